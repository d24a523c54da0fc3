"""Flag spelling (docs/contract/admission.md §13) and the owned-key tables."""

from __future__ import annotations

import pytest

from gpustack_render.core.vocabulary import Engine
from gpustack_render.engines import owned
from gpustack_render.engines.flags import (
    FlagHit,
    engine_of,
    find_flag,
    flag_name,
    has_flag,
    is_value_token,
    last_value,
    resolves_to,
    spelled,
    values_at,
)

VLLM_KEYS = owned.VLLM_OWNED_ARGS
SGLANG_KEYS = owned.SGLANG_OWNED_ARGS


@pytest.mark.parametrize(
    ("token", "engine", "keys", "expected"),
    [
        pytest.param("--kv-transfer-config", "vllm", VLLM_KEYS, "--kv-transfer-config", id="exact"),
        pytest.param("--kv-transfer-config={}", "vllm", VLLM_KEYS, "--kv-transfer-config", id="eq"),
        pytest.param("--kv_transfer_config", "vllm", VLLM_KEYS, "--kv-transfer-config", id="under"),
        pytest.param(
            "--kv-transfer-config.kv_role=x", "vllm", VLLM_KEYS, "--kv-transfer-config", id="dotted"
        ),
        pytest.param(
            "--kv_events_config.topic", "vllm-ascend", VLLM_KEYS, "--kv-events-config", id="ascend"
        ),
        pytest.param("--kv-transfer-conf", "vllm", VLLM_KEYS, "--kv-transfer-config", id="prefix"),
        pytest.param("--kv", "vllm", VLLM_KEYS, "--kv-transfer-config", id="short-prefix-first"),
        pytest.param("--kv-e", "vllm", VLLM_KEYS, "--kv-events-config", id="prefix-second"),
        pytest.param("--kv-transfer-config-x", "vllm", VLLM_KEYS, None, id="longer-stem"),
        pytest.param("-kv-transfer-config", "vllm", VLLM_KEYS, None, id="single-dash"),
        pytest.param("--", "vllm", VLLM_KEYS, None, id="bare-dashes"),
        pytest.param("--=x", "vllm", VLLM_KEYS, None, id="empty-name"),
        pytest.param("kv-transfer-config", "vllm", VLLM_KEYS, None, id="no-dashes"),
        pytest.param("--kv_transfer_config", "sglang", VLLM_KEYS, None, id="sglang-no-underscore"),
        pytest.param(
            "--disaggregation-mo", "sglang", SGLANG_KEYS, "--disaggregation-mode", id="sg-prefix"
        ),
        pytest.param(
            "--hicache-storage-backend",
            "sglang",
            ("--hicache-storage-backend-extra-config",),
            None,
            id="other-owned-key-is-not-a-prefix",
        ),
        pytest.param(
            "--hicache-storage-backend",
            "sglang",
            SGLANG_KEYS,
            "--hicache-storage-backend",
            id="exact-before-prefix",
        ),
        pytest.param(
            "--disaggregation-mode.x", "sglang", SGLANG_KEYS, None, id="sglang-no-dotted-members"
        ),
        pytest.param("--kv-cache-dtype", "vllm", VLLM_KEYS, None, id="dtype-not-owned-here"),
        pytest.param(
            "--kv-cache-dtype-skip-layers",
            "vllm",
            (owned.KV_CACHE_DTYPE_FLAG,),
            None,
            id="skip-layers-never-dtype",
        ),
    ],
)
def test_resolves_to(token: str, engine: str, keys: tuple[str, ...], expected: str | None) -> None:
    assert resolves_to(token, keys, Engine(engine)) == expected


def test_flag_name_rewrites_only_vllm_family() -> None:
    assert flag_name("--a_b.c_d=1", Engine.VLLM) == "--a-b"
    assert flag_name("--a_b.c_d=1", Engine.VLLM_ASCEND) == "--a-b"
    assert flag_name("--a_b.c_d=1", Engine.SGLANG) == "--a_b.c_d"
    assert flag_name("-x", Engine.VLLM) is None


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        pytest.param(["--port", "9000"], [FlagHit(0, "9000")], id="split"),
        pytest.param(["--port=9000"], [FlagHit(0, "9000")], id="eq"),
        pytest.param(["--po", "1", "--port=2"], [FlagHit(0, "1"), FlagHit(2, "2")], id="twice"),
        pytest.param(["--port"], [FlagHit(0, None)], id="no-value"),
        pytest.param(["--port", "--host"], [FlagHit(0, None)], id="followed-by-flag"),
        pytest.param(["--port", "-1"], [FlagHit(0, "-1")], id="negative-value"),
        pytest.param(["--portx", "1", "-p", "2"], [], id="none"),
    ],
)
def test_find_flag(argv: list[str], expected: list[FlagHit]) -> None:
    assert find_flag(argv, owned.PORT_FLAG, Engine.VLLM) == expected


def test_single_value_helpers() -> None:
    argv = ["--host", "0.0.0.0", "--port", "1", "--port=2"]
    assert last_value(argv, "--port", Engine.SGLANG) == "2"
    assert has_flag(argv, "--host", Engine.SGLANG)
    assert not has_flag(argv, "--served-model-name", Engine.SGLANG)


def test_values_at() -> None:
    argv = ["--served-model-name", "a", "b", "--x", "c"]
    assert values_at(argv, 0, many=True) == ["a", "b"]
    assert values_at(argv, 0, many=False) == ["a"]
    assert values_at(["--served-model-name=a", "b"], 0, many=True) == ["a"]
    assert values_at(argv, 9, many=True) == []


def test_value_tokens() -> None:
    assert is_value_token("8")
    assert is_value_token("-8")
    assert is_value_token("-.5")
    assert not is_value_token("-tp")
    assert not is_value_token("--x")


def test_engine_of() -> None:
    assert engine_of("vLLM", "ascend") is Engine.VLLM_ASCEND
    assert engine_of("vLLM", "nvidia") is Engine.VLLM
    assert engine_of("vLLM") is Engine.VLLM
    assert engine_of("SGLang", "ascend") is Engine.SGLANG


def test_spelled() -> None:
    assert spelled("--kv-transfer-config={}", "--kv-transfer-config") == "--kv-transfer-config"
    assert spelled("--kv_transfer_config", "--kv-transfer-config") == (
        "--kv_transfer_config (read as --kv-transfer-config)"
    )


def test_owned_tables() -> None:
    assert owned.owned_args(Engine.VLLM) == owned.owned_args(Engine.VLLM_ASCEND)
    assert owned.owned_env(Engine.VLLM) == owned.owned_env(Engine.VLLM_ASCEND)
    assert "MOONCAKE_CONFIG_PATH" in owned.owned_env(Engine.VLLM)
    assert "MOONCAKE_CONFIG_PATH" not in owned.owned_env(Engine.SGLANG)
    assert "MOONCAKE_TENANT_ID" in owned.owned_env(Engine.SGLANG)
    assert "MOONCAKE_TENANT_ID" not in owned.owned_env(Engine.VLLM)
    for engine in owned.ENGINES:
        assert set(owned.REPLICA_ENV) <= set(owned.owned_env(engine))
        assert not set(owned.DEFAULTED_ENV) & set(owned.owned_env(engine))
    gateway = owned.ROUTER_OWNED_ARGS[owned.SGLANG_GATEWAY]
    assert "--kv-connector" not in gateway
    assert "--pd-disaggregation" in gateway
    assert "--vllm-pd-disaggregation" not in gateway
