"""Explain against observed state never raises on a damaged observation, and its JSON always
matches its schema: one value anywhere in a real ``kubectl get -o yaml`` List replaced by
arbitrary JSON (docs/explain.md, "Observed state")."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import jsonschema
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpustack_render.cli.documents import read_bundle
from gpustack_render.cli.yamlio import load_documents
from gpustack_render.explain.observed import (
    OBSERVED_JSON_SCHEMA,
    explain_observed,
    observed_text,
    observed_to_json,
    split_observed,
)
from gpustack_render.rendering.renderer import render
from gpustack_render.schema.decoding import decode_deployment

from .test_admission_properties import json_values

ROOT = Path(__file__).resolve().parents[2]
_BUNDLE = read_bundle(
    [("pd-vllm-llm-d.yaml", (ROOT / "examples" / "pd-vllm-llm-d.yaml").read_text())]
)
_MD, _ = decode_deployment(_BUNDLE.deployments[0])
assert _MD is not None
_RENDERING = render(_MD, lookups=_BUNDLE.lookups(), settings=_BUNDLE.settings)
_ITEMS = load_documents((ROOT / "tests/unit/data/explain/pd-joint-held.yaml").read_text())
_VALIDATOR = jsonschema.Draft202012Validator(OBSERVED_JSON_SCHEMA)


@st.composite
def damaged_lists(draw: st.DrawFn) -> dict[str, Any]:
    items = copy.deepcopy(_ITEMS)
    obj: dict[str, Any] = {"apiVersion": "v1", "kind": "List", "items": items}
    paths: list[tuple[Any, Any]] = []

    def walk(node: Any, depth: int) -> None:
        if depth > 6:
            return
        children = node.items() if isinstance(node, dict) else enumerate(node)
        for key, child in children:
            paths.append((node, key))
            if isinstance(child, dict | list):
                walk(child, depth + 1)

    walk(obj, 0)
    for _ in range(draw(st.integers(1, 3))):
        parent, key = draw(st.sampled_from(paths))
        parent[key] = draw(json_values)
    return obj


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(damaged=damaged_lists())
def test_a_damaged_observation_never_raises(damaged: dict[str, Any]) -> None:
    assert _MD is not None
    report = explain_observed(_MD, _RENDERING, split_observed([damaged]), settings=_BUNDLE.settings)
    _VALIDATOR.validate(observed_to_json(report))
    assert all(isinstance(line, str) for line in observed_text(report))


#: The fields of an item the readers look at first: a damaged one must be named, not raise.
_ITEM_FIELDS = ("apiVersion", "kind", "metadata", "spec", "status")
_META_FIELDS = ("name", "namespace", "uid", "labels", "annotations", "ownerReferences")


@st.composite
def damaged_items(draw: st.DrawFn) -> dict[str, Any]:
    """The List with an item, one of its top-level fields or one of its metadata fields
    replaced: the few places every reader starts from, which a walk over every node of the
    List rarely picks."""
    items: list[Any] = copy.deepcopy(_ITEMS)
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(0, len(items) - 1))
        where = draw(st.sampled_from([None, *_ITEM_FIELDS, *_META_FIELDS]))
        value = draw(json_values)
        item = items[i]
        if where is None or not isinstance(item, dict):
            items[i] = value
        elif where in _ITEM_FIELDS:
            item[where] = value
        elif isinstance(item.get("metadata"), dict):
            item["metadata"][where] = value
    return {"apiVersion": "v1", "kind": "List", "items": items}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(damaged=damaged_items())
def test_a_damaged_item_never_raises(damaged: dict[str, Any]) -> None:
    assert _MD is not None
    report = explain_observed(_MD, _RENDERING, split_observed([damaged]), settings=_BUNDLE.settings)
    _VALIDATOR.validate(observed_to_json(report))
    assert all(isinstance(line, str) for line in observed_text(report))
