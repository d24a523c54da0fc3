"""The controller on the simulated cluster: create, scale, delete
(docs/contract/controller.md §3–§5, §12).

The controller runs in this test's event loop; the real Kueue composes and admits each group's
Workload, the scheduler binds and KWOK runs the Pods. Every wait is bounded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpustack_controller.kube import (
    EVENTS,
    INSTANCE_TYPES,
    LOCAL_QUEUES,
    MODEL_DEPLOYMENTS,
    PODS,
    SERVICES,
    Kube,
)
from gpustack_controller.reconciler import FIELD_MANAGER
from gpustack_render.api.inputs import InstanceType
from gpustack_render.core import labels
from gpustack_render.core.settings import Settings
from gpustack_render.reconcile.applied import apply_aligned as service_aligned
from gpustack_render.rendering.renderer import render
from gpustack_render.schema.decoding import decode_deployment, decode_model
from gpustack_render.schema.lookups import StaticLookups

from .cluster import Cluster
from .controller_fixtures import (
    ENTRANCE,
    INSTANCE_TYPE,
    KUEUE_WORKLOADS,
    admitted,
    condition,
    deployment,
    ensure_instance_type,
    eventually,
    get_md,
    gpu_usage,
    group_of,
    new_entrance,
    new_namespace,
    pods_of,
    role,
    running_controller,
    seat,
    serving,
    steady,
    tear_down,
    workloads_in,
)

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


@pytest.fixture
async def kube(kubeconfig_path: Path) -> Any:
    client = await Kube.connect(kubeconfig=str(kubeconfig_path))
    try:
        await ensure_instance_type(client)
        yield client
    finally:
        await client.close()


def _expected_pods(md_obj: dict[str, Any], instance_type: dict[str, Any]) -> list[dict[str, Any]]:
    md, errs = decode_deployment(md_obj)
    assert md is not None, errs
    it, _ = decode_model(InstanceType, instance_type)
    assert it is not None
    rendering = render(md, lookups=StaticLookups.of([it]), settings=Settings())
    return rendering.pods()


def _strip(pod: dict[str, Any]) -> dict[str, Any]:
    """The parts of a Pod the controller wrote (labels, annotations, owner, spec containers)."""
    meta = pod["metadata"]
    return {
        "labels": meta.get("labels"),
        "annotations": meta.get("annotations"),
        "ownerReferences": meta.get("ownerReferences"),
        "containers": [
            {k: c.get(k) for k in ("name", "image", "command", "env", "ports")}
            for c in pod["spec"]["containers"]
        ],
        "hostname": pod["spec"].get("hostname"),
        "subdomain": pod["spec"].get("subdomain"),
    }


async def test_create_makes_exactly_the_rendered_pods_services_and_local_queue(
    kube: Kube, kubeconfig_path: Path
) -> None:
    ns = await new_namespace(kube)
    body = deployment("qwen", ns, role(replicas=2), role("big", replicas=1, size=2))
    async with running_controller(kubeconfig_path):
        created = await kube.create(MODEL_DEPLOYMENTS, body, ns)
        pods = await eventually(
            lambda: _when(pods_of(kube, ns, "qwen"), lambda p: len(p) == 4),
            what="4 Pods",
        )
        md = await eventually(
            lambda: _when(get_md(kube, ns, "qwen"), lambda m: m.get("status")),
            what="a status",
        )
        assert md["metadata"]["finalizers"] == ["gpustack.ai/controlled"]
        instance_type = await kube.get(INSTANCE_TYPES, INSTANCE_TYPE)
        assert instance_type is not None
        wanted = _expected_pods(created, instance_type)
        assert sorted(seat(p) for p in pods) == [
            ("big", 0, 0),
            ("big", 0, 1),
            ("server", 0, 0),
            ("server", 1, 0),
        ]
        by_seat = {seat(p): p for p in pods}
        for pod in wanted:
            got = by_seat[seat(pod)]
            # The API server adds defaults (fieldRef apiVersion, …) and Kueue's webhook its
            # own label, gate and finalizer; the rest is as rendered.
            assert covers(_strip(got), _strip(pod)), (_strip(got), _strip(pod))
            if pod["metadata"].get("name"):
                assert got["metadata"]["name"] == pod["metadata"]["name"]
            else:
                assert got["metadata"]["generateName"] == pod["metadata"]["generateName"]
        services, _ = await kube.list(SERVICES, ns)
        assert sorted(s["metadata"]["name"] for s in services) == [
            "qwen",
            "qwen-big",
            "qwen-big-r0",
            "qwen-server",
        ]
        for svc in services:
            refs = svc["metadata"]["ownerReferences"]
            assert refs[0]["uid"] == created["metadata"]["uid"] and refs[0]["controller"] is True
        queues, _ = await kube.list(LOCAL_QUEUES, ns)
        assert [(q["metadata"]["name"], q["spec"]["clusterQueue"]) for q in queues] == [
            (ENTRANCE, ENTRANCE)
        ]
        assert "ownerReferences" not in queues[0]["metadata"]
        assert md["status"]["endpoint"] == f"http://qwen.{ns}.svc:8000"
        assert condition(md, "ReplicasUpToDate") is not None
        # The real Kueue took every group through that LocalQueue: one Workload per replica,
        # named after its group, admitted; the scheduler bound each Pod and KWOK runs it.
        await eventually(lambda: serving(kube, ns, "qwen", 4), timeout=60, what="4 Pods serving")
        workloads = await workloads_in(kube, ns)
        assert sorted(w["metadata"]["name"] for w in workloads) == sorted(
            {group_of(p) for p in pods}
        )
        assert {w["spec"]["queueName"] for w in workloads} == {ENTRANCE}
        await tear_down(kube, ns, "qwen")


def covers(stored: Any, wanted: Any) -> bool:
    """Every field of ``wanted`` is in ``stored`` with the same value (lists element-wise)."""
    if isinstance(wanted, dict):
        return isinstance(stored, dict) and all(
            k in stored and covers(stored[k], v) for k, v in wanted.items()
        )
    if isinstance(wanted, list):
        return (
            isinstance(stored, list)
            and len(stored) == len(wanted)
            and all(covers(a, b) for a, b in zip(stored, wanted, strict=True))
        )
    return bool(stored == wanted)


async def _when(read: Any, ok: Any) -> Any:
    value = await read
    return value if value and ok(value) else None


async def test_scale_up_and_down_never_touches_survivors(
    kube: Kube, kubeconfig_path: Path, cluster: Cluster
) -> None:
    ns = await new_namespace(kube)
    entrance = await new_entrance(kube, cluster, gpus=8)
    async with running_controller(kubeconfig_path):
        await kube.create(MODEL_DEPLOYMENTS, deployment("md", ns, entrance.role(replicas=2)), ns)
        before = await eventually(
            lambda: serving(kube, ns, "md", 2), timeout=60, what="2 Pods serving"
        )
        survivors = {p["metadata"]["uid"] for p in before}
        await eventually(lambda: _usage(cluster, entrance.name, 2), what="2 GPUs admitted")
        await kube.merge_patch(
            MODEL_DEPLOYMENTS, "md", {"spec": {"roles": [entrance.role(replicas=4)]}}, ns
        )
        after = await eventually(
            lambda: serving(kube, ns, "md", 4), timeout=60, what="4 Pods serving"
        )
        assert survivors <= {p["metadata"]["uid"] for p in after}
        assert sorted(seat(p)[1] for p in after) == [0, 1, 2, 3]
        await eventually(lambda: _n(workloads_in(kube, ns), 4), what="4 Workloads")
        await eventually(lambda: _usage(cluster, entrance.name, 4), what="4 GPUs admitted")
        ordinal_one = {p["metadata"]["uid"] for p in after if seat(p)[1] == 1}
        high_groups = {group_of(p) for p in after if seat(p)[1] >= 1}
        await kube.merge_patch(
            MODEL_DEPLOYMENTS, "md", {"spec": {"roles": [entrance.role(replicas=1)]}}, ns
        )
        # Highest ordinals leave with their Workloads; ordinal 0 survives untouched.
        remaining = await eventually(
            lambda: _when(pods_of(kube, ns, "md"), lambda p: len(p) == 1),
            timeout=60,
            what="1 Pod",
        )
        assert remaining[0]["metadata"]["uid"] in survivors
        assert seat(remaining[0])[1] == 0
        assert not ordinal_one & {p["metadata"]["uid"] for p in remaining}
        workloads = await eventually(
            lambda: _n(workloads_in(kube, ns), 1), timeout=60, what="1 Workload"
        )
        assert workloads[0]["metadata"]["name"] == group_of(remaining[0])
        assert not high_groups & {w["metadata"]["name"] for w in workloads}
        # Their quota is released on the ClusterQueue.
        await eventually(lambda: _usage(cluster, entrance.name, 1), what="1 GPU admitted")
        await eventually(
            lambda: _when(
                get_md(kube, ns, "md"),
                lambda m: (m["status"].get("roles") or [{}])[0].get("desired") == 1,
            ),
            what="status desired 1",
        )
        await tear_down(kube, ns, "md")
        await eventually(lambda: _usage(cluster, entrance.name, 0), what="no GPU admitted")


async def _usage(cluster: Cluster, name: str, gpus: int) -> bool:
    return gpu_usage(cluster, name) == gpus


async def _n(read: Any, n: int) -> Any:
    items = await read
    return items if len(items) == n else None


async def test_deletion_tears_everything_down_and_releases_the_finalizer(
    kube: Kube, kubeconfig_path: Path, cluster: Cluster
) -> None:
    ns = await new_namespace(kube)
    entrance = await new_entrance(kube, cluster, gpus=8)
    async with running_controller(kubeconfig_path):
        await kube.create(MODEL_DEPLOYMENTS, deployment("gone", ns, entrance.role(replicas=2)), ns)
        await eventually(lambda: serving(kube, ns, "gone", 2), timeout=60, what="2 Pods serving")
        assert len(await workloads_in(kube, ns)) == 2
        await eventually(lambda: _usage(cluster, entrance.name, 2), what="2 GPUs admitted")
        await kube.delete(MODEL_DEPLOYMENTS, "gone", ns)
        await eventually(
            lambda: _when(_absent(get_md(kube, ns, "gone")), bool),
            timeout=60,
            what="the deployment gone",
        )
        # The finalizer is released only once the owned Pods are gone (Kueue's finalizer on
        # them included) and their Workloads deleted.
        assert await pods_of(kube, ns, "gone") == []
        await eventually(
            lambda: _empty(workloads_in(kube, ns)), timeout=60, what="no Workload left"
        )
        await eventually(lambda: _usage(cluster, entrance.name, 0), what="quota released")


async def test_teardown_leaves_the_workload_of_a_pod_it_does_not_own(
    kube: Kube, kubeconfig_path: Path
) -> None:
    """docs/contract/controller.md §12: only the Workloads owning the deployment's own Pods are
    deleted."""
    ns = await new_namespace(kube)
    async with running_controller(kubeconfig_path):
        await kube.create(MODEL_DEPLOYMENTS, deployment("mine", ns, role(replicas=1)), ns)
        await eventually(lambda: serving(kube, ns, "mine", 1), timeout=60, what="its Pod serving")
        stranger = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "stranger",
                "namespace": ns,
                "labels": {
                    **labels.deployment_selector("mine"),
                    labels.QUEUE_NAME: ENTRANCE,
                    labels.POD_GROUP_NAME: "stranger-group",
                },
                "annotations": {labels.POD_GROUP_TOTAL_COUNT: "1", labels.ROLE_HASH: "x"},
            },
            "spec": {"containers": [{"name": "main", "image": "busybox"}]},
        }
        await kube.create(PODS, stranger, ns)
        # The real Kueue composes the stranger's group a Workload of its own and admits it.
        before = await eventually(
            lambda: _admitted_named(kube, ns, "stranger-group"), timeout=60, what="its Workload"
        )
        await kube.delete(MODEL_DEPLOYMENTS, "mine", ns)
        await eventually(
            lambda: _when(_absent(get_md(kube, ns, "mine")), bool),
            timeout=60,
            what="the deployment gone",
        )
        after = await eventually(
            lambda: _n(workloads_in(kube, ns), 1), timeout=60, what="only the stranger's Workload"
        )
        # The same Workload object (same uid), still admitted: not deleted and composed again.
        assert [(w["metadata"]["name"], w["metadata"]["uid"]) for w in after] == [
            ("stranger-group", before["metadata"]["uid"])
        ]
        assert admitted(after[0])
        assert await kube.get(PODS, "stranger", ns) is not None
    # Not the controller's: the test removes it. Deleted, it turns Failed (the kubelet's part,
    # KWOK's pod-terminate stage), but Kueue keeps its finalizer on a failed member of a group
    # (a retriable group waits for a replacement) until the group's Workload goes: deleting
    # the Workload, as an administrator would, is what releases it.
    await kube.delete(PODS, "stranger", ns)
    await kube.delete(KUEUE_WORKLOADS, "stranger-group", ns)
    await eventually(lambda: _empty(pods_of(kube, ns, "mine")), timeout=60, what="stranger gone")


async def _admitted_named(kube: Kube, ns: str, name: str) -> dict[str, Any] | None:
    w = await kube.get(KUEUE_WORKLOADS, name, ns)
    return w if w is not None and admitted(w) else None


async def _empty(read: Any) -> bool:
    return not await read


async def _absent(read: Any) -> bool:
    return (await read) is None


async def test_render_failure_is_an_event_and_stalled_in_status(
    kube: Kube, kubeconfig_path: Path
) -> None:
    """A first generation that cannot be rendered: the RenderFailed event, and its status says
    the same (Stalled, RenderFailed, naming the type), written once (issue 37)."""
    ns = await new_namespace(kube)
    body = deployment("broken", ns, {"name": "server", "instanceType": "no-such-type"})
    async with running_controller(kubeconfig_path):
        await kube.create(MODEL_DEPLOYMENTS, body, ns)

        async def render_failed() -> list[dict[str, Any]]:
            events, _ = await kube.list(EVENTS, ns)
            return [e for e in events if e.get("reason") == "RenderFailed"]

        events = await eventually(render_failed, what="a RenderFailed event")
        assert "no-such-type" in events[0]["message"]
        assert events[0]["type"] == "Warning"
        assert events[0]["involvedObject"]["name"] == "broken"

        async def stalled() -> dict[str, Any] | None:
            md = await get_md(kube, ns, "broken")
            cond = condition(md or {}, "Stalled")
            return md if cond and cond["reason"] == "RenderFailed" else None

        md = await eventually(stalled, what="Stalled RenderFailed in status")
        status = md["status"]
        assert status["observedGeneration"] == md["metadata"]["generation"]
        assert status["phase"] == "Starting" and "no-such-type" in status["phaseMessage"]
        ready = condition(md, "Ready")
        assert ready is not None and (ready["status"], ready["reason"]) == ("False", "RenderFailed")
        assert "no-such-type" in ready["message"]
        # The retries (with backoff) compute the same status: it is not written again.
        version = md["metadata"]["resourceVersion"]

        async def unchanged() -> bool:
            again = await get_md(kube, ns, "broken")
            return again is not None and again["metadata"]["resourceVersion"] == version

        await steady(unchanged, seconds=3, what="the status written once")
        # Repeats are counted on one Event, not written again (D24).
        await eventually(
            lambda: _when(render_failed(), lambda e: len(e) == 1 and e[0].get("count", 1) > 1),
            what="a counted repeat",
        )
        assert await pods_of(kube, ns, "broken") == []


async def test_a_key_dropped_from_the_rendered_service_is_removed_by_the_next_apply(
    kube: Kube, kubeconfig_path: Path
) -> None:
    """docs/contract/render.md §19 / docs/contract/controller.md §11: Services follow the rendering.
    A label or annotation an earlier rendering applied (same field manager) and the current one no
    longer carries is removed on the next pass; an aligned Service is not re-applied."""
    ns = await new_namespace(kube)
    async with running_controller(kubeconfig_path):
        created = await kube.create(
            MODEL_DEPLOYMENTS, deployment("svc", ns, role(replicas=1, size=2)), ns
        )
        await eventually(
            lambda: _when(_services(kube, ns), lambda s: len(s) == 3), what="3 Services"
        )
        # An earlier rendering, as this controller applied it: one more label and annotation
        # than the current rendering carries (every rendered value still in place).
        stored = await kube.get(SERVICES, "svc-server", ns)
        assert stored is not None
        older = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {
                "name": "svc-server",
                "namespace": ns,
                "labels": {**stored["metadata"]["labels"], "example.com/dropped": "yes"},
                "annotations": {
                    **stored["metadata"].get("annotations", {}),
                    "example.com/dropped": "yes",
                },
                "ownerReferences": stored["metadata"]["ownerReferences"],
            },
            "spec": {
                "type": "ClusterIP",
                "selector": stored["spec"]["selector"],
                "ports": [
                    {k: p[k] for k in ("name", "protocol", "port", "targetPort")}
                    for p in stored["spec"]["ports"]
                ],
            },
        }
        await kube.apply(SERVICES, older, field_manager=FIELD_MANAGER, namespace=ns)

        async def realigned() -> dict[str, Any] | None:
            svc = await kube.get(SERVICES, "svc-server", ns)
            if svc is None:
                return None
            meta = svc["metadata"]
            if "example.com/dropped" in (meta.get("labels") or {}):
                return None
            if "example.com/dropped" in (meta.get("annotations") or {}):
                return None
            return svc

        # The Service update enqueues its owner; the pass re-applies the current rendering.
        await eventually(realigned, what="the dropped keys removed")
        # What is stored now is aligned with the rendering: no further apply is due.
        instance_type = await kube.get(INSTANCE_TYPES, INSTANCE_TYPE)
        assert instance_type is not None
        md, _ = decode_deployment(created)
        it, _ = decode_model(InstanceType, instance_type)
        assert md is not None and it is not None
        rendering = render(md, lookups=StaticLookups.of([it]), settings=Settings())
        for wanted in rendering.services():
            got = await kube.get(SERVICES, wanted["metadata"]["name"], ns)
            assert got is not None
            assert service_aligned(got, wanted, FIELD_MANAGER), got["metadata"]["name"]
        await tear_down(kube, ns, "svc")


async def _services(kube: Kube, ns: str) -> list[dict[str, Any]]:
    items, _ = await kube.list(SERVICES, ns)
    return items
