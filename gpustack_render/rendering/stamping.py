"""Turning one role's Pod template into a fresh manifest per seat, fast.

A role's Pods differ only in a handful of seat values, and the largest shape renders 65,536 of
them, so the template is compiled once into a function whose body is the manifest as nested
dict and list displays: each call builds a fresh tree of dicts and lists (no two Pods share a
mutable container), while the immutable leaves (strings, numbers, booleans) are shared
constants. Seat values are the function's parameters, placed where the template holds a
:class:`Slot`. Only identifiers this module generates reach the compiled source; every key and
value travels as a constant object, never as text.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: The seat values a template may hold, in the compiled builder's parameter order.
SEAT_SLOTS = ("name", "group", "ordinal", "member", "digest", "subdomain", "leader")


@dataclass(frozen=True, slots=True)
class Slot:
    """A placeholder for one seat value in a Pod template (one of :data:`SEAT_SLOTS`)."""

    name: str

    def __post_init__(self) -> None:
        if self.name not in SEAT_SLOTS:
            raise ValueError(f"unknown seat slot {self.name!r}")


Builder = Callable[[str, str, str, str, str, str, str], dict[str, Any]]


def compile_builder(template: Mapping[str, Any]) -> Builder:
    """A function ``(name, group, ordinal, member, digest, subdomain, leader) → manifest``."""
    constants: dict[str, Any] = {}

    def constant(value: Any) -> str:
        key = f"_k{len(constants)}"
        constants[key] = value
        return key

    def expr(value: Any) -> str:
        if isinstance(value, Slot):
            return value.name
        if isinstance(value, Mapping):
            items = ", ".join(f"{constant(k)}: {expr(v)}" for k, v in value.items())
            return "{" + items + "}"
        if isinstance(value, Sequence) and not isinstance(value, str | bytes):
            return "[" + ", ".join(expr(v) for v in value) + "]"
        if value is None or isinstance(value, str | int | float | bool):
            return constant(value)
        raise TypeError(f"a Pod template holds only JSON data, not {type(value).__name__}")

    source = f"def build({', '.join(SEAT_SLOTS)}):\n    return {expr(template)}\n"
    namespace: dict[str, Any] = dict(constants)
    exec(compile(source, "<pod template>", "exec"), namespace)
    build: Builder = namespace["build"]
    return build
