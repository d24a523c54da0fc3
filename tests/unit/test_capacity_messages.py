"""Issue 37, item 5: what status says when replicas wait for capacity. A ClusterQueue short of
quota and nodes with no room read differently, each with its way out (Kueue v0.17's own words
tell them apart); every list of replicas is bounded; the detail is said once, in the condition
that carries it, and the summary conditions and ``phaseMessage`` refer to it."""

from __future__ import annotations

from dataclasses import replace

from test_status_conditions import (
    ENTRANCE,
    compute,
    condition,
    deployment,
    message,
    pods_of,
    rendered,
    role,
    workloads_of,
)

from gpustack_render.deployment.scaling import scale_targets
from gpustack_render.reconcile.conditions import common as cond
from gpustack_render.reconcile.conditions.common import few
from gpustack_render.reconcile.observed import ObservedPod, ObservedWorkload
from gpustack_render.reconcile.quotashortfall import NODES, QUOTA, held_by
from gpustack_render.reconcile.replicas import ReplicaIndex
from gpustack_render.reconcile.scalerstatus import quota_condition, unit_counts

#: Kueue v0.17's messages (pkg/scheduler/flavorassigner, pkg/cache/scheduler/
#: tas_flavor_snapshot.go), as the simulated cluster's Kueue writes them.
QUOTA_SHORT = (
    "couldn't assign flavors to pod set server: insufficient unused quota for nvidia.com/gpu "
    "in flavor default-flavor, 1 more needed"
)
NO_NODE_ROOM = (
    "couldn't assign flavors to pod set server: topology \"gpustack-topology\" doesn't allow "
    'to fit any of 1 pod(s). Total nodes: 8; excluded: resource "nvidia.com/gpu": 8'
)
#: The scheduler's PodScheduled=False message (kube-scheduler v1.35).
NO_FIT = (
    "0/8 nodes are available: 8 Insufficient nvidia.com/gpu. preemption: 0/8 nodes are "
    "available: 8 No preemption victims found for incoming pod."
)
SUMMARIES = (cond.READY, cond.RECONCILING)


def _waiting(
    pods: list[ObservedPod], message: str, *, held: int | None = None
) -> list[ObservedWorkload]:
    """Every Workload of ``pods``, the last ``held`` (all when None) held by Kueue with
    ``message``; the rest admitted."""
    wls = workloads_of(pods)
    start = 0 if held is None else len(wls) - held
    return [
        replace(
            w,
            quota_reserved=False,
            admitted=False,
            ever_admitted=False,
            quota_reason="Pending",
            quota_message=message,
        )
        if i >= start
        else w
        for i, w in enumerate(wls)
    ]


def test_kueues_words_tell_quota_short_from_no_room_on_a_node() -> None:
    assert held_by(QUOTA_SHORT) == QUOTA
    assert held_by(NO_NODE_ROOM) == NODES
    partial = NO_NODE_ROOM.replace("doesn't allow to fit any of 1", "allows to fit only 2 out of 3")
    assert held_by(partial) == NODES
    assert held_by(f"{NO_NODE_ROOM}; {QUOTA_SHORT}") == QUOTA
    assert held_by("") == QUOTA


def test_nodes_full_with_quota_free_names_the_nodes_not_quota() -> None:
    md = deployment(role(replicas=3, resources={"accelerator": 1}))
    rendering = rendered(md, binding=None)
    pods = pods_of(rendering, ready=False, phase="Pending")
    status = compute(md, rendering, pods, _waiting(pods, NO_NODE_ROOM))
    assert condition(status, cond.QUOTA_RESERVED) == ("False", "NodesFull")
    text = message(status, cond.QUOTA_RESERVED)
    assert text.startswith(
        f"3 of 3 replicas wait for room on a node, not for quota (in queue {ENTRANCE})"
    )
    assert f"ClusterQueue {ENTRANCE} has the quota for 3 replica(s)" in text
    assert "no node has room for their Pods" in text
    assert "free or add nodes" in text and "more quota does not help" in text
    assert "wait for quota" not in text and "raise its nominalQuota" not in text
    for type_ in SUMMARIES:
        assert condition(status, type_)[1] == "NodesFull"
        assert "wait for quota" not in message(status, type_)
    assert status.phase_message is not None and "room on a node" in status.phase_message


def test_quota_short_names_the_cluster_queue_and_the_resource() -> None:
    md = deployment(role(replicas=3, resources={"accelerator": 1}))
    rendering = rendered(md, binding=None)
    pods = pods_of(rendering, ready=False, phase="Pending")
    status = compute(md, rendering, pods, _waiting(pods, QUOTA_SHORT, held=1))
    assert condition(status, cond.QUOTA_RESERVED) == ("False", "Pending")
    text = message(status, cond.QUOTA_RESERVED)
    assert text.startswith(f"1 of 3 replicas wait for quota in queue {ENTRANCE}")
    assert (
        f"ClusterQueue {ENTRANCE} cannot hold 1 replica(s) (server 2): it lacks nvidia.com/gpu "
        "in flavor default-flavor"
    ) in text
    assert "raise its nominalQuota" in text and "room on a node" not in text
    ready = message(status, cond.READY)
    assert ready == (
        f"QuotaReserved: 1 of 3 replicas wait for quota in queue {ENTRANCE}: ClusterQueue "
        f"{ENTRANCE} lacks nvidia.com/gpu in flavor default-flavor (condition QuotaReserved has "
        "the detail)"
    )


def test_admitted_replicas_the_scheduler_cannot_place_read_nodes_full() -> None:
    """Kueue reserved quota and admitted (a flavor without a topology does not look at nodes);
    the scheduler finds no node: QuotaReserved stays True, the summary says NodesFull with the
    scheduler's words."""
    md = deployment(role(replicas=2, resources={"accelerator": 1}))
    rendering = rendered(md, binding=None)
    pods = [
        replace(
            p,
            ready=False,
            phase="Pending",
            unscheduled_reason="Unschedulable",
            unscheduled_message=NO_FIT,
        )
        for p in pods_of(rendering)
    ]
    status = compute(md, rendering, pods, workloads_of(pods))
    assert condition(status, cond.QUOTA_RESERVED) == ("True", "Reserved")
    for type_ in SUMMARIES:
        assert condition(status, type_)[1] == "NodesFull"
        text = message(status, type_)
        assert "2 of 2 replicas hold quota but wait for a node with room (server 0, server 1)" in (
            text
        )
        assert NO_FIT in text and "more quota does not help" in text
    assert status.phase_message is not None and "wait for a node with room" in status.phase_message
    # A Pod still behind Kueue's gate is not one the scheduler could not place.
    gated = [replace(p, gated=True) for p in pods]
    status = compute(md, rendering, gated, workloads_of(gated))
    assert condition(status, cond.READY)[1] != "NodesFull"


def test_seventy_eight_pending_replicas_stay_bounded_and_are_detailed_once() -> None:
    """The issue's case: 78 replicas pending listed every one, 2,197 characters, in three
    conditions."""
    md = deployment(role(replicas=78, resources={"accelerator": 1}))
    rendering = rendered(md, binding=None)
    pods = pods_of(rendering, ready=False, phase="Pending")
    status = compute(md, rendering, pods, _waiting(pods, QUOTA_SHORT))
    messages = {c.type: c.message or "" for c in status.conditions or ()}
    assert all(len(m) <= 700 for m in messages.values()), {t: len(m) for t, m in messages.items()}
    quota = messages[cond.QUOTA_RESERVED]
    assert "cannot hold 78 replica(s) (server 0, server 1, server 2 … (+75 more))" in quota
    # Kueue's words are quoted once, in QuotaReserved alone.
    assert [t for t, m in messages.items() if "insufficient unused quota" in m] == [
        cond.QUOTA_RESERVED
    ]
    assert status.phase_message is not None and len(status.phase_message) < 300
    assert "server 3" not in status.phase_message


def test_missing_replicas_are_counted_and_a_few_named() -> None:
    md = deployment(role(replicas=40, resources={"accelerator": 1}))
    rendering = rendered(md, binding=None)
    pods = [p for p in pods_of(rendering) if p.ordinal == 0]
    status = compute(md, rendering, pods, workloads_of(pods))
    text = message(status, cond.REPLICAS_UP_TO_DATE)
    assert "role server replica(s) 1, 2, 3 … (+36 more)" in text
    assert len(text) < 200


def test_few_names_at_most_three() -> None:
    assert few(["a"]) == "a"
    assert few(["a", "b", "c"]) == "a, b, c"
    assert few(f"a-{i}" for i in range(78)) == "a-0, a-1, a-2 … (+75 more)"


def test_a_scaler_whose_units_wait_for_room_on_a_node_says_so() -> None:
    md = deployment(
        role("server", replicas=2, resources={"accelerator": 1}, scaling={"mode": "External"})
    )
    rendering = rendered(md, binding=None)
    pods = pods_of(rendering, ready=False, phase="Pending")
    (target,) = scale_targets(md)
    index = ReplicaIndex.of(pods, _waiting(pods, NO_NODE_ROOM, held=1))
    counts = unit_counts(target, units=2, rendering=rendering, index=index)
    verdict = quota_condition(target, counts, rendering)
    assert verdict.reason == "NodesFull"
    assert verdict.message.startswith(
        "1 replica(s) of role server of 2 wait for room on a node, not for quota"
    )
    assert "has the quota for 1 replica(s) (server 1)" in verdict.message
