"""The router objects the controller renders, proven with the real routers (issue 23, D26;
docs/routers.md).

On a simulated cluster of its own — KWOK Nodes whose Pod range is loopback, the Deployment and
ReplicaSet controllers on — the in-process controller renders and applies a ModelDeployment's
engine Pods and its router objects. Then ``vllm-router`` and ``sglang-router`` (the SGLang Model
Gateway), the PyPI binaries of the test extra, run as local processes with the command line of
the rendered router Deployment (only their listen addresses and ports moved to loopback),
authenticated as the rendered ServiceAccount; their own ``GET /workers`` says what they
discovered:

- exactly the deployment's serving Pods (the leader of a size-2 instance, never its worker; not
  the router's own Pods), on the rendered port;
- split into prefill and decode for a pair, a vLLM prefiller with its bootstrap port;
- scaling a role changes what they see;
- without the rendered Role they see nothing.

Every edit of the router's own fields leaves every engine Pod's UID alone, while the router
Deployment takes the edit; status names the router once it is Ready. llm-d-router's endpoint
picker cannot be built here (docs/decisions.md): its rendered objects, the InferencePool
included, are applied by the controller and validated by the API server, and pruned with the
router block.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from gpustack_controller.kube import CONFIGMAPS, INSTANCE_TYPES, MODEL_DEPLOYMENTS, Kube
from gpustack_render.api.inputs import InstanceType
from gpustack_render.core import labels
from gpustack_render.core.settings import Settings
from gpustack_render.reconcile.keys import FIELD_MANAGER
from gpustack_render.reconcile.owned import ROUTER_KINDS, ROUTER_POLICIES, Owner, plan_owned
from gpustack_render.rendering.renderer import render
from gpustack_render.schema.decoding import decode_deployment, decode_model
from gpustack_render.schema.lookups import StaticLookups
from gpustack_render.schema.resources import INFERENCE_POOLS, ROLES, ROUTER_RESOURCES

from .cluster import Cluster, ClusterBinaries, FakeNode
from .controller_fixtures import (
    ENTRANCE,
    INSTANCE_TYPE,
    condition,
    deployment,
    ensure_instance_type,
    eventually,
    get_md,
    live,
    new_namespace,
    pods_of,
    role,
    running_controller,
    serving,
    steady,
    tear_down,
)
from .router_fixtures import (
    EngineHealthStandIn,
    RouterProcess,
    container_command,
    loopback_nodes,
    router_deployment,
    router_running,
    standin_addresses,
    worker_view,
)

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

IMAGES = {
    "vllm-router": "registry.example.com/vllm-router:0.1.17",
    "sglang-gateway": "registry.example.com/sglang-router:0.3.2",
    "llm-d-router": "registry.example.com/llm-d-router:v0.10.0",
}
SGLANG_IMAGE = "lmsysorg/sglang:v0.5.18"
PORT = 8000
#: Discovery and health checks of a fresh router process take a few seconds.
SEES = 60.0


@pytest.fixture(scope="module")
def nodes() -> list[FakeNode]:
    return loopback_nodes(2)


@pytest.fixture(scope="module")
def router_cluster(envtest_binaries: ClusterBinaries, nodes: list[FakeNode]) -> Iterator[Cluster]:
    with Cluster(envtest_binaries, nodes=nodes, deployments=True) as sim:
        sim.ensure_cluster_queue(ENTRANCE)
        yield sim


@pytest_asyncio.fixture(loop_scope="session")
async def rkube(router_cluster: Cluster) -> AsyncIterator[Kube]:
    client = await Kube.connect(kubeconfig=str(router_cluster.kubeconfig))
    try:
        await ensure_instance_type(client)
        yield client
    finally:
        await client.close()


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def engines(nodes: list[FakeNode]) -> AsyncIterator[EngineHealthStandIn]:
    standin = EngineHealthStandIn(standin_addresses(nodes), PORT)
    await standin.start()
    try:
        yield standin
    finally:
        await standin.stop()


def routed(
    name: str,
    namespace: str,
    router: str,
    *roles: dict[str, Any],
    engine: str = "vLLM",
    **spec: Any,
) -> dict[str, Any]:
    body = deployment(name, namespace, *roles)
    body["spec"]["router"] = {"name": router, "image": IMAGES[router], **spec}
    if engine == "SGLang":
        body["spec"]["engine"] = {"name": "SGLang", "image": SGLANG_IMAGE}
    return body


def ip_of(pod: dict[str, Any]) -> str:
    ip = str((pod.get("status") or {}).get("podIP") or "")
    # Every dial of this test stays on loopback (the Nodes' podCIDR).
    assert ip.startswith("127.244."), f"{pod['metadata']['name']}: Pod IP {ip!r} is not loopback"
    return ip


def url(pod: dict[str, Any]) -> str:
    return f"http://{ip_of(pod)}:{PORT}"


def pick(pods: list[dict[str, Any]], role_name: str, member: int = 0) -> list[dict[str, Any]]:
    return [
        p
        for p in pods
        if p["metadata"]["labels"][labels.COMPONENT] == role_name
        and p["metadata"]["labels"][labels.MEMBER_INDEX] == str(member)
    ]


async def scale(kube: Kube, namespace: str, name: str, index: int, replicas: int) -> None:
    md = await get_md(kube, namespace, name)
    assert md is not None
    roles = md["spec"]["roles"]
    roles[index]["replicas"] = replicas
    await kube.merge_patch(MODEL_DEPLOYMENTS, name, {"spec": {"roles": roles}}, namespace)


async def rendered_command(kube: Kube, namespace: str, name: str) -> list[str]:
    async def present() -> dict[str, Any] | None:
        return await router_deployment(kube, namespace, name)

    return container_command(await eventually(present, what=f"{name}-router applied"))


async def wait_serving(
    kube: Kube, namespace: str, name: str, pods: int, what: str
) -> list[dict[str, Any]]:
    """``pods`` Pods of the deployment serving (Running, Ready, admitted by Kueue)."""

    async def ready() -> list[dict[str, Any]] | None:
        return await serving(kube, namespace, name, pods)

    return await eventually(ready, timeout=90, what=what)


def run_router(
    cluster: Cluster, command: list[str], namespace: str, name: str, directory: Path
) -> contextlib.AbstractContextManager[RouterProcess]:
    """The router of ``command``, as the rendered ServiceAccount ``<name>-router``."""
    return router_running(
        command,
        cp=cluster.control_plane,
        namespace=namespace,
        account=f"{name}-router",
        directory=directory,
    )


async def sees(router: RouterProcess, expected: set[tuple[str, str, int | None]]) -> None:
    async def exactly() -> bool:
        return worker_view(await router.workers()) == expected

    try:
        await eventually(exactly, timeout=SEES, what=f"the router to list {sorted(expected)}")
    except AssertionError:
        raise AssertionError(
            f"listed {sorted(worker_view(await router.workers()))}, want {sorted(expected)}\n"
            f"{router.log()}"
        ) from None


async def test_vllm_router_sees_the_pairs_leaders_split_and_follows_a_scale(
    rkube: Kube, router_cluster: Cluster, engines: EngineHealthStandIn, tmp_path: Path
) -> None:
    ns = await new_namespace(rkube, "rt-vllm")
    name = "pd"
    md = routed(
        name,
        ns,
        "vllm-router",
        role("prefill", kind="Prefill", size=2),
        role("decode", kind="Decode"),
    )
    async with running_controller(router_cluster.kubeconfig):
        await rkube.create(MODEL_DEPLOYMENTS, md, ns)

        pods = await wait_serving(rkube, ns, name, 3, "prefill (2 members) and decode serving")
        command = await rendered_command(rkube, ns, name)
        assert "--vllm-pd-disaggregation" in command and "--kv-connector" in command
        (leader,) = pick(pods, "prefill", 0)
        (worker,) = pick(pods, "prefill", 1)
        (decode,) = pick(pods, "decode", 0)
        ip_of(worker)
        with run_router(router_cluster, command, ns, name, tmp_path) as router:
            await eventually(router.alive, what="vllm-router up")
            # The leader only (its bootstrap port from the Pod annotation), never the worker
            # member, which answers /health too.
            await sees(router, {(url(leader), "prefill", 8998), (url(decode), "decode", None)})
            await scale(rkube, ns, name, 1, 2)

            pods = await wait_serving(rkube, ns, name, 4, "a second decoder serving")
            decoders = {(url(p), "decode", None) for p in pick(pods, "decode", 0)}
            assert len(decoders) == 2
            await sees(router, {(url(leader), "prefill", 8998), *decoders})

        # The healthy pair shows no False condition but the two summary ones: nothing reads KV
        # events behind vllm-router, so KVEventsPublishing does not apply (D9 amended, issue 37).
        async def healthy() -> dict[str, Any] | None:
            md = await get_md(rkube, ns, name)
            ready = condition(md or {}, "Ready")
            return md if ready and ready["status"] == "True" else None

        status = await eventually(healthy, timeout=90, what="the pair Ready behind vllm-router")
        events = condition(status, "KVEventsPublishing")
        assert events is not None
        assert (events["status"], events["reason"]) == ("True", "NotApplicable")
        assert "vllm-router reads no KV events" in events["message"]
        false = [c["type"] for c in status["status"]["conditions"] if c["status"] == "False"]
        assert false == ["Reconciling", "Stalled"]
        await tear_down(rkube, ns, name)


async def test_sglang_gateway_sees_each_server_and_follows_a_scale(
    rkube: Kube, router_cluster: Cluster, engines: EngineHealthStandIn, tmp_path: Path
) -> None:
    ns = await new_namespace(rkube, "rt-sgl")
    name = "chat"
    md = routed(name, ns, "sglang-gateway", role(replicas=2), engine="SGLang")
    async with running_controller(router_cluster.kubeconfig):
        await rkube.create(MODEL_DEPLOYMENTS, md, ns)

        pods = await wait_serving(rkube, ns, name, 2, "two servers serving")
        command = await rendered_command(rkube, ns, name)
        assert command[:2] == ["sglang-router", "launch"] and "--selector" in command
        with run_router(router_cluster, command, ns, name, tmp_path) as router:
            await eventually(router.alive, what="the gateway up")
            await sees(router, {(url(p), "regular", None) for p in pods})
            await scale(rkube, ns, name, 0, 3)

            pods = await wait_serving(rkube, ns, name, 3, "a third server serving")
            await sees(router, {(url(p), "regular", None) for p in pods})
        await tear_down(rkube, ns, name)


async def test_sglang_gateway_sees_the_pairs_leaders_split(
    rkube: Kube, router_cluster: Cluster, engines: EngineHealthStandIn, tmp_path: Path
) -> None:
    ns = await new_namespace(rkube, "rt-sgl-pd")
    name = "pd"
    md = routed(
        name,
        ns,
        "sglang-gateway",
        role("prefill", kind="Prefill"),
        role("decode", kind="Decode", size=2),
        engine="SGLang",
    )
    async with running_controller(router_cluster.kubeconfig):
        await rkube.create(MODEL_DEPLOYMENTS, md, ns)

        pods = await wait_serving(rkube, ns, name, 3, "prefill and decode (2 members) serving")
        command = await rendered_command(rkube, ns, name)
        assert "--pd-disaggregation" in command
        (prefill,) = pick(pods, "prefill")
        (decode,) = pick(pods, "decode", 0)
        with run_router(router_cluster, command, ns, name, tmp_path) as router:
            await eventually(router.alive, what="the gateway up")
            # The gateway reads the prefiller's bootstrap port from sglang.ai/bootstrap-port.
            expected = {(url(prefill), "prefill", 8998), (url(decode), "decode", None)}
            await sees(router, expected)
        await tear_down(rkube, ns, name)


async def test_without_the_rendered_role_the_router_sees_nothing(
    rkube: Kube, router_cluster: Cluster, engines: EngineHealthStandIn, tmp_path: Path
) -> None:
    ns = await new_namespace(rkube, "rt-norole")
    name = "chat"
    async with running_controller(router_cluster.kubeconfig):
        await rkube.create(MODEL_DEPLOYMENTS, routed(name, ns, "vllm-router", role()), ns)

        await wait_serving(rkube, ns, name, 1, "one server serving")
        command = await rendered_command(rkube, ns, name)
    # The controller is stopped: nothing puts the Role back.
    assert await rkube.get(ROLES, f"{name}-router", ns) is not None
    assert await rkube.delete(ROLES, f"{name}-router", ns)
    with run_router(router_cluster, command, ns, name, tmp_path) as router:
        await eventually(router.alive, what="vllm-router up")

        async def refused() -> bool:
            return "forbidden" in router.log().lower()

        await eventually(refused, timeout=SEES, what="the Pod list refused")
        await steady(lambda: _no_workers(router), seconds=5, what="no worker without the Role")
    async with running_controller(router_cluster.kubeconfig):
        # The controller puts the Role back, then tears down.
        async def restored() -> bool:
            return await rkube.get(ROLES, f"{name}-router", ns) is not None

        await eventually(restored, what="the Role re-applied")
        await tear_down(rkube, ns, name)


async def converged(kube: Kube, namespace: str, name: str, settings: Settings) -> None:
    """The router objects the API server holds, server defaults and managed fields included, are
    aligned with a fresh rendering: the next pass writes none of them."""
    raw = await get_md(kube, namespace, name)
    assert raw is not None
    md, errs = decode_deployment(raw)
    assert md is not None, errs
    itype = await kube.get(INSTANCE_TYPES, INSTANCE_TYPE)
    assert itype is not None
    typed, _ = decode_model(InstanceType, itype)
    assert typed is not None
    rendering = render(md, lookups=StaticLookups.of([typed]), settings=settings)
    wanted = rendering.router_objects()
    assert wanted
    owner = Owner(namespace, name, md.metadata.uid)
    for kind in ROUTER_KINDS:
        mine = [o for o in wanted if o["kind"] == kind]
        stored = {
            str(o["metadata"]["name"]): await kube.get(
                ROUTER_RESOURCES[kind], str(o["metadata"]["name"]), namespace
            )
            for o in mine
        }
        plan = plan_owned(
            ROUTER_POLICIES[kind], mine, stored=stored, owner=owner, manager=FIELD_MANAGER
        )
        assert plan.writes == 0 and plan.conflicts == (), (kind, plan)


async def _no_workers(router: RouterProcess) -> bool:
    return await router.workers() == []


#: Each edit of the seed's editable row: (field, value, what the router Deployment shows).
ROUTER_EDITS: list[tuple[str, Any]] = [
    ("replicas", 2),
    ("extraArgs", ["--policy", "round_robin"]),
    ("image", "registry.example.com/vllm-router:0.1.18"),
    ("imagePullPolicy", "Always"),
    ("imagePullSecrets", [{"name": "registry"}]),
    ("requestTimeoutSeconds", 300),
]


def _shows(deployment: dict[str, Any], field: str, value: Any) -> bool:
    spec = deployment["spec"]
    pod = spec["template"]["spec"]
    (container,) = pod["containers"]
    command = container["command"]
    match field:
        case "replicas":
            return bool(spec["replicas"] == value)
        case "extraArgs":
            return bool(command[-len(value) :] == value)
        case "image":
            return bool(container["image"] == value)
        case "imagePullPolicy":
            return bool(container.get("imagePullPolicy") == value)
        case "imagePullSecrets":
            return bool(pod.get("imagePullSecrets") == value)
        case "requestTimeoutSeconds":
            return "--request-timeout-secs" in command and str(value) in command
    raise AssertionError(field)


async def test_router_edits_change_the_router_only_and_status_names_it(
    rkube: Kube, router_cluster: Cluster, engines: EngineHealthStandIn
) -> None:
    ns = await new_namespace(rkube, "rt-edit")
    name = "chat"
    async with running_controller(router_cluster.kubeconfig):
        await rkube.create(MODEL_DEPLOYMENTS, routed(name, ns, "vllm-router", role(replicas=2)), ns)

        before = await wait_serving(rkube, ns, name, 2, "two servers serving")
        uids = {p["metadata"]["uid"] for p in before}
        hashes = {p["metadata"]["annotations"][labels.POD_SPEC_HASH] for p in before}

        async def router_ready() -> dict[str, Any] | None:
            md = await get_md(rkube, ns, name)
            cond = condition(md or {}, "RouterReady")
            ready = cond and cond["status"] == "True"
            return md if ready and md and md["status"].get("roleSummary") == "1R2S" else None

        # The router Deployment's Pod runs on a KWOK Node (the Deployment and ReplicaSet
        # controllers run): RouterReady, the router in roleSummary and the endpoint.
        md = await eventually(router_ready, timeout=90, what="RouterReady True, 1R2S")
        status = md["status"]
        assert (condition(md, "RouterReady") or {}).get("reason") == "Ready"
        assert status["endpoint"] == f"http://{name}-router.{ns}.svc:{PORT}"
        assert status["router"]["endpoint"] == status["endpoint"]
        assert status["router"]["metrics"] == {"port": 29000}
        assert status["roleSummary"] == "1R2S"
        assert (condition(md, "Ready") or {}).get("status") == "True"

        async def engine_pods_untouched() -> bool:
            pods = live(await pods_of(rkube, ns, name))
            return {p["metadata"]["uid"] for p in pods} == uids and {
                p["metadata"]["annotations"][labels.POD_SPEC_HASH] for p in pods
            } == hashes

        for field, value in ROUTER_EDITS:
            current = await get_md(rkube, ns, name)
            assert current is not None
            await rkube.merge_patch(
                MODEL_DEPLOYMENTS, name, {"spec": {"router": {field: value}}}, ns
            )

            async def applied(field: str = field, value: Any = value) -> bool:
                dep = await router_deployment(rkube, ns, name)
                return dep is not None and _shows(dep, field, value)

            await eventually(applied, what=f"router.{field} on the router Deployment")
            await steady(
                engine_pods_untouched, seconds=3, what=f"router.{field} left the engine Pods"
            )
        await converged(rkube, ns, name, Settings())
        await tear_down(rkube, ns, name)


async def test_llm_d_router_objects_are_valid_applied_and_pruned(
    rkube: Kube, router_cluster: Cluster
) -> None:
    """llm-d-router's objects, the InferencePool included, through the real API server: the
    controller applies them (the API server validates each, the pool against the Inference
    Extension's CRD), the router becomes Ready on a KWOK Node, and removing the router block
    prunes them all."""
    system = await new_namespace(rkube, "rt-system")
    await rkube.create(
        CONFIGMAPS,
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "gpustack-settings", "namespace": system},
            "data": {
                "model-deployment-inference-pool": "true",
                "model-deployment-router-tokenizer-image": "registry.example.com/tokenizer:v1",
            },
        },
        system,
    )
    ns = await new_namespace(rkube, "rt-llmd")
    name = "pd"
    md = routed(
        name,
        ns,
        "llm-d-router",
        role("prefill", kind="Prefill"),
        role("decode", kind="Decode"),
        disaggregationThresholdTokens=32,
    )
    async with running_controller(router_cluster.kubeconfig, namespace=system):
        await rkube.create(MODEL_DEPLOYMENTS, md, ns)

        async def pool() -> dict[str, Any] | None:
            return await rkube.get(INFERENCE_POOLS, name, ns)

        stored = await eventually(pool, timeout=60, what="the InferencePool applied")
        # The API server took the pool and defaulted what the CRD defaults.
        ref = stored["spec"]["endpointPickerRef"]
        assert ref["name"] == f"{name}-router" and ref["port"] == {"number": 9002}
        assert stored["spec"]["targetPorts"] == [{"number": PORT}]
        assert stored["spec"]["selector"]["matchLabels"] == labels.serving_selector(name)
        dep = await router_deployment(rkube, ns, name)
        assert dep is not None
        containers = [c["name"] for c in dep["spec"]["template"]["spec"]["containers"]]
        assert containers == ["endpoint-picker", "proxy", "tokenizer"]

        async def router_ready() -> bool:
            current = await get_md(rkube, ns, name)
            cond = condition(current or {}, "RouterReady")
            return bool(cond and cond["status"] == "True")

        await eventually(router_ready, timeout=90, what="RouterReady True")
        await converged(
            rkube,
            ns,
            name,
            Settings(
                inference_pool=True,
                router_tokenizer_image="registry.example.com/tokenizer:v1",
                system_namespace=system,
            ),
        )
        for resource in ROUTER_RESOURCES.values():
            object_name = name if resource is INFERENCE_POOLS else f"{name}-router"
            assert await rkube.get(resource, object_name, ns) is not None, resource.kind
        # Removing the router block (its objects go; the roles roll: D3).
        current = await get_md(rkube, ns, name)
        assert current is not None
        await rkube.merge_patch(MODEL_DEPLOYMENTS, name, {"spec": {"router": None}}, ns)

        async def pruned() -> bool:
            for resource in ROUTER_RESOURCES.values():
                object_name = name if resource is INFERENCE_POOLS else f"{name}-router"
                if await rkube.get(resource, object_name, ns) is not None:
                    return False
            return True

        await eventually(pruned, timeout=60, what="every router object pruned")
        await tear_down(rkube, ns, name)
