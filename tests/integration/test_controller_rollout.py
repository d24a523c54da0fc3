"""Rollout, departures and restarts against the real API server (controller.md §6–§7, D6).

The test plays Kueue (``PlayKueue``): with ``auto_admit`` off, a replacement waits for the
admission the test grants, which is what gates the next replica's deletion.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gpustack_controller.kube import MODEL_DEPLOYMENTS, PODS, WORKLOADS, Kube
from gpustack_render.core import labels

from .controller_fixtures import (
    PlayKueue,
    deployment,
    ensure_instance_type,
    eventually,
    get_md,
    live,
    new_namespace,
    pods_of,
    replacing,
    role,
    running_controller,
    seat,
    steady,
)

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

NEW_IMAGE = "vllm/vllm-openai:v0.26.0"


@pytest.fixture
async def kube(kubeconfig_path: Path) -> AsyncIterator[Kube]:
    client = await Kube.connect(kubeconfig=str(kubeconfig_path))
    try:
        await ensure_instance_type(client)
        yield client
    finally:
        await client.close()


def image(pod: dict[str, Any]) -> str:
    return str(pod["spec"]["containers"][-1]["image"])


def by_ordinal(pods: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    return {seat(p)[1]: p for p in live(pods)}


async def admitted_running(kube: Kube, kueue: PlayKueue, ns: str, md: str, n: int) -> bool:
    pods = live(await pods_of(kube, ns, md))
    workloads = await kueue.workloads()
    admitted = [
        w
        for w in workloads
        if any(
            c["type"] == "Admitted" and c["status"] == "True"
            for c in (w.get("status") or {}).get("conditions") or ()
        )
    ]
    running = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
    return len(pods) == n and len(admitted) == n and len(running) == n


async def workload_of(kueue: PlayKueue, pod: dict[str, Any]) -> dict[str, Any] | None:
    for w in await kueue.workloads():
        if any(
            r["uid"] == pod["metadata"]["uid"] for r in w["metadata"].get("ownerReferences") or ()
        ):
            return w
    return None


async def set_image(kube: Kube, ns: str, name: str, value: str, replicas: int) -> None:
    body = deployment(name, ns, role(replicas=replicas), image=value)
    await kube.merge_patch(MODEL_DEPLOYMENTS, name, {"spec": body["spec"]}, ns)


async def test_an_image_edit_rolls_one_replica_at_a_time_and_waits_on_admission(
    kube: Kube, kubeconfig_path: Path
) -> None:
    ns = await new_namespace(kube)
    async with running_controller(kubeconfig_path), PlayKueue(kube, ns) as kueue:
        await kube.create(MODEL_DEPLOYMENTS, deployment("roll", ns, role(replicas=3)), ns)
        await eventually(
            lambda: _true(admitted_running(kube, kueue, ns, "roll", 3)),
            what="3 admitted, running replicas",
        )
        old = by_ordinal(await pods_of(kube, ns, "roll"))
        kueue.auto_admit = False
        await set_image(kube, ns, "roll", NEW_IMAGE, 3)

        # The highest ordinal goes first, and is remembered in status before it is deleted.
        async def replaced(ordinal: int) -> dict[str, Any] | None:
            pods = by_ordinal(await pods_of(kube, ns, "roll"))
            pod = pods.get(ordinal)
            return pod if pod is not None and image(pod) == NEW_IMAGE else None

        new2 = await eventually(lambda: replaced(2), what="ordinal 2 replaced")
        md = await get_md(kube, ns, "roll")
        assert md is not None and replacing(md) == 2
        await eventually(lambda: workload_of(kueue, new2), what="the replacement's Workload")

        # Not admitted yet: nothing else is deleted, however long we wait.
        async def others_untouched() -> bool:
            pods = by_ordinal(await pods_of(kube, ns, "roll"))
            return all(
                pods.get(o, {}).get("metadata", {}).get("uid") == old[o]["metadata"]["uid"]
                for o in (0, 1)
            )

        await steady(others_untouched, seconds=3, what="ordinals 0 and 1 kept")
        md = await get_md(kube, ns, "roll")
        assert md is not None and replacing(md) == 2
        assert md["status"]["conditions"]
        rollout = {c["type"]: c for c in md["status"]["conditions"]}["ReplicasUpToDate"]
        assert (rollout["status"], rollout["reason"]) == ("False", "RolloutInProgress")

        # Admission of the replacement releases the next one, and only the next one.
        w = await workload_of(kueue, new2)
        assert w is not None
        await kueue.admit(w["metadata"]["name"])
        new1 = await eventually(lambda: replaced(1), what="ordinal 1 replaced")
        pods = by_ordinal(await pods_of(kube, ns, "roll"))
        assert pods[0]["metadata"]["uid"] == old[0]["metadata"]["uid"]
        assert pods[2]["metadata"]["uid"] == new2["metadata"]["uid"]
        md = await get_md(kube, ns, "roll")
        assert md is not None and replacing(md) == 1
        assert new1["metadata"]["uid"] != old[1]["metadata"]["uid"]

        kueue.auto_admit = True
        await eventually(lambda: replaced(0), what="ordinal 0 replaced")

        async def settled() -> bool:
            m = await get_md(kube, ns, "roll")
            if m is None or replacing(m) is not None:
                return False
            cond = {c["type"]: c for c in m["status"]["conditions"]}["ReplicasUpToDate"]
            return bool(cond["status"] == "True" and cond["reason"] == "UpToDate")

        await eventually(settled, what="UpToDate with no replacement remembered")
        final = live(await pods_of(kube, ns, "roll"))
        assert sorted(seat(p)[1] for p in final) == [0, 1, 2]
        assert {image(p) for p in final} == {NEW_IMAGE}


async def test_a_restarted_controller_resumes_the_same_replacement(
    kube: Kube, kubeconfig_path: Path
) -> None:
    ns = await new_namespace(kube)
    async with PlayKueue(kube, ns) as kueue:
        async with running_controller(kubeconfig_path):
            await kube.create(MODEL_DEPLOYMENTS, deployment("resume", ns, role(replicas=2)), ns)
            await eventually(
                lambda: _true(admitted_running(kube, kueue, ns, "resume", 2)),
                what="2 admitted replicas",
            )
            old = by_ordinal(await pods_of(kube, ns, "resume"))
            kueue.auto_admit = False
            await set_image(kube, ns, "resume", NEW_IMAGE, 2)

            async def new_at_one() -> dict[str, Any] | None:
                pod = by_ordinal(await pods_of(kube, ns, "resume")).get(1)
                return pod if pod is not None and image(pod) == NEW_IMAGE else None

            replacement = await eventually(new_at_one, what="ordinal 1 replaced")
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
                    and pods[0]["metadata"]["uid"] == old[0]["metadata"]["uid"]
                    and pods[1]["metadata"]["uid"] == replacement["metadata"]["uid"]
                )

            await steady(same_rollout, seconds=3, what="the same replacement, nothing else")
            kueue.auto_admit = True

            async def done() -> bool:
                m = await get_md(kube, ns, "resume")
                pods = live(await pods_of(kube, ns, "resume"))
                return (
                    m is not None
                    and replacing(m) is None
                    and len(pods) == 2
                    and {image(p) for p in pods} == {NEW_IMAGE}
                )

            await eventually(done, what="the rollout finished")


async def test_a_deleted_pod_keeps_its_workload_until_the_controller_replaces_the_replica(
    kube: Kube, kubeconfig_path: Path
) -> None:
    ns = await new_namespace(kube)
    async with PlayKueue(kube, ns) as kueue:
        async with running_controller(kubeconfig_path):
            await kube.create(MODEL_DEPLOYMENTS, deployment("drain", ns, role(replicas=2)), ns)
            await eventually(
                lambda: _true(admitted_running(kube, kueue, ns, "drain", 2)),
                what="2 admitted replicas",
            )
        victim = by_ordinal(await pods_of(kube, ns, "drain"))[1]
        workload = await workload_of(kueue, victim)
        assert workload is not None
        # A drain / kubectl delete pod: Kueue's finalizer holds the Pod while its Workload stands.
        await kube.delete(PODS, victim["metadata"]["name"], ns)

        async def still_held() -> bool:
            pod = await kube.get(PODS, victim["metadata"]["name"], ns)
            w = await kube.get(WORKLOADS, workload["metadata"]["name"], ns)
            return bool(pod and pod["metadata"].get("deletionTimestamp") and w is not None)

        await steady(still_held, seconds=2, what="the Pod held by its standing Workload")
        async with running_controller(kubeconfig_path):
            await eventually(
                lambda: _true(_gone(kube.get(WORKLOADS, workload["metadata"]["name"], ns))),
                what="the controller deleting the stranded Workload",
            )

            async def recreated() -> dict[str, Any] | None:
                pod = by_ordinal(await pods_of(kube, ns, "drain")).get(1)
                if pod is None or pod["metadata"]["uid"] == victim["metadata"]["uid"]:
                    return None
                return pod

            fresh = await recreated_eventually(recreated)
            assert fresh["metadata"]["name"] != victim["metadata"]["name"]  # size 1: fresh name
            assert fresh["metadata"]["labels"][labels.POD_ORDINAL] == "1"


async def recreated_eventually(probe: Any) -> dict[str, Any]:
    result: dict[str, Any] = await eventually(probe, what="ordinal 1 recreated")
    return result


async def _true(awaitable: Any) -> bool:
    return bool(await awaitable)


async def _gone(awaitable: Any) -> bool:
    return (await awaitable) is None
