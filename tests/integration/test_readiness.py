"""Readiness as tools read it, on the simulated cluster: the real ``kubectl wait
--for=condition=Ready`` (and ``Stalled``) against deployments the real Kueue admits and KWOK
runs, and the CRD's printer columns as the API server prints them (docs/decisions.md,
"Readiness for tools")."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest

from gpustack_controller.kube import MODEL_DEPLOYMENTS, Kube

from .cluster import Cluster
from .controller_fixtures import (
    condition,
    deployment,
    eventually,
    get_md,
    live,
    new_entrance,
    new_namespace,
    pods_of,
    running_controller,
    serving,
)
from .rollout_fixtures import LONG, NEW_IMAGE, edit_role, image

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


async def kubectl_wait(
    cluster: Cluster, ns: str, name: str, for_: str, *, timeout: int
) -> subprocess.CompletedProcess[str]:
    """The real ``kubectl wait``, off the event loop so the controller keeps running in it."""
    return await asyncio.to_thread(
        cluster.kubectl,
        "wait",
        "-n",
        ns,
        f"modeldeployment/{name}",
        f"--for={for_}",
        f"--timeout={timeout}s",
        check=False,
        timeout=timeout + 30,
    )


async def create_and_wait_ready(kube: Kube, cluster: Cluster, ns: str) -> None:
    """Create the two-replica deployment ``chat`` and wait with ``kubectl`` until it is Ready."""
    entrance = await new_entrance(kube, cluster, gpus=8)
    await kube.create(MODEL_DEPLOYMENTS, deployment("chat", ns, entrance.role(replicas=2)), ns)
    waited = await kubectl_wait(cluster, ns, "chat", "condition=Ready", timeout=120)
    assert waited.returncode == 0, waited.stderr
    assert "condition met" in waited.stdout


async def test_kubectl_wait_for_ready_returns_when_every_replica_serves(
    kube: Kube, kubeconfig_path: Path, cluster: Cluster
) -> None:
    ns = await new_namespace(kube)
    async with running_controller(kubeconfig_path):
        await create_and_wait_ready(kube, cluster, ns)
        # Ready means served: both groups admitted by Kueue, both Pods Running and Ready.
        assert await serving(kube, ns, "chat", 2)
        md = await get_md(kube, ns, "chat")
        assert md is not None
        generation = md["metadata"]["generation"]
        assert md["status"]["observedGeneration"] == generation
        for type_, status in (("Ready", "True"), ("Reconciling", "False"), ("Stalled", "False")):
            cond = condition(md, type_)
            assert cond is not None and cond["status"] == status, cond
            assert cond["observedGeneration"] == generation
        # The API server prints the CRD's columns: ROLES names the role, its counts and kind.
        table = await asyncio.to_thread(cluster.kubectl, "get", "md", "chat", "-n", ns)
        header, row = table.stdout.splitlines()[:2]
        assert header.split()[:4] == ["NAME", "ENGINE", "ROLES", "READY"]
        assert "server 2/2 Server" in row and " True " in row


async def test_kubectl_wait_ignores_a_ready_older_than_the_spec_then_sees_the_rollout_end(
    kube: Kube, kubeconfig_path: Path, cluster: Cluster
) -> None:
    ns = await new_namespace(kube)
    async with running_controller(kubeconfig_path):
        await create_and_wait_ready(kube, cluster, ns)
    # No controller: the edit moves metadata.generation past every condition's
    # observedGeneration, so the stored Ready=True no longer counts for kubectl.
    await edit_role(kube, ns, "chat", image=NEW_IMAGE)
    md = await get_md(kube, ns, "chat")
    assert md is not None
    ready = condition(md, "Ready")
    assert ready is not None and ready["status"] == "True"
    assert ready["observedGeneration"] < md["metadata"]["generation"]
    stale = await kubectl_wait(cluster, ns, "chat", "condition=Ready", timeout=3)
    assert stale.returncode != 0, stale.stdout
    async with running_controller(kubeconfig_path):
        waited = await kubectl_wait(cluster, ns, "chat", "condition=Ready", timeout=180)
        assert waited.returncode == 0, waited.stderr
        # Ready again only once every replica runs the edit.
        current = live(await pods_of(kube, ns, "chat"))
        assert len(current) == 2 and {image(p) for p in current} == {NEW_IMAGE}
        assert await eventually(lambda: serving(kube, ns, "chat", 2), timeout=LONG)


async def test_kubectl_wait_for_stalled_in_the_controllers_own_namespace(
    kube: Kube, kubeconfig_path: Path, cluster: Cluster
) -> None:
    ns = await new_namespace(kube)
    entrance = await new_entrance(kube, cluster, gpus=8)
    # The controller's system namespace gets no LocalQueue: nothing is admitted there, and only
    # a person can fix it (deploy elsewhere), so the deployment is Stalled, not Reconciling.
    async with running_controller(kubeconfig_path, namespace=ns):
        await kube.create(MODEL_DEPLOYMENTS, deployment("chat", ns, entrance.role()), ns)
        waited = await kubectl_wait(cluster, ns, "chat", "condition=Stalled", timeout=120)
        assert waited.returncode == 0, waited.stderr
        md = await get_md(kube, ns, "chat")
        assert md is not None
        stalled = condition(md, "Stalled")
        assert stalled is not None and stalled["reason"] == "NoQueueInReservedNamespace"
        for type_ in ("Ready", "Reconciling"):
            cond = condition(md, type_)
            assert cond is not None and cond["status"] == "False", cond
