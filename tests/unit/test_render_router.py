"""The router's objects (D26; docs/routers.md; ``rendering/router/``): the command lines from the
routers' own flags, the objects around them, what fails to render and why, and that nothing of
the router reaches an engine Pod."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from property.strategies import ROUTER_IMAGES, Case, deployment, instance_type, render_case, role

from gpustack_render.core import labels
from gpustack_render.core.settings import ROUTER_IMAGE_ATTRS, Settings, settings_from_data
from gpustack_render.engines.owned import ROUTER_OWNED_ARGS
from gpustack_render.rendering.renderer import Rendering
from gpustack_render.rendering.router.commandline import FIELD_FLAGS

SERVING = [
    "app.kubernetes.io/name=model-deployment",
    "app.kubernetes.io/instance=qwen",
    "modeldeployment.gpustack.ai/member-index=0",
]
ROUTER_KINDS = ["ServiceAccount", "Role", "RoleBinding", "Service", "Deployment"]


def _case(
    router: str | dict[str, Any],
    roles: list[dict[str, Any]] | None = None,
    *,
    engine: str = "vLLM",
    settings: Settings | None = None,
    uid: str | None = "uid-1",
) -> Rendering:
    image = "lmsysorg/sglang:v0.5.18" if engine == "SGLang" else "vllm/vllm-openai:v0.25.1"
    md = deployment(roles or [role(replicas=2)], router=router, engine=engine, image=image, uid=uid)
    rendering: Rendering = render_case(Case(md, [instance_type()], settings or Settings()))
    return rendering


def _pair(router: str, *, engine: str = "vLLM", **router_fields: Any) -> Rendering:
    return _case(
        {"name": router, **router_fields},
        [role("prefill", kind="Prefill", size=2), role("decode", kind="Decode")],
        engine=engine,
    )


def _deployment(rendering: Rendering) -> dict[str, Any]:
    assert rendering.router is not None
    obj = rendering.router.of_kind("Deployment")
    assert obj is not None, rendering.router.failure
    return obj


def _containers(rendering: Rendering) -> dict[str, dict[str, Any]]:
    spec = _deployment(rendering)["spec"]["template"]["spec"]
    return {c["name"]: c for c in spec["containers"]}


def _config(rendering: Rendering) -> dict[str, Any]:
    assert rendering.router is not None
    cm = rendering.router.of_kind("ConfigMap")
    assert cm is not None
    return dict(json.loads(cm["data"]["config.yaml"]))


# ---- command lines -----------------------------------------------------------------------------


def test_vllm_router_plain_command_line() -> None:
    command = _containers(_case("vllm-router"))["router"]["command"]
    assert command == [
        "vllm-router",
        "--host",
        "0.0.0.0",
        "--port",
        "8000",
        "--prometheus-host",
        "0.0.0.0",
        "--prometheus-port",
        "29000",
        "--service-discovery",
        "--service-discovery-namespace",
        "team-a",
        "--service-discovery-port",
        "8000",
        "--selector",
        *SERVING,
    ]


def test_vllm_router_pair_command_line_and_extra_args_last() -> None:
    rendering = _pair(
        "vllm-router", extraArgs=["--policy", "round_robin"], requestTimeoutSeconds=60
    )
    command = _containers(rendering)["router"]["command"]
    tail = command[command.index("--service-discovery-port") + 2 :]
    assert tail == [
        "--vllm-pd-disaggregation",
        "--prefill-selector",
        *SERVING,
        "modeldeployment.gpustack.ai/role-kind=prefill",
        "--decode-selector",
        *SERVING,
        "modeldeployment.gpustack.ai/role-kind=decode",
        "--kv-connector",
        "mooncake",
        "--request-timeout-secs",
        "60",
        "--policy",
        "round_robin",
    ]


def test_sglang_gateway_pair_has_no_kv_connector() -> None:
    command = _containers(_pair("sglang-gateway", engine="SGLang"))["router"]["command"]
    assert command[:2] == ["sglang-router", "launch"]
    assert "--pd-disaggregation" in command and "--kv-connector" not in command


@pytest.mark.parametrize("router", ["vllm-router", "sglang-gateway"])
def test_every_synthesized_flag_is_owned_or_a_fields(router: str) -> None:
    engine = "SGLang" if router == "sglang-gateway" else "vLLM"
    for rendering in (
        _case({"name": router, "requestTimeoutSeconds": 5}, engine=engine),
        _pair(router, engine=engine, requestTimeoutSeconds=5),
    ):
        command = _containers(rendering)["router"]["command"]
        flags = {t for t in command if t.startswith("--")}
        assert flags <= {*ROUTER_OWNED_ARGS[router], *FIELD_FLAGS[router]}


def test_the_serving_port_and_listener_follow_the_roles() -> None:
    rendering = _case("vllm-router", [role(ports=[{"port": 9000}], extraArgs=["--port", "9000"])])
    command = _containers(rendering)["router"]["command"]
    assert command[command.index("--port") + 1] == "9000"
    assert command[command.index("--service-discovery-port") + 1] == "9000"
    assert rendering.router is not None and rendering.router.port == 9000
    service = rendering.router.of_kind("Service")
    assert service is not None and service["spec"]["ports"][0]["port"] == 9000


def test_llm_d_router_picker_proxy_and_args() -> None:
    rendering = _pair("llm-d-router", extraArgs=["--v=4"], requestTimeoutSeconds=120)
    containers = _containers(rendering)
    assert list(containers) == ["endpoint-picker", "proxy"]  # no tokenizer Setting
    picker = containers["endpoint-picker"]
    assert picker["args"] == [
        "--endpoint-selector=" + ",".join(SERVING),
        "--endpoint-target-ports=8000",
        "--config-file=/etc/llm-d-router/config.yaml",
        "--secure-serving=true",
        "--grpc-health-port=9003",
        "--metrics-endpoint-auth=false",
        "--v=4",
    ]
    flags = {a.split("=", 1)[0] for a in picker["args"][:-1]}
    assert flags == set(ROUTER_OWNED_ARGS["llm-d-router"])
    assert [e["name"] for e in picker["env"]] == ["NAMESPACE", "POD_NAME"]
    assert rendering.router is not None
    cm = rendering.router.of_kind("ConfigMap")
    assert cm is not None
    envoy = json.loads(cm["data"]["envoy.yaml"])
    (serving,) = [x for x in envoy["static_resources"]["listeners"] if x["name"] == "serving"]
    route = serving["filter_chains"][0]["filters"][0]["typed_config"]["route_config"]
    assert route["virtual_hosts"][0]["routes"][0]["route"]["timeout"] == "120s"


# ---- llm-d-router's scheduling -----------------------------------------------------------------


def test_llm_d_pair_config_uses_the_threshold_and_role_kind() -> None:
    config = _config(_pair("llm-d-router", disaggregationThresholdTokens=0))
    plugins = {p.get("name") or p["type"]: p for p in config["plugins"]}
    assert plugins["prefix-based-pd-decider"]["parameters"] == {"nonCachedTokens": 0}
    assert plugins["prefill-pods"]["parameters"] == {
        "label": labels.ROLE_KIND,
        "validValues": ["prefill"],
    }
    assert [p["name"] for p in config["schedulingProfiles"]] == ["prefill", "decode"]
    # Unset: the router's own P/D sample value, not the decider's code default (never).
    unset = _config(_pair("llm-d-router"))
    decider = next(p for p in unset["plugins"] if p["type"] == "prefix-based-pd-decider")
    assert decider["parameters"] == {"nonCachedTokens": 16}


def test_llm_d_scores_by_kv_events_only_with_a_tokenizer() -> None:
    md = deployment(
        [
            role("prefill", kind="Prefill", env=[{"name": "PYTHONHASHSEED", "value": "42"}]),
            role("decode", kind="Decode"),
        ],
        router="llm-d-router",
    )
    tokenizer = replace(Settings(), router_tokenizer_image="registry.example.com/tokenizer:1")
    with_events = render_case(Case(md, [instance_type()], tokenizer))
    config = _config(with_events)
    scorer = next(p for p in config["plugins"] if p["type"] == "precise-prefix-cache-scorer")
    params = scorer["parameters"]
    assert params["tokenProcessorConfig"] == {"blockSize": 16, "hashSeed": "42"}
    assert params["indexerConfig"]["tokenizersPoolConfig"]["modelName"] == "Qwen/Qwen3-8B"
    assert params["kvEventsConfig"]["topicFilter"] == "kv@"
    assert params["kvEventsConfig"]["podDiscoveryConfig"]["socketPort"] == 5557
    assert list(_containers(with_events)) == ["endpoint-picker", "proxy", "tokenizer"]
    without = _config(render_case(Case(md, [instance_type()])))
    assert {p["type"] for p in without["plugins"]} >= {"prefix-cache-scorer"}
    assert "precise-prefix-cache-scorer" not in {p["type"] for p in without["plugins"]}


def test_llm_d_reads_sglang_metrics_through_the_data_layer() -> None:
    config = _config(_case("llm-d-router", engine="SGLang"))
    assert config["featureGates"] == ["dataLayer"]
    assert config["data"]["sources"][0]["extractors"] == [
        {"pluginRef": "model-server-protocol-metrics"}
    ]


def test_a_config_change_changes_the_pod_template() -> None:
    def digest(threshold: int) -> str:
        dep = _deployment(_pair("llm-d-router", disaggregationThresholdTokens=threshold))
        return str(dep["spec"]["template"]["metadata"]["annotations"][labels.ROUTER_CONFIG_HASH])

    assert digest(8) != digest(64)


# ---- the objects -------------------------------------------------------------------------------


def test_objects_names_owners_labels_and_no_queue() -> None:
    rendering = _case("vllm-router")
    assert rendering.router is not None
    objects = rendering.router.objects
    assert [o["kind"] for o in objects] == ROUTER_KINDS
    for obj in objects:
        meta = obj["metadata"]
        assert meta["name"] == "qwen-router" and meta["namespace"] == "team-a"
        assert meta["labels"] == labels.router_labels("qwen")
        assert labels.QUEUE_NAME not in meta["labels"]
        (ref,) = meta["ownerReferences"]
        assert ref["controller"] is True and ref["uid"] == "uid-1"
    template = _deployment(rendering)["spec"]["template"]
    assert labels.QUEUE_NAME not in template["metadata"]["labels"]
    assert template["metadata"]["labels"][labels.NAME] != labels.NAME_VALUE
    assert rendering.objects()[-len(objects) :] == list(objects)
    without_uid = _case("vllm-router", uid=None)
    assert without_uid.router is not None
    assert all("ownerReferences" not in o["metadata"] for o in without_uid.router.objects)


def test_role_grants_pods_read_only_and_the_pod_runs_restricted() -> None:
    rendering = _case("sglang-gateway", engine="SGLang")
    assert rendering.router is not None
    role_obj = rendering.router.of_kind("Role")
    assert role_obj is not None
    assert role_obj["rules"] == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}
    ]
    pod = _deployment(rendering)["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "qwen-router" and pod["automountServiceAccountToken"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (container,) = pod["containers"]
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
    }
    assert container["resources"]["limits"] == {"cpu": "500m", "memory": "512Mi"}
    assert container["readinessProbe"]["httpGet"]["path"] == "/readiness"
    assert container["livenessProbe"]["httpGet"]["path"] == "/liveness"


def test_image_pull_fields_and_replicas_and_settings_resources() -> None:
    settings, errs = settings_from_data(
        {"model-deployment-router-cpu": "2", "model-deployment-router-memory": "1Gi"}
    )
    assert not errs
    rendering = _case(
        {
            "name": "vllm-router",
            "replicas": 3,
            "imagePullPolicy": "Always",
            "imagePullSecrets": [{"name": "reg"}],
        },
        settings=settings,
    )
    dep = _deployment(rendering)
    assert dep["spec"]["replicas"] == 3
    pod = dep["spec"]["template"]["spec"]
    assert pod["imagePullSecrets"] == [{"name": "reg"}]
    (container,) = pod["containers"]
    assert container["imagePullPolicy"] == "Always"
    assert container["image"] == ROUTER_IMAGES["vllm-router"]
    assert container["resources"]["requests"] == {"cpu": "2", "memory": "1Gi"}


def test_the_settings_default_image_and_the_inference_pool() -> None:
    settings = replace(
        Settings(),
        router_image_llm_d_router="registry.example.com/picker:1",
        inference_pool=True,
    )
    rendering = _case({"name": "llm-d-router", "image": None}, settings=settings)
    assert _containers(rendering)["endpoint-picker"]["image"] == "registry.example.com/picker:1"
    assert rendering.router is not None
    pool = rendering.router.of_kind("InferencePool")
    assert pool is not None
    assert pool["apiVersion"] == "inference.networking.k8s.io/v1"
    assert pool["metadata"]["name"] == "qwen"
    assert pool["spec"]["selector"] == {"matchLabels": labels.serving_selector("qwen")}
    assert pool["spec"]["targetPorts"] == [{"number": 8000}]
    assert pool["spec"]["endpointPickerRef"]["name"] == "qwen-router"
    # Only llm-d-router has an endpoint picker to name.
    other = _case("vllm-router", settings=settings)
    assert other.router is not None and other.router.of_kind("InferencePool") is None


# ---- what is not rendered ----------------------------------------------------------------------


def test_no_image_renders_the_routers_default_image() -> None:
    """D26 amended: the seed's router block names no image; each router's Settings default is
    its own release's image; ``router.image`` wins over it."""
    for name, attr in ROUTER_IMAGE_ATTRS.items():
        engine = "SGLang" if name == "sglang-gateway" else "vLLM"
        rendering = _case({"name": name, "image": None}, engine=engine)
        assert rendering.router is not None and rendering.router.failure is None
        (deployment_obj,) = [o for o in rendering.router.objects if o["kind"] == "Deployment"]
        first = deployment_obj["spec"]["template"]["spec"]["containers"][0]
        assert first["image"] == getattr(Settings(), attr) != ""
    own = _case({"name": "vllm-router", "image": "example.org/router:1"})
    assert own.router is not None
    (deployment_obj,) = [o for o in own.router.objects if o["kind"] == "Deployment"]
    assert deployment_obj["spec"]["template"]["spec"]["containers"][0]["image"] == (
        "example.org/router:1"
    )


def test_no_image_and_no_default_renders_no_router_but_every_engine_pod() -> None:
    rendering = _case(
        {"name": "vllm-router", "image": None}, settings=Settings(router_image_vllm_router="")
    )
    assert rendering.router is not None and rendering.router.objects == ()
    failure = rendering.router.failure
    assert failure is not None and failure.origin == "router.image-missing"
    assert "spec.router.image" in failure.message
    assert "model-deployment-router-image-vllm-router" in failure.message
    assert len(rendering.pods()) == 2


def test_roles_on_different_listeners_render_no_router() -> None:
    rendering = _case(
        "vllm-router",
        [role("a", extraArgs=["--port", "9000"]), role("b")],
    )
    assert rendering.router is not None and rendering.router.failure is not None
    assert rendering.router.failure.origin == "router.listener-ports-differ"


def test_no_router_no_objects() -> None:
    md = deployment([role()])
    rendering = render_case(Case(md, [instance_type()]))
    assert rendering.router is None and rendering.router_objects() == []


# ---- nothing of the router reaches an engine Pod (D10) -----------------------------------------


EDITS: list[dict[str, Any]] = [
    {"replicas": 3},
    {"image": "registry.example.com/vllm-router:9"},
    {"extraArgs": ["--policy", "random"]},
    {"imagePullPolicy": "Never"},
    {"imagePullSecrets": [{"name": "other"}]},
    {"requestTimeoutSeconds": 9},
]


@pytest.mark.parametrize("edit", EDITS, ids=lambda e: next(iter(e)))
@pytest.mark.parametrize("router", ["vllm-router", "llm-d-router"])
def test_router_edits_move_no_engine_pod(router: str, edit: dict[str, Any]) -> None:
    before = _pair(router)
    after = _pair(router, **edit)
    assert [s.pod for s in before.iter_seats()] == [s.pod for s in after.iter_seats()]
    assert _deployment(before) != _deployment(after)


def test_the_bootstrap_annotation_is_vllm_routers_own() -> None:
    def annotated(router: str) -> list[bool]:
        return [
            labels.VLLM_BOOTSTRAP_PORT in s.pod["metadata"]["annotations"]
            for s in _pair(router).iter_seats()
        ]

    # Both members of the prefill instance, not the decoder.
    assert annotated("vllm-router") == [True, True, False]
    assert annotated("llm-d-router") == [False, False, False]
