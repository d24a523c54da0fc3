"""End to end on the simulated cluster: the real Kueue admits, the real scheduler binds, KWOK
runs the Pods. Each test is a sentence of the seed's "Rollout behavior" or "Replica departures"
(docs/contract/model-deployment.md), observed through those components only.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gpustack_controller.kube import MODEL_DEPLOYMENTS, Kube

from .cluster import Cluster
from .controller_fixtures import (
    deployment,
    eventually,
    get_md,
    gpu_usage,
    new_entrance,
    new_namespace,
    running_controller,
    serving,
)

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


@pytest.fixture
async def kube(kubeconfig_path: Path) -> AsyncIterator[Kube]:
    client = await Kube.connect(kubeconfig=str(kubeconfig_path))
    try:
        yield client
    finally:
        await client.close()


async def _phase(kube: Kube, ns: str, name: str, phase: str) -> dict[str, Any] | None:
    md = await get_md(kube, ns, name)
    return md if md and (md.get("status") or {}).get("phase") == phase else None


async def test_create_every_group_is_admitted_scheduled_and_ready(
    kube: Kube, kubeconfig_path: Path, cluster: Cluster
) -> None:
    ns = await new_namespace(kube)
    entrance = await new_entrance(kube, cluster, gpus=8)
    body = deployment("chat", ns, entrance.role(replicas=2), entrance.role("big", size=2))
    async with running_controller(kubeconfig_path):
        await kube.create(MODEL_DEPLOYMENTS, body, ns)
        pods = await eventually(
            lambda: serving(kube, ns, "chat", 4), timeout=60, what="4 admitted, Ready Pods"
        )
        assert all(p["spec"].get("nodeName", "").startswith("gpu-node-") for p in pods)
        await eventually(lambda: _phase(kube, ns, "chat", "Ready"), timeout=60, what="Ready")
        await eventually(
            lambda: _usage_is(cluster, entrance.name, 4), what="4 GPUs used on the ClusterQueue"
        )


async def _usage_is(cluster: Cluster, name: str, gpus: int) -> bool:
    return gpu_usage(cluster, name) == gpus
