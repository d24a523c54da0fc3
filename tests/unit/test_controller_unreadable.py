"""A stored ModelDeployment that does not decode (docs/contract/controller.md §12): it is
reported on itself, and once deleted it is still torn down, so it never holds its Pods, their
Workloads, its Binding claim and its own deletion for ever.

The object below is one the API server stores: a status condition is a preserved-unknown
object, so a status writer can nest a field deeper than the controller reads.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from controller_support import MemoryKube, reconciler

from gpustack_controller.metrics import StatusGauges
from gpustack_render.cli.yamlio import load_documents
from gpustack_render.reconcile.claims import FINALIZER
from gpustack_render.reconcile.events import DEPLOYMENT_UNREADABLE

EXAMPLE = Path(__file__).parents[2] / "examples" / "cpu-only.yaml"
NAMESPACE = "team-a"


def _cluster() -> tuple[MemoryKube, str]:
    kube = MemoryKube()
    name = ""
    for doc in load_documents(EXAMPLE.read_text()):
        stored = kube.put(doc)
        if doc["kind"] == "ModelDeployment":
            name = stored["metadata"]["name"]
    return kube, name


def _spoil(kube: MemoryKube, name: str, **metadata: Any) -> None:
    """Nest a preserved field of a status condition deeper than any object is read."""
    md = kube.stored("ModelDeployment", NAMESPACE, name)
    assert md is not None
    deep: dict[str, Any] = {"leaf": True}
    for _ in range(150):
        deep = {"x": deep}
    md["status"]["conditions"][0]["extra"] = deep
    md["metadata"].update(metadata)


def _unreadable_events(kube: MemoryKube) -> list[dict[str, Any]]:
    return [e for e in kube.of_kind("Event") if e["reason"] == DEPLOYMENT_UNREADABLE]


async def _running() -> tuple[MemoryKube, str, Any]:
    kube, name = _cluster()
    reconcile = reconciler(kube, StatusGauges())
    await reconcile(f"{NAMESPACE}/{name}")
    assert kube.of_kind("Pod")
    return kube, name, reconcile


async def test_an_unreadable_deployment_is_reported_and_left_alone() -> None:
    kube, name, reconcile = await _running()
    pods = kube.of_kind("Pod")
    _spoil(kube, name)
    again = await reconcile(f"{NAMESPACE}/{name}")
    assert again is not None  # a status-only fix moves no generation: look again later
    assert kube.of_kind("Pod") == pods
    (event,) = _unreadable_events(kube)
    assert event["type"] == "Warning"
    assert event["involvedObject"]["name"] == name
    assert "status.conditions[0].extra.x" in event["message"]
    assert "not reconciled" in event["message"]


async def test_a_deleted_unreadable_deployment_is_still_torn_down() -> None:
    """Before, the pass logged and returned: the finalizer stayed, and so did the deployment,
    its Pods and the quota their Workloads held."""
    kube, name, reconcile = await _running()
    md = kube.stored("ModelDeployment", NAMESPACE, name)
    assert md is not None and FINALIZER in md["metadata"]["finalizers"]
    _spoil(kube, name, deletionTimestamp="2026-01-02T03:04:05Z")
    key = f"{NAMESPACE}/{name}"
    for _ in range(5):
        if await reconcile(key) is None:
            break
    assert kube.stored("ModelDeployment", NAMESPACE, name) is None
    assert kube.of_kind("Pod") == []
    assert _unreadable_events(kube), "the teardown says why the deployment could not be read"
    assert "teardown still runs" in _unreadable_events(kube)[0]["message"]


async def test_an_unreadable_deployment_of_another_controller_is_not_torn_down() -> None:
    kube, name, reconcile = await _running()
    _spoil(kube, name, deletionTimestamp="2026-01-02T03:04:05Z", finalizers=["someone/else"])
    assert await reconcile(f"{NAMESPACE}/{name}") is None
    assert kube.stored("ModelDeployment", NAMESPACE, name) is not None
    assert kube.of_kind("Pod")
