"""What status says when replicas wait for capacity, on the simulated cluster with the real Kueue,
scheduler and KWOK (issue 37, item 5; docs/autoscaling.md, "What status tells when capacity runs
out").

- Quota free, nodes full: the ClusterQueue has room, the nodes do not. Kueue's topology-aware
  flavor places Pods before it reserves quota and says the topology does not fit them; status
  reads ``NodesFull`` and names the nodes, not quota.
- Admitted, nodes full: on a flavor without a topology Kueue admits without looking at nodes and
  the scheduler cannot place the Pod (``PodScheduled=False Unschedulable``); status names the
  nodes and quotes the scheduler.
- Quota short: status names the ClusterQueue and the resource it lacks.
- Many replicas pending: every message stays short, and Kueue's words are said once, in
  ``QuotaReserved``; ``Ready``, ``Reconciling`` and ``phaseMessage`` refer to it.
"""

from __future__ import annotations

import contextlib
import re
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gpustack_controller.kube import MODEL_DEPLOYMENTS, Kube

from .cluster import Cluster, cluster_queue
from .controller_fixtures import (
    Entrance,
    condition,
    deployment,
    ensure_instance_type,
    eventually,
    get_md,
    new_entrance,
    new_namespace,
    running_controller,
    tear_down,
)
from .rollout_fixtures import LONG

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

#: The longest message any condition or phaseMessage may carry here: well under what the old
#: messages reached (one name per replica, in three conditions).
BOUND = 700


def _messages(md: dict[str, Any]) -> dict[str, str]:
    status = md.get("status") or {}
    out = {c["type"]: c.get("message", "") for c in status.get("conditions") or ()}
    out["phaseMessage"] = status.get("phaseMessage", "")
    return out


@contextlib.asynccontextmanager
async def _deployed(
    kube: Kube, kubeconfig_path: Path, md: dict[str, Any], *, teardown: float = LONG
) -> AsyncIterator[None]:
    """The controller running with ``md`` created; torn down however the block ends (a test
    that fills every node must not leave it full for the next)."""
    ns, name = md["metadata"]["namespace"], md["metadata"]["name"]
    async with running_controller(kubeconfig_path):
        await kube.create(MODEL_DEPLOYMENTS, md, ns)
        try:
            yield
        finally:
            await tear_down(kube, ns, name, timeout=teardown)


async def _status_when(
    kube: Kube, ns: str, name: str, type_: str, reason: str, *needles: str, timeout: float = LONG
) -> dict[str, Any]:
    """The stored deployment once condition ``type_`` has ``reason`` and says every needle."""

    async def probe() -> dict[str, Any] | None:
        md = await get_md(kube, ns, name)
        found = condition(md or {}, type_) or {}
        text = found.get("message", "")
        ok = found.get("reason") == reason and all(n in text for n in needles)
        return md if ok else None

    return await eventually(probe, timeout=timeout, what=f"{type_} {reason} saying {needles}")


async def test_nodes_full_with_quota_free_reads_nodes_full_not_quota(
    kube: Kube, kubeconfig_path: Path, cluster: Cluster
) -> None:
    """Eight nodes of eight GPUs; nine replicas of eight GPUs on a ClusterQueue of 1000 GPUs:
    eight run, the ninth waits for a node, not for quota."""
    ns = await new_namespace(kube, "cap-nodes")
    entrance = await new_entrance(kube, cluster, gpus=1000)
    md = deployment("big", ns, entrance.role(replicas=9, resources={"accelerator": 8}))
    async with _deployed(kube, kubeconfig_path, md, teardown=2 * LONG):
        stored = await _status_when(
            kube,
            ns,
            "big",
            "QuotaReserved",
            "NodesFull",
            "doesn't allow to fit",
            timeout=2 * LONG,
        )
        quota = condition(stored, "QuotaReserved") or {}
        text = quota["message"]
        assert quota["status"] == "False"
        assert "replicas wait for room on a node, not for quota" in text, text
        assert f"ClusterQueue {entrance.name} has the quota for" in text, text
        assert "no node has room for their Pods" in text
        assert "free or add nodes" in text and "more quota does not help" in text
        assert "wait for quota" not in text and "nominalQuota" not in text
        for type_ in ("Ready", "Reconciling"):
            summary = condition(stored, type_) or {}
            assert summary["reason"] == "NodesFull", summary
            assert "wait for quota" not in summary["message"]
        # Some replicas serve: the phase is Degraded, "k of 9 replicas ready".
        assert "wait for quota" not in stored["status"]["phaseMessage"]


async def test_admitted_replicas_the_scheduler_cannot_place_read_nodes_full(
    kube: Kube, kubeconfig_path: Path, cluster: Cluster
) -> None:
    """A ClusterQueue on a flavor without a topology: Kueue admits by quota alone, and the
    scheduler finds no node with 16 GPUs (each has 8). QuotaReserved is True; the summary says
    NodesFull with the scheduler's words."""
    suffix = uuid.uuid4().hex[:8]
    flavor = f"plain-{suffix}"
    cluster.apply(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": flavor},
            "spec": {"nodeLabels": {"gpustack.ai/worker": "true"}},
        }
    )
    entrance = Entrance(f"gpustack-nvidia-plain-{suffix[:6]}", f"gpustack-fnv64-{suffix}aaaaaaaa")
    await ensure_instance_type(kube, entrance.instance_type, entrance.name)
    cluster.apply(cluster_queue(entrance.name, flavor=flavor))
    ns = await new_namespace(kube, "cap-sched")
    md = deployment("wide", ns, entrance.role(replicas=1, resources={"accelerator": 16}))
    async with _deployed(kube, kubeconfig_path, md):
        stored = await _status_when(
            kube, ns, "wide", "Ready", "NodesFull", "Insufficient nvidia.com/gpu"
        )
        quota = condition(stored, "QuotaReserved") or {}
        assert (quota["status"], quota["reason"]) == ("True", "Reserved"), quota
        ready = condition(stored, "Ready") or {}
        assert (
            "1 of 1 replicas hold quota but wait for a node with room (server 0)"
            in (ready["message"])
        ), ready
        assert "more quota does not help" in ready["message"]
        assert "wait for a node with room" in stored["status"]["phaseMessage"]


@pytest.mark.parametrize("replicas", [3, 40], ids=["one-waits", "many-wait"])
async def test_quota_short_names_the_queue_and_resource_briefly_and_once(
    kube: Kube, kubeconfig_path: Path, cluster: Cluster, replicas: int
) -> None:
    """A ClusterQueue of two GPUs: all but two replicas wait for quota. Status names the queue
    and the resource; every message stays short however many wait (the count and the first
    few), and Kueue's words are said once, in QuotaReserved, which the others refer to."""
    waiting = replicas - 2
    ns = await new_namespace(kube, "cap-quota")
    entrance = await new_entrance(kube, cluster, gpus=2)
    md = deployment("small", ns, entrance.role(replicas=replicas))
    async with _deployed(kube, kubeconfig_path, md, teardown=2 * LONG):
        stored = await _status_when(
            kube,
            ns,
            "small",
            "QuotaReserved",
            "Pending",
            f"{waiting} of {replicas} replicas wait for quota",
            f"cannot hold {waiting} replica(s)",
            "it lacks nvidia.com/gpu",
            timeout=3 * LONG,
        )
    messages = _messages(stored)
    too_long = {t: len(m) for t, m in messages.items() if len(m) > BOUND}
    assert not too_long, (too_long, messages)
    text = messages["QuotaReserved"]
    assert text.startswith(f"{waiting} of {replicas} replicas wait for quota in queue "), text
    # Which replicas Kueue leaves waiting is its own choice; at most three are named.
    more = rf" … \(\+{waiting - 3} more\)" if waiting > 3 else ""
    assert re.search(
        rf"ClusterQueue {entrance.name} cannot hold {waiting} replica\(s\) "
        rf"\(server \d+(, server \d+){{0,2}}{more}\): it lacks nvidia\.com/gpu in flavor "
        "default-flavor",
        text,
    ), text
    assert "raise its nominalQuota" in text and "room on a node" not in text
    assert [t for t, m in messages.items() if "insufficient" in m] == ["QuotaReserved"]
    for type_ in ("Ready", "Reconciling"):
        assert "condition QuotaReserved has the detail" in messages[type_], messages[type_]
        assert f"ClusterQueue {entrance.name} lacks nvidia.com/gpu" in messages[type_]
