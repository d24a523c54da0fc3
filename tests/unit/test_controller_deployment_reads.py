"""A pass reads its deployment from the watch cache, or from the answer to the controller's own
last write of it when that is newer, and live only when the cache cannot answer
(gpustack_controller/deployments.py).

The passes are the controller's real :class:`~gpustack_controller.reconciler.DeploymentReconciler`
over an in-memory API server (``controller_support.MemoryKube``) whose deployment GETs and status
applies are counted; the informers are filled by their own relist, as at start-up, and marked as
following their streams.
"""

from __future__ import annotations

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

NAMESPACE = "team-a"
NAME = "reads"
KEY = f"{NAMESPACE}/{NAME}"


def _gets(kube: MemoryKube) -> int:
    return kube.calls["get", "ModelDeployment"]


def _status_applies(kube: MemoryKube) -> int:
    return kube.calls["apply", "ModelDeployment", "status"]


async def _follow(reconcile: DeploymentReconciler) -> None:
    """Every informer the pass reads lists what the API server holds and follows it."""
    caches = reconcile.caches
    for informer in (caches.deployments, caches.pods, caches.workloads):
        await informer._relist()
        informer.current = True


def _reads(source: str) -> float:
    return counted("gpustack_controller_deployment_reads_total", source=source)


def test_a_pass_reads_a_current_cache_and_makes_no_get() -> None:
    kube = example_cluster(NAME, MemoryKube())
    reconcile = reconciler(kube, StatusGauges())

    async def scenario() -> None:
        await _follow(reconcile)
        cached = _reads("cache")
        await reconcile(KEY)
        assert _gets(kube) == 0
        assert _reads("cache") == cached + 1
        assert len(kube.of_kind("Pod")) == 2

    run(scenario())


def test_our_own_write_is_read_back_while_the_cache_lags_it() -> None:
    kube = example_cluster(NAME, MemoryKube())
    reconcile = reconciler(kube, StatusGauges())

    async def scenario() -> None:
        await _follow(reconcile)
        await reconcile(KEY)  # adds the finalizer, creates, writes the status
        serve_every_pod(kube)
        for informer in (reconcile.caches.pods, reconcile.caches.workloads):
            await informer._relist()
        await reconcile(KEY)  # writes Ready; the deployment cache still holds the first copy
        applies = _status_applies(kube)
        stored = kube.stored("ModelDeployment", NAMESPACE, NAME)
        assert stored is not None and stored["status"]["phase"] == "Ready"
        stale = reconcile.caches.deployments.get(KEY)
        assert stale is not None and "status" not in stale

        # Read from the stale cache, the pass would find no status and write Ready again;
        # it reads the answer to its own write instead, and writes nothing.
        own = _reads("own-write")
        await reconcile(KEY)
        assert _gets(kube) == 0
        assert _reads("own-write") == own + 1
        assert _status_applies(kube) == applies
        assert len(reconcile.deployments) == 1

        # The cache catches up: it answers, and the kept answer is let go.
        await reconcile.caches.deployments._relist()
        await reconcile(KEY)
        assert len(reconcile.deployments) == 0
        assert _status_applies(kube) == applies
        assert _gets(kube) == 0

    run(scenario())


def test_a_cache_that_cannot_answer_is_read_past() -> None:
    kube = example_cluster(NAME, MemoryKube())
    reconcile = reconciler(kube, StatusGauges())

    async def scenario() -> None:
        await _follow(reconcile)
        await reconcile(KEY)
        # Not following its stream (relisting after a dropped watch): live.
        reconcile.caches.deployments.current = False
        await reconcile(KEY)
        assert _gets(kube) == 1
        reconcile.caches.deployments.current = True
        # A copy that cannot be ordered against our last write's answer: live.
        await reconcile.caches.deployments._relist()
        reconcile.caches.deployments.cache[KEY]["metadata"]["resourceVersion"] = "x1"
        reconcile.deployments.wrote(kube.stored("ModelDeployment", NAMESPACE, NAME) or {})
        await reconcile(KEY)
        assert _gets(kube) == 2
        # Deleted (gone from the API server, the cache not yet told): live, and done.
        kube.objects.pop(("ModelDeployment", NAMESPACE, NAME))
        await reconcile.caches.deployments._relist()
        assert reconcile.caches.deployments.get(KEY) is None
        assert await reconcile(KEY) is None
        assert _gets(kube) == 3
        assert len(reconcile.deployments) == 0

    run(scenario())
