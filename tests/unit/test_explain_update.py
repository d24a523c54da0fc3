"""Offline ``explain`` of an update says what the rollout planner will do (the rest of its
outputs are golden cases)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from explain_support import INSTANCE_TYPE, UID, as_list, replicas_of, role_spec

from gpustack_render.api import KVCachePool
from gpustack_render.cli import yamlio
from gpustack_render.cli.documents import read_bundle
from gpustack_render.cli.verbs.explain import gate_failures
from gpustack_render.core.settings import Settings
from gpustack_render.explain.observed import split_observed
from gpustack_render.explain.report import explain_deployment
from gpustack_render.rendering.renderer import render
from gpustack_render.schema.decoding import decode_deployment
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


def _deployment(
    *roles: dict[str, Any], image: str = "vllm/vllm-openai:v0.25.1", **meta: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "ModelDeployment",
        "metadata": {"name": "qwen-chat", "namespace": "team-a", "uid": UID, **meta},
        "spec": {
            "model": {"name": "Qwen/Qwen2.5-7B-Instruct"},
            "engine": {"name": "vLLM", "image": image},
            "roles": list(roles),
        },
    }


_FLOOR = {"modeldeployment.gpustack.ai/min-render-version": "2"}
EDITS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "image": (_deployment(role_spec()), _deployment(role_spec(), image="x:2")),
    "size": (
        _deployment(role_spec(replicas=3, size=2)),
        _deployment(role_spec(replicas=3, size=3)),
    ),
    "scale-up-and-roll": (
        _deployment(role_spec()),
        _deployment(role_spec(replicas=4), image="x:2"),
    ),
    "scale-down-and-roll": (
        _deployment(role_spec(replicas=4)),
        _deployment(role_spec(replicas=2), image="x:2"),
    ),
    "scale": (_deployment(role_spec(replicas=3)), _deployment(role_spec(replicas=1))),
    "floor": (_deployment(role_spec()), _deployment(role_spec(), annotations=_FLOOR)),
    "pair-one-role": (
        _deployment(role_spec("prefill", kind="Prefill"), role_spec("decode", kind="Decode")),
        _deployment(
            role_spec("prefill", kind="Prefill"), role_spec("decode", args=["-O3"], kind="Decode")
        ),
    ),
    "pair-both-and-scale": (
        _deployment(
            role_spec("prefill", replicas=3, kind="Prefill"), role_spec("decode", kind="Decode")
        ),
        _deployment(
            role_spec("prefill", replicas=1, kind="Prefill"),
            role_spec("decode", replicas=3, kind="Decode"),
            image="x:2",
        ),
    ),
}


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_offline_replacements_are_the_planners(edit: str) -> None:
    # The replicas the offline answer says an edit replaces, in its order, are the ones the
    # real planner replaces pass after pass on the stored object's running replicas.
    old, new = EDITS[edit]
    lookups = StaticLookups.of([INSTANCE_TYPE])
    stored, _ = decode_deployment(copy.deepcopy(old))
    assert stored is not None
    rendering = render(stored, lookups=lookups, settings=Settings())
    running = [
        o for r in rendering.roles for o in replicas_of(rendering, r.name, render_version="1")
    ]
    observed = split_observed(as_list(running)["items"])
    answer = explain_deployment(
        new, lookups=lookups, settings=Settings(), old=old, observed=observed
    )
    assert answer.observed is not None and answer.observed.converged
    planner: dict[str, list[int | None]] = {}
    for step in answer.observed.timeline:
        for deletion in step.deletes:
            if deletion.why in ("healthy", "queued", "outdated", "broken"):
                planner.setdefault(deletion.role, []).append(deletion.ordinal)
    for role in answer.roles:
        assert list(role.replaced) == planner.get(role.name, []), role.name


def test_an_update_that_cannot_be_compared_trips_the_gates() -> None:
    # The stored object's InstanceType is gone: its replicas cannot be compared, yet the edit
    # replaces them (their pod-spec-hash names the old type); a gate must not pass silently.
    stored = _md(instanceType="gone", resources={"accelerator": "1"})
    lookups = StaticLookups.of([INSTANCE_TYPE])
    answer = explain_deployment(_md(), lookups=lookups, settings=Settings(), old=stored)
    assert [p.side for p in answer.problems] == ["old"]
    assert answer.replaced() == 2 and answer.rolls()
    failed = gate_failures(answer, max_replaced=0, fail_on=["roll"])
    assert len(failed) == 2 and "cannot be rendered" in failed[1]


def test_an_edited_file_without_a_uid_is_the_stored_object_updated() -> None:
    """Issue 37 item 2: a file kept in Git has no ``metadata.uid``; explained against the stored
    object (which has one, as live mode reads it), a ``router.replicas`` edit only scales the
    router's Deployment: the ServiceAccount, Role, RoleBinding and Service are unchanged, the
    same answer as when both sides carry the uid."""
    text = (ROOT / "golden" / "render-router-default-image" / "input.yaml").read_text()
    stored = yamlio.load_documents(text)[0]
    assert stored["metadata"]["uid"]
    lookups = read_bundle([("input.yaml", text)]).lookups(default_namespace="team-a")
    edited = copy.deepcopy(stored)
    edited["spec"]["router"]["replicas"] = 3
    with_uid = explain_deployment(edited, lookups=lookups, settings=Settings(), old=stored)
    del edited["metadata"]["uid"]
    from_git = explain_deployment(edited, lookups=lookups, settings=Settings(), old=stored)
    for answer in (with_uid, from_git):
        assert answer.router is not None
        assert [(c.kind, c.change) for c in answer.router.changes] == [
            ("Deployment", "scaled 1 -> 3")
        ]
    assert from_git == with_uid
