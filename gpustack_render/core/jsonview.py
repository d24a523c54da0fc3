"""Lenient views of plain JSON data (a raw Pod, Workload or Service), so no shape of input
makes a reader raise.

An object reaches the webhook or the controller already decoded by the API server, but the
library also serves the command line and property tests with arbitrary data: a field of the
wrong JSON type reads as absent, and a non-string token or value reads as its ``str``. Every
module that reads raw objects (injection, the observed Pods and Workloads, owner references)
reads through these.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def mapping(value: object) -> dict[str, Any]:
    """``value`` when it is an object with string keys (others dropped), else ``{}``."""
    if not isinstance(value, Mapping):
        return {}
    return {k: v for k, v in value.items() if isinstance(k, str)}


def view(value: object) -> Mapping[str, Any]:
    """``value`` itself when it is an object, else ``{}``: a read-only view, never a copy (the
    observation of a large pass reads thousands of objects)."""
    return value if isinstance(value, Mapping) else {}


def strings(value: object) -> dict[str, str]:
    """The string values of an object, keys as strings (labels, annotations, selectors)."""
    return {str(k): str(v) for k, v in view(value).items() if isinstance(v, str)}


def items(value: object) -> list[Any]:
    """``value`` when it is a list, else ``[]``."""
    return value if isinstance(value, list) else []


def tokens(value: object) -> list[str]:
    """A ``command``/``args`` list as strings."""
    return [t if isinstance(t, str) else str(t) for t in items(value)]


def name_of(entry: object) -> str:
    """The ``name`` of a list entry (container, env var, volume, mount), ``""`` when none."""
    if not isinstance(entry, Mapping):
        return ""
    name = entry.get("name")
    return name if isinstance(name, str) else ("" if name is None else str(name))


def metadata_of(pod: Mapping[str, Any]) -> dict[str, Any]:
    return mapping(pod.get("metadata"))


def labels_of(pod: Mapping[str, Any]) -> dict[str, Any]:
    return mapping(metadata_of(pod).get("labels"))


def annotations_of(pod: Mapping[str, Any]) -> dict[str, Any]:
    return mapping(metadata_of(pod).get("annotations"))


def spec_of(pod: Mapping[str, Any]) -> dict[str, Any]:
    return mapping(pod.get("spec"))
