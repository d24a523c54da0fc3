"""Offline ``explain`` of an update says what the rollout planner will do (the rest of its
outputs are golden cases)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from explain_support import INSTANCE_TYPE

from gpustack_render.api import KVCachePool
from gpustack_render.cli import yamlio
from gpustack_render.cli.documents import read_bundle
from gpustack_render.core.settings import Settings
from gpustack_render.explain.report import explain_deployment
from gpustack_render.schema.lookups import StaticLookups

ROOT = Path(__file__).resolve().parents[2]
POOL_CASE = ROOT / "golden" / "render-vllm-pool" / "input.yaml"
HELD_BY_CACHE = "explain.held-by-cache"
KV_STATUS = {
    "binding": "team-a-dram",
    "pool": "dram-pool",
    "domain": {"name": "team-a-shared", "blockSize": 16, "dtype": "bfloat16"},
}


def _pool_inputs(*, endpoint: str) -> tuple[dict[str, Any], StaticLookups]:
    text = POOL_CASE.read_text()
    docs = yamlio.load_documents(text)
    bundle = read_bundle([("input.yaml", text)])
    for obj in bundle.inputs:
        if isinstance(obj, KVCachePool):
            status = obj.status.model_copy(update={"client_endpoint": endpoint})
            inputs = [
                o if o is not obj else obj.model_copy(update={"status": status})
                for o in bundle.inputs
            ]
            return docs[0], StaticLookups.of(inputs, default_namespace="team-a")
    raise AssertionError("no KVCachePool in the case")


@pytest.mark.parametrize("edit_image", [False, True])
def test_a_roll_the_cache_holds_replaces_nothing(edit_image: bool) -> None:
    # The stored object resolved a store connection before (status.kvCache); the pool has lost
    # its endpoint since: the controller deletes no outdated replica (RolloutHeldByCache).
    md, old_lookups = _pool_inputs(endpoint="dram-pool-master.gpustack-system.svc:50051")
    _, lookups = _pool_inputs(endpoint="")
    stored = copy.deepcopy(md)
    stored["status"] = {"kvCache": KV_STATUS}
    new = copy.deepcopy(md)
    if edit_image:
        new["spec"]["engine"]["image"] = "vllm/vllm-openai:v0.26.0"
    answer = explain_deployment(
        new, lookups=lookups, settings=Settings(), old=stored, old_lookups=old_lookups
    )
    (role,) = answer.roles
    assert role.action == "roll" and role.changes
    assert role.replaced == () and role.untouched == (0, 1)
    assert HELD_BY_CACHE in {c.id for c in role.costs}
    assert answer.replaced() == 0


def test_without_a_resolved_connection_before_nothing_holds() -> None:
    # status.kvCache absent: the connection never resolved, so nothing holds the roll.
    md, old_lookups = _pool_inputs(endpoint="dram-pool-master.gpustack-system.svc:50051")
    _, lookups = _pool_inputs(endpoint="")
    answer = explain_deployment(
        md, lookups=lookups, settings=Settings(), old=md, old_lookups=old_lookups
    )
    (role,) = answer.roles
    assert role.action == "roll" and role.replaced == (1, 0)
    assert HELD_BY_CACHE not in {c.id for c in role.costs}


def _md(**role: Any) -> dict[str, Any]:
    return {
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "ModelDeployment",
        "metadata": {"name": "qwen-chat", "namespace": "team-a"},
        "spec": {
            "model": {"name": "Qwen/Qwen2.5-7B-Instruct"},
            "engine": {"name": "vLLM", "image": "vllm/vllm-openai:v0.25.1"},
            "roles": [{"name": "server", "replicas": 2, "instanceType": "a10g", **role}],
        },
    }


def test_a_default_the_api_server_stored_is_no_dropped_field() -> None:
    # `kubectl get -o yaml` prints the schema defaults and the mutating accelerator default; a
    # manifest omitting them changes nothing, so no "falls back to its default" note.
    stored = _md(
        kind="Server",
        size=1,
        privileged=False,
        startupTimeoutSeconds=1800,
        resources={"accelerator": "1"},
    )
    lookups = StaticLookups.of([INSTANCE_TYPE])
    answer = explain_deployment(_md(), lookups=lookups, settings=Settings(), old=stored)
    assert [r.action for r in answer.roles] == ["unchanged"]
    assert answer.notes == ()


def test_a_dropped_field_that_moves_is_still_noted() -> None:
    stored = _md(size=2, resources={"accelerator": "1"})
    lookups = StaticLookups.of([INSTANCE_TYPE])
    answer = explain_deployment(_md(), lookups=lookups, settings=Settings(), old=stored)
    assert [r.action for r in answer.roles] == ["roll"]
    assert [n.split(" ", 1)[0] for n in answer.notes] == ["spec.roles[0].size"]


def test_a_stored_object_that_no_longer_decodes_is_named_as_not_compared() -> None:
    # Its replicas cannot be compared: the answer says so rather than showing a silent create.
    stored = _md(replicas=2000, resources={"accelerator": "1"})
    lookups = StaticLookups.of([INSTANCE_TYPE])
    answer = explain_deployment(_md(), lookups=lookups, settings=Settings(), old=stored)
    assert answer.operation == "UPDATE"
    (problem,) = answer.problems
    assert problem.side == "old" and problem.field == "spec.roles[0].replicas"
    assert any("cannot be compared" in n for n in answer.notes)
