"""The closed vocabularies (core/vocabulary.py) and the two decisions made once about them: an
engine's family (``Engine.family``) and the arguments a role's engine reads
(``deployment.roles.role_argv``).

Every ``match`` over these enums ends in ``assert_never``, so mypy --strict refuses a new member
a helper does not handle; these tests check what the helpers answer for every member today.
"""

from __future__ import annotations

from typing import Any, get_args

import pytest

from gpustack_render.api import modeldeployment
from gpustack_render.api.modeldeployment import EngineName, RoleKindName, RoleSpec
from gpustack_render.core.vocabulary import Engine, EngineFamily, RoleKind
from gpustack_render.deployment.roles import effective_kind, role_argv
from gpustack_render.engines import connectors, owned
from gpustack_render.engines.flags import engine_of
from gpustack_render.engines.parallelism import flag_table
from gpustack_render.injection.collisions import owned_connector_flag
from gpustack_render.injection.launch import recognised_engine
from gpustack_render.rendering.drain import idle_gauges
from gpustack_render.rendering.pods import base_command


def test_every_engine_has_one_family() -> None:
    assert {engine: engine.family for engine in Engine} == {
        Engine.VLLM: EngineFamily.VLLM,
        Engine.VLLM_ASCEND: EngineFamily.VLLM,
        Engine.SGLANG: EngineFamily.SGLANG,
    }
    assert {engine.family for engine in Engine} == set(EngineFamily)


def test_members_are_their_wire_strings() -> None:
    for member in (*Engine, *EngineFamily, *RoleKind):
        assert member == member.value and str(member) == member.value == f"{member}"


@pytest.mark.parametrize("engine", list(Engine), ids=str)
def test_family_helpers_answer_for_every_engine(engine: Engine) -> None:
    """What an engine is given follows its family: the same for both vLLM backends."""
    same = [e for e in Engine if e.family is engine.family]
    for helper in (owned.owned_args, owned.owned_env, flag_table):
        answer: Any = helper(engine)
        assert answer and all(helper(e) == answer for e in same)
    client = connectors.store_client(engine, endpoint="m", transport="tcp", tenant="", dtype="")
    vehicle = {EngineFamily.VLLM: "file", EngineFamily.SGLANG: "environment"}[engine.family]
    assert client.engine is engine and client.vehicle == vehicle
    flag = owned_connector_flag(engine.family)
    assert flag in owned.owned_args(engine)


@pytest.mark.parametrize("family", list(EngineFamily), ids=str)
def test_every_family_has_a_base_command_an_entry_point_and_gauges(family: EngineFamily) -> None:
    argv = base_command(family, "m")
    assert recognised_engine(argv) is family
    assert idle_gauges(family) and all(g.startswith(f"{family}:") for g in idle_gauges(family))


def test_every_api_engine_name_maps_to_an_engine() -> None:
    names: tuple[EngineName, ...] = get_args(EngineName)
    assert {engine_of(n) for n in names} == {Engine.VLLM, Engine.SGLANG}
    assert engine_of("vLLM", "ascend") is Engine.VLLM_ASCEND
    assert engine_of("SGLang", "ascend") is Engine.SGLANG


def test_api_and_internal_role_kinds_are_two_names_one_to_one() -> None:
    """``RoleKindName`` is the API spelling, ``RoleKind`` the internal one; the old shared name
    ``RoleKind`` no longer names the API Literal."""
    assert not hasattr(modeldeployment, "RoleKind")
    names: tuple[RoleKindName, ...] = get_args(RoleKindName)
    kinds = [
        effective_kind(RoleSpec.model_validate({"name": "r", "instanceType": "t", "kind": n}))
        for n in names
    ]
    assert kinds == list(RoleKind)
    unset = RoleSpec.model_validate({"name": "r", "instanceType": "t"})
    assert effective_kind(unset) is RoleKind.SERVER


@pytest.mark.parametrize("kind", [*RoleKind, None], ids=str)
def test_every_role_kind_has_a_store_role(kind: RoleKind | None) -> None:
    expected = {RoleKind.PREFILL: "kv_producer", RoleKind.DECODE: "kv_consumer"}
    assert connectors.kv_role_for(kind) == (expected.get(kind, "kv_both") if kind else "kv_both")


def _role(**fields: Any) -> RoleSpec:
    return RoleSpec.model_validate({"name": "r", "instanceType": "t", **fields})


@pytest.mark.parametrize(
    ("fields", "argv", "source"),
    [
        pytest.param({}, (), "extraArgs", id="nothing"),
        pytest.param({"extraArgs": ["-tp", "2"]}, ("-tp", "2"), "extraArgs", id="managed"),
        pytest.param(
            {"command": ["vllm", "serve", "m"], "extraArgs": ["-tp", "2"]},
            ("vllm", "serve", "m"),
            "command",
            id="take-over-extra-args-inert",
        ),
        pytest.param(
            {"command": [], "extraArgs": ["--port", "1"]},
            ("--port", "1"),
            "extraArgs",
            id="empty-command-is-managed",
        ),
    ],
)
def test_role_argv(fields: dict[str, Any], argv: tuple[str, ...], source: str) -> None:
    role = _role(**fields)
    assert role_argv(role) == (argv, source)
    assert (role_argv(role).source == "extraArgs") is role.managed
