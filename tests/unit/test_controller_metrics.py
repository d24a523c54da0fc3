"""The controller's metrics, read from its registry after real reconcile passes and real
work-queue workers (docs/operations.md, "Metrics").

The passes run :class:`~gpustack_controller.reconciler.DeploymentReconciler` against an
in-memory API server (``controller_support.MemoryKube``): the gauges are what the status the
pass wrote says, the counters and the histogram what the work queue saw.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, cast

import pytest
from aiohttp.test_utils import TestClient, TestServer
from controller_support import MemoryKube, example_cluster, reconciler, run, serve_every_pod

from gpustack_controller import metrics
from gpustack_controller.controller import Controller
from gpustack_controller.kube import ApiError, Kube
from gpustack_controller.metrics import REGISTRY, StatusGauges, error_labels
from gpustack_controller.server import make_app
from gpustack_controller.workqueue import WorkQueue
from gpustack_render.api.modeldeployment import ModelDeploymentStatus, RoleStatus
from gpustack_render.core.errors import RenderError

EXAMPLE = Path(__file__).parents[2] / "examples" / "cpu-only.yaml"
NAMESPACE = "team-a"


def _value(name: str, **labels: str) -> float | None:
    return REGISTRY.get_sample_value(name, labels)


def _count(name: str, **labels: str) -> float:
    return _value(name, **labels) or 0.0


def _cluster(name: str) -> MemoryKube:
    """The example's InstanceType and its deployment, renamed ``name``."""
    return example_cluster(name, MemoryKube())


def _replicas(name: str, role: str = "embed") -> dict[str, float | None]:
    return {
        state: _value(
            "gpustack_controller_replicas",
            namespace=NAMESPACE,
            deployment=name,
            role=role,
            state=state,
        )
        for state in metrics.REPLICA_STATES
    }


# ---- replicas by state, rollouts in progress -------------------------------------------------


def test_replicas_by_state_follow_the_status_each_pass_writes_and_go_with_the_deployment() -> None:
    kube = _cluster("states")
    gauges = StatusGauges()
    reconcile = reconciler(kube, gauges)
    run(reconcile(f"{NAMESPACE}/states"))
    status = kube.stored("ModelDeployment", NAMESPACE, "states")["status"]  # type: ignore[index]
    assert status["roles"][0] == {**status["roles"][0], "desired": 2, "ready": 0}
    assert _replicas("states") == {"desired": 2, "ready": 0, "quota_reserved": 0, "replacing": 0}

    serve_every_pod(kube)
    run(reconcile(f"{NAMESPACE}/states"))
    status = kube.stored("ModelDeployment", NAMESPACE, "states")["status"]  # type: ignore[index]
    assert status["phase"] == "Ready"
    assert _replicas("states") == {"desired": 2, "ready": 2, "quota_reserved": 2, "replacing": 0}
    assert gauges.tracked() == {(NAMESPACE, "states")}

    # Deleted (the API server no longer has it): every series of it is removed.
    del kube.objects[("ModelDeployment", NAMESPACE, "states")]
    run(reconcile(f"{NAMESPACE}/states"))
    assert _replicas("states") == dict.fromkeys(metrics.REPLICA_STATES)
    assert gauges.tracked() == set()


def test_a_rollout_in_flight_is_counted_until_the_deployment_is_torn_down() -> None:
    kube = _cluster("rolling")
    gauges = StatusGauges()
    reconcile = reconciler(kube, gauges)
    key = f"{NAMESPACE}/rolling"
    run(reconcile(key))
    serve_every_pod(kube)
    run(reconcile(key))
    before = _count("gpustack_controller_rollouts_in_progress")

    # A new image: every replica is outdated; one per role is replaced at a time (D6).
    md = kube.stored("ModelDeployment", NAMESPACE, "rolling")
    assert md is not None
    md["spec"]["engine"]["image"] = "vllm/vllm-cpu:v0.26.0"
    md["metadata"]["generation"] = 2
    run(reconcile(key))
    status = kube.stored("ModelDeployment", NAMESPACE, "rolling")["status"]  # type: ignore[index]
    assert status["roles"][0].get("replacing") is not None
    assert _replicas("rolling")["replacing"] == 1
    assert _count("gpustack_controller_rollouts_in_progress") == before + 1

    # Deleted with its finalizer: the teardown passes drain it, then release it.
    md = kube.stored("ModelDeployment", NAMESPACE, "rolling")
    assert md is not None
    md["metadata"]["deletionTimestamp"] = "2026-01-02T03:05:00Z"
    for _ in range(3):
        run(reconcile(key))
    assert kube.stored("ModelDeployment", NAMESPACE, "rolling") is None
    assert _replicas("rolling") == dict.fromkeys(metrics.REPLICA_STATES)
    assert _count("gpustack_controller_rollouts_in_progress") == before


def test_a_role_dropped_from_the_spec_drops_its_series() -> None:
    gauges = StatusGauges()
    two = ModelDeploymentStatus(
        roles=[RoleStatus(name="a", desired=1), RoleStatus(name="b", desired=3, replacing=0)]
    )
    gauges.observe(NAMESPACE, "dropped", two)
    assert _replicas("dropped", "b")["desired"] == 3
    gauges.observe(NAMESPACE, "dropped", ModelDeploymentStatus(roles=[RoleStatus(name="a")]))
    assert _replicas("dropped", "b") == dict.fromkeys(metrics.REPLICA_STATES)
    assert _replicas("dropped", "a")["desired"] == 0


def test_a_deletion_seen_by_the_watch_drops_the_series_without_a_pass() -> None:
    """A deployment gone without a teardown pass (its finalizer removed by hand, or deleted
    while another process led): the DELETED event alone removes its series."""
    controller = Controller(cast(Kube, MemoryKube()))
    gauges = controller.reconciler.gauges = StatusGauges()
    gauges.observe(NAMESPACE, "watched", ModelDeploymentStatus(roles=[RoleStatus(name="embed")]))
    assert _replicas("watched")["desired"] == 0
    md = {"metadata": {"name": "watched", "namespace": NAMESPACE}}
    controller._on_deployment("MODIFIED", md, None)
    assert gauges.tracked() == {(NAMESPACE, "watched")}  # only a deletion forgets
    controller._on_deployment("DELETED", md, None)
    assert gauges.tracked() == set()
    assert _replicas("watched") == dict.fromkeys(metrics.REPLICA_STATES)


# ---- passes, durations, errors, the queue ----------------------------------------------------


async def _drain(queue: WorkQueue, reconcile: Callable[[str], Awaitable[float | None]]) -> None:
    """Run one worker until the queue is empty and nothing is in flight."""
    worker = asyncio.create_task(queue.run_workers(reconcile, workers=1))
    try:
        for _ in range(200):
            await asyncio.sleep(0.005)
            if not len(queue) and not queue._processing:
                break
    finally:
        worker.cancel()
        await asyncio.gather(worker, return_exceptions=True)


def test_a_pass_through_the_work_queue_is_timed_and_counted_by_result() -> None:
    kube = _cluster("timed")
    reconcile = reconciler(kube, StatusGauges())
    queue = WorkQueue("metrics-timed")
    assert _value("gpustack_controller_queue_depth", controller="metrics-timed") == 0.0

    async def main() -> None:
        queue.add(f"{NAMESPACE}/timed")
        queue.add(f"{NAMESPACE}/timed")  # already waiting: one key, one add
        assert _value("gpustack_controller_queue_depth", controller="metrics-timed") == 1.0
        await _drain(queue, reconcile)

    asyncio.run(main())
    labels = {"controller": "metrics-timed", "result": "success"}
    assert _count("gpustack_controller_reconcile_duration_seconds_count", **labels) == 1
    assert _count("gpustack_controller_reconcile_duration_seconds_sum", **labels) > 0
    assert _count("gpustack_controller_reconcile_total", **labels) == 1
    assert _count("gpustack_controller_queue_adds_total", controller="metrics-timed") == 1
    assert _value("gpustack_controller_queue_depth", controller="metrics-timed") == 0.0
    assert _count("gpustack_controller_queue_retries_total", controller="metrics-timed") == 0


@pytest.mark.parametrize(
    ("name", "break_it", "kind", "reason"),
    [
        pytest.param(
            "no-type",
            lambda kube: kube.objects.pop(("InstanceType", "", "gpustack-cpu-c7i-8xlarge")),
            "render",
            "render.instance-type-missing",
            id="render",
        ),
        pytest.param(
            "pods-forbidden",
            lambda kube: kube.fail("create", "Pod", ApiError(403, "Forbidden", "no")),
            "api",
            "Forbidden",
            id="api",
        ),
        pytest.param(
            "unreachable",
            lambda kube: kube.fail("list", "Pod", ApiError(0, "ClientConnectorError", "refused")),
            "transport",
            "ClientConnectorError",
            id="transport",
        ),
    ],
)
def test_a_failed_pass_is_counted_by_the_kind_and_reason_of_its_error(
    name: str, break_it: Callable[[MemoryKube], object], kind: str, reason: str
) -> None:
    kube = _cluster(name)
    break_it(kube)
    reconcile = reconciler(kube, StatusGauges())
    controller = f"metrics-{name}"
    queue = WorkQueue(controller, base_delay=30.0)
    errors = {"controller": controller, "kind": kind, "reason": reason}

    async def main() -> None:
        queue.add(f"{NAMESPACE}/{name}")
        await _drain(queue, reconcile)
        queue.close()

    asyncio.run(main())
    assert _count("gpustack_controller_reconcile_errors_total", **errors) == 1
    assert _count("gpustack_controller_reconcile_total", controller=controller, result="error") == 1
    timed = {"controller": controller, "result": "error"}
    assert _count("gpustack_controller_reconcile_duration_seconds_count", **timed) == 1
    assert _count("gpustack_controller_queue_retries_total", controller=controller) == 1


@pytest.mark.parametrize(
    ("exc", "labels"),
    [
        (ApiError(409, "Conflict", "stale"), ("api", "Conflict")),
        (ApiError(404, "Not Found"), ("api", "NotFound")),
        (ApiError(418, "I'm a teapot"), ("api", "Other")),
        (ApiError(0, "TimeoutError"), ("transport", "TimeoutError")),
        (ApiError(0, "not an identifier!"), ("transport", "Unknown")),
        (
            RenderError("no", origin="ports.reserved-port-declared"),
            ("render", "ports.reserved-port-declared"),
        ),
        (RenderError("no"), ("render", "unknown")),
        (KeyError("x"), ("internal", "KeyError")),
    ],
)
def test_error_labels_come_from_a_bounded_vocabulary(
    exc: BaseException, labels: tuple[str, str]
) -> None:
    assert error_labels(exc) == labels


def test_a_key_added_while_it_is_processed_counts_once_more() -> None:
    queue = WorkQueue("metrics-dirty")
    seen: list[str] = []

    async def reconcile(key: str) -> float | None:
        seen.append(key)
        if len(seen) == 1:
            queue.add(key)
            queue.add(key)  # already dirty: not counted again
        return None

    async def main() -> None:
        queue.add("ns/a")
        await _drain(queue, reconcile)

    asyncio.run(main())
    assert seen == ["ns/a", "ns/a"]
    assert _count("gpustack_controller_queue_adds_total", controller="metrics-dirty") == 2
    assert (
        _count("gpustack_controller_reconcile_total", controller="metrics-dirty", result="success")
        == 2
    )


def test_a_cancelled_pass_is_not_counted() -> None:
    queue = WorkQueue("metrics-cancel")
    started: list[str] = []

    async def reconcile(key: str) -> float | None:
        started.append(key)
        await asyncio.sleep(10)
        return None

    async def main() -> None:
        queue.add("ns/a")
        worker = asyncio.create_task(queue.run_workers(reconcile, workers=1))
        for _ in range(200):
            await asyncio.sleep(0.005)
            if started:
                break
        worker.cancel()
        await asyncio.gather(worker, return_exceptions=True)

    asyncio.run(main())
    assert started == ["ns/a"]  # the pass was under way when it was cancelled
    for result in metrics.RESULTS:
        labels = {"controller": "metrics-cancel", "result": result}
        assert _value("gpustack_controller_reconcile_total", **labels) is None
        assert _value("gpustack_controller_reconcile_duration_seconds_count", **labels) is None


async def test_the_health_server_serves_the_new_series() -> None:
    """/metrics of the controller's health server renders the registry the passes wrote to."""
    gauges = StatusGauges()
    kube = _cluster("served")
    await reconciler(kube, gauges)(f"{NAMESPACE}/served")
    client: TestClient[Any, Any] = TestClient(TestServer(make_app(lambda: (True, "ok"))))
    await client.start_server()
    try:
        resp = await client.get("/metrics")
        text = await resp.text()
    finally:
        await client.close()
    assert resp.status == 200
    assert (
        'gpustack_controller_replicas{deployment="served",namespace="team-a",role="embed",'
        'state="desired"} 2.0' in text
    )
    for name in (
        "gpustack_controller_reconcile_errors_total",
        "gpustack_controller_queue_adds_total",
        "gpustack_controller_queue_retries_total",
        "gpustack_controller_rollouts_in_progress",
    ):
        assert f"# TYPE {name} " in text, name
