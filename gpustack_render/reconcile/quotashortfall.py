"""What a ClusterQueue lacks for the replicas that wait for quota, in words (D27,
docs/autoscaling.md).

Kueue v0.17 writes on a Workload it cannot fit ``QuotaReserved=False``, reason ``Pending``, and a
message such as ``couldn't assign flavors to pod set decode: insufficient unused quota for
nvidia.com/gpu in flavor default-flavor, 1 more needed`` (its flavor assigner,
``pkg/scheduler/flavorassigner``, joins one such phrase per resource with ``, ``; ``insufficient
quota for … > maximum capacity`` when even borrowing could not fit it). The Workload does not name
its ClusterQueue before admission; the deployment's LocalQueue does (D16).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from gpustack_render.core import jsonview
from gpustack_render.reconcile.replicas import Replica
from gpustack_render.rendering.renderer import Rendering

_INSUFFICIENT: Final = re.compile(
    r"insufficient (?:unused )?quota for ([^\s,]+) in flavor ([^\s,]+)"
)
#: Kueue's own words are quoted up to this length per queue.
_QUOTED: Final = 400


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


def shortfall(rendering: Rendering, pending: Sequence[Replica]) -> str:
    """One sentence per ClusterQueue holding ``pending`` replicas back (replicas whose
    Workload waits for quota): the queue, the replicas, the resources it lacks and Kueue's
    own message. Empty when nothing waits."""
    by_queue: dict[str, list[Replica]] = {}
    for replica in pending:
        role = rendering.role(replica.role)
        queue = cluster_queue_of(rendering, role.queue) if role is not None else ""
        by_queue.setdefault(queue, []).append(replica)
    parts = []
    for queue, replicas in by_queue.items():
        messages = [w.quota_message for r in replicas for w in r.workloads if w.quota_message]
        lacks = missing_resources(messages)
        named = ", ".join(f"{r.role} {r.ordinal}" for r in replicas)
        text = f"ClusterQueue {queue or '(none)'} cannot hold {len(replicas)} replica(s) ({named})"
        if lacks:
            text += f": it lacks {'; '.join(lacks)}"
        if messages:
            text += f' (Kueue: "{messages[0][:_QUOTED]}")'
        parts.append(text)
    return "; ".join(parts)
