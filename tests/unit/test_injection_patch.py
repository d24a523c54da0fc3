"""The pruned JSON Patch: same result as ``jsonpatch.make_patch`` on copy-on-write documents."""

from __future__ import annotations

import json
from typing import Any

import jsonpatch
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
    calls: list[int] = []

    def leaky(src: Any, dst: Any) -> list[dict[str, Any]]:
        calls.append(1)
        return [{"op": "add", "path": "/x", "value": [p._SHARED + "0"]}]

    monkeypatch.setattr(p, "_additions", leaky)
    src = {"env": [A]}
    dst = {"env": [A, B]}
    assert p.make_patch(src, dst) == jsonpatch.make_patch(src, dst).patch
    assert len(calls) == 1


def test_writes_placeholder() -> None:
    assert p._writes_placeholder({"a": [p._SHARED + "3"]})
    assert not p._writes_placeholder({"a": ["x", 1, None]})


def test_in_place_env_beside_valueless_entry() -> None:
    # docs/contract/injection-notes.md §5 step 1: MOONCAKE_MASTER rewritten in place and
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
    wrong = [{"op": "remove", "path": "/a"}]
    monkeypatch.setattr(p, "_diff", lambda s, d: wrong)
    monkeypatch.setattr(jsonpatch, "make_patch", lambda s, d: jsonpatch.JsonPatch(wrong))
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


# ---- the diff through jsonpatch's DiffBuilder, and the patch's own check -------------------

#: JSON documents: objects, arrays and scalars, nested a few levels, keys that need escaping.
_scalars = (
    st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from(["", "a", "b", "~", "/"])
)
_json = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=5)
        | st.dictionaries(st.sampled_from(["a", "b", "c", "x/y", "m~n", "0"]), inner, max_size=4)
    ),
    max_leaves=12,
)


def test_the_installed_jsonpatch_takes_the_builder_diff() -> None:
    # make_patch drives jsonpatch's DiffBuilder itself (its entry point is not public) when it
    # gives make_patch's own operations on this jsonpatch; otherwise it uses the public API, a
    # third slower. This fails when a jsonpatch release changes the builder, so the slower path
    # is noticed and the builder call revisited.
    assert p._diff is p._builder_diff


@settings(max_examples=300, deadline=None)
@given(_json, _json)
def test_builder_diff_is_make_patch(src: Any, dst: Any) -> None:
    assert p._builder_diff(src, dst) == jsonpatch.make_patch(src, dst).patch


@settings(max_examples=300, deadline=None)
@given(_json, _json)
def test_own_apply_agrees_with_jsonpatch(src: Any, dst: Any) -> None:
    ops = jsonpatch.make_patch(src, dst).patch
    assert p._apply(json.loads(json.dumps(src)), ops) == jsonpatch.apply_patch(src, ops)
    assert p._applies(src, ops, dst)


@pytest.mark.parametrize(
    ("doc", "op"),
    [
        pytest.param({"a": [1]}, {"op": "add", "path": "/a/2", "value": 0}, id="index-past-end"),
        pytest.param({"a": [1]}, {"op": "add", "path": "/a/01", "value": 0}, id="leading-zero"),
        pytest.param({"a": [1]}, {"op": "replace", "path": "/a/-", "value": 0}, id="dash-replace"),
        pytest.param({"a": [1]}, {"op": "remove", "path": "/b"}, id="remove-missing"),
        pytest.param({"a": [1]}, {"op": "replace", "path": "/b", "value": 0}, id="replace-missing"),
        pytest.param(
            {"a": [1]}, {"op": "add", "path": "a", "value": 0}, id="pointer-without-slash"
        ),
        pytest.param(
            {"a": {"b": 1}}, {"op": "move", "from": "/a", "path": "/a/c"}, id="move-inside"
        ),
        pytest.param(
            {"a": 1}, {"op": "test", "path": "/a", "value": True}, id="test-true-is-not-1"
        ),
        pytest.param({"a": 1}, {"op": "add", "path": "/a/b/c", "value": 0}, id="through-a-scalar"),
        pytest.param({"a": 1}, {"op": "add", "path": "/b"}, id="add-without-value"),
        pytest.param({"a": 1}, {"op": "frobnicate", "path": "/a"}, id="unknown-op"),
    ],
)
def test_own_apply_refuses_what_jsonpatch_refuses(doc: Any, op: dict[str, Any]) -> None:
    with pytest.raises((jsonpatch.JsonPatchException, jsonpatch.JsonPointerException)):
        jsonpatch.apply_patch(json.loads(json.dumps(doc)), [op])
    assert not p._applies(doc, [op], doc)


def test_applied_values_are_copies() -> None:
    # An add of a list, then an add inside it: the patch's own value (a branch of the mutated
    # Pod) must not be what the second operation grows.
    value = [1]
    ops: list[dict[str, Any]] = [
        {"op": "add", "path": "/l", "value": value},
        {"op": "add", "path": "/l/-", "value": 2},
    ]
    assert p._applies({}, ops, {"l": [1, 2]})
    assert value == [1]


@st.composite
def _grown(draw: st.DrawFn) -> tuple[Any, Any]:
    """A document and a copy grown by additions only, as injection grows a Pod: members added,
    items appended (copies of existing items among them), items changed in place by additions."""
    src = draw(_json)

    def grow(value: Any) -> Any:
        if isinstance(value, dict):
            grown = {k: grow(v) if draw(st.booleans()) else v for k, v in value.items()}
            for key in draw(st.lists(st.sampled_from(["a", "n", "x/y", "q~"]), max_size=2)):
                grown.setdefault(key, draw(_json))
            return grown
        if isinstance(value, list):
            out = [grow(v) if draw(st.booleans()) else v for v in value]
            for _ in range(draw(st.integers(0, 2))):
                pool = [draw(_json), *value]
                out.append(json.loads(json.dumps(draw(st.sampled_from(pool)))))
            return out
        return value

    return src, grow(src)


@settings(max_examples=500, deadline=None)
@given(_grown())
def test_additions_are_make_patch(pair: tuple[Any, Any]) -> None:
    src, dst = pair
    ops = p._additions(src, dst)
    if ops is not None:
        assert ops == jsonpatch.make_patch(src, dst).patch


@settings(max_examples=300, deadline=None)
@given(_json, _json)
def test_additions_of_unrelated_documents_are_make_patch(src: Any, dst: Any) -> None:
    ops = p._additions(src, dst)
    if ops is not None:
        assert ops == jsonpatch.make_patch(src, dst).patch


@pytest.mark.parametrize(
    ("src", "dst", "taken"),
    [
        pytest.param({"l": ["a"]}, {"l": ["a", "b"], "m": 1}, True, id="append-and-member"),
        pytest.param([{"k": 1}, "s"], [{"k": 1, "j": 2}, "s"], True, id="item-grown-in-place"),
        pytest.param({"l": [A, B]}, {"l": [A, B, A]}, True, id="append-a-copy-after-prefix"),
        pytest.param({"l": [A, B]}, {"l": [{**A, "x": 1}, B, B]}, False, id="common-end"),
        pytest.param({"l": [A, B]}, {"l": [{**A, "x": 1}, {**B, "x": 1}, A]}, False, id="moved"),
        pytest.param({"a": 1}, {"a": True}, False, id="one-to-true"),
        pytest.param({"a": 1}, {}, False, id="member-removed"),
    ],
)
def test_additions_take_only_what_they_can_pair(src: Any, dst: Any, taken: bool) -> None:
    ops = p._additions(src, dst)
    assert (ops is not None) is taken
    if ops is not None:
        assert ops == jsonpatch.make_patch(src, dst).patch
    assert jsonpatch.apply_patch(json.loads(json.dumps(src)), p.make_patch(src, dst)) == dst
