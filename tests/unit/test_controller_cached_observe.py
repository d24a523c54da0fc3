"""A pass plans on the Pod and Workload caches first, and lists the deployment's Pods live only
when its plan would act (gpustack_controller/observe.py; docs/contract/controller.md §6).

The passes are the controller's real :class:`~gpustack_controller.reconciler.DeploymentReconciler`
over an in-memory API server (``controller_support.MemoryKube``), counting its Pod LISTs; the
informers are filled by their own relist, as at start-up, and marked as following their streams.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from controller_support import (
    MemoryKube,
    counted,
    example_cluster,
    reconciler,
    run,
    serve_every_pod,
)

from gpustack_controller.metrics import StatusGauges
from gpustack_controller.reconciler import DeploymentReconciler
from gpustack_render.reconcile.keys import deployment_selector
from gpustack_render.reconcile.rollout import RolloutStep, acts

EXAMPLE = Path(__file__).parents[2] / "examples" / "cpu-only.yaml"
NAMESPACE = "team-a"
NAME = "cached"
KEY = f"{NAMESPACE}/{NAME}"


def _pod_lists(kube: MemoryKube) -> int:
    """The deployment's Pods listed live (the informers' own lists are not counted)."""
    return kube.calls["list", "Pod", deployment_selector(NAME)]


def _cluster() -> MemoryKube:
    return example_cluster(NAME, MemoryKube())


async def _follow(reconcile: DeploymentReconciler) -> None:
    """The Pod and Workload informers list what the API server holds and follow it."""
    for informer in (reconcile.caches.pods, reconcile.caches.workloads):
        await informer._relist()
        informer.current = True


async def _served(kube: MemoryKube, reconcile: DeploymentReconciler) -> None:
    """The deployment created, served, and seen so by the caches."""
    await _follow(reconcile)
    await reconcile(KEY)
    serve_every_pod(kube)
    await _follow(reconcile)


def _observations(source: str) -> float:
    return counted("gpustack_controller_pod_observations_total", source=source)


def _phase(kube: MemoryKube) -> Any:
    stored = kube.stored("ModelDeployment", NAMESPACE, NAME)
    assert stored is not None
    return stored["status"]["phase"]


def test_a_pass_that_only_reports_reads_its_pods_from_the_cache() -> None:
    kube = _cluster()
    reconcile = reconciler(kube, StatusGauges())

    async def scenario() -> None:
        # Caches following an empty namespace: the plan creates, so the Pods are listed live
        # (the create gate's uncached list) and both replicas are created once.
        await _follow(reconcile)
        live = _observations("live")
        await reconcile(KEY)
        assert _pod_lists(kube) == 1
        assert _observations("live") == live + 1
        assert len(kube.of_kind("Pod")) == 2

        # Served; the caches have seen it: the pass reports Ready with no Pod LIST.
        serve_every_pod(kube)
        await _follow(reconcile)
        cached = _observations("cache")
        await reconcile(KEY)
        assert _pod_lists(kube) == 1
        assert _observations("cache") == cached + 1
        assert _phase(kube) == "Ready"

    run(scenario())


def test_a_cache_that_lags_a_create_never_doubles_a_replica() -> None:
    kube = _cluster()
    reconcile = reconciler(kube, StatusGauges())

    async def scenario() -> None:
        await _served(kube, reconcile)
        pods = reconcile.caches.pods
        # The cache has not seen one Pod yet: planned on it, the pass would create that seat
        # again; it lists live instead, finds the Pod, and creates nothing.
        lagging = sorted(pods.cache)[0]
        pods._remove(lagging)
        before = _pod_lists(kube)
        await reconcile(KEY)
        assert _pod_lists(kube) == before + 1
        assert len(kube.of_kind("Pod")) == 2
        assert _phase(kube) == "Ready"

    run(scenario())


def test_a_cache_not_following_its_stream_is_never_read() -> None:
    kube = _cluster()
    reconcile = reconciler(kube, StatusGauges())

    async def scenario() -> None:
        await _served(kube, reconcile)
        reconcile.caches.pods.current = False  # relisting after a dropped stream
        before = _pod_lists(kube)
        await reconcile(KEY)
        assert _pod_lists(kube) == before + 1
        assert _phase(kube) == "Ready"

    run(scenario())


def test_only_a_plan_that_writes_or_waits_acts() -> None:
    quiet = RolloutStep(
        replacing={"embed": None},
        persist_first=False,
        delete_pods=(),
        delete_workloads=(),
        create=(),
        requeue=False,
    )
    assert not acts(quiet)
    something: Any = ("x",)
    for field in ("delete_pods", "delete_workloads", "create", "blocked"):
        changed: dict[str, Any] = {field: something}
        assert acts(dataclasses.replace(quiet, **changed)), field
    for flag in ("persist_first", "requeue"):
        raised: dict[str, Any] = {flag: True}
        assert acts(dataclasses.replace(quiet, **raised)), flag
