"""The pruned JSON Patch: same result as ``jsonpatch.make_patch`` on copy-on-write documents."""

from __future__ import annotations

import json
from typing import Any

import jsonpatch
import pytest

from gpustack_render.injection import patch as p

A = {"name": "a", "value": "1"}
B = {"name": "b", "value": "2"}
C = {"name": "c", "valueFrom": {"fieldRef": {"fieldPath": "x"}}}


def cases() -> list[Any]:
    shared = {"deep": {"list": [A, B]}}
    out = []
    src: dict[str, Any] = {"keep": shared, "env": [A, B, C], "args": ["x", "y"]}
    dst = {**src, "env": [A, {"name": "b", "value": "new"}, C, {"name": "d", "value": "4"}]}
    out.append(pytest.param(src, dst, id="in-place-and-append"))
    dst2 = {**src, "args": [*src["args"], "--flag", "v"], "extra": {"k": "v"}}
    out.append(pytest.param(src, dst2, id="append-scalars-and-add-member"))
    dst3 = {k: v for k, v in src.items() if k != "keep"}
    out.append(pytest.param(src, dst3, id="remove-member"))
    dst4 = {**src, "env": [B, A, C]}
    out.append(pytest.param(src, dst4, id="shared-items-reordered"))
    dst5 = {**src, "env": [A, A, C]}
    out.append(pytest.param(src, dst5, id="shared-item-duplicated"))
    out.append(pytest.param([A, B], [A, B, [A]], id="top-level-list"))
    out.append(pytest.param({"a": None}, {"a": [1]}, id="null-to-list"))
    return out


@pytest.mark.parametrize(("src", "dst"), cases())
def test_same_patch_as_make_patch(src: Any, dst: Any) -> None:
    ops = p.make_patch(src, dst)
    # Applied to a fresh copy of the wire document (no aliasing inside it, as from JSON).
    assert jsonpatch.apply_patch(json.loads(json.dumps(src)), ops) == dst
    assert ops == jsonpatch.make_patch(src, dst).patch


def test_placeholders_never_leak(monkeypatch: pytest.MonkeyPatch) -> None:
    # Force the pruned diff to write a placeholder: the module falls back to the full diff.
    real = jsonpatch.make_patch
    calls: list[int] = []

    def leaky(src: Any, dst: Any) -> jsonpatch.JsonPatch:
        calls.append(1)
        if len(calls) == 1:
            return jsonpatch.JsonPatch([{"op": "add", "path": "/x", "value": [p._SHARED + "0"]}])
        return real(src, dst)

    monkeypatch.setattr(jsonpatch, "make_patch", leaky)
    src = {"env": [A]}
    dst = {"env": [A, B]}
    assert p.make_patch(src, dst) == real(src, dst).patch
    assert len(calls) == 2


def test_writes_placeholder() -> None:
    assert p._writes_placeholder({"a": [p._SHARED + "3"]})
    assert not p._writes_placeholder({"a": ["x", 1, None]})


def test_in_place_env_beside_valueless_entry() -> None:
    # docs/contract/kv-injection.md §5 step 1: MOONCAKE_MASTER rewritten in place and
    # MOONCAKE_DEVICE, declared without a value, replaced whole. Pruned against different partners,
    # the first rewritten entry compares equal to the second original one, and the pruned diff wrote
    # a nameless env entry. The patch must give exactly the injected Pod.
    master = "MOONCAKE_MASTER"
    device = "MOONCAKE_DEVICE"
    src: dict[str, Any] = {"env": [{"name": master, "value": ""}, {"name": device}]}
    dst = {
        "env": [
            {"name": master, "value": "m:1"},
            {"name": device, "value": ""},
            {"name": "MOONCAKE_TENANT_ID", "value": "d"},
        ]
    }
    ops = p.make_patch(src, dst)
    assert jsonpatch.apply_patch(json.loads(json.dumps(src)), ops) == dst


def test_coarse_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    # Both diffs wrong: the coarse patch replaces what differs and never diffs inside an array.
    monkeypatch.setattr(
        jsonpatch, "make_patch", lambda s, d: jsonpatch.JsonPatch([{"op": "remove", "path": "/a"}])
    )
    src = {"a/b": {"k": [1, 2]}, "gone": 1, "same": [A]}
    dst = {"a/b": {"k": [2, 1], "n": "x"}, "same": [A]}
    ops = p.make_patch(src, dst)
    assert jsonpatch.apply_patch(json.loads(json.dumps(src)), ops) == dst
    assert {"op": "replace", "path": "/a~1b/k", "value": [2, 1]} in ops


def test_long_changed_array_is_replaced_whole() -> None:
    # A hostile Pod: 17,000 env entries, every other one rewritten in place to the same value.
    # jsonpatch matches array items with difflib, quadratic on that many equal items (11 s here,
    # past the API server's 10 s timeout); the array is replaced whole (bench/injection_hostile.py
    # prints how long the review of such a Pod takes).
    env = [
        {"name": "MOONCAKE_MASTER", "value": f"v{i}"} if i % 2 else {"name": "X", "value": "1"}
        for i in range(17_000)
    ]
    injected = [e if e["name"] == "X" else {"name": "MOONCAKE_MASTER", "value": "m:1"} for e in env]
    containers = [{"name": "c", "image": "i"}]
    src = {"spec": {"containers": [{"name": "s", "env": env}], "other": containers}}
    dst = {"spec": {"containers": [{"name": "s", "env": injected}], "other": containers}}
    ops = p.make_patch(src, dst)
    assert ops == [{"op": "replace", "path": "/spec/containers/0/env", "value": injected}]
    assert jsonpatch.apply_patch(json.loads(json.dumps(src)), ops) == dst


def test_short_changed_array_is_still_diffed() -> None:
    env = [{"name": "X", "value": str(i)} for i in range(p._DIFF_ITEMS)]
    src = {"env": env}
    dst = {"env": [*env, {"name": "Y", "value": "1"}]}
    assert p.make_patch(src, dst) == [
        {"op": "add", "path": f"/env/{p._DIFF_ITEMS}", "value": {"name": "Y", "value": "1"}}
    ]


def test_a_diff_that_names_a_marker_in_its_path_is_not_taken() -> None:
    # Found by the injection property test: two declared tenants removed in front of entries the
    # mutation keeps (the same objects, moved up). On the pruned trees jsonpatch rewrote one kept
    # entry in place and added the pruning marker to it by path; applied to the real Pod that
    # wrote the marker into an env entry. Such a patch is refused and the verified diff of the
    # whole Pods is used instead.
    kept = [
        {"name": "MOONCAKE_CONFIG_PATH", "value": ""},
        {"name": "MOONCAKE_CONFIG_PATH"},
        {"name": "MOONCAKE_CONFIG_PATH"},
    ]
    added = [{"name": "MOONCAKE_MASTER", "value": "m:1"}, {"name": "MC_TE_METRIC", "value": "1"}]
    src = {"spec": {"containers": [{"name": "s", "env": [{"name": "T"}, {"name": "T"}, *kept]}]}}
    dst = {"spec": {"containers": [{"name": "s", "env": [*kept, *added]}]}}
    ops = p.make_patch(src, dst)
    assert not [op for op in ops if "\x00" in op["path"]]
    assert jsonpatch.apply_patch(json.loads(json.dumps(src)), ops) == dst
