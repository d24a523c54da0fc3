"""The controller's pure decisions of one pass: the input graph, the Service sync and the
teardown plan (gpustack_render.reconcile), tested without the controller shell."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from gpustack_render.api.inputs import KVCacheBackend, KVCachePool, KVCachePoolBinding
from gpustack_render.api.modeldeployment import ModelDeployment
from gpustack_render.cli.yamlio import load_documents
from gpustack_render.core import labels
from gpustack_render.reconcile.claims import FINALIZER
from gpustack_render.reconcile.events import INPUT_UNREADABLE
from gpustack_render.reconcile.inputs import InputGraph, Read
from gpustack_render.reconcile.observed import ObservedPod, ObservedWorkload
from gpustack_render.reconcile.owned import SERVICE_POLICY, Owner, PassFacts, plan_owned
from gpustack_render.reconcile.replicas import ReplicaIndex
from gpustack_render.reconcile.teardown import Draining, Releasing, plan_teardown
from gpustack_render.schema.decoding import decode_deployment
from gpustack_render.schema.lookups import LookupFailed

EXAMPLE = Path(__file__).parents[2] / "examples" / "sglang-pool.yaml"
UID = "0b6c4a9e-4d5e-4a43-9f7e-6c2f3f0f8a11"
NOW = "2026-01-02T03:04:05Z"


def _objects() -> dict[str, dict[str, Any]]:
    return {str(d["kind"]): d for d in load_documents(EXAMPLE.read_text())}


def _deployment(**metadata: Any) -> ModelDeployment:
    raw = copy.deepcopy(_objects()["ModelDeployment"])
    raw["metadata"].update({"uid": UID, **metadata})
    md, errs = decode_deployment(raw)
    assert md is not None, errs
    return md


def _answer_all(graph: InputGraph, objects: dict[str, dict[str, Any]]) -> list[Read]:
    order: list[Read] = []
    while pending := graph.pending():
        for read in pending:
            order.append(read)
            graph.answer(read, objects.get(read.kind.__name__))
    return order


def test_the_graph_walks_binding_pool_backend_in_rounds() -> None:
    objects = _objects()
    graph = InputGraph(_deployment())
    kinds = [r.kind.__name__ for r in _answer_all(graph, objects)]
    assert kinds == [
        "InstanceType",
        "KVCachePoolBinding",
        "KVCachePool",
        "KVCacheBackend",
    ]
    assert graph.raw_binding == objects["KVCachePoolBinding"]
    ns = graph.namespace
    binding = graph.lookups.get(
        KVCachePoolBinding, ns, objects["KVCachePoolBinding"]["metadata"]["name"]
    )
    assert isinstance(binding, KVCachePoolBinding)
    assert isinstance(graph.lookups.get(KVCachePool, "", binding.spec.pool_ref.name), KVCachePool)
    assert all(isinstance(b, KVCacheBackend) for b in graph.lookups.backends.values())


def test_a_stored_object_that_does_not_decode_is_a_failed_read() -> None:
    """One policy with the webhook: never read as absent."""
    objects = _objects()
    bad = copy.deepcopy(objects["KVCachePool"])
    bad["spec"]["backends"] = "not-a-list"
    objects["KVCachePool"] = bad
    graph = InputGraph(_deployment())
    kinds = [r.kind.__name__ for r in _answer_all(graph, objects)]
    assert kinds == ["InstanceType", "KVCachePoolBinding", "KVCachePool"]
    with pytest.raises(LookupFailed, match="does not decode"):
        graph.lookups.get(KVCachePool, "", bad["metadata"]["name"])


def test_a_binding_nested_too_deep_is_one_unreadable_object_never_claimed() -> None:
    """The hostile Binding of issue 17: reported (an InputUnreadable Event naming it and the
    path of the cut), read as a failed read by the render, and not claimed."""
    objects = _objects()
    deep: dict[str, Any] = {"leaf": True}
    for _ in range(150):
        deep = {"x": deep}
    bad = copy.deepcopy(objects["KVCachePoolBinding"])
    bad["metadata"]["resourceVersion"] = "42"
    bad["spec"]["unknownField"] = deep
    objects["KVCachePoolBinding"] = bad
    graph = InputGraph(_deployment())
    kinds = [r.kind.__name__ for r in _answer_all(graph, objects)]
    assert kinds == ["InstanceType", "KVCachePoolBinding"]
    assert graph.raw_binding is None
    (unreadable,) = graph.unreadable
    assert unreadable.read.kind is KVCachePoolBinding and unreadable.resource_version == "42"
    event = unreadable.event()
    name = bad["metadata"]["name"]
    assert event.reason == INPUT_UNREADABLE
    assert f"KVCachePoolBinding {graph.namespace}/{name}" in event.message
    assert "spec.unknownField.x.x" in event.message and "nested deeper than" in event.message
    with pytest.raises(LookupFailed, match="does not decode"):
        graph.lookups.get(KVCachePoolBinding, graph.namespace, name)


def test_a_missing_object_stops_the_walk_and_reads_as_absent() -> None:
    objects = _objects()
    del objects["KVCachePoolBinding"]
    graph = InputGraph(_deployment())
    kinds = [r.kind.__name__ for r in _answer_all(graph, objects)]
    assert kinds == ["InstanceType", "KVCachePoolBinding"]
    assert graph.raw_binding is None
    assert graph.lookups.bindings == {}


def _service(name: str, *, ordinal: str | None = None, owner: str = UID) -> dict[str, Any]:
    selector = {labels.COMPONENT: "server"}
    if ordinal is not None:
        selector[labels.POD_ORDINAL] = ordinal
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": name,
            "namespace": "team-a",
            "uid": f"uid-{name}",
            "ownerReferences": [{"uid": owner, "controller": True}],
        },
        "spec": {"selector": selector},
    }


def test_service_sync_applies_reports_conflicts_and_prunes() -> None:
    wanted = [_service("a"), _service("b"), _service("c")]
    theirs = _service("b", owner="someone-else")
    stale = _service("old")
    held = _service("old-0", ordinal="0")
    foreign = _service("other", owner="someone-else")
    pods = [ObservedPod(name="p", uid="u", role="server", ordinal=0, terminating=True)]
    sync = plan_owned(
        SERVICE_POLICY,
        wanted,
        stored={"a": None, "b": theirs, "c": None},
        others=[theirs, stale, held, foreign],
        owner=Owner("team-a", "qwen", UID),
        manager="gpustack-controller",
        facts=PassFacts(pods=pods),
    )
    assert [s["metadata"]["name"] for s in sync.applies] == ["a", "c"]
    assert [(c.namespace, c.name, c.deployment) for c in sync.conflicts] == [
        ("team-a", "b", "qwen")
    ]
    assert str(sync.conflicts[0]) == (
        "Service team-a/b exists and is not owned by ModelDeployment team-a/qwen"
    )
    # Pruned by name and uid (the delete's precondition: a same-named successor stays).
    assert sync.prunes == (("old", "uid-old"),)


def test_teardown_is_not_ours_without_the_finalizer() -> None:
    md = _deployment(deletionTimestamp=NOW)
    assert plan_teardown(md, index=ReplicaIndex.of([], []), now=NOW) is None


def test_teardown_drains_owned_pods_and_their_workloads_first() -> None:
    md = _deployment(deletionTimestamp=NOW, finalizers=[FINALIZER])
    live = ObservedPod(name="p0", uid="u0", role="server", ordinal=0)
    leaving = ObservedPod(name="p1", uid="u1", role="server", ordinal=1, terminating=True)
    stranger = ObservedPod(name="x", uid="ux", role="server", ordinal=2, owned=False)
    workloads = [
        ObservedWorkload(name="w0", owner_pods=frozenset({"u0"})),
        ObservedWorkload(name="wx", owner_pods=frozenset({"ux"})),
    ]
    step = plan_teardown(md, index=ReplicaIndex.of([live, leaving, stranger], workloads), now=NOW)
    assert isinstance(step, Draining)
    assert [p.name for p in step.delete_pods] == ["p0"]
    assert step.delete_workloads == ("w0",)
    assert step.status is not None


def test_teardown_releases_the_claim_then_the_finalizer() -> None:
    md = _deployment(deletionTimestamp=NOW, finalizers=["other", FINALIZER])
    step = plan_teardown(md, index=ReplicaIndex.of([], []), now=NOW)
    assert isinstance(step, Releasing)
    assert md.spec.kv_cache is not None
    assert step.binding == md.spec.kv_cache.pool_ref.name
    assert step.finalizers == ["other"]
