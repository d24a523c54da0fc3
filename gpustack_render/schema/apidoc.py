"""The API reference (``docs/api.md``), generated from the models so it cannot drift.

Every field of every kind: wire name, type, default, bounds, mutability (ModelDeployment spec
only, D3) and description. ``make docs`` writes it; a test fails when the committed file differs.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from gpustack_render.api.common import Mutability
from gpustack_render.schema.crd import field_schema
from gpustack_render.schema.kinds import KINDS, KindInfo

_SKIP = ("api_version", "kind", "metadata")


def _models_in(tp: Any) -> list[type[BaseModel]]:
    """The models a field's type nests (through Optional, list, dict and Annotated)."""
    if get_origin(tp) is typing.Annotated:
        return _models_in(get_args(tp)[0])
    if get_origin(tp) in (Union, types.UnionType, list, dict):
        return [m for a in get_args(tp) for m in _models_in(a)]
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return [tp]
    return []


def _is_list(tp: Any) -> bool:
    if get_origin(tp) is typing.Annotated:
        return _is_list(get_args(tp)[0])
    if get_origin(tp) in (Union, types.UnionType):
        return any(_is_list(a) for a in get_args(tp) if a is not type(None))
    return get_origin(tp) is list


def _mutability(info: FieldInfo) -> str | None:
    found = [m.value for m in info.metadata if isinstance(m, Mutability)]
    return found[0] if found else None


def _type_text(schema: dict[str, Any]) -> str:
    if schema.get("x-kubernetes-int-or-string"):
        return "quantity" if "pattern" in schema else "int or string"
    kind = schema.get("type", "any")
    if kind == "array":
        return f"[]{_type_text(schema.get('items', {}))}"
    if kind == "integer":
        return str(schema.get("format", "integer"))
    if kind == "object" and "additionalProperties" in schema:
        return f"map[string]{_type_text(schema['additionalProperties'])}"
    return str(kind)


def _bounds_text(schema: dict[str, Any]) -> str:
    parts: list[str] = []
    if "enum" in schema:
        parts.append(" | ".join(f"`{v}`" for v in schema["enum"]))
    lo, hi = schema.get("minimum"), schema.get("maximum")
    if lo is not None and hi is not None:
        parts.append(f"{lo}..{hi}")
    elif lo is not None:
        parts.append(f"≥ {lo}")
    elif hi is not None:
        parts.append(f"≤ {hi}")
    for key, label in (
        ("minLength", "min length"),
        ("maxLength", "max length"),
        ("minItems", "min items"),
        ("maxItems", "max items"),
    ):
        if key in schema:
            parts.append(f"{label} {schema[key]}")
    if "pattern" in schema and not schema.get("x-kubernetes-int-or-string"):
        parts.append(f"pattern `{schema['pattern']}`")
    if schema.get("x-kubernetes-list-type") == "map":
        keys = "+".join(schema.get("x-kubernetes-list-map-keys", []))
        parts.append(f"list-map key {keys}")
    elif schema.get("x-kubernetes-list-type") == "atomic":
        parts.append("atomic")
    return "; ".join(parts)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ") if text else ""


def field_rows(
    model: type[BaseModel], *, prefix: str = "", inherited: str | None = None
) -> Iterator[tuple[str, str, str, str, str, str, str]]:
    """(path, type, required, default, bounds, mutability, description) for every field."""
    for name, info in model.model_fields.items():
        if not prefix and name in _SKIP:
            continue
        wire = info.alias or name
        path = f"{prefix}.{wire}" if prefix else wire
        schema = field_schema(info)
        mutability = _mutability(info) or inherited
        default = schema.get("default")
        default_text = (
            ""
            if default is None
            else f"`{str(default).lower() if isinstance(default, bool) else default}`"
        )
        yield (
            f"`{path}`",
            _type_text(schema),
            "yes" if info.is_required() else "",
            default_text,
            _cell(_bounds_text(schema)),
            mutability or "",
            _cell(str(schema.get("description", ""))),
        )
        child_prefix = f"{path}[]" if _is_list(info.annotation) else path
        for sub in _models_in(info.annotation):
            yield from field_rows(sub, prefix=child_prefix, inherited=mutability)


def _kind_section(info: KindInfo) -> list[str]:
    scope = "namespaced" if info.scope == "Namespaced" else "cluster-scoped"
    short = ", ".join(f"`{s}`" for s in info.short_names) or "none"
    lines = [
        f"## {info.kind}",
        "",
        f"`worker.gpustack.ai/v1`, {scope}, plural `{info.plural}`, short names {short}.",
        "",
    ]
    doc = " ".join((info.model.__doc__ or "").split()).replace("``", "`")
    if doc:
        lines += [doc, ""]
    header = "| Field | Type | Required | Default | Bounds | Mutability | Description |"
    if not info.owned:
        lines += [
            "Only the fields this project reads; every other field is kept as given.",
            "",
        ]
    lines += [header, "|---|---|---|---|---|---|---|"]
    for row in field_rows(info.model):
        if info.kind != "ModelDeployment" or not row[0].startswith("`spec"):
            row = (*row[:5], "", row[6])
        lines.append("| " + " | ".join(row) + " |")
    lines.append("")
    return lines


def api_reference(extra: Mapping[str, Sequence[str]] | None = None) -> str:
    """The whole Markdown reference; ``extra`` adds lines after a kind's section (by kind
    name), written by the layers above from their own tables."""
    lines = [
        "# API reference",
        "",
        "Generated from the models in `gpustack_render/api/` by `make docs`; do not edit by "
        "hand (a test fails when this file drifts). Mutability (D3): **frozen** = an UPDATE "
        "changing it is refused; **rolls** = editable, replaces the affected replicas one per "
        "role; **free** = editable, replaces nothing.",
        "",
    ]
    for info in KINDS:
        lines += _kind_section(info)
        lines += list((extra or {}).get(info.kind, ()))
    return "\n".join(lines).rstrip("\n") + "\n"
