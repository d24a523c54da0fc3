"""The parallel-degree parser (docs/contract/admission.md §14)."""

from __future__ import annotations

import pytest

from gpustack_render.api.modeldeployment import RoleSpec
from gpustack_render.core.vocabulary import Engine
from gpustack_render.deployment.roles import role_parallelism
from gpustack_render.engines.parallelism import Degrees, parse_int, parse_parallelism


@pytest.mark.parametrize(
    ("argv", "engine", "expected"),
    [
        pytest.param([], "vllm", Degrees(), id="empty"),
        pytest.param(["-tp", "2"], "vllm", Degrees(tensor_parallel=2), id="alias"),
        pytest.param(["-t", "2"], "vllm", Degrees(tensor_parallel=2), id="abbreviation"),
        pytest.param(["-tp=4"], "vllm", Degrees(tensor_parallel=4), id="alias-eq"),
        pytest.param(
            ["--tensor_parallel_size", "3"], "vllm", Degrees(tensor_parallel=3), id="underscores"
        ),
        pytest.param(["--tensor", "2"], "vllm", Degrees(tensor_parallel=2), id="unique-prefix"),
        pytest.param(["--data-parallel-s", "2"], "vllm", Degrees(), id="ambiguous-prefix"),
        pytest.param(
            ["--data-parallel-size-l", "2"],
            "vllm",
            Degrees(data_parallel_local=2),
            id="prefix-local",
        ),
        pytest.param(["-tp", "2", "-tp", "4"], "vllm", Degrees(tensor_parallel=4), id="last-wins"),
        pytest.param(["--", "-tp", "2"], "vllm", Degrees(), id="double-dash-stops"),
        pytest.param(["serve", "m", "-pp", "2"], "vllm", Degrees(pipeline_parallel=2), id="skip"),
        pytest.param(["-tp", " 1_0 "], "vllm", Degrees(tensor_parallel=10), id="int-syntax"),
        pytest.param(
            ["-dpl", "0"], "vllm", Degrees(data_parallel_local=0), id="local-zero-allowed"
        ),
        pytest.param(["--tp", "2"], "sglang", Degrees(tensor_parallel=2), id="sglang-prefix"),
        pytest.param(["--ep", "4"], "sglang", Degrees(expert_parallel=4), id="sglang-ep-alias"),
        pytest.param(["-tp", "2"], "sglang", Degrees(), id="sglang-no-short"),
        pytest.param(
            ["--tensor_parallel_size", "2"], "sglang", Degrees(), id="sglang-no-underscore"
        ),
    ],
)
def test_degrees(argv: list[str], engine: str, expected: Degrees) -> None:
    parsed = parse_parallelism(argv, engine=Engine(engine))
    assert parsed.error is None, parsed.error
    assert parsed.degrees == expected


@pytest.mark.parametrize(
    ("argv", "flag", "fragment"),
    [
        pytest.param(["-tp"], "--tensor-parallel-size", "no value", id="no-value"),
        pytest.param(["-tp", "--x"], "--tensor-parallel-size", "no value", id="flag-follows"),
        pytest.param(["-tp", "two"], "--tensor-parallel-size", "not an integer", id="word"),
        pytest.param(["-tp", "_3"], "--tensor-parallel-size", "not an integer", id="underscore"),
        pytest.param(["-tp", "3_"], "--tensor-parallel-size", "not an integer", id="trailing-"),
        pytest.param(["-tp", "1__0"], "--tensor-parallel-size", "not an integer", id="double-"),
        pytest.param(["-tp", "-2"], "--tensor-parallel-size", "below", id="negative"),
        pytest.param(["-tp=0"], "--tensor-parallel-size", "below", id="zero"),
        pytest.param(["-dpl", "-1"], "--data-parallel-size-local", "below", id="local-negative"),
        pytest.param(["-tp", "9" * 20], "--tensor-parallel-size", "out of range", id="int64"),
        pytest.param(["-t=2"], "--tensor-parallel-size", "3.12", id="abbreviation-eq"),
        pytest.param(["-t2"], "--tensor-parallel-size", "every Python", id="glued-abbreviation"),
        pytest.param(["-pc=2"], "--prefill-context-parallel-size", "3.12", id="pc-eq"),
    ],
)
def test_unreadable(argv: list[str], flag: str, fragment: str) -> None:
    parsed = parse_parallelism(argv, engine=Engine.VLLM)
    assert parsed.error is not None
    assert parsed.error.flag == flag
    assert fragment in parsed.error.problem
    assert not parsed.readable and not parsed.complete
    assert parsed.load_balance == "Unknown"
    assert parsed.degrees == Degrees()


def test_modes_and_wiring() -> None:
    parsed = parse_parallelism(
        ["-e", "-ep=true", "-n2", "-r", "0", "--headless", "--master-addr", "h"], engine=Engine.VLLM
    )
    assert parsed.error is None
    assert parsed.modes == {"--enable-expert-parallel"}
    assert dict(parsed.wiring) == {
        "--nnodes": "2",
        "--node-rank": "0",
        "--headless": None,
        "--master-addr": "h",
    }
    assert parsed.nnodes == 2
    assert not parsed.complete
    assert parse_parallelism(["-e=1"], engine=Engine.VLLM).modes == frozenset()
    assert parse_parallelism(["-e2"], engine=Engine.VLLM).error is None


@pytest.mark.parametrize(
    ("argv", "env", "engine", "width"),
    [
        pytest.param(["-tp", "2", "-pp", "2"], [], "vllm", 4, id="tp-pp"),
        pytest.param(["-tp", "2", "-dp", "2"], [], "vllm", 4, id="dp-when-local-undeclared"),
        pytest.param(["-tp", "2", "-dp", "4", "-dpl", "2"], [], "vllm", 4, id="local-wins"),
        pytest.param(["-tp", "2", "-dp", "4", "-dpl", "1"], [], "vllm", 2, id="local-one"),
        pytest.param(["-pcp", "2", "-dcp", "4"], [], "vllm", 2, id="pcp-counts-dcp-not"),
        pytest.param(["-tp", "2", "-ep"], [], "vllm", 2, id="expert-mode-never"),
        pytest.param([], [("VLLM_DP_SIZE", "4")], "vllm", 4, id="env-dp"),
        pytest.param(["-dp", "2"], [("VLLM_DP_SIZE", "4")], "vllm", 2, id="flag-beats-env"),
        pytest.param(["-dpl", "0"], [("VLLM_DP_SIZE", "4")], "vllm", 1, id="local-zero-no-env"),
        pytest.param(["--tp", "2", "--dp", "2"], [], "sglang", 4, id="sglang-dp"),
        pytest.param(
            ["--tp", "2", "--dp", "2", "--enable-dp-attention"], [], "sglang", 2, id="dp-attn"
        ),
        pytest.param(["--dp", "2", "--moe-dp-size", "2"], [], "sglang", 1, id="moe-dp"),
        pytest.param(["--dp", "2", "--enable-prefill-cp"], [], "sglang", 2, id="prefill-cp"),
        pytest.param(["--tp", "2", "--ep-size", "8"], [], "sglang", 2, id="ep-never"),
        pytest.param([], [("VLLM_DP_SIZE", "4")], "sglang", 1, id="env-vllm-only"),
    ],
)
def test_width(argv: list[str], env: list[tuple[str, str]], engine: str, width: int) -> None:
    assert parse_parallelism(argv, engine=Engine(engine), env=env).width() == width


def test_env_errors_name_the_variable() -> None:
    parsed = parse_parallelism([], engine=Engine.VLLM, env=[("VLLM_DP_SIZE", "x")])
    assert parsed.error is not None and parsed.error.flag == "VLLM_DP_SIZE"
    parsed = parse_parallelism([], engine=Engine.VLLM, env=[("VLLM_DP_SIZE", None)])
    assert parsed.error is not None


def test_width_factors_name_the_source() -> None:
    parsed = parse_parallelism(["-tp", "2"], engine=Engine.VLLM, env=[("VLLM_DP_SIZE", "4")])
    assert [f for f, v in parsed.width_factors() if v > 1] == [
        "--tensor-parallel-size",
        "VLLM_DP_SIZE",
    ]


def test_cache_degrees_and_load_balance() -> None:
    parsed = parse_parallelism(
        ["-tp", "2", "-dp", "2", "--enable-expert-parallel"], engine=Engine.VLLM
    )
    assert parsed.cache_degrees() == {"dcp": 1, "dp": 2, "ep": 4, "pcp": 1, "pp": 1, "tp": 2}
    assert parsed.load_balance == "Internal"
    sg = parse_parallelism(
        ["--tp-size", "2", "--ep-size", "2", "--dcp-size", "2"], engine=Engine.SGLANG
    )
    assert sg.cache_degrees() == {"dcp": 2, "dp": 1, "ep": 2, "pcp": 1, "pp": 1, "tp": 2}
    assert parse_parallelism(["-dph"], engine=Engine.VLLM).load_balance == "Hybrid"
    assert parse_parallelism(["-dpe"], engine=Engine.VLLM).load_balance == "External"
    assert parse_parallelism(["-dpm"], engine=Engine.VLLM).load_balance == "MultiPort"


def test_role_stream() -> None:
    def role(**fields: object) -> RoleSpec:
        return RoleSpec.model_validate({"name": "r", "instanceType": "t", **fields})

    took = role_parallelism(
        role(command=["vllm", "serve", "m", "-tp", "4"], extraArgs=["-tp", "2"]),
        engine=Engine.VLLM,
    )
    assert took.source == "command" and took.degrees.tensor_parallel == 4
    managed = role_parallelism(role(extraArgs=["-tp", "2"]), engine=Engine.VLLM)
    assert managed.source == "extraArgs" and managed.degrees.tensor_parallel == 2
    env = role(extraArgs=["-tp", "2"], env=[{"name": "VLLM_DP_SIZE", "value": "2"}])
    assert role_parallelism(env, engine=Engine.VLLM).width() == 4


@pytest.mark.parametrize(
    ("raw", "value"),
    [("10", 10), ("+3", 3), ("-3", -3), (" 7 ", 7), ("1_000", 1000), ("", None), ("1.0", None)],
)
def test_parse_int(raw: str, value: int | None) -> None:
    assert parse_int(raw) == value
