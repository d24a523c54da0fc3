"""Status, events, the joint admission check and leader election on the simulated cluster, with
the real Kueue admitting, the scheduler binding and KWOK running the Pods
(docs/contract/controller.md §9, §13–§16, D24)."""

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
    INSTANCE_TYPES,
    LEASES,
    MODEL_DEPLOYMENTS,
    PODS,
    POOLS,
    ApiError,
    Kube,
)

from .cluster import Cluster
from .controller_fixtures import (
    KUEUE_WORKLOADS,
    NAMESPACES,
    admitted,
    condition,
    deployment,
    deployment_gone,
    ensure_instance_type,
    eventually,
    get_md,
    group_of,
    has_condition,
    hold_queue,
    live,
    new_entrance,
    new_namespace,
    pods_of,
    role,
    running_controller,
    seat,
    serving,
    steady,
    tear_down,
    unique,
    workload_of,
    workloads_in,
)
from .rollout_fixtures import edit_role

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
    kube: Kube, kubeconfig_path: Path, cluster: Cluster
) -> None:
    ns = await new_namespace(kube)
    entrance = await new_entrance(kube, cluster, gpus=8)
    async with running_controller(kubeconfig_path):
        await kube.create(MODEL_DEPLOYMENTS, deployment("ok", ns, entrance.role(replicas=2)), ns)
        md = await eventually(lambda: _ready(kube, ns, "ok"), timeout=60, what="phase Ready")
        # Ready is what Kueue and the Pods say: both groups admitted, both Pods Running+Ready.
        assert await serving(kube, ns, "ok", 2)
        status = md["status"]
        got = {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}
        assert got == {
            "Ready": ("True", "Ready"),
            "Reconciling": ("False", "Ready"),
            "Stalled": ("False", "Ready"),
            "DomainRegistered": ("True", "NotApplicable"),
            "QuotaReserved": ("True", "Reserved"),
            "ReplicasUpToDate": ("True", "UpToDate"),
            "RoleKindsReady": ("True", "AllKindsReady"),
            "CacheAttached": ("True", "NotApplicable"),
            "KVEventsPublishing": ("True", "NotApplicable"),
            "RouterReady": ("True", "NotApplicable"),
            "WeightsReady": ("True", "NotApplicable"),
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
        # The flavor the real Kueue assigned (the ClusterQueue's only one).
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

        # A deleted Pod of a deployment without a KV cache is routine: the replica comes back
        # through Kueue (admitted again, Running, Ready) and no departure event is recorded,
        # since there are no cached blocks and no KV lease to lose (issue 37; the deployment
        # on a pool gets it: test_the_binding_claim_and_domain_registration).
        victim = (await pods_of(kube, ns, "ok"))[0]
        await kube.delete(PODS, victim["metadata"]["name"], ns)

        async def replaced() -> bool:
            pods = await serving(kube, ns, "ok", 2)
            uids = {p["metadata"]["uid"] for p in pods or ()}
            return bool(pods) and victim["metadata"]["uid"] not in uids

        await eventually(replaced, timeout=60, what="the deleted replica back, 2 Pods serving")
        await eventually(lambda: _ready(kube, ns, "ok"), timeout=60, what="Ready again")
        assert await _departures(kube, ns) == []
        await tear_down(kube, ns, "ok")


#: The Warning events a replica's departure may raise (docs/contract/controller.md §16).
DEPARTURES = ("ReplicaEvicted", "ReplicaLeaving", "ReplicaRestarted")


async def _departures(kube: Kube, ns: str, pod: str = "") -> list[dict[str, Any]]:
    """The departure events recorded in ``ns`` (those naming ``pod``, when given)."""
    events, _ = await kube.list(EVENTS, ns)
    return [e for e in events if e.get("reason") in DEPARTURES and pod in e.get("message", "")]


async def _show(cluster: Cluster, ns: str, name: str, when: str) -> None:
    """Print what a user sees (run with ``-s``): ``kubectl get md`` and the status conditions."""
    table = await asyncio.to_thread(cluster.kubectl, "get", "md", name, "-n", ns)
    conditions = await asyncio.to_thread(
        cluster.kubectl,
        "get",
        "md",
        name,
        "-n",
        ns,
        "-o",
        "jsonpath=generation {.metadata.generation}, observedGeneration "
        "{.status.observedGeneration}, phase {.status.phase}: {.status.phaseMessage}{'\\n'}"
        "{range .status.conditions[*]}{.type}={.status} {.reason} (generation "
        "{.observedGeneration}): {.message}{'\\n'}{end}",
    )
    print(f"\n--- {when}\n$ kubectl get md {name} -n {ns}\n{table.stdout}{conditions.stdout}")


async def test_an_edit_that_cannot_render_is_stalled_in_status_and_keeps_what_serves(
    kube: Kube, kubeconfig_path: Path, cluster: Cluster
) -> None:
    """Issue 37: an edit naming an InstanceType whose status is not filled in yet cannot be
    rendered. The status of that generation says so (Stalled, RenderFailed, naming the type),
    the replicas already running keep serving untouched, and once the type's status is filled
    in the deployment converges onto it."""
    ns = await new_namespace(kube)
    entrance = await new_entrance(kube, cluster, gpus=8)
    fresh = unique("gpustack-nvidia-a10g-fresh")
    async with running_controller(kubeconfig_path):
        await kube.create(MODEL_DEPLOYMENTS, deployment("edit", ns, entrance.role(replicas=2)), ns)
        await eventually(lambda: _ready(kube, ns, "edit"), timeout=60, what="phase Ready")
        before = await eventually(lambda: serving(kube, ns, "edit", 2), what="2 Pods serving")
        uids = {p["metadata"]["uid"] for p in before}
        await _show(cluster, ns, "edit", "Ready, before the edit")

        await kube.create(
            INSTANCE_TYPES,
            {
                "apiVersion": "worker.gpustack.ai/v1",
                "kind": "InstanceType",
                "metadata": {"name": fresh},
                "spec": {"acceleratable": True, "unitResources": {"cpu": "8", "ram": "32Gi"}},
            },
        )
        await edit_role(kube, ns, "edit", instanceType=fresh)
        edited = await get_md(kube, ns, "edit")
        assert edited is not None
        generation = edited["metadata"]["generation"]

        async def reported() -> dict[str, Any] | None:
            md = await get_md(kube, ns, "edit")
            observed = ((md or {}).get("status") or {}).get("observedGeneration")
            return md if observed == generation else None

        try:
            md = await eventually(reported, timeout=60, what="the edited generation in status")
        finally:
            await _show(cluster, ns, "edit", "the edit names an InstanceType with no status yet")
        got = {c["type"]: c for c in md["status"]["conditions"]}
        assert (got["Ready"]["status"], got["Ready"]["reason"]) == ("False", "RenderFailed")
        assert (got["Stalled"]["status"], got["Stalled"]["reason"]) == ("True", "RenderFailed")
        assert got["Reconciling"]["status"] == "False"
        for type_ in ("Ready", "Stalled"):
            assert got[type_]["observedGeneration"] == generation
            assert f"InstanceType {fresh!r}" in got[type_]["message"]
            assert f"generation {generation} cannot be rendered" in got[type_]["message"]
        # What runs is still what the status counts: never Ready, both replicas serving.
        assert md["status"]["phase"] == "Degraded"
        assert md["status"]["roleReadiness"] == "server 2/2 Server"
        assert md["status"]["roleSummary"] == "2S"
        assert md["status"]["endpoint"] == f"http://edit.{ns}.svc:8000"

        version = md["metadata"]["resourceVersion"]

        async def untouched() -> bool:
            pods = await serving(kube, ns, "edit", 2)
            again = await get_md(kube, ns, "edit")
            # The retries (with backoff) compute the same status: not written again.
            written_once = again is not None and again["metadata"]["resourceVersion"] == version
            return (
                written_once and pods is not None and {p["metadata"]["uid"] for p in pods} == uids
            )

        await steady(untouched, seconds=4, what="the original Pods kept, Running and Ready")

        # The type's status filled in: the edit renders and rolls onto the new type.
        await ensure_instance_type(kube, fresh, entrance.name)

        async def converged() -> dict[str, Any] | None:
            md = await get_md(kube, ns, "edit")
            ready = condition(md or {}, "Ready")
            done = ready and ready["status"] == "True" and ready["observedGeneration"] == generation
            return md if done else None

        md = await eventually(converged, timeout=180, what="Ready at the edited generation")
        await _show(cluster, ns, "edit", "the InstanceType's status filled in")
        assert md["status"]["phase"] == "Ready"
        stalled = condition(md, "Stalled")
        assert stalled is not None and stalled["status"] == "False"
        after = await eventually(lambda: serving(kube, ns, "edit", 2), what="2 Pods serving")
        assert not uids & {p["metadata"]["uid"] for p in after}  # both rolled onto the type
        # A rollout of a deployment without a KV cache raises no departure event (issue 37).
        assert await _departures(kube, ns) == []
        await tear_down(kube, ns, "edit")


async def test_the_joint_check_holds_every_group_until_the_whole_set_reserved_quota(
    kube: Kube, kubeconfig_path: Path, cluster: Cluster
) -> None:
    """A prefill/decode pair whose decode ClusterQueue has no GPU quota: the prefill group
    reserves quota but the joint check keeps it Pending, so no group of either role starts;
    once the decode queue has quota both groups are admitted together."""
    ns = await new_namespace(kube)
    prefill = await new_entrance(kube, cluster, gpus=8)
    decode = await new_entrance(kube, cluster, gpus=0)
    body = deployment(
        "pd", ns, prefill.role("prefill", kind="Prefill"), decode.role("decode", kind="Decode")
    )
    async with running_controller(kubeconfig_path):
        check = await kube.get(ADMISSION_CHECKS, "gpustack-model-deployment-joint")
        assert check is not None
        assert check["spec"]["controllerName"] == "worker.gpustack.ai/model-deployment-joint"
        active = {c["type"]: c for c in check["status"]["conditions"]}["Active"]
        assert (active["status"], active["reason"]) == ("True", "Ready")

        await kube.create(MODEL_DEPLOYMENTS, body, ns)
        pods = await eventually(lambda: _n(pods_of(kube, ns, "pd"), 2), what="one Pod per role")
        by_role = {seat(p)[0]: group_of(p) for p in pods}
        # The real Kueue composes one Workload per replica, named after the group.
        workloads = await eventually(
            lambda: _n(workloads_in(kube, ns), 2), timeout=60, what="one Workload per replica"
        )
        assert {w["metadata"]["name"] for w in workloads} == set(by_role.values())

        async def state(name: str) -> tuple[str, str] | None:
            w = await kube.get(KUEUE_WORKLOADS, name, ns)
            for entry in ((w or {}).get("status") or {}).get("admissionChecks") or ():
                if entry["name"] == "gpustack-model-deployment-joint":
                    return entry["state"], entry.get("message", "")
            return None

        async def pending_on_decode() -> tuple[str, str] | None:
            got = await state(by_role["prefill"])
            return got if got and got[0] == "Pending" and "decode" in got[1] else None

        # Prefill reserved quota on its queue; the check holds it, naming the decode role.
        await eventually(pending_on_decode, timeout=60, what="Pending naming the decode role")
        w = await kube.get(KUEUE_WORKLOADS, by_role["prefill"], ns)
        assert w is not None and has_condition(w, "QuotaReserved")
        managers = {m["manager"] for m in w["metadata"]["managedFields"]}
        assert "worker.gpustack.ai/model-deployment-joint" in managers

        async def nothing_started() -> bool:
            current = {x["metadata"]["name"]: x for x in await workloads_in(kube, ns)}
            decode_w = current.get(by_role["decode"])
            if decode_w is None or has_condition(decode_w, "QuotaReserved"):
                return False
            if any(admitted(x) for x in current.values()):
                return False
            return all(_gated(p) for p in await pods_of(kube, ns, "pd"))

        # No group of either role starts: both stay behind Kueue's scheduling gate.
        await steady(nothing_started, seconds=5, what="no group admitted, every Pod gated")

        # Quota for the decode queue: it reserves, the check turns Ready for both, both start.
        cluster.ensure_cluster_queue(decode.name, quota={"nvidia.com/gpu": 8})
        for name in by_role.values():

            async def ready(name: str = name) -> bool:
                got = await state(name)
                return got is not None and got[0] == "Ready"

            await eventually(ready, timeout=60, what=f"{name} Ready")
        await eventually(lambda: serving(kube, ns, "pd", 2), timeout=60, what="both roles serving")
        await tear_down(kube, ns, "pd")


def _gated(pod: dict[str, Any]) -> bool:
    """Behind Kueue's scheduling gate, bound to no Node."""
    gates = {g.get("name") for g in pod["spec"].get("schedulingGates") or ()}
    return "kueue.x-k8s.io/admission" in gates and not pod["spec"].get("nodeName")


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
        await tear_down(kube, ns, "led")
    finally:
        for controller in (first, second):
            with contextlib.suppress(ApiError):
                await controller.stop()
        for client in clients:
            await client.close()


async def test_the_binding_claim_and_domain_registration(
    kube: Kube, kubeconfig_path: Path, cluster: Cluster
) -> None:
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
    # A private queue: it admits the first replicas, then holds (stopPolicy Hold) so that the
    # rollout the resolved connection causes visibly waits for each replacement's admission.
    entrance = await new_entrance(kube, cluster, gpus=8)
    body = deployment("cached", ns, entrance.role(replicas=2))
    body["spec"]["kvCache"] = {"poolRef": {"name": "cache"}}
    async with running_controller(kubeconfig_path):
        await kube.create(MODEL_DEPLOYMENTS, body, ns)

        async def registered(reason: str) -> dict[str, Any] | None:
            md = await get_md(kube, ns, "cached")
            cond = condition(md, "DomainRegistered") if md else None
            return md if cond and cond["reason"] == reason else None

        # No phase yet: BindingNotReady, and the claim is already held.
        await eventually(lambda: registered("BindingNotReady"), what="BindingNotReady")
        before = await eventually(
            lambda: serving(kube, ns, "cached", 2), timeout=60, what="the replicas admitted, Ready"
        )
        assert not any(_has_client(p) for p in before)
        hold_queue(cluster, entrance.name)
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
        # The replicas were created without a store client; the resolved connection changes
        # their hash, so they are outdated and rolled one at a time: the first replacement
        # carries the store client and, the queue held, waits for admission; the other replica
        # waits for that admission before it is rolled.
        original = {p["metadata"]["uid"] for p in before}

        async def one_replaced() -> list[dict[str, Any]] | None:
            current = live(await pods_of(kube, ns, "cached"))
            fresh = [p for p in current if p["metadata"]["uid"] not in original]
            kept = [p for p in current if p["metadata"]["uid"] in original]
            if len(fresh) != 1 or len(kept) != 1 or not _has_client(fresh[0]):
                return None
            return current

        (replacement,) = [
            p
            for p in await eventually(one_replaced, timeout=60, what="one replica replaced")
            if p["metadata"]["uid"] not in original
        ]
        rollout = await eventually(
            lambda: _cond(get_md(kube, ns, "cached"), "ReplicasUpToDate", "RolloutInProgress"),
            what="RolloutInProgress",
        )
        assert rollout["status"] == "False"
        await steady(
            lambda: _is(one_replaced()), seconds=3, what="the other replica waits, outdated"
        )
        # Kueue composed the replacement's Workload but, the queue held, reserves no quota.
        workload = await workload_of(kube, replacement)
        assert workload is not None and not has_condition(workload, "QuotaReserved")
        # A departing replica of a deployment on a pool costs its siblings its cached blocks:
        # recorded on the deployment (ReplicaLeaving), naming the Pod and the lease window.
        (kept,) = [
            p for p in live(await pods_of(kube, ns, "cached")) if p["metadata"]["uid"] in original
        ]
        await kube.delete(PODS, kept["metadata"]["name"], ns)
        (event, *_) = await eventually(
            lambda: _departures(kube, ns, kept["metadata"]["name"]), what="a ReplicaLeaving event"
        )
        assert (event["type"], event["reason"]) == ("Warning", "ReplicaLeaving")
        assert event["involvedObject"]["kind"] == "ModelDeployment"
        assert event["involvedObject"]["name"] == "cached"
        assert "30 s" in event["message"] and "cached blocks" in event["message"]
        await kube.delete(MODEL_DEPLOYMENTS, "cached", ns)

        async def released() -> bool:
            b = await kube.get(BINDINGS, "cache", ns)
            gone = await get_md(kube, ns, "cached") is None
            return gone and b is not None and not (b.get("status") or {}).get("usedBy")

        await eventually(released, timeout=60, what="the claim released at teardown")
        await eventually(
            lambda: deployment_gone(kube, ns, "cached"), timeout=60, what="Pods and Workload gone"
        )


def _has_client(pod: dict[str, Any]) -> bool:
    return "kvcache.gpustack.ai/client-config" in (pod["metadata"].get("annotations") or {})


async def _is(read: Any) -> bool:
    return bool(await read)


async def _cond(read: Any, type_: str, reason: str) -> dict[str, Any] | None:
    md = await read
    cond = condition(md, type_) if md else None
    return cond if cond and cond["reason"] == reason else None
