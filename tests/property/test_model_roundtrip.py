"""Model round trip: parse → dump → parse is the identity for valid objects; invalid objects give
field errors whose paths exist in the input (or name a missing child of an existing parent)."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpustack_render.core.errors import ErrorType
from gpustack_render.core.paths import FieldPath
from gpustack_render.schema.decoding import decode_deployment

from .strategies import cases

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 70000) | st.text(max_size=8),
    # Keys are identifier-like: a key holding "." or "[" renders an ambiguous path (as in
    # Kubernetes), which this test could not map back onto the input.
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.from_regex(r"[a-zA-Z][a-zA-Z0-9_-]{0,7}", fullmatch=True), inner, max_size=3
        )
    ),
    max_leaves=6,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_valid_deployments_round_trip(case: Any) -> None:
    raw = case.deployment
    md, errs = decode_deployment(copy.deepcopy(raw))
    assert not errs and md is not None
    dumped = md.to_dict()
    again, errs2 = decode_deployment(dumped)
    assert not errs2 and again is not None
    assert again == md
    assert again.to_dict() == dumped


def _paths(data: dict[str, Any]) -> list[FieldPath]:
    out: list[FieldPath] = []

    def walk(node: Any, path: FieldPath) -> None:
        out.append(path)
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, path.child(k))
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, path.index(i))

    walk(data, FieldPath())
    return out


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(), st.data())
def test_broken_deployments_name_fields_that_exist(case: Any, data: st.DataObject) -> None:
    raw = case.deployment
    broken = copy.deepcopy(raw)
    targets = [p for p in _paths(broken) if p.parts and p.parts[0] == "spec"]
    target = data.draw(st.sampled_from(targets))
    parent_found, parent = FieldPath(target.parts[:-1]).resolve(broken)
    assert parent_found
    last = target.parts[-1]
    action = data.draw(st.sampled_from(["replace", "delete", "add"]))
    if action == "add" and isinstance(parent, dict):
        parent["unknownField" + str(len(parent))] = data.draw(JSON)
    elif action == "delete" and isinstance(parent, dict) and isinstance(last, str):
        del parent[last]
    elif isinstance(parent, dict) and isinstance(last, str):  # noqa: SIM114 (narrowed apart)
        parent[last] = data.draw(JSON)
    elif isinstance(parent, list) and isinstance(last, int):
        parent[last] = data.draw(JSON)
    md, errs = decode_deployment(broken)
    for err in errs:
        path = FieldPath(tuple(_parse(err.field)))
        found, _ = path.resolve(broken)
        if err.type is ErrorType.REQUIRED:
            found, _ = FieldPath(path.parts[:-1]).resolve(broken)
        assert found, f"{err.field} ({err.type.value}) is not in the input"
    if md is None:
        assert errs


def _parse(field: str) -> list[str | int]:
    parts: list[str | int] = []
    for chunk in field.replace("]", "").split("."):
        name, *indexes = chunk.split("[")
        if name:
            parts.append(name)
        parts.extend(int(i) for i in indexes)
    return parts
