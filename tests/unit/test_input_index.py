"""The input index (gpustack_render.reconcile.inputindex): which deployments an InstanceType,
Binding, pool or backend event concerns, kept from the events themselves, and the same reads
the render's own InputGraph makes (docs/contract/controller.md §2)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from gpustack_render.api.inputs import (
    InputObject,
    InstanceType,
    KVCacheBackend,
    KVCachePool,
    KVCachePoolBinding,
)
from gpustack_render.cli.yamlio import load_documents
from gpustack_render.reconcile import inputindex
from gpustack_render.reconcile.inputindex import InputIndex
from gpustack_render.reconcile.inputs import InputGraph, Read
from gpustack_render.schema.decoding import decode_deployment

EXAMPLE = Path(__file__).parents[2] / "examples" / "sglang-pool.yaml"
KINDS: dict[str, type[InputObject]] = {
    "InstanceType": InstanceType,
    "KVCachePoolBinding": KVCachePoolBinding,
    "KVCachePool": KVCachePool,
    "KVCacheBackend": KVCacheBackend,
}


def _objects() -> dict[str, dict[str, Any]]:
    return {str(d["kind"]): d for d in load_documents(EXAMPLE.read_text())}


OBJECTS = _objects()
TYPE = OBJECTS["InstanceType"]["metadata"]["name"]
BINDING = OBJECTS["KVCachePoolBinding"]["metadata"]["name"]
POOL = OBJECTS["KVCachePool"]["metadata"]["name"]
BACKEND = OBJECTS["KVCacheBackend"]["metadata"]["name"]
NS = OBJECTS["ModelDeployment"]["metadata"]["namespace"]


def deployment(
    name: str, namespace: str = NS, *, instance_type: str = TYPE, pool_ref: str | None = BINDING
) -> dict[str, Any]:
    raw = copy.deepcopy(OBJECTS["ModelDeployment"])
    raw["metadata"].update({"name": name, "namespace": namespace})
    for role in raw["spec"]["roles"]:
        role["instanceType"] = instance_type
    if pool_ref is None:
        raw["spec"].pop("kvCache", None)
    else:
        raw["spec"]["kvCache"]["poolRef"]["name"] = pool_ref
    return raw


def obj(kind: str, name: str | None = None, **spec: Any) -> dict[str, Any]:
    raw = copy.deepcopy(OBJECTS[kind])
    if name is not None:
        raw["metadata"]["name"] = name
    raw["spec"].update(spec)
    return raw


def index_of(*deployments: dict[str, Any], inputs: tuple[dict[str, Any], ...] = ()) -> InputIndex:
    index = InputIndex()
    for raw in deployments:
        index.deployment_changed(f"{raw['metadata']['namespace']}/{raw['metadata']['name']}", raw)
    for raw in inputs or tuple(OBJECTS[k] for k in KINDS):
        index.input_changed(KINDS[raw["kind"]], raw)
    return index


def changed(index: InputIndex, raw: dict[str, Any]) -> list[str]:
    return index.input_changed(KINDS[raw["kind"]], raw)


def test_each_input_kind_reaches_the_deployments_that_read_it() -> None:
    index = index_of(
        deployment("a"),
        deployment("b", pool_ref=None),
        deployment("c", namespace="other"),  # names a Binding of its own namespace
        deployment("d", instance_type="another-type", pool_ref=None),
    )
    assert changed(index, OBJECTS["InstanceType"]) == ["other/c", f"{NS}/a", f"{NS}/b"]
    assert changed(index, obj("InstanceType", "another-type")) == [f"{NS}/d"]
    assert changed(index, OBJECTS["KVCachePoolBinding"]) == [f"{NS}/a"]
    # Through the Binding: the pool, then the pool's backend.
    assert changed(index, OBJECTS["KVCachePool"]) == [f"{NS}/a"]
    assert changed(index, OBJECTS["KVCacheBackend"]) == [f"{NS}/a"]
    assert changed(index, obj("KVCachePool", "unused-pool")) == []


def test_the_index_reads_what_the_render_reads() -> None:
    """One source of truth: every object the render's InputGraph reads maps back to the
    deployment, and nothing else does."""
    raw = deployment("a")
    md, errs = decode_deployment(copy.deepcopy(raw))
    assert md is not None, errs
    graph = InputGraph(md)
    read: list[Read] = []
    while pending := graph.pending():
        for r in pending:
            read.append(r)
            graph.answer(r, OBJECTS[r.kind.__name__])
    index = index_of(raw)
    assert list(index.reads_of(f"{NS}/a")) == [
        r for r in read if r.kind in (InstanceType, KVCachePoolBinding)
    ]
    for r in read:
        assert index.readers(r) == [f"{NS}/a"], r
    assert index.readers(Read(KVCachePoolBinding, "other", BINDING)) == []


def test_a_pool_that_does_not_decode_reaches_no_backend() -> None:
    """A pool names at most one backend; one listing two does not decode, so the render never
    reads a backend through it, and neither backend's events concern the deployment."""
    index = index_of(
        deployment("a"),
        inputs=(
            OBJECTS["KVCachePoolBinding"],
            obj("KVCachePool", backends=[BACKEND, "second"]),
        ),
    )
    assert changed(index, OBJECTS["KVCacheBackend"]) == []
    assert changed(index, obj("KVCacheBackend", "second")) == []
    assert changed(index, OBJECTS["KVCachePool"]) == [f"{NS}/a"]
    assert changed(index, OBJECTS["KVCacheBackend"]) == [f"{NS}/a"]


def test_an_edit_moves_the_deployment_to_its_new_inputs() -> None:
    index = index_of(deployment("a"))
    edited = deployment("a", instance_type="another-type", pool_ref="other-binding")
    index.deployment_changed(f"{NS}/a", edited)
    assert changed(index, OBJECTS["InstanceType"]) == []
    assert changed(index, OBJECTS["KVCachePoolBinding"]) == []
    assert changed(index, OBJECTS["KVCachePool"]) == []
    assert changed(index, obj("InstanceType", "another-type")) == [f"{NS}/a"]
    # The new Binding does not exist yet: its creation concerns the deployment, and once it
    # names a pool, that pool's events do too.
    assert changed(index, obj("KVCachePoolBinding", "other-binding", poolRef={"name": "p2"})) == [
        f"{NS}/a"
    ]
    assert changed(index, obj("KVCachePool", "p2")) == [f"{NS}/a"]
    # Dropping the cache entirely.
    index.deployment_changed(f"{NS}/a", deployment("a", pool_ref=None))
    assert changed(index, obj("KVCachePool", "p2")) == []


def test_a_binding_that_points_at_another_pool_takes_its_readers_along() -> None:
    index = index_of(deployment("a"))
    changed(index, obj("KVCachePoolBinding", poolRef={"name": "p2"}))
    assert changed(index, OBJECTS["KVCachePool"]) == []
    assert changed(index, obj("KVCachePool", "p2")) == [f"{NS}/a"]


def test_deletion_forgets_the_deployment_and_the_input_edges() -> None:
    index = index_of(deployment("a"), deployment("b"))
    index.deployment_deleted(f"{NS}/a")
    assert changed(index, OBJECTS["KVCacheBackend"]) == [f"{NS}/b"]
    index.deployment_deleted(f"{NS}/b")
    assert changed(index, OBJECTS["InstanceType"]) == []
    assert index.reads_of(f"{NS}/b") == ()
    # A deleted pool leads nowhere any more, but its deletion still concerns its readers.
    index = index_of(deployment("a"))
    assert index.input_deleted(KVCachePool, OBJECTS["KVCachePool"]) == [f"{NS}/a"]
    assert changed(index, OBJECTS["KVCacheBackend"]) == []


def test_an_undecodable_object_leads_nowhere() -> None:
    """The render's policy: a stored object that does not decode is a failed read, never
    followed; a deployment that does not decode reads nothing."""
    index = index_of(deployment("a"))
    bad_binding = obj("KVCachePoolBinding", poolRef="not-an-object")
    assert changed(index, bad_binding) == [f"{NS}/a"]
    assert changed(index, OBJECTS["KVCachePool"]) == []
    bad = deployment("a")
    bad["spec"]["roles"] = "not-a-list"
    index.deployment_changed(f"{NS}/a", bad)
    assert changed(index, OBJECTS["InstanceType"]) == []


def test_a_status_only_update_is_not_decoded_again(monkeypatch: pytest.MonkeyPatch) -> None:
    raw = deployment("a")
    index = index_of(raw)
    calls: list[object] = []
    real = decode_deployment

    def counting(data: Any) -> Any:
        calls.append(data)
        return real(data)

    monkeypatch.setattr(inputindex, "decode_deployment", counting)
    index.deployment_changed(f"{NS}/a", {**copy.deepcopy(raw), "status": {"phase": "Ready"}})
    assert calls == []
    index.deployment_changed(f"{NS}/a", deployment("a", pool_ref=None))
    assert len(calls) == 1


def test_an_input_event_decodes_no_deployment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Handling an input event costs what it concerns: the deployments are never walked or
    decoded again, however many there are."""
    index = index_of(*(deployment(f"d{i}", pool_ref=f"b{i}") for i in range(200)))
    monkeypatch.setattr(inputindex, "decode_deployment", None)  # any call would fail
    assert changed(index, obj("KVCachePoolBinding", "b7")) == [f"{NS}/d7"]
    assert len(changed(index, OBJECTS["InstanceType"])) == 200
