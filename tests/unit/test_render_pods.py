"""The main container through ``render``: argv order (D17), env order (D19), volumes, Engram."""

from __future__ import annotations

from typing import Any

import pytest
from property.strategies import Case, deployment, instance_type, pool_inputs, render_case, role

from gpustack_render.core.vocabulary import Engine
from gpustack_render.rendering.pods import vllm_engram_enabled

BASE = ["vllm", "serve", "Qwen/Qwen3-8B"]
FILLED = ["--served-model-name", "Qwen/Qwen3-8B", "--host", "0.0.0.0", "--port", "8000"]


def _main(case: Case, role_index: int = 0) -> dict[str, Any]:
    pod = render_case(case).roles[role_index].seats[0].pod
    return next(c for c in pod["spec"]["containers"] if c["name"] == "main")


def _server(**fields: Any) -> Case:
    return Case(deployment([role(**fields)]), [instance_type()])


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        pytest.param([], [*BASE, *FILLED], id="all-filled"),
        pytest.param(
            ["--port", "9000"],
            [*BASE, "--served-model-name", "Qwen/Qwen3-8B", "--host", "0.0.0.0", "--port", "9000"],
            id="own-port",
        ),
        pytest.param(
            ["--port=9000"],
            [*BASE, "--served-model-name", "Qwen/Qwen3-8B", "--host", "0.0.0.0", "--port=9000"],
            id="own-port-equals-form",
        ),
        pytest.param(
            ["--po", "9000"],
            [*BASE, "--served-model-name", "Qwen/Qwen3-8B", "--host", "0.0.0.0", "--po", "9000"],
            id="own-port-unique-prefix",
        ),
        pytest.param(
            ["--served_model_name", "Qwen/Qwen3-8B"],
            [*BASE, "--host", "0.0.0.0", "--port", "8000", "--served_model_name", "Qwen/Qwen3-8B"],
            id="served-name-underscore",
        ),
        pytest.param(
            ["--host", "::"],
            [*BASE, "--served-model-name", "Qwen/Qwen3-8B", "--port", "8000", "--host", "::"],
            id="own-host",
        ),
        pytest.param(
            ["--max-model-len", "4096", "--portable"],
            [*BASE, *FILLED, "--max-model-len", "4096", "--portable"],
            id="longer-flag-is-not-port",
        ),
    ],
)
def test_vllm_argv(extra: list[str], expected: list[str]) -> None:
    assert _main(_server(extraArgs=extra))["command"] == expected


@pytest.mark.parametrize("value", ["+9000", "9_000", " 9000 ", "09000"])
def test_own_port_is_read_as_the_engine_reads_it(value: str) -> None:
    """The engine's argparse reads ``--port`` with ``int()``: a sign, ``_`` between digits and
    surrounding blanks all name port 9000, so the container port, the probes, the scrape port
    and the Service's ``targetPort`` follow it (admission reads the value the same way)."""
    case = _server(extraArgs=[f"--port={value}"])
    rendering = render_case(case)
    main = _main(case)
    assert main["ports"] == [{"name": "http", "protocol": "TCP", "containerPort": 9000}]
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert main[probe]["httpGet"]["port"] == 9000
    pod = rendering.roles[0].seats[0].pod
    assert pod["metadata"]["annotations"]["prometheus.io/port"] == "9000"
    assert rendering.roles[0].service["spec"]["ports"][0]["port"] == 8000
    assert rendering.roles[0].service["spec"]["ports"][0]["targetPort"] == 9000


def test_extra_args_come_last_after_connector_arguments() -> None:
    case = Case(
        deployment([role(extraArgs=["--enable-prefix-caching"])], pool_ref="team-a-cache"),
        [instance_type(), *pool_inputs()],
    )
    command = _main(case)["command"]
    assert command[3] == "--kv-transfer-config"
    assert command[5:7] == ["--kv-cache-dtype", "bfloat16"]
    assert command[-1] == "--enable-prefix-caching"


def test_sglang_defaulted_group_dropped_when_named() -> None:
    case = Case(
        deployment(
            [role(extraArgs=["--enable-hierarchical-cache", "--hicache-ratio", "2"])],
            engine="SGLang",
            image="lmsysorg/sglang:v0.5.18",
            pool_ref="team-a-cache",
        ),
        [instance_type(), *pool_inputs()],
    )
    command = _main(case)["command"]
    assert command.count("--enable-hierarchical-cache") == 1
    assert command[-3:] == ["--enable-hierarchical-cache", "--hicache-ratio", "2"]


def test_env_order_owned_defaulted_user_rank() -> None:
    case = Case(
        deployment(
            [
                role(
                    size=2,
                    env=[
                        {"name": "A_USER", "value": "1"},
                        {"name": "MC_TE_METRIC", "value": "0"},
                        {"name": "MOONCAKE_CONFIG_PATH", "value": "/mine"},
                        {"name": "GPUSTACK_MEMBER_INDEX", "value": "7"},
                        {"name": "NO_VALUE"},
                    ],
                )
            ],
            pool_ref="team-a-cache",
        ),
        [instance_type(), *pool_inputs()],
    )
    env = _main(case)["env"]
    assert [e["name"] for e in env] == [
        "MOONCAKE_CONFIG_PATH",
        "VLLM_CACHE_ROOT",
        "A_USER",
        "MC_TE_METRIC",
        "NO_VALUE",
        "GPUSTACK_REPLICA_LEADER_ADDRESS",
        "GPUSTACK_REPLICA_SIZE",
        "GPUSTACK_MEMBER_INDEX",
    ]
    assert env[0]["value"] == "/etc/gpustack/kvcache/mooncake.json"
    assert env[3] == {"name": "MC_TE_METRIC", "value": "0"}
    assert env[4] == {"name": "NO_VALUE"}
    assert env[-1]["valueFrom"]["fieldRef"]["fieldPath"] == (
        "metadata.labels['modeldeployment.gpustack.ai/member-index']"
    )


def test_no_rank_env_at_size_one() -> None:
    names = [e["name"] for e in _main(_server())["env"]]
    assert not any(n.startswith("GPUSTACK_") for n in names)


def test_take_over_keeps_shm_and_probes_but_no_cache() -> None:
    main = _main(_server(command=["vllm", "serve", "m", "--port", "9100"]))
    assert main["command"] == ["vllm", "serve", "m", "--port", "9100"]
    assert "env" not in main and "lifecycle" not in main
    assert [m["name"] for m in main["volumeMounts"]] == ["gpustack-shm"]
    assert main["startupProbe"]["httpGet"]["port"] == 9100


@pytest.mark.parametrize(
    ("shm_size", "limit"),
    [
        pytest.param(None, "16Gi", id="default"),
        pytest.param("32Gi", "32Gi", id="binary"),
        pytest.param("32768Mi", "32Gi", id="largest-exact-unit"),
        pytest.param(1073741824, "1Gi", id="plain-bytes"),
        pytest.param("1536Mi", "1536Mi", id="not-whole-gi"),
        pytest.param("1G", "953Mi", id="decimal-rounded-down-to-mi"),
    ],
)
def test_shm_size_limit_is_written_in_d18_form(shm_size: Any, limit: str) -> None:
    """D18: every memory quantity the project writes is in the largest exact binary unit,
    rounded down to 1Mi; the shm ``sizeLimit`` is one of them."""
    fields = {} if shm_size is None else {"shmSize": shm_size}
    pod = render_case(_server(**fields)).roles[0].seats[0].pod
    shm = next(v for v in pod["spec"]["volumes"] if v["name"] == "gpustack-shm")
    assert shm["emptyDir"] == {"medium": "Memory", "sizeLimit": limit}


def test_additional_volume_without_source_is_skipped_but_keeps_indices() -> None:
    main = _main(
        _server(
            additionalVolumes=[
                {"mountPath": "/nothing"},
                {"mountPath": "/data", "readOnly": False, "hostPath": {"path": "/mnt"}},
            ]
        )
    )
    assert main["volumeMounts"][0] == {
        "name": "additional-1",
        "mountPath": "/data",
        "readOnly": False,
    }


@pytest.mark.parametrize(
    ("argv", "enabled"),
    [
        pytest.param(["--engram-config", "{}"], True, id="bare-json"),
        pytest.param(['--engram-config={"cpu_offload": false}'], False, id="json-off"),
        pytest.param(["--engram_config", '{"cpu_offload": "false"}'], False, id="json-off-string"),
        pytest.param(["--engram-config.table_size=8"], True, id="dotted-member"),
        pytest.param(["--engram-config.cpu_offload", "false"], False, id="dotted-off"),
        pytest.param(
            ["--engram-config.cpu_offload=false", "--engram-config.cpu_offload=true"],
            True,
            id="last-setting-wins",
        ),
        pytest.param(["--engram-config", "not-json"], True, id="unparsable-value"),
        pytest.param(["--engram-configs"], False, id="longer-flag"),
        pytest.param([], False, id="absent"),
    ],
)
def test_vllm_engram_detection(argv: list[str], enabled: bool) -> None:
    assert vllm_engram_enabled(argv, Engine.VLLM) is enabled


def test_routing_proxy_picks_next_free_engine_port() -> None:
    case = Case(
        deployment(
            [
                role("prefill", kind="Prefill", ports=[{"port": 8000}]),
                role("decode", kind="Decode", ports=[{"port": 8000}, {"port": 8200}]),
            ],
            router="llm-d-router",
        ),
        [instance_type()],
    )
    rendering = render_case(case)
    decoder = rendering.roles[1]
    assert decoder.direct_decoder
    main = _main(case, 1)
    assert main["ports"][0] == {"name": "model-server", "protocol": "TCP", "containerPort": 8201}
    assert main["ports"][1] == {"name": "tcp-8200", "protocol": "TCP", "containerPort": 8200}
    assert (
        "--port" in main["command"]
        and main["command"][main["command"].index("--port") + 1] == "8201"
    )


def test_members_of_a_multi_pod_instance_name_their_rank_label_for_kueue() -> None:
    """Kueue's topology-aware placement orders a group's ranks by the label named here
    (copied into kueue.x-k8s.io/pod-group-pod-index by Kueue's Pod webhook)."""
    key = "kueue.x-k8s.io/pod-group-pod-index-label"
    rendering = render_case(_server(size=2))
    seats = rendering.roles[0].seats
    assert len(seats) == 2
    for seat in seats:
        annotations = seat.pod["metadata"]["annotations"]
        assert annotations[key] == "modeldeployment.gpustack.ai/member-index"
        assert annotations["modeldeployment.gpustack.ai/render-version"] == "2"
    single = render_case(_server()).roles[0].seats[0].pod
    assert key not in single["metadata"]["annotations"]
