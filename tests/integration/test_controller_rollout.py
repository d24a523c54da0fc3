"""Rollout, departures and restarts on the simulated cluster (docs/contract/controller.md §6–§7,
D6).

The real Kueue admits every group; a test holds admission with the ClusterQueue's own switch
(``stopPolicy: Hold``, :func:`.controller_fixtures.hold_queue`), which is what gates the next
replica's deletion, and reads the status the controller writes while it waits.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gpustack_controller.kube import PODS, Kube
from gpustack_render.core import labels

from .cluster import Cluster
from .controller_fixtures import (
    Entrance,
    admitted,
    deployment,
    eventually,
    get_md,
    hold_queue,
    live,
    new_entrance,
    new_namespace,
    pods_of,
    replacing,
    running_controller,
    seat,
    serving,
    steady,
    workload_of,
)
from .rollout_fixtures import LONG, NEW_IMAGE, by_ordinal, deploy_serving, edit_role, image, uid

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


@pytest.fixture
async def entrance(kube: Kube, cluster: Cluster) -> AsyncIterator[Entrance]:
    """A private entrance whose ClusterQueue is released from any hold after the test."""
    private = await new_entrance(kube, cluster, gpus=8)
    try:
        yield private
    finally:
        hold_queue(cluster, private.name, hold=False)


def _replaced_at(kube: Kube, ns: str, md: str, ordinal: int) -> Any:
    async def probe() -> dict[str, Any] | None:
        pod = by_ordinal(await pods_of(kube, ns, md)).get(ordinal)
        return pod if pod is not None and image(pod) == NEW_IMAGE else None

    return probe


async def test_an_image_edit_rolls_one_replica_at_a_time_and_waits_on_admission(
    kube: Kube, kubeconfig_path: Path, cluster: Cluster, entrance: Entrance
) -> None:
    ns = await new_namespace(kube)
    async with running_controller(kubeconfig_path):
        await deploy_serving(kube, deployment("roll", ns, entrance.role(replicas=3)), 3)
        old = by_ordinal(await pods_of(kube, ns, "roll"))
        hold_queue(cluster, entrance.name)
        await edit_role(kube, ns, "roll", image=NEW_IMAGE)

        # The highest ordinal goes first, and is remembered in status before it is deleted.
        new2 = await eventually(_replaced_at(kube, ns, "roll", 2), timeout=LONG, what="2 replaced")
        md = await get_md(kube, ns, "roll")
        assert md is not None and replacing(md) == 2
        pending = await eventually(
            lambda: workload_of(kube, new2), timeout=LONG, what="the replacement's Workload"
        )
        assert not admitted(pending)

        # Not admitted (the ClusterQueue holds): nothing else is deleted, however long we wait.
        async def others_untouched() -> bool:
            pods = by_ordinal(await pods_of(kube, ns, "roll"))
            return all(uid(pods.get(o)) == uid(old[o]) for o in (0, 1))

        await steady(others_untouched, seconds=4, what="ordinals 0 and 1 kept")
        md = await get_md(kube, ns, "roll")
        assert md is not None and replacing(md) == 2
        rollout = {c["type"]: c for c in md["status"]["conditions"]}["ReplicasUpToDate"]
        assert (rollout["status"], rollout["reason"]) == ("False", "RolloutInProgress")

        # Kueue admitting the replacement releases the next one.
        hold_queue(cluster, entrance.name, hold=False)
        new1 = await eventually(_replaced_at(kube, ns, "roll", 1), timeout=LONG, what="1 replaced")
        admitted_two = await workload_of(kube, new2)
        assert admitted_two is not None and admitted(admitted_two)
        assert uid(new1) != uid(old[1])
        await eventually(_replaced_at(kube, ns, "roll", 0), timeout=LONG, what="0 replaced")

        async def settled() -> bool:
            m = await get_md(kube, ns, "roll")
            if m is None or replacing(m) is not None:
                return False
            cond = {c["type"]: c for c in m["status"]["conditions"]}["ReplicasUpToDate"]
            return bool(cond["status"] == "True" and cond["reason"] == "UpToDate")

        await eventually(settled, timeout=LONG, what="UpToDate with no replacement remembered")
        final = await eventually(lambda: serving(kube, ns, "roll", 3), timeout=LONG, what="3")
        assert sorted(seat(p)[1] for p in final) == [0, 1, 2]
        assert {image(p) for p in final} == {NEW_IMAGE}


async def test_a_restarted_controller_resumes_the_same_replacement(
    kube: Kube, kubeconfig_path: Path, cluster: Cluster, entrance: Entrance
) -> None:
    ns = await new_namespace(kube)
    async with running_controller(kubeconfig_path):
        body = deployment("resume", ns, entrance.role(replicas=2))
        await deploy_serving(kube, body, 2)
        old = by_ordinal(await pods_of(kube, ns, "resume"))
        hold_queue(cluster, entrance.name)
        await edit_role(kube, ns, "resume", image=NEW_IMAGE)
        replacement = await eventually(
            _replaced_at(kube, ns, "resume", 1), timeout=LONG, what="ordinal 1 replaced"
        )
    # The controller is gone mid-rollout; a new one starts from what the cluster holds.
    md = await get_md(kube, ns, "resume")
    assert md is not None and replacing(md) == 1
    async with running_controller(kubeconfig_path):

        async def same_rollout() -> bool:
            m = await get_md(kube, ns, "resume")
            pods = by_ordinal(await pods_of(kube, ns, "resume"))
            return (
                m is not None
                and replacing(m) == 1
                and uid(pods.get(0)) == uid(old[0])
                and uid(pods.get(1)) == uid(replacement)
            )

        await steady(same_rollout, seconds=4, what="the same replacement, nothing else")
        hold_queue(cluster, entrance.name, hold=False)

        async def done() -> bool:
            m = await get_md(kube, ns, "resume")
            pods = await serving(kube, ns, "resume", 2)
            return (
                m is not None
                and replacing(m) is None
                and bool(pods)
                and {image(p) for p in pods or ()} == {NEW_IMAGE}
            )

        await eventually(done, timeout=LONG, what="the rollout finished")
        pods = by_ordinal(await pods_of(kube, ns, "resume"))
        assert uid(pods[1]) == uid(replacement), "the resumed replacement was rebuilt"


async def test_a_deleted_pod_keeps_its_workload_until_the_controller_replaces_the_replica(
    kube: Kube, kubeconfig_path: Path, entrance: Entrance
) -> None:
    ns = await new_namespace(kube)
    async with running_controller(kubeconfig_path):
        await deploy_serving(kube, deployment("drain", ns, entrance.role(replicas=2)), 2)
    victim = by_ordinal(await pods_of(kube, ns, "drain"))[1]
    workload = await workload_of(kube, victim)
    assert workload is not None and admitted(workload)
    # A drain / kubectl delete pod: Kueue's finalizer holds the Pod while its Workload stands.
    await kube.delete(PODS, victim["metadata"]["name"], ns)

    async def still_held() -> bool:
        pod = await kube.get(PODS, victim["metadata"]["name"], ns)
        w = await workload_of(kube, victim)
        return bool(pod and pod["metadata"].get("deletionTimestamp") and uid(w) == uid(workload))

    await steady(still_held, seconds=3, what="the Pod held by its standing Workload")
    async with running_controller(kubeconfig_path):

        async def recreated() -> dict[str, Any] | None:
            pods = await serving(kube, ns, "drain", 2)
            pod = by_ordinal(pods or ()).get(1)
            return None if pod is None or uid(pod) == uid(victim) else pod

        fresh = await eventually(recreated, timeout=LONG, what="ordinal 1 recreated")
        assert fresh["metadata"]["name"] != victim["metadata"]["name"]  # size 1: fresh name
        assert fresh["metadata"]["labels"][labels.POD_ORDINAL] == "1"
        renewed = await workload_of(kube, fresh)
        assert renewed is not None and uid(renewed) != uid(workload) and admitted(renewed)
        assert len(live(await pods_of(kube, ns, "drain"))) == 2
