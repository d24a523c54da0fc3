"""Decoding plain objects into the API models, as the API server's schema would.

Schema problems (a bound, an enum, a required field, an unknown field under strict field
validation, a duplicate list-map key) become :class:`~gpustack_render.core.errors.FieldError` s with
paths built from JSON names, so a user sees one error format whatever caught the problem.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from gpustack_render.api.artifact import DIGEST_PATTERN
from gpustack_render.api.inputs import DNS1123_SUBDOMAIN_PATTERN
from gpustack_render.api.modeldeployment import (
    ABSOLUTE_PATH_PATTERN,
    RELATIVE_PATH_PATTERN,
    ROLE_NAME_PATTERN,
    ModelDeployment,
    ModelDeploymentSpec,
)
from gpustack_render.core import errors
from gpustack_render.core.errors import ErrorList, FieldError
from gpustack_render.core.nesting import MAX_DEPTH, too_deep
from gpustack_render.core.paths import ROLES, FieldPath

M = TypeVar("M", bound=BaseModel)


# Union-member and validator tags pydantic puts into error locations; not field names.
_TAGS = {"int", "str", "bool", "float", "list", "dict", "none", "is-instance", "lax-or-strict"}


def _path_of(loc: Sequence[int | str]) -> FieldPath:
    parts: list[str | int] = []
    for part in loc:
        if isinstance(part, str) and (part in _TAGS or "[" in part or "(" in part):
            continue
        parts.append(part)
    return FieldPath(tuple(parts))


def _value_at(data: Any, path: FieldPath) -> tuple[bool, Any]:
    return path.resolve(data)


#: pydantic error type → how the API server words the same schema refusal.
_DETAILS: dict[str, str] = {
    "less_than_equal": "must be less than or equal to {le}",
    "greater_than_equal": "must be greater than or equal to {ge}",
    "less_than": "must be less than {lt}",
    "greater_than": "must be greater than {gt}",
    "string_too_short": "must be at least {min_length} characters long",
    "too_short": "must have at least {min_length} items",
    "int_type": "must be an integer",
    "int_from_float": "must be an integer",
    "int_parsing": "must be an integer",
    "string_type": "must be a string",
    "bool_type": "must be a boolean",
    "bool_parsing": "must be a boolean",
    "list_type": "must be a list",
    "dict_type": "must be an object",
    "model_type": "must be an object",
    "model_attributes_type": "must be an object",
}


#: Each pattern the models check → what it allows, in words. The API server's own refusal
#: quotes the expression; a person needs the rule (and :func:`pattern_detail` adds what is wrong
#: with the value). Every pattern of the models has an entry (tests/unit/test_decoding.py).
PATTERN_WORDS: dict[str, str] = {
    # Role and scaling-group names (and DNS1123_LABEL_PATTERN, the same expression).
    ROLE_NAME_PATTERN: (
        "must consist of lower-case letters, digits and '-', start and end with a letter or "
        "digit, and be at most 63 characters (a DNS-1123 label)"
    ),
    DNS1123_SUBDOMAIN_PATTERN: (
        "must consist of lower-case letters, digits, '-' and '.', each part between dots "
        "starting and ending with a letter or digit, and be at most 253 characters (a "
        "DNS-1123 subdomain, such as 'dram-pool')"
    ),
    ABSOLUTE_PATH_PATTERN: (
        "must be an absolute path: start with '/', with no empty part ('//') and no '/' at the end"
    ),
    RELATIVE_PATH_PATTERN: (
        "must be a relative path on one line: not empty and not starting with '/'"
    ),
    DIGEST_PATTERN: "must be 'sha256:' and 64 lowercase hex digits (a manifest digest)",
}

#: Fields of older API versions that strict decoding refuses, keyed on (parent, field): what took
#: their place, in words (D29: the Elastic EP profile's head type and TP field are gone).
RETIRED_FIELDS: dict[tuple[str, str], str] = {
    ("elasticEp", "headInstanceType"): (
        "the Ray head of an elastic role needs no InstanceType: it runs CPU-only, asks for no "
        "accelerator and stays outside Kueue. Remove the field"
    ),
    ("elasticEp", "tensorParallelSize"): (
        "the tensor-parallel degree of an elastic role comes from its extraArgs "
        "(--tensor-parallel-size <n>, any spelling the engine reads). Remove the field and pass "
        "the flag in spec.roles[].extraArgs"
    ),
}


def unknown_field_detail(path: FieldPath) -> str:
    """The refusal of an unknown field at ``path``; a retired field says what replaced it."""
    detail = f'unknown field "{path}": this API has no such field'
    parent = next((p for p in reversed(path.parts[:-1]) if isinstance(p, str)), None)
    field = path.parts[-1] if path.parts else None
    words = RETIRED_FIELDS.get((parent, field)) if isinstance(field, str) and parent else None
    return f"{detail}; {words}" if words else detail


#: A DNS-1123 label, matched whole (``fullmatch``: ``$`` alone also matches before a newline).
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


def pattern_detail(pattern: str, value: Any) -> str:
    """The refusal of ``value`` by ``pattern``: the rule in words (:data:`PATTERN_WORDS`; the
    expression itself for a pattern without words) and, for a DNS-1123 label, what is wrong
    with this value and a name that would do."""
    words = PATTERN_WORDS.get(pattern)
    if words is None:
        return f"must match the pattern '{pattern}'"
    if pattern == ROLE_NAME_PATTERN and isinstance(value, str):
        faults = _label_faults(value)
        if faults:
            words += f"; it {faults}"
        fixed = re.sub(r"[^a-z0-9-]+", "-", value.lower()).strip("-")[:63].rstrip("-")
        if fixed != value and _DNS_LABEL.fullmatch(fixed):
            words += f" ('{fixed}' would do)"
    return words


def _label_faults(value: str) -> str:
    """What keeps ``value`` from being a DNS-1123 label, in words (empty when nothing does)."""
    faults = []
    upper = list(dict.fromkeys(c for c in value if "A" <= c <= "Z"))
    if upper:
        shown = ", ".join(f"'{c}'" for c in upper)
        faults.append(f"has the upper-case letter{'s' if len(upper) > 1 else ''} {shown}")
    other = list(
        dict.fromkeys(c for c in value if not ("a" <= c <= "z" or "0" <= c <= "9" or c == "-"))
    )
    other = [c for c in other if c not in upper]
    if other:
        shown = ", ".join(repr(c) for c in other)
        faults.append(f"has {shown}, neither a lower-case letter, a digit nor '-'")
    if value.startswith("-"):
        faults.append("starts with '-'")
    if value.endswith("-") and value != "-":
        faults.append("ends with '-'")
    if len(faults) > 1:
        return ", ".join(faults[:-1]) + " and " + faults[-1]
    return "".join(faults)


def _detail(kind: str, ctx: dict[str, Any], fallback: str) -> str:
    template = _DETAILS.get(kind)
    if template is None:
        # A validator's own message ("Value error, <ours>") keeps only our words.
        return fallback.removeprefix("Value error, ")
    try:
        return template.format(**ctx)
    except (KeyError, IndexError):
        return fallback


def translate(exc: ValidationError, data: Any, *, prefix: FieldPath | None = None) -> ErrorList:
    """Pydantic errors as field errors.

    missing → Required, extra → Forbidden, enum → NotSupported, else Invalid.
    """
    out = ErrorList()
    seen: set[tuple[str, str]] = set()
    for err in exc.errors(include_url=False):
        path = _path_of(err["loc"])
        full = FieldPath((*prefix.parts, *path.parts)) if prefix else path
        kind = err["type"]
        found, value = _value_at(data, path)
        ctx = err.get("ctx") or {}
        fe: FieldError
        if kind == "missing":
            fe = errors.required(full, origin="schema.violation")
        elif kind == "extra_forbidden":
            fe = errors.forbidden(full, unknown_field_detail(full), origin="schema.violation")
        elif kind in ("literal_error", "enum"):
            expected = str(ctx.get("expected", ""))
            choices = [c.strip().strip("'\"") for c in expected.replace(" or ", ",").split(",")]
            fe = errors.not_supported(
                full, value, [c for c in choices if c], origin="schema.violation"
            )
        elif kind == "string_pattern_mismatch":
            fe = errors.invalid(
                full,
                value if found else None,
                pattern_detail(str(ctx.get("pattern", "")), value),
                origin="schema.violation",
            )
        elif kind == "string_too_long":
            fe = errors.too_long(full, int(ctx.get("max_length", 0)), origin="schema.violation")
        elif kind == "too_long" and isinstance(value, list):
            fe = errors.too_many(
                full, len(value), int(ctx.get("max_length", 0)), origin="schema.violation"
            )
        else:
            fe = errors.invalid(
                full,
                value if found else None,
                _detail(kind, ctx, err["msg"]),
                origin="schema.violation",
            )
        key = (fe.field, fe.type.value)
        if key in seen:
            continue  # one cause per field and type: a union reports each member otherwise
        seen.add(key)
        out.append(fe)
    return out


def _hashable(value: Any) -> Any:
    """A list-map key value usable in a dict (a list or object key is kept as its JSON text)."""
    if isinstance(value, (list, dict)):
        return json.dumps(value, sort_keys=True, default=str)
    return value


def _list_map_duplicates(
    items: Any,
    path: FieldPath,
    keys: tuple[str, ...],
    defaults: Mapping[str, Any] | None = None,
    *,
    at_key: bool = False,
) -> ErrorList:
    """A ``Duplicate`` cause per later item whose key repeats an earlier one's: at the item, as
    the API server reports a list-map key, or with ``at_key`` (a single key) at that key's
    field, with the key's value."""
    out = ErrorList()
    if not isinstance(items, list):
        return out
    seen: dict[tuple[Any, ...], int] = {}
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            continue
        key = tuple(_hashable(item.get(k, (defaults or {}).get(k))) for k in keys)
        if key in seen:
            if at_key:
                (name,) = keys
                where, value = path.index(i).child(name), item.get(name)
            else:
                where, value = path.index(i), dict(zip(keys, key, strict=True))
            out.append(errors.duplicate(where, value, origin="schema.violation"))
        else:
            seen[key] = i
    return out


def schema_duplicates(data: Mapping[str, Any]) -> ErrorList:
    """Duplicate keys of the deployment's list-maps (roles by name, env, ports). A repeated role
    name is reported at the later role's ``name`` (D22); the others at the list entry."""
    out = ErrorList()
    spec = data.get("spec")
    if not isinstance(spec, dict):
        return out
    roles = spec.get("roles")
    out.extend(_list_map_duplicates(roles, ROLES, ("name",), at_key=True))
    if isinstance(roles, list):
        for i, role in enumerate(roles):
            if not isinstance(role, dict):
                continue
            rp = ROLES.index(i)
            out.extend(_list_map_duplicates(role.get("env"), rp.child("env"), ("name",)))
            out.extend(
                _list_map_duplicates(
                    role.get("ports"), rp.child("ports"), ("port", "protocol"), {"protocol": "TCP"}
                )
            )
    return out


def nesting_errors(data: Any) -> ErrorList:
    """An error at the first value nested deeper than the bound
    (:mod:`gpustack_render.core.nesting`)."""
    path = too_deep(data)
    if path is None:
        return ErrorList()
    return ErrorList(
        [
            errors.invalid(
                path,
                None,
                f"nested deeper than {MAX_DEPTH} levels of objects and lists",
                origin="schema.nesting-too-deep",
            )
        ]
    )


def decode_model(cls: type[M], data: Any) -> tuple[M | None, ErrorList]:
    """Validate ``data`` as ``cls``; returns the model or the field errors, never raises.

    Nesting past the bound is refused before the model sees it; any other failure of the
    model (``RecursionError`` and ``MemoryError`` included) is one error on this object only.
    """
    deep = nesting_errors(data)
    if deep:
        return None, deep
    try:
        return cls.model_validate(data), ErrorList()
    except ValidationError as exc:
        return None, translate(exc, data)
    except Exception as exc:  # RecursionError and MemoryError included
        detail = f"cannot be decoded as a {cls.__name__} ({type(exc).__name__})"
        return None, ErrorList([errors.invalid("", None, detail, origin="schema.undecodable")])


#: The largest float the API server's validator takes as a JSON integer (go-openapi's
#: ``swag.IsFloat64AJSONInteger``): 2^53.
_JSON_INTEGER_BOUND = 2**53
#: The API server decodes a JSON number as an int64 when it can, else as a float64.
_INT64 = range(-(2**63), 2**63)


@functools.cache
def _spec_schema() -> dict[str, Any]:
    from gpustack_render.schema.crd import model_schema  # only an odd input needs it

    return model_schema(ModelDeploymentSpec)


def _has_null_or_float(value: Any) -> bool:
    if isinstance(value, dict):
        return any(_has_null_or_float(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_null_or_float(v) for v in value)
    return (
        value is None
        or isinstance(value, float)
        or (isinstance(value, int) and not isinstance(value, bool) and value not in _INT64)
    )


def _as_served(value: Any, schema: Mapping[str, Any]) -> Any:
    """``value`` as the API server reads it against its structural ``schema``: a ``null``
    field of an object is pruned (then defaulted, when the schema has a default), and a whole
    float where an integer belongs is that integer (``2.0`` is accepted and stored as ``2``),
    while an integer beyond int64 is a float there (decoded as a float64, refused as not an
    integer). Unknown fields and list items are left as they are (strict decoding refuses
    them)."""
    if isinstance(value, dict):
        props = schema.get("properties")
        if not isinstance(props, dict):
            return value
        return {
            k: _as_served(v, props[k]) if k in props else v
            for k, v in value.items()
            if not (v is None and k in props)
        }
    if isinstance(value, list):
        items = schema.get("items")
        return [_as_served(v, items) for v in value] if isinstance(items, dict) else value
    if not (schema.get("type") == "integer" or schema.get("x-kubernetes-int-or-string")):
        return value
    if isinstance(value, float) and value.is_integer() and abs(value) <= _JSON_INTEGER_BOUND:
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool) and value not in _INT64:
        try:
            return float(value)
        except OverflowError:  # past float64 too: the API server cannot decode it at all
            return math.inf if value > 0 else -math.inf
    return value


def decode_deployment(data: Any) -> tuple[ModelDeployment | None, ErrorList]:
    """A ModelDeployment with schema defaults applied, or every schema error found.

    The spec is first read as the API server reads it (:func:`_as_served`): ``replicas: null``
    takes the default and ``replicas: 2.0`` is 2, as ``kubectl apply`` of the same file.
    """
    if not isinstance(data, dict):
        return None, ErrorList([errors.invalid("", type(data).__name__, "must be an object")])
    deep = nesting_errors(data)
    if deep:
        return None, deep
    spec = data.get("spec")
    if isinstance(spec, dict) and _has_null_or_float(spec):
        data = {**data, "spec": _as_served(spec, _spec_schema())}
    dupes = schema_duplicates(data)
    md, errs = decode_model(ModelDeployment, data)
    errs = ErrorList([*errs, *dupes])
    if errs:
        return None, errs
    return md, errs
