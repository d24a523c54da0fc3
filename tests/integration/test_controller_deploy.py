"""deploy/controller on the simulated cluster: the shipped RBAC is enough for the whole
lifecycle with the real Kueue (the controller authenticates as its ServiceAccount's user name),
the settings ConfigMap carries every key with its default, and /healthz and /metrics answer."""

from __future__ import annotations

import asyncio
import signal
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
from prometheus_client.parser import text_string_to_metric_families

from gpustack_controller.controller import Controller, Options
from gpustack_controller.kube import (
    ADMISSION_CHECKS,
    CONFIGMAPS,
    EVENTS,
    LEASES,
    MODEL_DEPLOYMENTS,
    PODS,
    ApiError,
    Kube,
    Resource,
)
from gpustack_controller.server import serve
from gpustack_render.core.settings import Settings, settings_to_data

from .controller_fixtures import (
    NAMESPACES,
    condition,
    deployment,
    ensure_instance_type,
    eventually,
    get_md,
    live,
    new_namespace,
    pods_of,
    role,
    serving,
    tear_down,
    workloads_in,
)
from .controlplane import REPO_ROOT, ControlPlane, load_yaml_documents

pytestmark = [pytest.mark.integration]
async_test = pytest.mark.asyncio(loop_scope="session")

DEPLOY = REPO_ROOT / "deploy" / "controller"
SYSTEM = "gpustack-system"
SERVICE_ACCOUNT_USER = f"system:serviceaccount:{SYSTEM}:gpustack-controller"
RBAC_KINDS = {
    "ServiceAccount": Resource("", "v1", "serviceaccounts", "ServiceAccount"),
    "ConfigMap": CONFIGMAPS,
    "ClusterRole": Resource(
        "rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", namespaced=False
    ),
    "ClusterRoleBinding": Resource(
        "rbac.authorization.k8s.io",
        "v1",
        "clusterrolebindings",
        "ClusterRoleBinding",
        namespaced=False,
    ),
    "Role": Resource("rbac.authorization.k8s.io", "v1", "roles", "Role"),
    "RoleBinding": Resource("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding"),
}


def manifests(*names: str) -> list[dict[str, Any]]:
    return [doc for name in names for doc in load_yaml_documents(DEPLOY / name)]


def test_kustomization_lists_every_manifest() -> None:
    (kustomization,) = manifests("kustomization.yaml")
    listed = set(kustomization["resources"])
    on_disk = {p.name for p in DEPLOY.glob("*.yaml")} - {"kustomization.yaml"}
    assert listed == on_disk
    assert kustomization["namespace"] == SYSTEM


def test_settings_configmap_carries_every_key_with_its_default() -> None:
    (config_map,) = manifests("settings.yaml")
    assert config_map["metadata"]["name"] == "gpustack-settings"
    assert config_map["data"] == settings_to_data(Settings())


def test_deployment_runs_the_controller_with_probes_on_its_health_port() -> None:
    (dep,) = manifests("deployment.yaml")
    spec = dep["spec"]["template"]["spec"]
    assert spec["serviceAccountName"] == "gpustack-controller"
    (container,) = spec["containers"]
    assert container["command"] == ["python", "-m", "gpustack_controller"]
    assert "--leader-elect" in container["args"]
    port = container["ports"][0]["containerPort"]
    assert f"--health-port={port}" in container["args"]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"


@pytest.mark.parametrize("shipped", [True, False], ids=["deployment-args", "default"])
async def test_the_health_server_answers_over_ipv4_and_ipv6(shipped: bool) -> None:
    """The kubelet probes the Pod IP, which is IPv6 on an IPv6 or IPv6-first dual-stack cluster:
    the deployment's arguments, and the server's default, make the health server listen on
    every address."""
    from gpustack_controller.__main__ import _parser

    (dep,) = manifests("deployment.yaml")
    (container,) = dep["spec"]["template"]["spec"]["containers"]
    args = _parser().parse_args(container["args"] if shipped else [])
    families = [(socket.AF_INET, "127.0.0.1")]
    if socket.has_ipv6:
        try:
            with socket.socket(socket.AF_INET6) as probe:
                probe.bind(("::1", 0))
            families.append((socket.AF_INET6, "::1"))
        except OSError:
            pass
    if len(families) < 2:
        pytest.skip("no IPv6 loopback on this host")
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    runner = await serve(lambda: (True, "ok"), host=args.health_host, port=port)
    try:
        async with aiohttp.ClientSession() as session:
            for _, address in families:
                host = f"[{address}]" if ":" in address else address
                async with session.get(f"http://{host}:{port}/healthz") as response:
                    assert response.status == 200, address
    finally:
        await runner.cleanup()


@pytest_asyncio.fixture(loop_scope="session")
async def admin(kubeconfig_path: Path) -> AsyncIterator[Kube]:
    client = await Kube.connect(kubeconfig=str(kubeconfig_path))
    try:
        await ensure_instance_type(client)
        try:
            await client.create(
                NAMESPACES,
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SYSTEM}},
            )
        except ApiError as exc:
            if not exc.conflict:
                raise
        for doc in manifests("serviceaccount.yaml", "rbac.yaml", "settings.yaml"):
            resource = RBAC_KINDS[doc["kind"]]
            await client.apply(
                resource,
                doc,
                field_manager="deploy-test",
                namespace=doc["metadata"].get("namespace"),
            )
        yield client
    finally:
        await client.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@async_test
async def test_the_shipped_rbac_is_enough_for_the_whole_lifecycle(
    admin: Kube, control_plane: ControlPlane
) -> None:
    config = control_plane.user_kubeconfig(
        SERVICE_ACCOUNT_USER, groups=("system:serviceaccounts", f"system:serviceaccounts:{SYSTEM}")
    )
    kube = await Kube.connect(kubeconfig=str(config))
    # The identity is really confined: it cannot read Secrets.
    try:
        await kube.list(Resource("", "v1", "secrets", "Secret"), SYSTEM)
        raise AssertionError("the controller's identity can list Secrets")
    except ApiError as exc:
        assert exc.status == 403
    controller = Controller(
        kube, Options(system_namespace=SYSTEM, leader_election=True, identity="rbac-test")
    )
    port = _free_port()
    runner = await serve(controller.healthy, host="127.0.0.1", port=port)
    ns = await new_namespace(admin)
    try:
        await controller.start(sync_timeout=30)
        lease = await admin.get(LEASES, "gpustack-controller", SYSTEM)
        assert lease is not None and lease["spec"]["holderIdentity"] == "rbac-test"
        check = await admin.get(ADMISSION_CHECKS, "gpustack-model-deployment-joint")
        assert check is not None and check.get("status", {}).get("conditions")
        # The real Kueue admits every group (the joint check answered by this identity),
        # the scheduler binds, KWOK runs the Pods.
        await admin.create(MODEL_DEPLOYMENTS, deployment("rbac", ns, role(replicas=2)), ns)

        async def ready() -> dict[str, Any] | None:
            md = await get_md(admin, ns, "rbac")
            return md if md and (md.get("status") or {}).get("phase") == "Ready" else None

        await eventually(ready, timeout=60, what="phase Ready under the shipped RBAC")
        assert await serving(admin, ns, "rbac", 2)

        async def counted() -> bool:
            replicas = await _replica_series(port, ns, "rbac")
            return replicas.get(("server", "ready")) == replicas.get(("server", "desired")) == 2

        await eventually(counted, what="/metrics counts the 2 ready replicas of the role")
        # Scale down (deletes Pods and Workloads), then a departure event.
        await admin.merge_patch(
            MODEL_DEPLOYMENTS, "rbac", {"spec": {"roles": [role(replicas=1)]}}, ns
        )

        async def one() -> bool:
            pods = await pods_of(admin, ns, "rbac")
            return len(pods) == 1 and len(await workloads_in(admin, ns)) == 1

        await eventually(one, timeout=60, what="scaled down to 1, its Workload with it")
        victim = live(await pods_of(admin, ns, "rbac"))[0]
        await admin.delete(PODS, victim["metadata"]["name"], ns)

        async def replaced() -> bool:
            pods = live(await pods_of(admin, ns, "rbac"))
            return len(pods) == 1 and pods[0]["metadata"]["uid"] != victim["metadata"]["uid"]

        # The replica comes back, freshly admitted, under the same identity.
        await eventually(replaced, timeout=60, what="the deleted replica replaced")
        await eventually(ready, timeout=60, what="Ready again under the shipped RBAC")
        # An edit that cannot render: the Event and the status, under the same identity (a
        # deployment without a KV cache records no departure event to show it; issue 37).
        broken = {"spec": {"roles": [role(replicas=1, instanceType="no-such-type")]}}
        await admin.merge_patch(MODEL_DEPLOYMENTS, "rbac", broken, ns)

        async def render_failed() -> bool:
            events, _ = await admin.list(EVENTS, ns)
            stalled = condition(await get_md(admin, ns, "rbac") or {}, "Stalled")
            return any(e.get("reason") == "RenderFailed" for e in events) and bool(
                stalled and stalled["reason"] == "RenderFailed"
            )

        await eventually(render_failed, what="the RenderFailed Event and Stalled in status")
        await admin.merge_patch(
            MODEL_DEPLOYMENTS, "rbac", {"spec": {"roles": [role(replicas=1)]}}, ns
        )
        await eventually(ready, timeout=60, what="Ready again once it renders")
        await tear_down(admin, ns, "rbac")

        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{port}/healthz") as resp:
                assert resp.status == 200 and await resp.text() == "ok"
            async with http.get(f"http://127.0.0.1:{port}/metrics") as resp:
                text = await resp.text()
                assert resp.status == 200
                assert "gpustack_controller_reconcile_total" in text
                assert "gpustack_controller_leader 1.0" in text
                assert 'gpustack_controller_reconcile_duration_seconds_count{controller="' in text
                assert "gpustack_controller_rollouts_in_progress" in text
        # Torn down: the deployment's replica series went with it.
        assert await _replica_series(port, ns, "rbac") == {}
    finally:
        await controller.stop()
        await runner.cleanup()
        await kube.close()


async def _replica_series(port: int, namespace: str, name: str) -> dict[tuple[str, str], float]:
    """(role, state) -> value of the controller's ``gpustack_controller_replicas`` series of
    one deployment, read from its /metrics."""
    url = f"http://127.0.0.1:{port}/metrics"
    async with aiohttp.ClientSession() as http, http.get(url) as resp:
        text = await resp.text()
    return {
        (sample.labels["role"], sample.labels["state"]): sample.value
        for family in text_string_to_metric_families(text)
        if family.name == "gpustack_controller_replicas"
        for sample in family.samples
        if (sample.labels["namespace"], sample.labels["deployment"]) == (namespace, name)
    }


@async_test
async def test_the_process_serves_health_takes_the_lease_and_stops_on_sigterm(
    admin: Kube, kubeconfig_path: Path
) -> None:
    port = _free_port()
    identity = f"proc-{port}"
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gpustack_controller",
        f"--kubeconfig={kubeconfig_path}",
        f"--namespace={SYSTEM}",
        f"--health-port={port}",
        "--health-host=127.0.0.1",
        f"--lease-name=lease-{port}",
        f"--identity={identity}",
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        async with aiohttp.ClientSession() as http:

            async def healthy() -> bool:
                try:
                    async with http.get(f"http://127.0.0.1:{port}/healthz") as resp:
                        return resp.status == 200 and await resp.text() == "ok"
                except aiohttp.ClientError:
                    return False

            await eventually(healthy, timeout=30, what="/healthz ok")
        lease = await admin.get(LEASES, f"lease-{port}", SYSTEM)
        assert lease is not None and lease["spec"]["holderIdentity"] == identity
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 20) == 0
        # Released on the way out: a successor need not wait for the lease to expire.
        lease = await admin.get(LEASES, f"lease-{port}", SYSTEM)
        assert lease is not None and lease["spec"]["holderIdentity"] == ""
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
