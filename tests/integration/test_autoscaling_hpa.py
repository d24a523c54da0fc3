"""The real HPA scales a role, and a prefill/decode ratio group, through their
ModelDeploymentScalers (D27, docs/autoscaling.md), on the simulated cluster with the autoscaling
option: KWOK emulates the Pods' CPU, metrics-server serves it, the HPA of
kube-controller-manager writes the scaler's ``/scale``, the controller (in this event loop)
creates and removes the replicas, the real Kueue admits them (the joint admission check per
unit), and the scaler's status says what waits for quota.

Each test raises the emulated CPU of the target's leader Pods far above the HPA's target, sees
the count go up and Kueue admit the new groups, then lowers it and sees the count go back down.
Timings on this machine are printed (metrics take ~30 s to appear for a new Pod; the HPA syncs
every 5 s and waits a 15 s stabilization window before a scale-down).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from gpustack_controller.kube import MODEL_DEPLOYMENTS, SCALERS, Kube, Resource
from gpustack_render.core import labels

from .autoscaling import cpu_hpa
from .cluster import Cluster
from .controller_fixtures import (
    admitted,
    condition,
    deployment,
    eventually,
    group_of,
    live,
    new_entrance,
    new_namespace,
    pods_of,
    running_controller,
    running_ready,
    seats_of,
    serving,
    tear_down,
    workloads_in,
)

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

HPAS = Resource("autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler")
#: The HPA aims at 10% of a Pod's CPU request; the hot Pod uses 50% (4 of its 8 cores), so the
#: HPA asks for five times the Pods it sees, capped by its maxReplicas: one step up.
TARGET_UTILIZATION = 10
HOT = "4"
COOL = "10m"
SCALE_WAIT = 180.0


@pytest.fixture
async def kube(autoscaling_cluster: Cluster) -> AsyncIterator[Kube]:
    client = await Kube.connect(kubeconfig=str(autoscaling_cluster.control_plane.kubeconfig))
    try:
        yield client
    finally:
        await client.close()


def _hpa(namespace: str, scaler: str, max_replicas: int) -> dict[str, Any]:
    target = {"apiVersion": SCALERS.api_version, "kind": SCALERS.kind, "name": scaler}
    return cpu_hpa(
        namespace, scaler, target, max_replicas=max_replicas, utilization=TARGET_UTILIZATION
    )


async def _scaler(kube: Kube, namespace: str, name: str) -> dict[str, Any] | None:
    return await kube.get(SCALERS, name, namespace)


def _heat(cluster: Cluster, namespace: str, pods: list[dict[str, Any]], cpu: str) -> None:
    for pod in pods:
        cluster.set_pod_usage(namespace, pod["metadata"]["name"], cpu=cpu, memory="100Mi")


async def _hpa_scales(kube: Kube, namespace: str, scaler: str, count: int, *, what: str) -> None:
    """Wait until the HPA wrote ``count`` into the scaler; on a timeout, say what the HPA saw."""

    async def scaled() -> dict[str, Any] | None:
        obj = await _scaler(kube, namespace, scaler)
        return obj if obj and obj["spec"]["replicas"] == count else None

    try:
        await eventually(scaled, timeout=SCALE_WAIT, what=what)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{await _story(kube, namespace, scaler)}") from None


async def _story(kube: Kube, namespace: str, name: str) -> str:
    hpa = await kube.get(HPAS, name, namespace)
    scaler = await _scaler(kube, namespace, name)
    return f"HPA status: {(hpa or {}).get('status')}\nscaler: {scaler}"


def _condition(obj: dict[str, Any] | None, type_: str) -> dict[str, Any]:
    return condition(obj or {}, type_) or {}


async def test_the_hpa_scales_a_role_through_its_scaler_and_kueue_admits_what_fits(
    autoscaling_cluster: Cluster, kube: Kube
) -> None:
    """One External role; the ClusterQueue holds 3 GPUs (one per replica). The HPA takes the
    role from 1 to its cap, 4: Kueue admits three, the fourth waits, and the scaler's status
    names the ClusterQueue and the GPUs it lacks while counting only ready replicas. Cooled down,
    the HPA takes it back to 1: every replica above ordinal 0 leaves, the queued one with them,
    and the first replica is never touched."""
    cluster = autoscaling_cluster
    started = time.monotonic()
    ns = await new_namespace(kube, "hpa-role")
    entrance = await new_entrance(kube, cluster, gpus=3)
    scaler = "chat-server"
    md = deployment(
        "chat",
        ns,
        entrance.role(replicas=1, scaling={"mode": "External", "minReplicas": 1, "maxReplicas": 4}),
    )
    async with running_controller(cluster.control_plane.kubeconfig):
        await kube.create(MODEL_DEPLOYMENTS, md, ns)

        async def first_runs() -> list[dict[str, Any]] | None:
            pods = live(await pods_of(kube, ns, "chat"))
            return pods if len(pods) == 1 and running_ready(pods[0]) else None

        first = await eventually(first_runs, timeout=60, what="the first replica Running")
        obj = await eventually(
            lambda: _scaler(kube, ns, scaler), timeout=30, what="the scaler created"
        )
        assert obj["spec"]["replicas"] == 1
        assert obj["metadata"]["ownerReferences"][0]["name"] == "chat"
        first_uid = first[0]["metadata"]["uid"]
        _heat(cluster, ns, first, HOT)
        await kube.create(HPAS, _hpa(ns, scaler, 4), ns)

        # Up: the HPA writes 4 through /scale; the controller creates three more replicas.

        await _hpa_scales(kube, ns, scaler, 4, what="the HPA up to 4")
        up_at = time.monotonic() - started

        # Kueue admits three groups (3 GPUs); the fourth waits for quota, and status says why.
        async def three_admitted_one_waiting() -> dict[str, Any] | None:
            obj = await _scaler(kube, ns, scaler)
            status = (obj or {}).get("status") or {}
            wanted = {"desired": 4, "admitted": 3, "quotaPending": 1, "ready": 3, "replicas": 3}
            return obj if all(status.get(k) == v for k, v in wanted.items()) else None

        obj = await eventually(
            three_admitted_one_waiting, timeout=90, what="3 admitted, 1 waiting for quota"
        )
        workloads = {w["metadata"]["name"]: w for w in await workloads_in(kube, ns)}
        pods = live(await pods_of(kube, ns, "chat"))
        by_ordinal = {int(p["metadata"]["labels"][labels.POD_ORDINAL]): p for p in pods}
        assert sorted(by_ordinal) == [0, 1, 2, 3]
        # Kueue admits the three new groups in its own order: any one of them may be the one
        # left waiting, never the first replica.
        waiting = [o for o in range(4) if not admitted(workloads[group_of(by_ordinal[o])])]
        assert len(waiting) == 1 and waiting[0] != 0, waiting
        quota = _condition(obj, "QuotaReserved")
        assert (quota["status"], quota["reason"]) == ("False", "QuotaPending")
        held_back = f"ClusterQueue {entrance.name} cannot hold 1 replica(s)"
        assert f"{held_back} (server {waiting[0]})" in quota["message"], quota["message"]
        assert "it lacks nvidia.com/gpu in flavor" in quota["message"]
        assert obj["status"]["selector"].endswith(
            "app.kubernetes.io/component=server,modeldeployment.gpustack.ai/member-index=0"
        )
        assert by_ordinal[0]["metadata"]["uid"] == first_uid  # the first replica untouched
        md_obj = await kube.get(MODEL_DEPLOYMENTS, "chat", ns)
        assert md_obj is not None
        (role_status,) = md_obj["status"]["roles"]
        assert (role_status["desired"], role_status["quotaPending"]) == (4, 1)
        assert role_status["scaling"] == {"source": "Scaler", "scaler": scaler}
        assert md_obj["spec"]["roles"][0]["replicas"] == 1  # the deployment's own count stays
        deployment_quota = _condition(md_obj, "QuotaReserved")
        assert (
            f"ClusterQueue {entrance.name} cannot hold 1 replica(s)" in deployment_quota["message"]
        )

        # Down: cool the hot Pod; once the new Pods' metrics exist (a missing one counts as busy
        # on a scale-down) and the stabilization window passed, the HPA asks for 1.
        _heat(cluster, ns, first, COOL)
        await _hpa_scales(kube, ns, scaler, 1, what="the HPA down to 1")
        down_at = time.monotonic() - started

        async def one_left() -> list[dict[str, Any]] | None:
            pods = live(await pods_of(kube, ns, "chat"))
            return pods if len(pods) == 1 else None

        (left,) = await eventually(one_left, timeout=60, what="three replicas removed")
        assert left["metadata"]["uid"] == first_uid
        obj = await eventually(
            lambda: _settled(kube, ns, scaler, quota_pending=0, desired=1),
            timeout=60,
            what="the scaler settled at 1",
        )
        assert _condition(obj, "QuotaReserved")["status"] == "True"
        print(f"role: HPA up at {up_at:.0f}s, down at {down_at:.0f}s")
        await kube.delete(HPAS, scaler, ns)
        await tear_down(kube, ns, "chat")


async def _settled(
    kube: Kube, namespace: str, name: str, *, quota_pending: int, desired: int
) -> dict[str, Any] | None:
    obj = await _scaler(kube, namespace, name)
    status = (obj or {}).get("status") or {}
    if status.get("desired") == desired and status.get("quotaPending") == quota_pending:
        return obj
    return None


async def test_the_hpa_scales_a_prefill_decode_group_by_whole_units(
    autoscaling_cluster: Cluster, kube: Kube
) -> None:
    """A 1 prefill : 2 decode group. The HPA (on the prefill leaders, one Pod per unit) takes it
    from 1 unit to 2: one prefill and two decode replicas appear together, Kueue admits the new
    unit (the joint check judges it with the base unit), and unit 0's Pods are untouched. Cooled
    down, it goes back to 1 unit: exactly the second unit's Pods leave."""
    cluster = autoscaling_cluster
    started = time.monotonic()
    ns = await new_namespace(kube, "hpa-pd")
    entrance = await new_entrance(kube, cluster, gpus=16)
    scaler = "pd-pd"
    md = deployment(
        "pd",
        ns,
        entrance.role("prefill", kind="Prefill", replicas=1),
        entrance.role("decode", kind="Decode", replicas=2),
    )
    md["spec"]["scalingGroups"] = [
        {
            "name": "pd",
            "roles": [{"name": "prefill", "perUnit": 1}, {"name": "decode", "perUnit": 2}],
            "minUnits": 1,
            "maxUnits": 3,
        }
    ]
    async with running_controller(cluster.control_plane.kubeconfig):
        await kube.create(MODEL_DEPLOYMENTS, md, ns)

        unit0 = await eventually(
            lambda: serving(kube, ns, "pd", 3), timeout=90, what="unit 0 serving"
        )
        before = seats_of(unit0)
        assert sorted(before) == [("decode", 0), ("decode", 1), ("prefill", 0)]
        obj = await eventually(lambda: _scaler(kube, ns, scaler), timeout=30, what="the scaler")
        assert obj["spec"]["replicas"] == 1 and obj["spec"]["scalingGroup"] == "pd"
        prefill = [p for p in unit0 if p["metadata"]["labels"][labels.COMPONENT] == "prefill"]
        _heat(cluster, ns, prefill, HOT)
        await kube.create(HPAS, _hpa(ns, scaler, 2), ns)

        await _hpa_scales(kube, ns, scaler, 2, what="the HPA up to 2")
        up_at = time.monotonic() - started
        both = await eventually(
            lambda: serving(kube, ns, "pd", 6), timeout=120, what="two units serving"
        )
        after = seats_of(both)
        assert sorted(after) == [
            ("decode", 0),
            ("decode", 1),
            ("decode", 2),
            ("decode", 3),
            ("prefill", 0),
            ("prefill", 1),
        ]
        assert {k: after[k] for k in before} == before  # unit 0 untouched
        obj = await eventually(
            lambda: _settled(kube, ns, scaler, quota_pending=0, desired=2),
            timeout=30,
            what="the scaler's status at 2 units",
        )
        await eventually(
            lambda: _ready_units(kube, ns, scaler, 2), timeout=30, what="2 ready units"
        )

        _heat(cluster, ns, prefill, COOL)
        await _hpa_scales(kube, ns, scaler, 1, what="the HPA down to 1")
        down_at = time.monotonic() - started

        async def unit0_only() -> list[dict[str, Any]] | None:
            pods = live(await pods_of(kube, ns, "pd"))
            return pods if len(pods) == 3 else None

        left = await eventually(unit0_only, timeout=60, what="unit 1 removed")
        assert seats_of(left) == before  # exactly unit 1 left; unit 0 never touched
        print(f"group: HPA up at {up_at:.0f}s, down at {down_at:.0f}s")
        await kube.delete(HPAS, scaler, ns)
        await tear_down(kube, ns, "pd")


async def _ready_units(kube: Kube, namespace: str, name: str, n: int) -> bool:
    obj = await _scaler(kube, namespace, name)
    status = (obj or {}).get("status") or {}
    return status.get("replicas") == n and status.get("admitted") == n
