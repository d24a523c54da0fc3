"""The one canonical YAML/JSON reader and writer.

Reading: YAML streams (several documents), JSON documents and JSON ``List`` objects. Writing:
block style, the key order the object was built with, LF line ends, a final newline, and none of
the noise Kubernetes clients print for empty fields (``creationTimestamp: null``, ``status: {}``).
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Mapping
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from gpustack_render.core import nesting


class DocumentError(ValueError):
    """Input that cannot be read as YAML or JSON documents; names the source and document."""


# Plain scalars that a YAML 1.1 reader (kubectl's among them) would not read back as strings.
_AMBIGUOUS = {"y", "n", "yes", "no", "on", "off", "true", "false", "null", "~", ""}


def _represent_str(representer: Any, data: str) -> Any:
    style = "'" if data.lower() in _AMBIGUOUS else None
    if "\n" in data:
        style = "|"
    return representer.represent_scalar("tag:yaml.org,2002:str", data, style=style)


def _yaml() -> YAML:
    y = YAML(typ="safe", pure=True)
    y.default_flow_style = False
    y.width = 4096
    y.indent(mapping=2, sequence=2, offset=0)
    y.allow_unicode = True
    # The representer is built on first access, from the settings above.
    y.representer.sort_base_mapping_type_on_output = False
    y.representer.add_representer(str, _represent_str)
    return y


def load_documents(text: str, *, source: str = "<input>") -> list[dict[str, Any]]:
    """Every object in ``text``; a ``List`` (``kind: List`` or ``*List``) is expanded.

    Empty documents are skipped. A document that is not a mapping is a :class:`DocumentError`
    naming ``source`` and the document's position (1-based).
    """
    stripped = text.lstrip()
    docs: list[Any]
    if stripped.startswith(("{", "[")):
        try:
            docs = [nesting.loads(text)]
        except json.JSONDecodeError as exc:
            raise DocumentError(f"{source}: not valid JSON: {exc}") from exc
        if isinstance(docs[0], list):
            docs = docs[0]
    else:
        try:
            docs = list(_yaml().load_all(text))
        except YAMLError as exc:
            raise DocumentError(f"{source}: not valid YAML: {_one_line(str(exc))}") from exc
        except RecursionError:
            raise DocumentError(f"{source}: not valid YAML: nested too deep") from None
    out: list[dict[str, Any]] = []
    for i, doc in enumerate(docs, start=1):
        if doc is None:
            continue
        if not isinstance(doc, dict):
            raise DocumentError(
                f"{source}: document {i} is a {type(doc).__name__}, not a Kubernetes object"
            )
        if _is_list(doc):
            items = doc.get("items") or []
            if not isinstance(items, list):
                raise DocumentError(f"{source}: document {i}: List items must be a list")
            for j, item in enumerate(items, start=1):
                if not isinstance(item, dict):
                    raise DocumentError(f"{source}: document {i} item {j} is not an object")
                out.append(_plain(item))
        else:
            out.append(_plain(doc))
    return out


def _is_list(doc: Mapping[str, Any]) -> bool:
    kind = doc.get("kind")
    return isinstance(kind, str) and kind.endswith("List") and "items" in doc


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _plain(value: Any) -> Any:
    """Convert loader types to plain dict/list/str/int/float/bool/None."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, str):
        return str(value)
    return value


def clean(obj: Any) -> Any:
    """Drop the noise a writer should not print: ``None`` values anywhere, and an empty
    top-level ``status`` of a Kubernetes object."""
    out = _drop_none(obj)
    if isinstance(out, dict) and "kind" in out and out.get("status") == {}:
        del out["status"]
    return out


def _drop_none(obj: Any) -> Any:
    if isinstance(obj, Mapping):
        return {k: _drop_none(v) for k, v in obj.items() if v is not None}
    if isinstance(obj, list):
        return [_drop_none(v) for v in obj]
    return obj


def dump_yaml(objects: Iterable[Mapping[str, Any]]) -> str:
    """A YAML stream of ``objects``: ``---`` separated, block style, deterministic."""
    chunks: list[str] = []
    for obj in objects:
        buf = io.StringIO()
        _yaml().dump(clean(obj), buf)
        chunks.append(buf.getvalue())
    if not chunks:
        return ""
    return "---\n" + "---\n".join(chunks)


def dump_yaml_one(obj: Mapping[str, Any]) -> str:
    """One object as a YAML document without a leading separator."""
    buf = io.StringIO()
    _yaml().dump(clean(obj), buf)
    return buf.getvalue()


def dump_json(obj: Any) -> str:
    """Indented JSON with a final newline, keys in build order."""
    return json.dumps(clean(obj), indent=2, ensure_ascii=False) + "\n"


def as_list(objects: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """A ``v1`` ``List`` holding ``objects``."""
    return {"apiVersion": "v1", "kind": "List", "items": list(objects)}
