"""A LocalQueue found feeding another ClusterQueue (docs/contract/controller.md §10): the
conflict, its status row and its event."""

from __future__ import annotations

from test_status_conditions import compute, condition, deployment, message, pods_of, rendered

from gpustack_render.reconcile import status as st
from gpustack_render.reconcile.conditions import common as cond
from gpustack_render.reconcile.events import LOCAL_QUEUE_CONFLICT, local_queue_conflict
from gpustack_render.reconcile.queues import queue_conflict
from gpustack_render.rendering.localqueues import local_queue


def stored(cluster_queue: object) -> dict[str, object]:
    return {"metadata": {"name": "e", "namespace": "ns"}, "spec": {"clusterQueue": cluster_queue}}


def test_a_queue_feeding_the_same_cluster_queue_is_no_conflict() -> None:
    assert queue_conflict(local_queue("e", namespace="ns"), stored("e")) is None


def test_a_queue_feeding_another_cluster_queue_is_a_conflict_naming_both() -> None:
    conflict = queue_conflict(local_queue("e", namespace="ns"), stored("other"))
    assert conflict is not None
    assert (conflict.kind, conflict.namespace, conflict.name) == ("LocalQueue", "ns", "e")
    assert "ClusterQueue other, not e" in conflict.message
    assert "immutable" in conflict.message
    broken = queue_conflict(local_queue("e", namespace="ns"), stored(None))
    assert broken is not None and "feeds no ClusterQueue" in broken.message


def test_quota_reserved_reports_the_conflict_first() -> None:
    md = deployment()
    rendering = rendered(md)
    conflict = queue_conflict(local_queue("e", namespace="ns"), stored("other"))
    assert conflict is not None
    status = compute(md, rendering, pods_of(rendering), [])
    assert condition(status, cond.QUOTA_RESERVED) != ("False", "LocalQueueConflict")
    status = st.deployment_status(
        md,
        rendering=rendering,
        pods=pods_of(rendering),
        plan=None,
        system_namespace="gpustack-system",
        now="2026-01-01T00:00:00Z",
        queue_conflicts=[conflict.message],
    )
    assert condition(status, cond.QUOTA_RESERVED) == ("False", "LocalQueueConflict")
    assert message(status, cond.QUOTA_RESERVED) == conflict.message


def test_the_event() -> None:
    event = local_queue_conflict("m")
    assert (event.reason, event.message, event.type) == (LOCAL_QUEUE_CONFLICT, "m", "Warning")
