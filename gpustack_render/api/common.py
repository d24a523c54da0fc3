"""Shared pieces of the API models: base configurations, quantities, references, conditions.

The spec models refuse unknown fields (the API server's strict decoding); the input kinds this
project only reads keep every field they do not name.
"""

# No `from __future__ import annotations` in the models: pydantic would compile every field's
# annotation from its string at import (about 220 of them); as objects they are read as they are.

from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from gpustack_render.core.quantity import is_quantity

GROUP = "worker.gpustack.ai"
VERSION = "v1"
API_VERSION = f"{GROUP}/{VERSION}"


@dataclass(frozen=True)
class Format:
    """Marks the OpenAPI ``format`` of an integer field (``int32`` or ``int64``) for the CRD."""

    value: str


@dataclass(frozen=True)
class IntOrString:
    """Marks a field as ``x-kubernetes-int-or-string`` for the CRD."""

    pattern: str = ""


@dataclass(frozen=True)
class Mutability:
    """How an UPDATE may change a field (D3); read by the API reference generator.

    ``frozen``: an edit is refused as a different deployment; ``rolls``: editable, replaces the
    affected replicas one per role; ``free``: editable, replaces nothing. A field without a
    marker inherits its parent's.
    """

    value: str


FROZEN = Mutability("frozen")
ROLLS = Mutability("rolls")
FREE = Mutability("free")


def _check_quantity(value: int | str) -> int | str:
    if not is_quantity(value):
        raise ValueError(f"{value!r} is not a quantity (for example 2, 500m, 64Gi)")
    return value


Int32 = Annotated[int, Format("int32")]
Int64 = Annotated[int, Format("int64")]
Quantity = Annotated[int | str, IntOrString(), AfterValidator(_check_quantity)]


def _no_strings() -> list[str]:
    """An empty list, as a default factory. ``list`` itself would cost the first model build a
    parse of its text signature (pydantic asks whether a factory takes the validated data, and
    ``inspect`` reads a builtin's signature through the tokenizer): 4 ms of a command's start."""
    return []


def list_map(*keys: str) -> dict[str, Any]:
    """CRD extension keys of a list keyed by ``keys`` (server-side apply merges by them)."""
    return {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": list(keys)}


ATOMIC: dict[str, Any] = {"x-kubernetes-list-type": "atomic"}
SET: dict[str, Any] = {"x-kubernetes-list-type": "set"}


class SpecModel(BaseModel):
    """A strict part of a served spec: unknown fields and wrong JSON types are refused."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        alias_generator=to_camel,
        populate_by_name=True,
        frozen=True,
        defer_build=True,
    )


class OpenModel(BaseModel):
    """A part of an object this project reads but does not own: unknown fields are kept."""

    model_config = ConfigDict(
        extra="allow",
        alias_generator=to_camel,
        populate_by_name=True,
        frozen=True,
        defer_build=True,
    )


class LocalObjectReference(SpecModel):
    """A reference by name to an object in the same namespace (or a cluster-scoped one)."""

    name: Annotated[str, Field(max_length=253, description="The referenced object's name.")]


class ObjectMeta(OpenModel):
    """The parts of ``metadata`` the library reads; everything else is kept as given."""

    name: str = ""
    generate_name: str = ""
    namespace: str = ""
    uid: str = ""
    generation: int = 0
    resource_version: str = ""
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    deletion_timestamp: str | None = None
    finalizers: list[str] = Field(default_factory=_no_strings)


class Condition(OpenModel):
    """The standard condition shape."""

    type: Annotated[str, Field(description="The condition's type, in CamelCase.")]
    status: Annotated[str, Field(description="True, False or Unknown.")] = "Unknown"
    reason: Annotated[
        str, Field(description="A CamelCase word saying why the status holds, for programs.")
    ] = ""
    message: Annotated[str, Field(description="The facts behind the status, for people.")] = ""
    last_transition_time: Annotated[
        str | None, Field(description="When the status last changed (RFC 3339).")
    ] = None
    observed_generation: Annotated[
        int | None,
        Field(description="The metadata.generation the condition was computed from."),
    ] = None
