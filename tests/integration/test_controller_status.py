"""Status, events, the joint admission check and leader election against the real API server
(controller.md §9, §13–§16, D24)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gpustack_controller.controller import Controller, Options
from gpustack_controller.kube import (
    ADMISSION_CHECKS,
    BACKENDS,
    BINDINGS,
    EVENTS,
    LEASES,
    MODEL_DEPLOYMENTS,
    PODS,
    POOLS,
    WORKLOADS,
    ApiError,
    Kube,
)

from .controller_fixtures import (
    NAMESPACES,
    PlayKueue,
    condition,
    deployment,
    ensure_instance_type,
    eventually,
    get_md,
    new_namespace,
    pods_of,
    role,
    running_controller,
    seat,
    unique,
)

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


@pytest.fixture
async def kube(kubeconfig_path: Path) -> AsyncIterator[Kube]:
    client = await Kube.connect(kubeconfig=str(kubeconfig_path))
    try:
        await ensure_instance_type(client)
        yield client
    finally:
        await client.close()


async def _ready(kube: Kube, ns: str, name: str) -> dict[str, Any] | None:
    md = await get_md(kube, ns, name)
    if md is None or (md.get("status") or {}).get("phase") != "Ready":
        return None
    return md


async def test_status_conditions_phase_and_summary_of_a_ready_deployment(
    kube: Kube, kubeconfig_path: Path
) -> None:
    ns = await new_namespace(kube)
    async with running_controller(kubeconfig_path), PlayKueue(kube, ns) as kueue:
        await kube.create(MODEL_DEPLOYMENTS, deployment("ok", ns, role(replicas=2)), ns)
        md = await eventually(lambda: _ready(kube, ns, "ok"), what="phase Ready")
        status = md["status"]
        got = {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}
        assert got == {
            "DomainRegistered": ("True", "NotApplicable"),
            "QuotaReserved": ("True", "Reserved"),
            "ReplicasUpToDate": ("True", "UpToDate"),
            "RoleKindsReady": ("True", "AllKindsReady"),
            "CacheAttached": ("True", "NotApplicable"),
            "KVEventsPublishing": ("True", "NotApplicable"),
            "RouterReady": ("True", "NotApplicable"),
        }
        generation = md["metadata"]["generation"]
        assert all(c["observedGeneration"] == generation for c in status["conditions"])
        assert status["phaseMessage"] == "" or "phaseMessage" not in status
        assert status["roleSummary"] == "2S"
        assert status["endpoint"] == f"http://ok.{ns}.svc:8000"
        (rs,) = status["roles"]
        assert (rs["name"], rs["kind"], rs["desired"], rs["ready"], rs["quotaReserved"]) == (
            "server",
            "Server",
            2,
            2,
            2,
        )
        assert rs["assignedFlavors"] == ["default-flavor"]
        assert "replacing" not in rs
        reserved_since = condition(md, "QuotaReserved")
        assert reserved_since is not None

        # A pass that changes nothing keeps every lastTransitionTime (a floor of 1 rolls
        # nothing; it is a currency input, so it enqueues a pass).
        await kube.merge_patch(
            MODEL_DEPLOYMENTS,
            "ok",
            {"metadata": {"annotations": {"modeldeployment.gpustack.ai/min-render-version": "1"}}},
            ns,
        )
        await asyncio.sleep(1.5)
        again = await get_md(kube, ns, "ok")
        assert again is not None
        assert condition(again, "QuotaReserved") == reserved_since

        # A departing replica is recorded on the deployment (ReplicaLeaving), once, counted.
        victim = (await pods_of(kube, ns, "ok"))[0]
        await kube.delete(PODS, victim["metadata"]["name"], ns)

        async def leaving() -> list[dict[str, Any]]:
            events, _ = await kube.list(EVENTS, ns)
            return [
                e
                for e in events
                if e.get("reason") == "ReplicaLeaving"
                and victim["metadata"]["name"] in e.get("message", "")
            ]

        (event,) = await eventually(leaving, what="a ReplicaLeaving event")
        assert event["type"] == "Warning"
        assert event["involvedObject"]["kind"] == "ModelDeployment"
        assert event["involvedObject"]["name"] == "ok"
        assert "30 s" in event["message"]
        await eventually(lambda: _ready(kube, ns, "ok"), what="Ready again")
        del kueue


async def test_the_joint_check_holds_every_group_until_the_whole_set_reserved_quota(
    kube: Kube, kubeconfig_path: Path
) -> None:
    ns = await new_namespace(kube)
    body = deployment("pd", ns, role("prefill", kind="Prefill"), role("decode", kind="Decode"))
    async with running_controller(kubeconfig_path), PlayKueue(kube, ns, auto_admit=False) as kueue:
        check = await kube.get(ADMISSION_CHECKS, "gpustack-model-deployment-joint")
        assert check is not None
        assert check["spec"]["controllerName"] == "worker.gpustack.ai/model-deployment-joint"
        active = {c["type"]: c for c in check["status"]["conditions"]}["Active"]
        assert (active["status"], active["reason"]) == ("True", "Ready")

        await kube.create(MODEL_DEPLOYMENTS, body, ns)
        workloads = await eventually(
            lambda: _n(kueue.workloads(), 2), what="one Workload per replica"
        )
        by_role = {w["spec"]["podSets"][0]["name"]: w["metadata"]["name"] for w in workloads}

        async def state(name: str) -> tuple[str, str] | None:
            w = await kube.get(WORKLOADS, name, ns)
            for entry in ((w or {}).get("status") or {}).get("admissionChecks") or ():
                if entry["name"] == "gpustack-model-deployment-joint":
                    return entry["state"], entry.get("message", "")
            return None

        await kueue.reserve(by_role["prefill"], check_state="Pending")

        async def pending_on_decode() -> tuple[str, str] | None:
            got = await state(by_role["prefill"])
            return got if got and got[0] == "Pending" and "decode" in got[1] else None

        await eventually(pending_on_decode, what="Pending naming the decode role")
        w = await kube.get(WORKLOADS, by_role["prefill"], ns)
        assert w is not None
        managers = {m["manager"] for m in w["metadata"]["managedFields"]}
        assert "worker.gpustack.ai/model-deployment-joint" in managers

        await kueue.reserve(by_role["decode"], check_state="Pending")
        for name in by_role.values():

            async def ready(name: str = name) -> bool:
                got = await state(name)
                return got is not None and got[0] == "Ready"

            await eventually(ready, what=f"{name} Ready")


async def _n(read: Any, n: int) -> Any:
    items = await read
    return items if len(items) == n else None


async def test_leader_election_one_controller_at_a_time(kube: Kube, kubeconfig_path: Path) -> None:
    system = unique("system")
    await kube.create(
        NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": system}}
    )
    ns = await new_namespace(kube)
    clients = [await Kube.connect(kubeconfig=str(kubeconfig_path)) for _ in range(2)]
    options = [
        Options(
            system_namespace=system, leader_election=True, identity=f"c{i}", admission_check=False
        )
        for i in range(2)
    ]
    first = Controller(clients[0], options[0])
    second = Controller(clients[1], options[1])
    try:
        await asyncio.wait_for(first.start(), 30)
        lease = await kube.get(LEASES, "gpustack-controller", system)
        assert lease is not None and lease["spec"]["holderIdentity"] == "c0"
        waiting = asyncio.create_task(second.start())
        await asyncio.sleep(2.5)
        assert not waiting.done(), "a second controller must wait for the lease"
        await kube.create(MODEL_DEPLOYMENTS, deployment("led", ns, role(replicas=1)), ns)
        await eventually(lambda: _n(pods_of(kube, ns, "led"), 1), what="the leader's Pod")
        await first.stop()
        await asyncio.wait_for(waiting, 30)
        lease = await kube.get(LEASES, "gpustack-controller", system)
        assert lease is not None and lease["spec"]["holderIdentity"] == "c1"
        assert lease["spec"]["leaseTransitions"] >= 1
        # The new leader reconciles: a scale-up reaches it.
        await kube.merge_patch(
            MODEL_DEPLOYMENTS, "led", {"spec": {"roles": [role(replicas=2)]}}, ns
        )
        pods = await eventually(lambda: _n(pods_of(kube, ns, "led"), 2), what="2 Pods")
        assert sorted(seat(p)[1] for p in pods) == [0, 1]
    finally:
        for controller in (first, second):
            with contextlib.suppress(ApiError):
                await controller.stop()
        for client in clients:
            await client.close()


async def test_the_binding_claim_and_domain_registration(kube: Kube, kubeconfig_path: Path) -> None:
    ns = await new_namespace(kube)
    pool, backend = unique("pool"), unique("backend")
    await kube.create(
        BACKENDS,
        {
            "apiVersion": "worker.gpustack.ai/v1",
            "kind": "KVCacheBackend",
            "metadata": {"name": backend},
            "spec": {"transport": {"protocol": "TCP"}},
        },
    )
    await kube.create(
        POOLS,
        {
            "apiVersion": "worker.gpustack.ai/v1",
            "kind": "KVCachePool",
            "metadata": {"name": pool},
            "spec": {"backends": [backend]},
        },
    )
    await kube.merge_patch(
        POOLS,
        pool,
        {
            "status": {
                "clientEndpoint": "master.gpustack-system.svc:50051",
                "conditions": [
                    {
                        "type": "QuotaLedgerAvailable",
                        "status": "True",
                        "reason": "Available",
                        "message": "",
                        "lastTransitionTime": "2026-01-01T00:00:00Z",
                    }
                ],
            }
        },
        subresource="status",
    )
    await kube.create(
        BINDINGS,
        {
            "apiVersion": "worker.gpustack.ai/v1",
            "kind": "KVCachePoolBinding",
            "metadata": {"name": "cache", "namespace": ns},
            "spec": {"poolRef": {"name": pool}, "domain": {"blockSize": 16, "dtype": "bfloat16"}},
            "status": {},
        },
        ns,
    )
    body = deployment("cached", ns, role(replicas=1))
    body["spec"]["kvCache"] = {"poolRef": {"name": "cache"}}
    async with running_controller(kubeconfig_path):
        await kube.create(MODEL_DEPLOYMENTS, body, ns)

        async def registered(reason: str) -> dict[str, Any] | None:
            md = await get_md(kube, ns, "cached")
            cond = condition(md, "DomainRegistered") if md else None
            return md if cond and cond["reason"] == reason else None

        # No phase yet: BindingNotReady, and the claim is already held.
        await eventually(lambda: registered("BindingNotReady"), what="BindingNotReady")
        binding = await kube.get(BINDINGS, "cache", ns)
        assert binding is not None
        assert binding["status"]["usedBy"] == [
            {"kind": "ModelDeployment", "namespace": "", "name": "cached"}
        ]
        await kube.merge_patch(
            BINDINGS,
            "cache",
            {
                "status": {
                    "phase": "Ready",
                    "conditions": [
                        {
                            "type": "QuotaGranted",
                            "status": "True",
                            "reason": "Granted",
                            "message": "",
                            "lastTransitionTime": "2026-01-01T00:00:00Z",
                        }
                    ],
                }
            },
            ns,
            subresource="status",
        )
        md = await eventually(lambda: registered("Registered"), what="Registered")
        assert md["status"]["kvCache"] == {
            "binding": "cache",
            "pool": pool,
            "domain": {"name": "default", "blockSize": 16, "dtype": "bfloat16"},
        }
        # The replica was created without a store client; the resolved connection changes its
        # hash, so it is outdated, and waits for admission before it is rolled.
        pods = await pods_of(kube, ns, "cached")
        assert (
            pods and "kvcache.gpustack.ai/client-config" not in pods[0]["metadata"]["annotations"]
        )
        rollout = await eventually(
            lambda: _cond(get_md(kube, ns, "cached"), "ReplicasUpToDate", "RolloutInProgress"),
            what="RolloutInProgress",
        )
        assert rollout["status"] == "False"
        await kube.delete(MODEL_DEPLOYMENTS, "cached", ns)

        async def released() -> bool:
            b = await kube.get(BINDINGS, "cache", ns)
            gone = await get_md(kube, ns, "cached") is None
            return gone and b is not None and not (b.get("status") or {}).get("usedBy")

        await eventually(released, what="the claim released at teardown")


async def _cond(read: Any, type_: str, reason: str) -> dict[str, Any] | None:
    md = await read
    cond = condition(md, type_) if md else None
    return cond if cond and cond["reason"] == reason else None
