"""CustomResourceDefinitions generated from the API models.

Structural OpenAPI v3 schemas with defaults, enums, bounds, patterns and list-map keys, so the
API server itself enforces what the schema can say (docs/contract/admission.md §2). Cross-field
rules live in the webhook, not in CEL.
"""

from __future__ import annotations

import copy
import types
import typing
from typing import Any, Literal, Union, get_args, get_origin

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from gpustack_render.api.common import GROUP, VERSION, Format, IntOrString, ObjectMeta
from gpustack_render.core.quantity import QUANTITY_PATTERN
from gpustack_render.schema.kinds import KINDS, KindInfo, Schema

_ENVELOPE = ("api_version", "kind", "metadata")
#: The envelope's schema, with the descriptions every Kubernetes kind gives these fields.
_ENVELOPE_SCHEMA: Schema = {
    "apiVersion": {
        "type": "string",
        "description": "APIVersion defines the versioned schema of this representation of an "
        "object. Servers should convert recognized schemas to the latest internal value, and "
        "may reject unrecognized values.",
    },
    "kind": {
        "type": "string",
        "description": "Kind is a string value representing the REST resource this object "
        "represents. Servers may infer this from the endpoint the client submits requests to. "
        "In CamelCase.",
    },
    # The API server refuses anything but name and generateName under metadata, a description
    # included; it serves ObjectMeta's own description in its place.
    "metadata": {"type": "object"},
}


def _strip_none(tp: Any) -> tuple[Any, bool]:
    """(the type without ``None``, whether ``None`` was allowed)."""
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        optional = len(args) != len(get_args(tp))
        if len(args) == 1:
            return args[0], optional
        return Union[tuple(args)], optional  # noqa: UP007
    return tp, False


def _apply_constraints(schema: Schema, metadata: list[Any]) -> None:
    is_array = schema.get("type") == "array"
    for meta in metadata:
        if isinstance(meta, annotated_types.Ge):
            schema["minimum"] = meta.ge
        elif isinstance(meta, annotated_types.Le):
            schema["maximum"] = meta.le
        elif isinstance(meta, annotated_types.MinLen):
            schema["minItems" if is_array else "minLength"] = meta.min_length
        elif isinstance(meta, annotated_types.MaxLen):
            schema["maxItems" if is_array else "maxLength"] = meta.max_length
        elif isinstance(meta, Format):
            schema["format"] = meta.value
        elif isinstance(meta, FieldInfo):
            _apply_constraints(schema, list(meta.metadata))
            if isinstance(meta.json_schema_extra, dict):
                schema.update(meta.json_schema_extra)
        elif getattr(meta, "pattern", None):
            schema["pattern"] = meta.pattern


def type_schema(tp: Any, metadata: list[Any] | None = None) -> Schema:  # noqa: C901 (one branch per Python type shape, a dispatch table)
    """The structural schema of a type annotation."""
    metadata = list(metadata or [])
    if get_origin(tp) is typing.Annotated:
        base, *extra = get_args(tp)
        return type_schema(base, [*extra, *metadata])
    tp, _ = _strip_none(tp)
    if get_origin(tp) is typing.Annotated:
        return type_schema(tp, metadata)
    if any(isinstance(m, IntOrString) for m in metadata):
        schema: Schema = {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": QUANTITY_PATTERN,
            "x-kubernetes-int-or-string": True,
        }
        return schema
    origin = get_origin(tp)
    if origin is Literal:
        values = list(get_args(tp))
        schema = {"type": "string", "enum": values}
    elif origin in (Union, types.UnionType):
        args = set(get_args(tp))
        if args == {int, str}:
            schema = {"x-kubernetes-int-or-string": True}
        else:
            schema = {"x-kubernetes-preserve-unknown-fields": True}
    elif origin is list:
        (item,) = get_args(tp)
        schema = {"type": "array", "items": type_schema(item)}
    elif origin is dict:
        _, value = get_args(tp)
        if value is Any:
            schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        else:
            schema = {"type": "object", "additionalProperties": type_schema(value)}
    elif isinstance(tp, type) and issubclass(tp, BaseModel):
        schema = model_schema(tp)
    elif tp is bool:
        schema = {"type": "boolean"}
    elif tp is int:
        schema = {"type": "integer"}
        if not any(isinstance(m, Format) for m in metadata):
            schema["format"] = "int64"
    elif tp is float:
        schema = {"type": "number"}
    elif tp is str:
        schema = {"type": "string"}
    elif tp is Any:
        schema = {"x-kubernetes-preserve-unknown-fields": True}
    else:  # pragma: no cover - a model author added a type this generator does not know
        raise TypeError(f"no CRD schema for {tp!r}")
    _apply_constraints(schema, metadata)
    return schema


def field_schema(info: FieldInfo) -> Schema:
    schema = type_schema(info.annotation, list(info.metadata))
    if isinstance(info.json_schema_extra, dict):
        schema.update(info.json_schema_extra)
    if info.description:
        schema["description"] = info.description
    default = info.default
    if default is not PydanticUndefined and default is not None and not info.default_factory:
        schema["default"] = default
    return schema


def model_schema(model: type[BaseModel], *, skip: tuple[str, ...] = ()) -> Schema:
    """An object schema with one property per field (JSON names) and its required list."""
    props: Schema = {}
    required: list[str] = []
    for name, info in model.model_fields.items():
        if name in skip:
            continue
        wire = info.alias or name
        props[wire] = field_schema(info)
        if info.is_required():
            required.append(wire)
    schema: Schema = {"type": "object"}
    if model.__doc__ and model.__doc__.strip() and not model.__doc__.startswith(model.__name__):
        schema["description"] = " ".join(model.__doc__.split()).replace("``", "")
    if props:
        schema["properties"] = props
    if required:
        schema["required"] = required
    if model.model_config.get("extra") == "allow" and model is not ObjectMeta:
        schema["x-kubernetes-preserve-unknown-fields"] = True
    return schema


def crd_for(info: KindInfo) -> dict[str, Any]:
    """The CustomResourceDefinition of one kind."""
    body = model_schema(info.model, skip=_ENVELOPE)
    body.pop("x-kubernetes-preserve-unknown-fields", None)
    props = {**copy.deepcopy(_ENVELOPE_SCHEMA), **body.get("properties", {})}
    root: Schema = {"type": "object"}
    if "description" in body:
        root["description"] = body["description"]
    root["properties"] = props
    if body.get("required"):
        root["required"] = body["required"]
    version: dict[str, Any] = {
        "name": VERSION,
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": root},
        "subresources": {"status": {}},
    }
    if info.scale is not None:
        version["subresources"]["scale"] = dict(info.scale)
    if info.printer_columns:
        version["additionalPrinterColumns"] = [dict(c) for c in info.printer_columns]
    names: dict[str, Any] = {
        "kind": info.kind,
        "listKind": f"{info.kind}List",
        "plural": info.plural,
        "singular": info.kind.lower(),
    }
    if info.short_names:
        names["shortNames"] = list(info.short_names)
    names["categories"] = ["gpustack"]
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{info.plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "names": names,
            "scope": info.scope,
            "versions": [version],
        },
    }


def all_crds() -> list[dict[str, Any]]:
    """Every CRD the project ships, in a stable order."""
    return [crd_for(info) for info in KINDS]


def crd_file_name(crd: dict[str, Any]) -> str:
    """The file under ``deploy/crds/`` holding ``crd``."""
    spec = crd["spec"]
    return f"{spec['group']}_{spec['names']['plural']}.yaml"
