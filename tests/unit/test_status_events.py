"""Departure and render events on the ModelDeployment (docs/contract/controller.md §16, D24)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from gpustack_render.api.modeldeployment import ModelDeployment
from gpustack_render.core.errors import RenderError
from gpustack_render.reconcile.events import (
    REPLICA_EVICTED,
    REPLICA_LEAVING,
    REPLICA_RESTARTED,
    dedup_key,
    departure_events,
    render_failed,
)
from gpustack_render.reconcile.observed import ObservedPod
from gpustack_render.schema.decoding import decode_deployment

BASE = ObservedPod(name="qwen-server-x1", uid="u", role="server", ordinal=1, phase="Running")


def _deployment(*, pool: bool) -> ModelDeployment:
    spec: dict[str, Any] = {
        "model": {"name": "Qwen/Qwen3-8B"},
        "engine": {"name": "vLLM", "image": "vllm/vllm-openai:v0.25.1"},
        "roles": [{"name": "server", "instanceType": "a10g"}],
    }
    if pool:
        spec["kvCache"] = {"poolRef": {"name": "cache"}}
    md, errs = decode_deployment(
        {
            "apiVersion": "worker.gpustack.ai/v1",
            "kind": "ModelDeployment",
            "metadata": {"name": "qwen", "namespace": "team-a"},
            "spec": spec,
        }
    )
    assert md is not None, errs
    return md


#: A deployment on a KV cache pool, and one without.
POOLED = _deployment(pool=True)
PLAIN = _deployment(pool=False)


@pytest.mark.parametrize(
    ("pod", "reasons"),
    [
        pytest.param(BASE, [], id="healthy"),
        pytest.param(
            replace(BASE, phase="Failed", reason="Evicted"), [REPLICA_EVICTED], id="evicted"
        ),
        pytest.param(replace(BASE, terminating=True), [REPLICA_LEAVING], id="leaving"),
        pytest.param(replace(BASE, restarts=3), [REPLICA_RESTARTED], id="restarted"),
        pytest.param(
            replace(BASE, terminating=True, restarts=1),
            [REPLICA_LEAVING, REPLICA_RESTARTED],
            id="both",
        ),
        pytest.param(replace(BASE, terminating=True, owned=False), [], id="not-ours"),
    ],
)
def test_departure_events(pod: ObservedPod, reasons: list[str]) -> None:
    events = departure_events(POOLED, [pod])
    assert [e.reason for e in events] == reasons
    for event in events:
        assert event.type == "Warning"
        assert event.pod == pod.name
        assert pod.name in event.message
        assert "30 s" in event.message and "kv_lease_duration" in event.message
    if pod.restarts:
        assert f"{pod.restarts} container restart" in events[-1].message


def test_evicted_and_leaving_name_the_lost_blocks() -> None:
    (event,) = departure_events(POOLED, [replace(BASE, phase="Failed", reason="Evicted")])
    assert "cached blocks are lost to its siblings" in event.message
    assert "role server, replica 1" in event.message


def test_render_failed_carries_the_renderer_message() -> None:
    event = render_failed(RenderError("role 'server': InstanceType 'x' publishes no entrance"))
    assert event.reason == "RenderFailed"
    assert event.message == "role 'server': InstanceType 'x' publishes no entrance"
    assert event.pod is None


def test_dedup_key_is_object_reason_message() -> None:
    a = departure_events(POOLED, [replace(BASE, terminating=True)])[0]
    b = departure_events(POOLED, [replace(BASE, terminating=True, uid="other")])[0]
    assert dedup_key(a, namespace="ns", name="qwen") == dedup_key(b, namespace="ns", name="qwen")
    assert dedup_key(a, namespace="ns", name="qwen") != dedup_key(a, namespace="ns", name="x")


def test_a_pod_that_left_during_the_pass_keeps_its_event() -> None:
    """Seen leaving when the pass looked, gone when it looked again (the pass deleted its
    Workload and Kueue released the Pod at once): the departure is still recorded, once."""
    leaving = replace(BASE, terminating=True)
    sibling = replace(BASE, name="qwen-server-x0", uid="s", ordinal=0)
    events = departure_events(POOLED, [sibling], seen_before=[leaving, sibling])
    assert [(e.reason, e.pod) for e in events] == [(REPLICA_LEAVING, leaving.name)]
    # Still there after the pass: the current observation is the one reported, not both.
    assert departure_events(POOLED, [leaving], seen_before=[leaving]) == departure_events(
        POOLED, [leaving]
    )
    # An earlier observation of a Pod that is still present does not resurrect old facts.
    assert departure_events(POOLED, [sibling], seen_before=[replace(sibling, restarts=2)]) == []


@pytest.mark.parametrize(
    "pod",
    [
        pytest.param(replace(BASE, phase="Failed", reason="Evicted"), id="evicted"),
        pytest.param(replace(BASE, terminating=True), id="leaving"),
        pytest.param(replace(BASE, restarts=3), id="restarted"),
    ],
)
def test_a_deployment_without_a_pool_gets_no_departure_event(pod: ObservedPod) -> None:
    """Every departure event is about the pool (lost blocks, a lapsing KV lease): without
    ``spec.kvCache`` a rollout or a deleted Pod is routine, not a warning (issue 37)."""
    assert departure_events(POOLED, [pod])
    assert departure_events(PLAIN, [pod]) == []
    assert departure_events(PLAIN, [], seen_before=[pod]) == []
