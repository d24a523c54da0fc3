"""End to end on the simulated cluster: the real Kueue admits, the real scheduler binds, KWOK
runs the Pods. Each test is a sentence of the seed's "Rollout behavior" or "Replica departures"
(docs/contract/model-deployment.md), observed through those components only.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpustack_controller.kube import (
    CONFIGMAPS,
    EVENTS,
    LOCAL_QUEUES,
    MODEL_DEPLOYMENTS,
    PODS,
    SERVICES,
    Kube,
)
from gpustack_kube import client
from gpustack_render.core import labels
from gpustack_render.rendering import renderer

from .cluster import Cluster
from .controller_fixtures import (
    IMAGE,
    KUEUE_POD_FINALIZER,
    KUEUE_WORKLOADS,
    admitted,
    condition,
    deployment,
    eventually,
    get_md,
    gpu_usage,
    group_of,
    has_condition,
    hold_queue,
    live,
    new_entrance,
    new_namespace,
    pods_of,
    running_controller,
    running_ready,
    seat,
    serving,
    steady,
    tear_down,
    workload_of,
    workloads_in,
)
from .rollout_fixtures import (
    LONG,
    NEW_IMAGE,
    NEWER_IMAGE,
    by_ordinal,
    deploy_serving,
    edit_role,
    evict,
    freezable_controller,
    image,
    md_replacing,
    members,
    mixed_ordinals,
    preemptor_pod,
    recording,
    resize_queue,
    settled_replica,
    uid,
    usage_is,
    workload_images,
    workload_named,
)

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


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
            lambda: usage_is(cluster, entrance.name, 4), what="4 GPUs used on the ClusterQueue"
        )


# ---- scale ------------------------------------------------------------------------------------


async def test_scale_up_adds_the_new_ordinal_and_scale_down_releases_the_highest(
    kube: Kube, kubeconfig_path: Path, cluster: Cluster
) -> None:
    """Seed, "Replica departures": a never-used ordinal is created on the first pass that sees
    it; "One group per replica": a scale-down sheds the highest ordinals, each Pod together with
    its own Workload, which releases the quota."""
    ns = await new_namespace(kube)
    entrance = await new_entrance(kube, cluster, gpus=8)
    async with running_controller(kubeconfig_path):
        await deploy_serving(kube, deployment("scale", ns, entrance.role(replicas=2)), 2)
        before = by_ordinal(await pods_of(kube, ns, "scale"))

        await edit_role(kube, ns, "scale", replicas=3)
        pods = await eventually(
            lambda: serving(kube, ns, "scale", 3), timeout=LONG, what="3 admitted replicas"
        )
        now = by_ordinal(pods)
        assert sorted(now) == [0, 1, 2]
        assert {o: uid(now[o]) for o in (0, 1)} == {o: uid(before[o]) for o in (0, 1)}
        await eventually(lambda: usage_is(cluster, entrance.name, 3), what="3 GPUs admitted")
        workloads = {w["metadata"]["name"]: w for w in await workloads_in(kube, ns)}
        kept = {o: uid(workloads[group_of(now[o])]) for o in (0, 1, 2)}

        async with recording(kube, ns, "scale") as timeline:
            await edit_role(kube, ns, "scale", replicas=1)

            async def shed() -> bool:
                left = await pods_of(kube, ns, "scale")
                names = {w["metadata"]["name"] for w in await workloads_in(kube, ns)}
                return [seat(p)[1] for p in left] == [0] and names == {group_of(now[0])}

            await eventually(shed, timeout=LONG, what="ordinals 2 and 1 gone with their Workloads")
            await eventually(
                lambda: usage_is(cluster, entrance.name, 1), what="the quota of 2 replicas released"
            )
        survivor = by_ordinal(await pods_of(kube, ns, "scale"))[0]
        assert uid(survivor) == uid(now[0]) and running_ready(survivor)
        workload = await workload_of(kube, survivor)
        assert workload is not None and uid(workload) == kept[0] and admitted(workload)
        for sample in timeline.samples:
            # Ordinal 0 is never touched, and a shed replica's Workload does not go before its
            # Pods are deleted: while a Pod of it stands undeleted, its Workload does too.
            assert all(not p["metadata"].get("deletionTimestamp") for p in sample.replica(0)), (
                "the survivor was deleted"
            )
            for ordinal in (1, 2):
                standing = [
                    p for p in sample.replica(ordinal) if not p["metadata"].get("deletionTimestamp")
                ]
                if standing:
                    assert group_of(standing[0]) in sample.workloads, (
                        f"ordinal {ordinal}'s Workload deleted before its Pod"
                    )


# ---- rollout -------------------------------------------------------------------------------------


async def test_an_image_edit_rolls_one_replica_at_a_time_each_freshly_admitted_never_mixed(
    kube: Kube, kubeconfig_path: Path, cluster: Cluster
) -> None:
    """Seed, "Rollout behavior": one replica per pass, highest ordinal first; each replacement
    is a fresh admission (a new Workload) and gates the next deletion; no ordinal ever holds
    members of two configurations (size 2)."""
    ns = await new_namespace(kube)
    entrance = await new_entrance(kube, cluster, gpus=8)
    body = deployment("roll", ns, entrance.role(replicas=3, size=2))
    async with running_controller(kubeconfig_path):
        pods = await deploy_serving(kube, body, 6)
        workloads = {w["metadata"]["name"]: w for w in await workloads_in(kube, ns)}
        first = {o: uid(workloads[group_of(p)]) for o, p in by_ordinal(pods).items()}
        assert len(set(first.values())) == 3

        async with recording(kube, ns, "roll") as timeline:
            await edit_role(kube, ns, "roll", image=NEW_IMAGE)

            async def rolled() -> bool:
                current = await serving(kube, ns, "roll", 6)
                return bool(current) and {image(p) for p in current or ()} == {NEW_IMAGE}

            await eventually(rolled, timeout=3 * LONG, what="every replica on the new image")
            await eventually(lambda: _replacing_is(kube, ns, "roll", None), what="rollout done")

    order: list[int] = []
    for sample in timeline.samples:
        assert not mixed_ordinals(sample, 3), "an ordinal held members of two configurations"
        moving = [
            o
            for o in range(3)
            if not settled_replica(sample, o, size=2, image_=IMAGE, workload_uid=first[o])
            and not settled_replica(sample, o, size=2, image_=NEW_IMAGE, not_uid=first[o])
        ]
        # One replica in flight at a time: the next one is deleted only once the previous
        # replacement's fresh Workload is admitted.
        assert len(moving) <= 1, f"replicas {moving} turned over at once"
        if moving and (not order or order[-1] != moving[0]):
            order.append(moving[0])
    assert order == [2, 1, 0]
    final = {w["metadata"]["name"]: w for w in await workloads_in(kube, ns)}
    assert len(final) == 3 and all(admitted(w) for w in final.values())
    assert not {uid(w) for w in final.values()} & set(first.values()), "a replacement rode on"
    assert all(workload_images(w) >= {NEW_IMAGE} for w in final.values())


async def test_a_full_cluster_queue_makes_the_rollout_wait_for_capacity_and_shed_nothing(
    kube: Kube, kubeconfig_path: Path, cluster: Cluster
) -> None:
    """Seed, "Rollout behavior": on a full pool a rollout waits for capacity rather than
    shedding replicas it cannot re-reserve."""
    ns = await new_namespace(kube)
    entrance = await new_entrance(kube, cluster, gpus=2)
    async with running_controller(kubeconfig_path):
        pods = await deploy_serving(kube, deployment("full", ns, entrance.role(replicas=2)), 2)
        old = by_ordinal(pods)
        old_workload = await workload_of(kube, old[0])
        assert old_workload is not None
        # Each replica now wants 2 GPUs; the queue holds 2, so a replacement cannot be admitted
        # beside the replica that still runs.
        await edit_role(kube, ns, "full", resources={"accelerator": 2})

        async def queued_replacement() -> dict[str, Any] | None:
            pod = by_ordinal(await pods_of(kube, ns, "full")).get(1)
            if pod is None or uid(pod) == uid(old[1]):
                return None
            w = await workload_of(kube, pod)
            return w if w is not None and not admitted(w) else None

        pending = await eventually(queued_replacement, timeout=LONG, what="ordinal 1 queued")

        async def nothing_shed() -> bool:
            pods_now = by_ordinal(await pods_of(kube, ns, "full"))
            w = await workload_of(kube, old[0])
            replacement = await workload_named(kube, ns, pending["metadata"]["name"])
            assert uid(pods_now.get(0)) == uid(old[0]), "ordinal 0 was deleted"
            assert running_ready(pods_now[0]), "ordinal 0 stopped serving"
            assert w is not None and uid(w) == uid(old_workload), "ordinal 0's Workload went"
            assert admitted(w), "ordinal 0 lost its admission"
            assert replacement is not None and not admitted(replacement), "admitted past quota"
            assert gpu_usage(cluster, entrance.name) == 1, "usage is not ordinal 0's alone"
            assert await _replacing_is(kube, ns, "full", 1), "the replacement was forgotten"
            return True

        # Kueue publishes the ClusterQueue's usage a moment after it changes.
        await eventually(lambda: usage_is(cluster, entrance.name, 1), what="1 GPU admitted")
        await steady(nothing_shed, seconds=6, what="ordinal 0 kept while 1 waits for quota")

        resize_queue(cluster, entrance.name, 4)
        pods = await eventually(lambda: serving(kube, ns, "full", 2), timeout=LONG, what="rolled")
        done = by_ordinal(pods)
        assert uid(done[0]) != uid(old[0])
        assert all(
            p["spec"]["containers"][-1]["resources"]["limits"]["nvidia.com/gpu"] == "2"
            for p in done.values()
        )
        await eventually(lambda: usage_is(cluster, entrance.name, 4), what="4 GPUs admitted")


async def test_a_second_edit_supersedes_a_queued_replacement_admitted_once_with_the_newer(
    kube: Kube, kubeconfig_path: Path, cluster: Cluster
) -> None:
    """Seed, "Rollout behavior": a queued replacement is superseded by a newer edit and admitted
    once, with the newer configuration; the obsolete configuration is never admitted."""
    ns = await new_namespace(kube)
    entrance = await new_entrance(kube, cluster, gpus=8)
    async with running_controller(kubeconfig_path):
        await kube.create(
            MODEL_DEPLOYMENTS, deployment("supersede", ns, entrance.role(replicas=2)), ns
        )
        pods = await eventually(lambda: serving(kube, ns, "supersede", 2), timeout=LONG, what="2")
        old = by_ordinal(pods)
        first = await workload_of(kube, old[1])
        assert first is not None
        async with recording(kube, ns, "supersede") as timeline:
            hold_queue(cluster, entrance.name)
            try:
                await edit_role(kube, ns, "supersede", image=NEW_IMAGE)

                async def queued(image_: str) -> dict[str, Any] | None:
                    pod = by_ordinal(await pods_of(kube, ns, "supersede")).get(1)
                    if pod is None or image(pod) != image_:
                        return None
                    w = await workload_of(kube, pod)
                    return w if w is not None and workload_images(w) >= {image_} else None

                obsolete = await eventually(
                    lambda: queued(NEW_IMAGE), timeout=LONG, what="a queued replacement"
                )
                assert not admitted(obsolete)
                await edit_role(kube, ns, "supersede", image=NEWER_IMAGE)
                newer = await eventually(
                    lambda: queued(NEWER_IMAGE), timeout=LONG, what="the superseding replacement"
                )
                assert uid(newer) != uid(obsolete)
                current = by_ordinal(await pods_of(kube, ns, "supersede"))
                assert uid(current[0]) == uid(old[0]), "a healthy replica went while one queued"
            finally:
                hold_queue(cluster, entrance.name, hold=False)

            async def rolled() -> bool:
                current = await serving(kube, ns, "supersede", 2)
                return bool(current) and {image(p) for p in current or ()} == {NEWER_IMAGE}

            await eventually(rolled, timeout=2 * LONG, what="both replicas on the newer image")
    admitted_ever = timeline.ever_admitted().values()
    assert not any(NEW_IMAGE in workload_images(w) for w in admitted_ever), (
        "the obsolete configuration was admitted"
    )
    # Ordinal 1's group was admitted twice in all: the original, then the newer replacement.
    ordinal_one = {
        uid(w) for w in admitted_ever if w["metadata"]["name"] == first["metadata"]["name"]
    }
    assert ordinal_one == {uid(first), uid(newer)}


@contextlib.contextmanager
def kueue_mode(cluster: Cluster, *, wait_for_pods_ready: bool) -> Iterator[None]:
    """Run the block with Kueue's ``waitForPodsReady`` as given; restore the default after."""
    if not wait_for_pods_ready:
        yield
        return
    cluster.restart_kueue(wait_for_pods_ready=True)
    try:
        yield
    finally:
        cluster.restart_kueue(wait_for_pods_ready=False)


@pytest.mark.parametrize(
    "wait_for_pods_ready",
    [
        pytest.param(False, id="default"),
        # Kueue then writes PodsReady=False (WaitForStart) on the queued Workload: that must
        # not read as "admitted before" (issue 13, item 2).
        pytest.param(True, id="waitForPodsReady"),
    ],
)
async def test_an_edit_replaces_a_group_still_queued_for_its_first_admission(
    kube: Kube, kubeconfig_path: Path, cluster: Cluster, wait_for_pods_ready: bool
) -> None:
    """Seed, "Rollout behavior": a complete group still waiting for its first admission is
    replaced after an edit, before any admitted sibling, so its obsolete configuration is never
    admitted."""
    ns = await new_namespace(kube)
    entrance = await new_entrance(kube, cluster, gpus=8)
    with kueue_mode(cluster, wait_for_pods_ready=wait_for_pods_ready):
        async with running_controller(kubeconfig_path):
            pods = await deploy_serving(kube, deployment("q", ns, entrance.role(replicas=2)), 2)
            old = by_ordinal(pods)
            async with recording(kube, ns, "q") as timeline:
                hold_queue(cluster, entrance.name)
                try:
                    await edit_role(kube, ns, "q", replicas=3)

                    async def queued(image_: str) -> dict[str, Any] | None:
                        pod = by_ordinal(await pods_of(kube, ns, "q")).get(2)
                        w = None if pod is None else await workload_of(kube, pod)
                        ok = w is not None and image_ in workload_images(w) and not admitted(w)
                        return w if ok else None

                    first = await eventually(
                        lambda: queued(IMAGE), timeout=LONG, what="ordinal 2 queued"
                    )
                    await edit_role(kube, ns, "q", image=NEW_IMAGE)
                    newer = await eventually(
                        lambda: queued(NEW_IMAGE), timeout=LONG, what="the queued group replaced"
                    )
                    assert uid(newer) != uid(first)
                    current = by_ordinal(await pods_of(kube, ns, "q"))
                    assert {o: uid(current.get(o)) for o in (0, 1)} == {
                        o: uid(old[o]) for o in (0, 1)
                    }, "an admitted replica went before the queued group"
                finally:
                    hold_queue(cluster, entrance.name, hold=False)

                async def rolled() -> bool:
                    current = await serving(kube, ns, "q", 3)
                    return bool(current) and {image(p) for p in current or ()} == {NEW_IMAGE}

                await eventually(rolled, timeout=2 * LONG, what="3 replicas on the new image")
    assert uid(first) not in timeline.ever_admitted(), "the obsolete queued group was admitted"


# ---- departures --------------------------------------------------------------------------------


async def test_kubectl_delete_pod_keeps_the_workload_until_the_whole_replica_is_replaced(
    kube: Kube, kubeconfig_path: Path, cluster: Cluster
) -> None:
    """Seed, "Replica departures": a delete that lands on the Pod alone leaves the replica's
    Workload standing (Kueue's finalizer holds the Pod); the controller replaces the whole
    replica, never filling it with a new member."""
    ns = await new_namespace(kube)
    entrance = await new_entrance(kube, cluster, gpus=8)
    body = deployment("del", ns, entrance.role(replicas=2, size=2))
    async with running_controller(kubeconfig_path):
        pods = await deploy_serving(kube, body, 4)
    replica = members(pods, 1)
    victim = next(p for p in replica if seat(p)[2] == 1)
    workload = await workload_of(kube, victim)
    assert workload is not None
    await asyncio.to_thread(
        cluster.kubectl, "delete", "pod", "-n", ns, victim["metadata"]["name"], "--wait=false"
    )

    async def held() -> bool:
        pod = await kube.get(PODS, victim["metadata"]["name"], ns)
        w = await workload_of(kube, victim)
        return bool(
            pod is not None
            and pod["metadata"].get("deletionTimestamp")
            and w is not None
            and uid(w) == uid(workload)
        )

    await steady(held, seconds=4, what="the Pod held while its Workload stands")

    old_uids = {uid(p) for p in pods}
    async with running_controller(kubeconfig_path):
        fresh = await eventually(lambda: serving(kube, ns, "del", 4), timeout=LONG, what="4")
        renewed = members(fresh, 1)
        assert not {uid(p) for p in renewed} & old_uids, "an old member was kept or reused"
        assert {uid(p) for p in members(fresh, 0)} == {uid(p) for p in members(pods, 0)}
        w = await workload_of(kube, renewed[0])
        assert w is not None and uid(w) != uid(workload) and admitted(w)


#: A finalizer of the test's own, keeping a deleted Workload readable as long as it wants.
HOLD_FINALIZER = "gpustack.test/hold"


async def _set_finalizer(kube: Kube, ns: str, name: str, *, held: bool) -> None:
    workload = await workload_named(kube, ns, name)
    assert workload is not None
    kept = [f for f in workload["metadata"].get("finalizers") or () if f != HOLD_FINALIZER]
    body = {"metadata": {"finalizers": [*kept, HOLD_FINALIZER] if held else kept}}
    await kube.merge_patch(KUEUE_WORKLOADS, name, body, ns)


async def test_a_deleted_workload_still_standing_holds_its_ordinal_until_it_is_gone(
    kube: Kube, kubeconfig_path: Path, cluster: Cluster
) -> None:
    """Seed, "Replica departures": a replacement is created only after the instance it
    replaces has left, members and Workload. Kueue keeps a deleted Workload until its group has
    stopped and attaches new Pods of the same group name to it, so the ordinal waits for the
    Workload to be gone (here a finalizer of the test's own keeps it) and then gets a fresh
    one."""
    ns = await new_namespace(kube)
    entrance = await new_entrance(kube, cluster, gpus=8)
    body = deployment("wait", ns, entrance.role(replicas=2))
    async with running_controller(kubeconfig_path):
        pods = await deploy_serving(kube, body, 2)
        victim = by_ordinal(pods)[1]
        workload = await workload_of(kube, victim)
        assert workload is not None
        name = workload["metadata"]["name"]
        await _set_finalizer(kube, ns, name, held=True)
        await kube.delete(PODS, victim["metadata"]["name"], ns)

        async def lingering() -> bool:
            w = await workload_named(kube, ns, name)
            left = members(live(await pods_of(kube, ns, "wait")), 1)
            return bool(w and w["metadata"].get("deletionTimestamp")) and not left

        await eventually(lingering, timeout=LONG, what="the Workload deleted, its Pod gone")
        await steady(lingering, seconds=6, what="no Pod at ordinal 1 while its Workload stands")
        await _set_finalizer(kube, ns, name, held=False)
        fresh = await eventually(lambda: serving(kube, ns, "wait", 2), timeout=LONG, what="2")
        renewed = await workload_of(kube, by_ordinal(fresh)[1])
        assert renewed is not None and uid(renewed) != uid(workload) and admitted(renewed)
        await tear_down(kube, ns, "wait")


async def test_kueue_preemption_takes_a_replica_which_returns_when_quota_frees(
    kube: Kube, kubeconfig_path: Path, cluster: Cluster
) -> None:
    """Seed, "Replica departures": Kueue preempting for a higher-priority workload evicts one
    replica's Workload; the replica comes back, freshly admitted, once the quota frees. (The
    renderer carries no priority class on its Pods, so the higher-priority Workload is a plain
    Pod group labelled gpustack-high in the same ClusterQueue.)"""
    ns = await new_namespace(kube)
    entrance = await new_entrance(kube, cluster, gpus=2)
    async with running_controller(kubeconfig_path):
        pods = await deploy_serving(kube, deployment("prey", ns, entrance.role(replicas=2)), 2)
        old = by_ordinal(pods)
        old_workloads = {o: uid(await workload_of(kube, p)) for o, p in old.items()}

        await kube.create(PODS, preemptor_pod(ns, "urgent", queue=entrance.name), ns)

        async def preempted() -> list[int] | None:
            urgent = await workload_named(kube, ns, "urgent")
            if urgent is None or not admitted(urgent):
                return None
            current = by_ordinal(await pods_of(kube, ns, "prey"))
            kept = [o for o in (0, 1) if uid(current.get(o)) == uid(old[o])]
            return kept if len(kept) == 1 else None

        kept = (await eventually(preempted, timeout=LONG, what="one replica preempted"))[0]
        taken = 1 - kept

        async def waiting() -> bool:
            pod = by_ordinal(await pods_of(kube, ns, "prey")).get(taken)
            w = None if pod is None else await workload_of(kube, pod)
            return w is not None and uid(w) != old_workloads[taken] and not admitted(w)

        await eventually(waiting, timeout=LONG, what="the taken replica queued again")

        async def urgent_runs() -> bool:
            pod = await kube.get(PODS, "urgent", ns)
            return pod is not None and running_ready(pod)

        await eventually(urgent_runs, timeout=LONG, what="the preemptor Running on the freed GPU")

        # The preemptor goes the way a group's owner ends it: its Pod, then its Workload. Deleting
        # the Pod alone leaves the group's Workload admitted and its quota held (checked against
        # Kueue v0.17.0: the replica then never returns).
        await kube.delete(PODS, "urgent", ns)
        await kube.delete(KUEUE_WORKLOADS, "urgent", ns)
        back = await eventually(lambda: serving(kube, ns, "prey", 2), timeout=LONG, what="back")
        returned = by_ordinal(back)
        assert uid(returned[kept]) == uid(old[kept]), "the sibling was touched"
        w = await workload_of(kube, returned[taken])
        assert w is not None and uid(w) != old_workloads[taken]
        await eventually(lambda: usage_is(cluster, entrance.name, 2), what="2 GPUs admitted")


async def test_a_node_drained_through_the_eviction_api_gets_its_replicas_replaced_elsewhere(
    kube: Kube, kubeconfig_path: Path, cluster: Cluster
) -> None:
    """Seed, "Replica departures": a drain (cordon, then an eviction per Pod) takes the Pods
    alone; the controller frees the slot (the replica's Workload) and the replica returns,
    freshly admitted, on another Node, its sibling untouched."""
    ns = await new_namespace(kube)
    entrance = await new_entrance(kube, cluster, gpus=8)
    async with running_controller(kubeconfig_path):
        pods = await deploy_serving(kube, deployment("drain", ns, entrance.role(replicas=2)), 2)
        old = by_ordinal(pods)
        node = old[1]["spec"]["nodeName"]
        before = {uid(await workload_of(kube, p)) for p in pods if p["spec"]["nodeName"] == node}
        await asyncio.to_thread(cluster.kubectl, "cordon", node)
        try:
            on_node = [p for p in pods if p["spec"]["nodeName"] == node]
            for pod in on_node:
                await evict(kube, pod)
            fresh = await eventually(
                lambda: _replaced(kube, ns, "drain", {uid(p) for p in on_node}),
                timeout=LONG,
                what="the drained replicas back elsewhere",
            )
            assert all(p["spec"]["nodeName"] != node for p in fresh)
            kept = [p for p in pods if p["spec"]["nodeName"] != node]
            assert {uid(p) for p in kept} <= {uid(p) for p in fresh}
            for pod in fresh:
                w = await workload_of(kube, pod)
                assert w is not None and admitted(w)
                if uid(pod) not in {uid(p) for p in kept}:
                    assert uid(w) not in before, "the drained replica rode on its old Workload"
        finally:
            await asyncio.to_thread(cluster.kubectl, "uncordon", node)


async def _replaced(
    kube: Kube, ns: str, md: str, gone: set[str | None]
) -> list[dict[str, Any]] | None:
    current = await serving(kube, ns, md, 2)
    if not current or {uid(p) for p in current} & gone:
        return None
    return current


# ---- deletion and restart -------------------------------------------------------------------


async def test_deleting_the_deployment_tears_everything_down_and_releases_the_quota(
    kube: Kube, kubeconfig_path: Path, cluster: Cluster
) -> None:
    ns = await new_namespace(kube)
    entrance = await new_entrance(kube, cluster, gpus=8)
    body = deployment("bye", ns, entrance.role(replicas=2), entrance.role("big", size=2))
    async with running_controller(kubeconfig_path):
        await deploy_serving(kube, body, 4)
        await eventually(lambda: usage_is(cluster, entrance.name, 4), what="4 GPUs admitted")
        await kube.delete(MODEL_DEPLOYMENTS, "bye", ns)

        async def gone() -> bool:
            return (
                await get_md(kube, ns, "bye") is None
                and not await pods_of(kube, ns, "bye")
                and not await workloads_in(kube, ns)
                and not await _services(kube, ns)
            )

        await eventually(
            gone, timeout=LONG, what="Pods, Workloads, Services and the deployment gone"
        )
        await eventually(lambda: usage_is(cluster, entrance.name, 0), what="no quota in use")


async def _services(kube: Kube, ns: str) -> list[dict[str, Any]]:
    items, _ = await kube.list(SERVICES, ns, label_selector=f"{labels.INSTANCE}=bye")
    return items


async def test_a_controller_killed_mid_rollout_resumes_the_same_replacement(
    kube: Kube, kubeconfig_path: Path, cluster: Cluster
) -> None:
    """Seed, "Changed role configuration": the role remembers which replica it is replacing, so
    a restart resumes the same rollout. The first controller dies after writing the choice and
    before its deletions land."""
    ns = await new_namespace(kube)
    entrance = await new_entrance(kube, cluster, gpus=8)
    body = deployment("crash", ns, entrance.role(replicas=3))
    async with freezable_controller(kubeconfig_path) as first:
        pods = await deploy_serving(kube, body, 3)
        old = by_ordinal(pods)
        first.freeze()
        await edit_role(kube, ns, "crash", image=NEW_IMAGE)
        await eventually(lambda: _is_set(first.blocked), what="the deletion in flight")
        await eventually(lambda: _replacing_is(kube, ns, "crash", 2), what="replacing: 2 stored")
    # Killed: nothing was deleted, the choice is on the deployment.
    assert {o: uid(p) for o, p in by_ordinal(await pods_of(kube, ns, "crash")).items()} == {
        o: uid(p) for o, p in old.items()
    }
    async with recording(kube, ns, "crash") as timeline, running_controller(kubeconfig_path):

        async def rolled() -> bool:
            current = await serving(kube, ns, "crash", 3)
            return bool(current) and {image(p) for p in current or ()} == {NEW_IMAGE}

        await eventually(rolled, timeout=3 * LONG, what="the rollout finished")
        await eventually(lambda: _replacing_is(kube, ns, "crash", None), what="nothing remembered")
    first_moved = next(
        o
        for sample in timeline.samples
        for o in (2, 1, 0)
        if uid(by_ordinal(sample.pods).get(o)) != uid(old[o])
    )
    assert first_moved == 2, "the restarted controller picked another replica first"
    remembered: list[int | None] = []
    for sample in timeline.samples:
        if not remembered or remembered[-1] != sample.replacing:
            remembered.append(sample.replacing)
    # 2 (resumed), then 1, then 0, then nothing: never a second choice while 2 was unresolved.
    steps = [r for r in remembered if r is not None]
    assert remembered[0] == 2 and remembered[-1] is None, remembered
    assert steps == sorted(set(steps), reverse=True), remembered


async def _replacing_is(kube: Kube, ns: str, name: str, value: int | None) -> bool:
    return await md_replacing(kube, ns, name) == value


async def _is_set(event: asyncio.Event) -> bool:
    return event.is_set()


# ---- the Kueue version ------------------------------------------------------------------------


async def test_the_controller_speaks_kueue_v1beta2_only_and_draws_no_deprecation_warning(
    kube: Kube,
    kubeconfig_path: Path,
    cluster: Cluster,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Kueue v0.17.0 stores every kind at v1beta2 and marks v1beta1 deprecated: a two-role
    deployment (LocalQueue, Workload watch, the joint check's writes, the AdmissionCheck) makes
    no request at v1beta1 and the API server answers none with a warning."""
    asked: list[str] = []
    warned: list[str] = []
    log_warnings = client.log_warnings

    def recording(method: str, path: str, response: Any) -> None:
        """Every answer of the client (a watch's included) passes here."""
        asked.append(path)
        warned.extend(f"{method} {path}: {w}" for w in response.headers.getall("Warning", ()))
        log_warnings(method, path, response)

    monkeypatch.setattr(client, "log_warnings", recording)
    ns = await new_namespace(kube)
    entrance = await new_entrance(kube, cluster, gpus=8)
    body = deployment("pair", ns, entrance.role("a"), entrance.role("b"))
    with caplog.at_level("WARNING", logger=client.log.name):
        async with running_controller(kubeconfig_path):
            await kube.create(MODEL_DEPLOYMENTS, body, ns)
            await eventually(lambda: serving(kube, ns, "pair", 2), timeout=60, what="2 Ready")
            await tear_down(kube, ns, "pair")
    kueue = [p for p in asked if "/kueue.x-k8s.io/" in p]
    assert any("/localqueues" in p for p in kueue) and any("/workloads" in p for p in kueue)
    assert [p for p in kueue if "/kueue.x-k8s.io/v1beta2/" not in p] == []
    assert warned == []
    assert [r.getMessage() for r in caplog.records if r.name == client.log.name] == []


# ---- LocalQueues -----------------------------------------------------------------------------


def _local_queue(ns: str, name: str, cluster_queue: str) -> dict[str, Any]:
    return {
        "apiVersion": LOCAL_QUEUES.api_version,
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"clusterQueue": cluster_queue},
    }


async def test_a_local_queue_feeding_another_cluster_queue_is_reported_and_left_alone(
    kube: Kube, kubeconfig_path: Path, cluster: Cluster
) -> None:
    """An administrator's LocalQueue of the entrance's name that feeds another ClusterQueue
    (``spec.clusterQueue`` is immutable) is never written: QuotaReserved and a
    LocalQueueConflict event say so, and no Pod is created into it."""
    ns = await new_namespace(kube)
    entrance = await new_entrance(kube, cluster, gpus=8)
    other = await new_entrance(kube, cluster, gpus=8)
    await kube.create(LOCAL_QUEUES, _local_queue(ns, entrance.name, other.name), ns)
    async with running_controller(kubeconfig_path):
        await kube.create(MODEL_DEPLOYMENTS, deployment("lq", ns, entrance.role()), ns)

        async def reported() -> dict[str, Any] | None:
            md = await get_md(kube, ns, "lq")
            quota = condition(md, "QuotaReserved") if md else None
            return quota if quota and quota.get("reason") == "LocalQueueConflict" else None

        quota = await eventually(reported, timeout=60, what="QuotaReserved LocalQueueConflict")
        assert other.name in quota["message"] and entrance.name in quota["message"]

        async def event() -> list[dict[str, Any]]:
            items, _ = await kube.list(EVENTS, ns)
            return [e for e in items if e.get("reason") == "LocalQueueConflict"]

        (found,) = await eventually(event, what="a LocalQueueConflict event")
        assert found["involvedObject"]["name"] == "lq" and other.name in found["message"]
        assert await pods_of(kube, ns, "lq") == []
        stored = await kube.get(LOCAL_QUEUES, entrance.name, ns)
        assert stored is not None and stored["spec"]["clusterQueue"] == other.name
        assert labels.MANAGED_BY not in (stored["metadata"].get("labels") or {})
        await tear_down(kube, ns, "lq")


async def test_a_matching_local_queue_is_not_taken_over_and_a_deleted_one_is_recreated(
    kube: Kube, kubeconfig_path: Path, cluster: Cluster
) -> None:
    """A pre-created LocalQueue feeding the right ClusterQueue is used as it is (nothing of the
    controller's is written into it); one deleted later is created again on a later pass."""
    ns = await new_namespace(kube)
    entrance = await new_entrance(kube, cluster, gpus=8)
    await kube.create(LOCAL_QUEUES, _local_queue(ns, entrance.name, entrance.name), ns)
    async with running_controller(kubeconfig_path):
        await deploy_serving(kube, deployment("lq", ns, entrance.role()), 1)
        stored = await kube.get(LOCAL_QUEUES, entrance.name, ns)
        assert stored is not None
        assert labels.MANAGED_BY not in (stored["metadata"].get("labels") or {})
        await kube.delete(LOCAL_QUEUES, entrance.name, ns)
        await eventually(lambda: _absent(kube, ns, entrance.name), what="the LocalQueue deleted")
        # Any later pass looks again: a min-render-version edit (the floor 1 changes nothing)
        # triggers one.
        await kube.merge_patch(
            MODEL_DEPLOYMENTS,
            "lq",
            {"metadata": {"annotations": {labels.MIN_RENDER_VERSION: "1"}}},
            ns,
        )

        async def recreated() -> dict[str, Any] | None:
            return await kube.get(LOCAL_QUEUES, entrance.name, ns)

        queue = await eventually(recreated, timeout=60, what="the LocalQueue recreated")
        assert queue["spec"]["clusterQueue"] == entrance.name
        assert queue["metadata"]["labels"][labels.MANAGED_BY] == labels.MANAGED_BY_VALUE
        await tear_down(kube, ns, "lq")


async def _absent(kube: Kube, ns: str, name: str) -> bool:
    return await kube.get(LOCAL_QUEUES, name, ns) is None


# ---- parking -----------------------------------------------------------------------------------

#: The parking window the test's controller runs with (the Setting, shortened).
PARK_AFTER = 12


def _check_entry(workload: dict[str, Any]) -> dict[str, Any] | None:
    entries = (workload.get("status") or {}).get("admissionChecks") or ()
    return next((e for e in entries if e.get("name") == "gpustack-model-deployment-joint"), None)


def _inactive(workloads: list[dict[str, Any]]) -> list[str]:
    return sorted(w["metadata"]["name"] for w in workloads if w["spec"].get("active") is False)


async def test_parking_counts_from_the_quota_reservation_and_deactivates_the_whole_set(
    kube: Kube, kubeconfig_path: Path, cluster: Cluster
) -> None:
    """Kueue adds the joint check's entry as Pending as soon as a Workload maps to its
    ClusterQueue, before quota: a pair that waited longer than the window for quota is not
    parked the moment one replica gets quota, only a window after that; then every Workload
    of the pair (the one holding quota and the one asking for it) is deactivated, and status
    names them."""
    system = await new_namespace(kube, "sys")
    settings = {"model-deployment-park-after-seconds": str(PARK_AFTER)}
    await kube.create(
        CONFIGMAPS,
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "gpustack-settings"}}
        | {"data": settings},
        system,
    )
    ns = await new_namespace(kube)
    entrance = await new_entrance(kube, cluster, gpus=1)
    hold_queue(cluster, entrance.name)
    body = deployment("park", ns, entrance.role("a"), entrance.role("b"))
    async with running_controller(kubeconfig_path, namespace=system):
        await kube.create(MODEL_DEPLOYMENTS, body, ns)

        async def mapped() -> list[dict[str, Any]] | None:
            wls = await workloads_in(kube, ns)
            entries = [_check_entry(w) for w in wls]
            return (
                wls
                if len(wls) == 2 and all(e and e["state"] == "Pending" for e in entries)
                else None
            )

        await eventually(mapped, timeout=60, what="2 Workloads with a Pending check entry")
        await asyncio.sleep(PARK_AFTER + 3)  # the entries are older than the window now
        hold_queue(cluster, entrance.name, hold=False)

        async def one_reserved() -> bool:
            wls = await workloads_in(kube, ns)
            return sum(1 for w in wls if has_condition(w, "QuotaReserved")) == 1

        await eventually(one_reserved, timeout=60, what="one replica reserving the 1 GPU")

        async def none_parked() -> bool:
            return _inactive(await workloads_in(kube, ns)) == []

        await steady(none_parked, seconds=PARK_AFTER - 4, what="not parked on getting quota")

        async def parked() -> list[str] | None:
            names = _inactive(await workloads_in(kube, ns))
            return names if len(names) == 2 else None

        names = await eventually(parked, timeout=60, what="both Workloads deactivated")

        async def reported() -> dict[str, Any] | None:
            md = await get_md(kube, ns, "park")
            quota = condition(md, "QuotaReserved") if md else None
            return quota if quota and quota.get("reason") == "Parked" else None

        # The pass reads Workloads from the controller's cache, which may show one of the two
        # deactivations before the other: the status names both once both events arrived.
        async def names_both() -> dict[str, Any] | None:
            quota = await reported()
            message = str((quota or {}).get("message") or "")
            return quota if all(name in message for name in names) else None

        await eventually(reported, timeout=30, what="QuotaReserved Parked")
        quota = await eventually(names_both, timeout=30, what="Parked naming both Workloads")
        assert quota["status"] == "False"
        await tear_down(kube, ns, "park")


# ---- render version ----------------------------------------------------------------------------

RANK_LABEL_KEY = "kueue.x-k8s.io/pod-group-pod-index-label"


def _versions(pods: list[dict[str, Any]]) -> dict[str, str]:
    return {
        p["metadata"]["uid"]: p["metadata"]["annotations"][labels.RENDER_VERSION]
        for p in live(pods)
    }


async def test_a_render_version_raise_keeps_running_replicas_and_rolls_them_on_request(
    kube: Kube, kubeconfig_path: Path, cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Seed, "Render version and upgrades": replicas built by the previous baseline (1) stay
    in place under the new one (2, which names the TAS rank label on members of size > 1); new
    replicas carry the new baseline; min-render-version 2 rolls the old ones."""
    ns = await new_namespace(kube)
    entrance = await new_entrance(kube, cluster, gpus=8)
    body = deployment("rv", ns, entrance.role(replicas=2, size=2))
    monkeypatch.setattr(renderer, "CURRENT_RENDER_VERSION", 1)
    async with running_controller(kubeconfig_path):
        old = await deploy_serving(kube, body, 4)
    assert set(_versions(old).values()) == {"1"}
    monkeypatch.undo()
    async with running_controller(kubeconfig_path):

        async def kept() -> bool:
            return _versions(await pods_of(kube, ns, "rv")) == _versions(old)

        await steady(kept, seconds=4, what="the version-1 replicas stay in place")
        await edit_role(kube, ns, "rv", replicas=3)
        grown = await eventually(lambda: serving(kube, ns, "rv", 6), timeout=LONG, what="6")
        new = members(grown, 2)
        assert {_versions(new)[uid(p) or ""] for p in new} == {"2"}
        assert all(p["metadata"]["annotations"][RANK_LABEL_KEY] == labels.MEMBER_INDEX for p in new)
        assert {k: v for k, v in _versions(grown).items() if k in _versions(old)} == _versions(old)
        await kube.merge_patch(
            MODEL_DEPLOYMENTS,
            "rv",
            {"metadata": {"annotations": {labels.MIN_RENDER_VERSION: "2"}}},
            ns,
        )

        async def rolled() -> list[dict[str, Any]] | None:
            pods = await serving(kube, ns, "rv", 6)
            return pods if pods and set(_versions(pods).values()) == {"2"} else None

        await eventually(rolled, timeout=3 * LONG, what="every replica at render version 2")
        await tear_down(kube, ns, "rv")


async def test_kueue_eviction_holds_the_pods_until_the_controller_deletes_the_stranded_workload(
    kube: Kube, kubeconfig_path: Path, cluster: Cluster
) -> None:
    """The eviction path the planner's property simulation models (tests/property/
    test_rollout_machine.py, ``Cluster.preempt``): Kueue evicts the Workload and deletes the
    group's Pods but keeps its finalizer on them and keeps the Workload; nothing is released
    while no controller runs. The controller frees the slot by deleting the stranded Workload,
    and the replica comes back once quota frees."""
    ns = await new_namespace(kube)
    entrance = await new_entrance(kube, cluster, gpus=2)
    async with running_controller(kubeconfig_path):
        pods = await deploy_serving(kube, deployment("prey", ns, entrance.role(replicas=2)), 2)
    old = by_ordinal(pods)
    await kube.create(PODS, preemptor_pod(ns, "urgent", queue=entrance.name), ns)

    async def stranded() -> tuple[dict[str, Any], dict[str, Any]] | None:
        for pod in await pods_of(kube, ns, "prey"):
            meta = pod["metadata"]
            if meta.get("deletionTimestamp") and KUEUE_POD_FINALIZER in meta.get("finalizers", ()):
                w = await workload_of(kube, pod)
                if w is not None and has_condition(w, "Evicted") and not admitted(w):
                    return pod, w
        return None

    victim, workload = await eventually(stranded, timeout=LONG, what="an evicted, held replica")

    async def held() -> bool:
        pod = await kube.get(PODS, victim["metadata"]["name"], ns)
        w = await workload_named(kube, ns, workload["metadata"]["name"])
        return pod is not None and w is not None and uid(w) == uid(workload)

    await steady(held, seconds=5, what="Kueue releases nothing while the Workload stands")
    async with running_controller(kubeconfig_path):

        async def freed() -> bool:
            w = await workload_named(kube, ns, workload["metadata"]["name"])
            gone = await kube.get(PODS, victim["metadata"]["name"], ns) is None
            return gone and (w is None or uid(w) != uid(workload))

        await eventually(freed, timeout=LONG, what="the stranded Workload deleted, the Pod gone")
        await kube.delete(PODS, "urgent", ns)
        await kube.delete(KUEUE_WORKLOADS, "urgent", ns)
        back = await eventually(lambda: serving(kube, ns, "prey", 2), timeout=LONG, what="back")
        kept = [o for o in (0, 1) if uid(by_ordinal(back)[o]) == uid(old[o])]
        assert len(kept) == 1, "the sibling was touched, or the victim kept"
        await tear_down(kube, ns, "prey")
