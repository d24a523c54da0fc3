"""What holds the replicas that wait for capacity, in words: a ClusterQueue short of quota, or
nodes with no room (D27, docs/autoscaling.md "What status tells when capacity runs out").

Kueue v0.17 writes on a Workload it cannot admit ``QuotaReserved=False``, reason ``Pending``
(``pkg/scheduler/scheduler.go``), and a message from its flavor assigner
(``pkg/scheduler/flavorassigner``) that says which of two things holds it:

- **quota short**: ``couldn't assign flavors to pod set decode: insufficient unused quota for
  nvidia.com/gpu in flavor default-flavor, 1 more needed`` (one such phrase per resource, joined
  with ``, ``; ``insufficient quota for … > maximum capacity`` when even borrowing could not fit
  it). The ClusterQueue cannot hold the replica: raising its quota, or freeing some, lets it in.
- **nodes full**: on a topology-aware flavor (``deploy/kueue/resourceflavor.yaml``) Kueue places
  every Pod on a node before it reserves quota, and when the nodes have no room it says
  ``couldn't assign flavors to pod set server: topology "gpustack-topology" doesn't allow to fit
  any of 1 pod(s). Total nodes: 8; excluded: resource "nvidia.com/gpu": 8``
  (``pkg/cache/scheduler/tas_flavor_snapshot.go``, ``notFitMessage``; ``allows to fit only 2 out
  of 3 pod(s)`` when some fit). The quota is there; more quota does not help, room on a node does.

On a flavor without a topology Kueue reserves quota and admits without looking at nodes; the
scheduler then cannot bind the Pod and writes ``PodScheduled=False``, reason ``Unschedulable``,
on it (``0/8 nodes are available: 8 Insufficient nvidia.com/gpu. …``): :func:`unplaced` finds
those replicas, :func:`no_node_for_admitted` says so.

The Workload does not name its ClusterQueue before admission; the deployment's LocalQueue does
(D16). Every list of replicas is bounded (:func:`~gpustack_render.reconcile.conditions.common.few`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from gpustack_render.core import jsonview
from gpustack_render.reconcile.conditions.common import QUOTED_CHARS, few
from gpustack_render.reconcile.observed import ObservedPod
from gpustack_render.reconcile.replicas import Replica
from gpustack_render.rendering.renderer import Rendering

_INSUFFICIENT: Final = re.compile(
    r"insufficient (?:unused )?quota for ([^\s,]+) in flavor ([^\s,]+)"
)
#: Kueue's topology-aware placement found no node with room (``notFitMessage``).
_NO_FIT: Final = re.compile(r"topology \"([^\"]+)\" (?:doesn't allow to fit|allows to fit only)")
#: The ``PodScheduled=False`` reason of a Pod the scheduler found no node for.
UNSCHEDULABLE: Final = "Unschedulable"

#: What holds a waiting replica back (:func:`held_by`).
QUOTA: Final = "quota"
NODES: Final = "nodes"


def cluster_queue_of(rendering: Rendering, queue: str) -> str:
    """The ClusterQueue a role's LocalQueue ``queue`` feeds (the one of the same name, D16)."""
    for local in rendering.local_queues:
        meta = jsonview.view(local.get("metadata"))
        if meta.get("name") == queue:
            target = jsonview.view(local.get("spec")).get("clusterQueue")
            return str(target or queue)
    return queue


def missing_resources(messages: Sequence[str]) -> list[str]:
    """Each ``<resource> in flavor <flavor>`` Kueue says is short, once, in order."""
    found: dict[str, None] = {}
    for message in messages:
        for resource, flavor in _INSUFFICIENT.findall(message):
            found.setdefault(f"{resource} in flavor {flavor}", None)
    return list(found)


def held_by(message: str) -> str:
    """:data:`NODES` when Kueue's ``QuotaReserved`` message says no node has room and nothing
    says quota is short; else :data:`QUOTA` (quota short, or a reason Kueue has not written
    yet: the queue holds it)."""
    if _NO_FIT.search(message) and not _INSUFFICIENT.search(message):
        return NODES
    return QUOTA


def _messages(replicas: Sequence[Replica]) -> list[str]:
    return [w.quota_message for r in replicas for w in r.workloads if w.quota_message]


def split_pending(pending: Sequence[Replica]) -> tuple[list[Replica], list[Replica]]:
    """The replicas waiting for quota: (held for quota, held for room on a node), each in the
    order given. A replica is held for room when Kueue's message on its Workloads says so."""
    quota: list[Replica] = []
    nodes: list[Replica] = []
    for replica in pending:
        messages = _messages([replica])
        if messages and all(held_by(m) == NODES for m in messages):
            nodes.append(replica)
        else:
            quota.append(replica)
    return quota, nodes


def _by_queue(rendering: Rendering, replicas: Sequence[Replica]) -> dict[str, list[Replica]]:
    out: dict[str, list[Replica]] = {}
    for replica in replicas:
        role = rendering.role(replica.role)
        queue = cluster_queue_of(rendering, role.queue) if role is not None else ""
        out.setdefault(queue, []).append(replica)
    return out


def replica_names(replicas: Sequence[Replica]) -> str:
    """``prefill 2, decode 4, decode 5``, bounded (:func:`few`)."""
    return few(f"{r.role} {r.ordinal}" for r in replicas)


def lacking(rendering: Rendering, pending: Sequence[Replica]) -> str:
    """The brief form of :func:`shortfall`: ``ClusterQueue q lacks nvidia.com/gpu in flavor f``
    per queue, joined by ``; `` (the queue alone while Kueue has not said what it lacks)."""
    parts = []
    for queue, replicas in _by_queue(rendering, pending).items():
        lacks = missing_resources(_messages(replicas))
        text = f"ClusterQueue {queue or '(none)'}"
        parts.append(f"{text} lacks {'; '.join(lacks)}" if lacks else f"{text} cannot hold them")
    return "; ".join(parts)


def shortfall(rendering: Rendering, pending: Sequence[Replica]) -> str:
    """One sentence per ClusterQueue holding ``pending`` replicas back (replicas whose
    Workload waits for quota): the queue, how many replicas and the first few, the resources it
    lacks and Kueue's own message. Empty when nothing waits."""
    parts = []
    for queue, replicas in _by_queue(rendering, pending).items():
        messages = _messages(replicas)
        lacks = missing_resources(messages)
        text = (
            f"ClusterQueue {queue or '(none)'} cannot hold {len(replicas)} replica(s) "
            f"({replica_names(replicas)})"
        )
        if lacks:
            text += f": it lacks {'; '.join(lacks)}"
        if messages:
            text += f' (Kueue: "{messages[0][:QUOTED_CHARS]}")'
        parts.append(text)
    return "; ".join(parts)


def no_room(rendering: Rendering, pending: Sequence[Replica]) -> str:
    """One sentence per ClusterQueue whose replicas Kueue holds because no node has room for
    them (topology-aware placement): the queue has the quota, the nodes do not. Empty when
    none."""
    parts = []
    for queue, replicas in _by_queue(rendering, pending).items():
        messages = _messages(replicas)
        text = (
            f"ClusterQueue {queue or '(none)'} has the quota for {len(replicas)} replica(s) "
            f"({replica_names(replicas)}) but no node has room for their Pods: Kueue reserves "
            "quota only once it has placed every Pod on a node"
        )
        if messages:
            text += f' (Kueue: "{messages[0][:QUOTED_CHARS]}")'
        parts.append(text)
    return "; ".join(parts)


def unplaced(replicas: Sequence[Replica]) -> list[tuple[Replica, ObservedPod]]:
    """The replicas that hold quota (Kueue reserved it) and have a Pod the scheduler cannot
    place (``PodScheduled=False``, reason ``Unschedulable``), each with its first such Pod."""
    out = []
    for replica in replicas:
        if not replica.quota_reserved:
            continue
        pod = next(
            (p for p in replica.pods if p.unscheduled_reason == UNSCHEDULABLE and not p.gated),
            None,
        )
        if pod is not None:
            out.append((replica, pod))
    return out


def no_node_for_admitted(found: Sequence[tuple[Replica, ObservedPod]], declared: int) -> str:
    """The sentence for :func:`unplaced` replicas: they hold quota, the scheduler finds no node
    with room, the scheduler's words for the first Pod, and the ways out. Empty when none."""
    if not found:
        return ""
    replicas = [r for r, _ in found]
    pod = found[0][1]
    said = pod.unscheduled_message[:QUOTED_CHARS] or UNSCHEDULABLE
    return (
        f"{len(replicas)} of {declared} replicas hold quota but wait for a node with room "
        f"({replica_names(replicas)}): the scheduler cannot place Pod {pod.name} "
        f'(scheduler: "{said}"); free or add nodes (kubectl describe nodes shows what is '
        "allocated), or lower the replicas: more quota does not help"
    )
