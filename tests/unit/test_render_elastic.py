"""Rendering the Elastic EP profile (docs/contract/elastic-ep.md §3, D29; docs/elastic-ep.md,
"What is rendered") and explaining a width edit.
"""

from __future__ import annotations

import copy
import http.server
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from gpustack_render.core.errors import RenderError
from gpustack_render.core.labels import (
    COMPONENT,
    MEMBER_INDEX,
    POD_GROUP_NAME,
    POD_GROUP_TOTAL_COUNT,
    POD_ORDINAL,
    POD_SPEC_HASH,
    QUEUE_NAME,
)
from gpustack_render.core.settings import Settings
from gpustack_render.explain.report import explain_deployment
from gpustack_render.rendering import elastic
from gpustack_render.rendering.elastic import (
    BOOT_WIDTH_ANNOTATION,
    ElasticMasterUnreadableError,
    LiveMaster,
    boot_width,
    live_masters,
    liveness_script,
    parse_boot_width,
)
from gpustack_render.rendering.hashing import role_hash_input
from gpustack_render.rendering.renderer import Rendering, render
from gpustack_render.schema.decoding import decode_deployment, decode_model
from gpustack_render.schema.kinds import INPUT_MODELS
from gpustack_render.schema.lookups import StaticLookups

ENTRANCE = "gpustack-fnv64-0123456789abcdef"
HEAD_ADDRESS = "deepseek-elastic-head.team-a.svc:6379"
JOIN = (
    'ray start --node-ip-address="$GPUSTACK_ELASTIC_POD_IP" '
    f"--address={HEAD_ADDRESS} "
    '--labels=gpustack-pod-uid="$GPUSTACK_ELASTIC_POD_UID"'
)
INSTANCE_TYPE: dict[str, Any] = {
    "apiVersion": "worker.gpustack.ai/v1",
    "kind": "InstanceType",
    "metadata": {"name": "h100"},
    "spec": {"acceleratable": True, "unitResources": {"cpu": "16", "ram": "128Gi"}},
    "status": {
        "entrance": ENTRANCE,
        "detail": {"manufacturer": "nvidia", "memory": "80Gi"},
        "accelerator": {"capacity": 64},
    },
}
POOL: list[dict[str, Any]] = [
    {
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "KVCachePoolBinding",
        "metadata": {"name": "team-a-dram", "namespace": "team-a"},
        "spec": {
            "poolRef": {"name": "dram-pool"},
            "domain": {"blockSize": 16, "dtype": "bfloat16", "name": "d"},
        },
        "status": {"phase": "Ready", "conditions": [{"type": "QuotaGranted", "status": "True"}]},
    },
    {
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "KVCachePool",
        "metadata": {"name": "dram-pool"},
        "spec": {"backends": ["dram-backend"]},
        "status": {
            "clientEndpoint": "dram-pool-master.gpustack-system.svc:50051",
            "conditions": [{"type": "QuotaLedgerAvailable", "status": "True"}],
        },
    },
    {
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "KVCacheBackend",
        "metadata": {"name": "dram-backend"},
        "spec": {
            "transport": {"protocol": "Auto"},
            "connection": {"managed": {"leader": {"multiTenancy": True}}},
        },
    },
]


def _doc(width: int = 2, *, pool: bool = False, **role: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "model": {"name": "deepseek-ai/DeepSeek-V2-Lite"},
        "engine": {"name": "vLLM", "image": "gpustack/runner:cuda13.0-vllm0.33.0"},
        "roles": [
            {
                "name": "server",
                "instanceType": "h100",
                "resources": {"accelerator": 1},
                "elasticEp": {"width": width},
                "extraArgs": ["--trust-remote-code"],
                **role,
            }
        ],
    }
    if pool:
        spec["kvCache"] = {"poolRef": {"name": "team-a-dram"}}
    return {
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "ModelDeployment",
        "metadata": {"name": "deepseek", "namespace": "team-a", "uid": "md-uid"},
        "spec": spec,
    }


def _lookups(*extra: dict[str, Any]) -> StaticLookups:
    objects = []
    for doc in (INSTANCE_TYPE, *extra):
        obj, errs = decode_model(INPUT_MODELS[doc["kind"]], copy.deepcopy(doc))
        assert obj is not None, errs
        objects.append(obj)
    return StaticLookups.of(objects)


def _render(doc: dict[str, Any], *extra: dict[str, Any], **kwargs: Any) -> Rendering:
    md, errs = decode_deployment(copy.deepcopy(doc))
    assert md is not None, errs
    return render(md, lookups=_lookups(*extra), settings=Settings(), **kwargs)


def _main(pod: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = next(c for c in pod["spec"]["containers"] if c["name"] == "main")
    return found


def _env_names(pod: dict[str, Any]) -> list[str]:
    return [e["name"] for e in _main(pod).get("env") or ()]


# --- members ------------------------------------------------------------------------------


@pytest.mark.parametrize("width", [2, 4, 64])
def test_width_members_each_its_own_group_of_one_on_the_entrance(width: int) -> None:
    role = _render(_doc(width)).roles[0]
    assert (role.replicas, role.size) == (width, 1)
    assert [s.ordinal for s in role.seats] == list(range(width))
    groups = [s.pod["metadata"]["labels"][POD_GROUP_NAME] for s in role.seats]
    assert len(set(groups)) == width
    for seat in role.seats:
        meta = seat.pod["metadata"]
        assert meta["generateName"] == "deepseek-server-"
        assert meta["labels"][QUEUE_NAME] == ENTRANCE
        assert meta["labels"][POD_ORDINAL] == str(seat.ordinal)
        assert meta["labels"][MEMBER_INDEX] == "0"
        assert meta["annotations"][POD_GROUP_TOTAL_COUNT] == "1"
    assert role.elastic is not None and role.elastic.width == width


def test_the_master_runs_the_engine_behind_the_join() -> None:
    master = _render(_doc(4)).roles[0].seats[0].pod
    assert _main(master)["command"] == [
        "/bin/sh",
        "-c",
        f'set -e; {JOIN}; exec "$@" --data-parallel-address "$GPUSTACK_ELASTIC_POD_IP"',
        "elastic-serve",
        "vllm",
        "serve",
        "deepseek-ai/DeepSeek-V2-Lite",
        "--served-model-name",
        "deepseek-ai/DeepSeek-V2-Lite",
        "--host",
        "0.0.0.0",
        "--port",
        "8000",
        "--trust-remote-code",
        "--data-parallel-backend",
        "ray",
        "--data-parallel-size",
        "4",
        "--data-parallel-size-local",
        "1",
        "--enable-expert-parallel",
        "--enable-eplb",
        "--enable-elastic-ep",
        "--eplb-config.use_async",
        "false",
    ]
    assert master["metadata"]["annotations"][BOOT_WIDTH_ANNOTATION] == "4"


def test_workers_only_join_ray_and_have_no_probe_or_hook() -> None:
    role = _render(_doc(3)).roles[0]
    for seat in role.seats[1:]:
        main = _main(seat.pod)
        assert main["command"] == ["/bin/sh", "-ec", f"{JOIN} --block"]
        assert not {"startupProbe", "readinessProbe", "livenessProbe", "lifecycle"} & set(main)
        assert BOOT_WIDTH_ANNOTATION not in seat.pod["metadata"]["annotations"]


def test_the_master_keeps_startup_readiness_and_drain_and_execs_its_liveness() -> None:
    main = _main(_render(_doc(2)).roles[0].seats[0].pod)
    assert main["startupProbe"]["httpGet"]["path"] == "/health"
    assert main["readinessProbe"]["httpGet"]["path"] == "/health"
    assert "preStop" in main["lifecycle"]
    live = main["livenessProbe"]
    assert live["exec"]["command"][:2] == ["python3", "-c"]
    assert "'http://127.0.0.1:8000/health'" in live["exec"]["command"][2]
    assert (live["periodSeconds"], live["timeoutSeconds"], live["failureThreshold"]) == (10, 3, 6)


def test_member_env_ray_defaults_before_and_profile_entries_after() -> None:
    doc = _doc(
        2,
        env=[
            {"name": "RAY_LOGGER_LEVEL", "value": "debug"},
            {"name": "RAY_ADDRESS", "value": "elsewhere:6379"},
            {"name": "MY_VAR", "value": "x"},
        ],
    )
    for seat in _render(doc).roles[0].seats:
        env = _main(seat.pod)["env"]
        names = [e["name"] for e in env]
        assert names == [
            "VLLM_CACHE_ROOT",
            "RAY_LOGGER_LEVEL",
            "MY_VAR",
            "RAY_LOG_TO_STDERR",
            "RAY_BACKEND_LOG_LEVEL",
            "GPUSTACK_ELASTIC_POD_UID",
            "RAY_ADDRESS",
            "GPUSTACK_ELASTIC_POD_IP",
            "VLLM_RAY_DP_PACK_STRATEGY",
        ]
        by_name = {e["name"]: e for e in env}
        assert by_name["RAY_LOGGER_LEVEL"]["value"] == "debug"  # the role's own value wins
        assert by_name["RAY_ADDRESS"]["value"] == HEAD_ADDRESS  # an owned name is the profile's
        assert by_name["GPUSTACK_ELASTIC_POD_UID"]["valueFrom"]["fieldRef"] == {
            "fieldPath": "metadata.uid"
        }
        assert by_name["GPUSTACK_ELASTIC_POD_IP"]["valueFrom"]["fieldRef"] == {
            "fieldPath": "status.podIP"
        }
        assert by_name["VLLM_RAY_DP_PACK_STRATEGY"]["value"] == "strict"


def test_members_carry_the_store_client_and_the_head_does_not() -> None:
    role = _render(_doc(2, pool=True), *POOL).roles[0]
    assert role.store_client
    for seat in role.seats:
        assert "kvcache.gpustack.ai/client-config" in seat.pod["metadata"]["annotations"]
        assert "MOONCAKE_CONFIG_PATH" in _env_names(seat.pod)
    assert "--kv-transfer-config" in _main(role.seats[0].pod)["command"]
    assert role.elastic is not None
    head = role.elastic.head_pod
    assert "kvcache.gpustack.ai/client-config" not in head["metadata"]["annotations"]
    assert [v["name"] for v in head["spec"]["volumes"]] == ["gpustack-shm"]


# --- the head -----------------------------------------------------------------------------


def test_the_head_pod() -> None:
    doc = _doc(
        2,
        shmSize="32Gi",
        additionalVolumes=[{"mountPath": "/etc/x", "configMap": {"name": "x"}}],
        env=[{"name": "RAY_DEDUP_LOGS", "value": "0"}],
    )
    role = _render(doc).roles[0]
    assert role.elastic is not None
    head = role.elastic.head_pod
    meta = head["metadata"]
    assert meta["generateName"] == "deepseek-elastic-head-"
    assert meta["labels"] == {
        "app.kubernetes.io/name": "model-deployment",
        "app.kubernetes.io/instance": "deepseek",
        "app.kubernetes.io/component": "deepseek-elastic-head",
        "app.kubernetes.io/part-of": "gpustack-operator-worker",
        "resource.gpustack.ai/type": "modeldeployments",
        "modeldeployment.gpustack.ai/pod-ordinal": "0",
        "modeldeployment.gpustack.ai/member-index": "0",
    }
    assert not [k for k in (*meta["labels"], *meta["annotations"]) if "kueue" in k]
    assert meta["ownerReferences"][0]["uid"] == "md-uid"
    spec = head["spec"]
    assert "terminationGracePeriodSeconds" not in spec  # only when the role sets it
    main = _main(head)
    assert "resources" not in main and "livenessProbe" not in main and "lifecycle" not in main
    assert main["image"] == "gpustack/runner:cuda13.0-vllm0.33.0"
    assert main["command"][2].startswith("ray start --head --include-dashboard=true --num-gpus=0")
    assert main["ports"] == [
        {"name": "gcs", "protocol": "TCP", "containerPort": 6379},
        {"name": "dashboard", "protocol": "TCP", "containerPort": 8265},
    ]
    assert [e["name"] for e in main["env"]] == [
        "RAY_LOG_TO_STDERR",
        "RAY_LOGGER_LEVEL",
        "RAY_BACKEND_LOG_LEVEL",
        "RAY_DEDUP_LOGS",
        "GPUSTACK_ELASTIC_POD_UID",
    ]
    assert [v["name"] for v in spec["volumes"]] == ["additional-0", "gpustack-shm"]
    assert spec["volumes"][1]["emptyDir"]["sizeLimit"] == "32Gi"
    with_grace = _render(_doc(2, terminationGracePeriodSeconds=60)).roles[0].elastic
    assert with_grace is not None
    assert with_grace.head_pod["spec"]["terminationGracePeriodSeconds"] == 60


def test_the_head_never_carries_weights_or_a_store() -> None:
    role = _render(_doc(2, pool=True), *POOL).roles[0]
    assert role.elastic is not None
    main = _main(role.elastic.head_pod)
    assert not [e for e in main["env"] if e["name"].startswith(("MOONCAKE", "HF_", "MC_"))]


def test_head_service_and_serving_services_select_the_master() -> None:
    rendering = _render(_doc(3))
    services = {s["metadata"]["name"]: s for s in rendering.services()}
    assert list(services) == ["deepseek", "deepseek-server", "deepseek-elastic-head"]
    head = services["deepseek-elastic-head"]
    assert head["spec"] == {
        "type": "ClusterIP",
        "selector": {
            "app.kubernetes.io/instance": "deepseek",
            "app.kubernetes.io/component": "deepseek-elastic-head",
        },
        "ports": [
            {"name": "gcs", "protocol": "TCP", "port": 6379, "targetPort": 6379},
            {"name": "dashboard", "protocol": "TCP", "port": 8265, "targetPort": 8265},
        ],
    }
    assert head["metadata"]["ownerReferences"][0]["controller"] is True
    for name in ("deepseek", "deepseek-server"):
        assert services[name]["spec"]["selector"][POD_ORDINAL] == "0"


def test_the_router_reaches_only_the_master() -> None:
    doc = _doc(2)
    doc["spec"]["router"] = {"name": "vllm-router"}
    rendering = _render(doc)
    deployment = next(o for o in rendering.router_objects() if o["kind"] == "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    argv = [*container.get("command", ()), *container.get("args", ())]
    assert f"{POD_ORDINAL}=0" in argv


def test_objects_put_the_head_after_its_members() -> None:
    rendering = _render(_doc(2))
    pods = rendering.pods()
    assert [p["metadata"]["labels"][COMPONENT] for p in pods] == [
        "server",
        "server",
        "deepseek-elastic-head",
    ]
    assert len(list(rendering.iter_seats())) == 2


# --- the hash -----------------------------------------------------------------------------


def test_width_is_not_a_hash_input() -> None:
    narrow = _render(_doc(2)).roles[0]
    wide = _render(_doc(4)).roles[0]
    assert narrow.hashes() == {k: v for k, v in wide.hashes().items() if k[0] < 2}
    assert narrow.hash_input == wide.hash_input
    assert narrow.elastic is not None and wide.elastic is not None
    head = narrow.elastic.head_pod["metadata"]["annotations"][POD_SPEC_HASH]
    assert head == wide.elastic.head_pod["metadata"]["annotations"][POD_SPEC_HASH]


def test_another_edit_moves_the_hash() -> None:
    before = _render(_doc(2)).roles[0].hashes()
    after = _render(_doc(2, extraArgs=["--max-model-len", "4096"])).roles[0].hashes()
    assert before[(0, 0)] != after[(0, 0)]


def test_role_hash_input_writes_the_profile_without_its_width() -> None:
    md, _ = decode_deployment(_doc(8))
    assert md is not None
    assert role_hash_input(md.spec.roles[0])["elasticEp"] == {}
    plain = _doc(2)
    del plain["spec"]["roles"][0]["elasticEp"]
    md, _ = decode_deployment(plain)
    assert md is not None
    assert role_hash_input(md.spec.roles[0])["elasticEp"] is None


# --- the boot width -----------------------------------------------------------------------


def _master_pod(
    uid: str, width: str | None, *, ordinal: str = "0", role: str = "server"
) -> dict[str, Any]:
    annotations = {BOOT_WIDTH_ANNOTATION: width} if width is not None else {}
    return {
        "metadata": {
            "name": f"m-{uid or 'x'}",
            "namespace": "team-a",
            "uid": uid,
            "labels": {
                "app.kubernetes.io/instance": "deepseek",
                "app.kubernetes.io/component": role,
                POD_ORDINAL: ordinal,
            },
            "annotations": annotations,
        }
    }


def test_a_live_master_keeps_its_boot_width() -> None:
    md, _ = decode_deployment(_doc(4))
    assert md is not None
    pods = [
        _master_pod("u0", "2"),
        _master_pod("u1", None, ordinal="1"),
        _master_pod("u2", "2", role="other"),
    ]
    masters = live_masters(md, pods, namespace="team-a")
    assert masters == (LiveMaster("m-u0", "u0", "2"),)
    assert live_masters(md, pods, namespace="team-b") == ()
    rendering = _render(_doc(4), elastic_masters=masters)
    role = rendering.roles[0]
    assert role.elastic is not None and role.elastic.boot_width == 2
    command = _main(role.seats[0].pod)["command"]
    assert command[command.index("--data-parallel-size") + 1] == "2"
    assert len(role.seats) == 4


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("2", 2), ("64", 64), ("+4", 4), ("1", None), ("65", None), ("", None), ("4.0", None)],
)
def test_parse_boot_width(raw: str, expected: int | None) -> None:
    assert parse_boot_width(raw) == expected
    assert parse_boot_width(None) is None


def test_boot_width_errors() -> None:
    def call(*masters: LiveMaster) -> int:
        return boot_width(4, masters, deployment="d", index=0, role="server")

    assert call() == 4
    with pytest.raises(ElasticMasterUnreadableError, match="no UID"):
        call(LiveMaster("m", "", "2"))
    with pytest.raises(ElasticMasterUnreadableError, match=re.escape("'65', not a width in 2..64")):
        call(LiveMaster("m", "u", "65"))
    with pytest.raises(ElasticMasterUnreadableError, match="absent"):
        call(LiveMaster("m", "u", None))
    with pytest.raises(RenderError, match="2 Pods claim ordinal 0") as two:
        call(LiveMaster("a", "u", "2"), LiveMaster("b", "v", "2"))
    assert not isinstance(two.value, ElasticMasterUnreadableError)
    assert two.value.origin == "render.elastic-two-masters"


# --- shapes the profile cannot render -----------------------------------------------------


def test_sglang_is_refused() -> None:
    doc = _doc(2)
    doc["spec"]["engine"] = {"name": "SGLang", "image": "lmsysorg/sglang:v0.5.23"}
    with pytest.raises(RenderError, match="renders only for vLLM") as exc:
        _render(doc)
    assert exc.value.origin == "render.elastic-unsupported"
    assert exc.value.field == "spec.roles[0].elasticEp"


def test_a_take_over_command_is_refused() -> None:
    with pytest.raises(RenderError, match=re.escape("spec.roles[0].command")) as exc:
        _render(_doc(2, command=["vllm", "serve", "m"]))
    assert exc.value.origin == "render.elastic-unsupported"


def test_two_elastic_roles_are_refused() -> None:
    doc = _doc(2)
    doc["spec"]["roles"].append({**doc["spec"]["roles"][0], "name": "other"})
    with pytest.raises(RenderError, match="one Ray cluster per deployment") as exc:
        _render(doc)
    assert exc.value.origin == "render.elastic-unsupported"


def test_a_head_name_taken_or_too_long_is_refused() -> None:
    with pytest.raises(RenderError, match="rename the role") as exc:
        _render(_doc(2, name="elastic-head"))
    assert exc.value.origin == "render.elastic-head-name"
    doc = _doc(2)
    doc["metadata"]["name"] = "d" * 52
    with pytest.raises(RenderError, match=re.escape("shorten metadata.name")):
        _render(doc)


# --- the liveness program -----------------------------------------------------------------


class _Status(http.server.BaseHTTPRequestHandler):
    status = 200

    def do_GET(self) -> None:
        self.send_response(self.server.status)  # type: ignore[attr-defined]
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        return


@pytest.fixture
def server() -> Iterator[http.server.HTTPServer]:
    srv = http.server.HTTPServer(("127.0.0.1", 0), _Status)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


@pytest.mark.parametrize(("status", "code"), [(200, 0), (503, 0), (500, 1), (404, 1), (302, 1)])
def test_liveness_accepts_200_and_503_only(
    server: http.server.HTTPServer, status: int, code: int
) -> None:
    server.status = status  # type: ignore[attr-defined]
    url = f"http://127.0.0.1:{server.server_address[1]}/health"
    done = subprocess.run([sys.executable, "-c", liveness_script(url)], timeout=30, check=False)
    assert done.returncode == code


def test_liveness_fails_without_a_listener(server: http.server.HTTPServer) -> None:
    port = server.server_address[1]
    server.shutdown()
    server.server_close()
    script = liveness_script(f"http://127.0.0.1:{port}/health")
    done = subprocess.run([sys.executable, "-c", script], timeout=30, check=False)
    assert done.returncode == 1


def test_https_liveness_skips_verification() -> None:
    script = liveness_script("https://127.0.0.1:8443/health")
    assert "ssl._create_unverified_context()" in script
    assert "ssl" not in liveness_script("http://127.0.0.1:8000/health")


# --- explain ------------------------------------------------------------------------------


def _explain(new: dict[str, Any], old: dict[str, Any] | None = None) -> Any:
    return explain_deployment(new, lookups=_lookups(), settings=Settings(), old=old)


def test_explain_a_width_edit_adds_members_and_restarts_nobody() -> None:
    tp2: dict[str, Any] = {
        "resources": {"accelerator": 2},
        "extraArgs": ["--tensor-parallel-size", "2"],
    }
    answer = _explain(_doc(4, **tp2), old=_doc(2, **tp2))
    assert answer.admission.allowed, answer.admission.causes
    (role,) = answer.roles
    assert (role.action, role.added, role.untouched, role.replaced) == ("scale", (2, 3), (0, 1), ())
    assert not answer.rolls() and answer.replaced() == 0
    (cost,) = role.costs
    assert cost.id == "explain.elastic-members-added"
    assert "members 2, 3 are created as Ray workers" in cost.message
    assert "2 nvidia.com/gpu (its TP)" in cost.message
    assert f"on entrance {ENTRANCE}" in cost.message
    assert "never shrink" in cost.message
    assert answer.joint is not None and (answer.joint.joint, answer.joint.groups) == (True, 2)


def test_explain_another_edit_rolls_nobody() -> None:
    answer = _explain(_doc(2, extraArgs=["--max-model-len", "4096"]), old=_doc(2))
    (role,) = answer.roles
    assert role.action == "unchanged" and role.replaced == () and role.changes
    assert [c.id for c in role.costs] == ["explain.elastic-no-roll"]
    assert not answer.rolls()


def test_explain_a_create_says_what_is_rendered() -> None:
    answer = _explain(_doc(4))
    (role,) = answer.roles
    assert [c.id for c in role.costs] == ["explain.elastic-profile"]
    assert "booting the engine at data-parallel size 4" in role.costs[0].message
    assert answer.joint is not None and (answer.joint.joint, answer.joint.groups) == (True, 4)


def test_explain_a_lowered_width_says_it_is_refused() -> None:
    answer = _explain(_doc(2), old=_doc(4))
    assert not answer.admission.allowed
    assert [c.origin for c in answer.admission.causes] == ["elastic.width-lowered"]


def test_master_flags_are_owned_flags() -> None:
    flags = [f for f in elastic.master_flags(2) if f.startswith("--")]
    assert set(flags) <= set(elastic.OWNED_FLAGS)
