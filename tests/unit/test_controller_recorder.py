"""When departure events fire and how repeats are recorded (docs/contract/controller.md §16, D24).

§16: the departure events are "emitted on every pass while true (the API server aggregates
identical events)"; D24: the controller aggregates itself — a repeat of the same (object,
reason, message) within 10 minutes updates the existing Event's ``count`` and
``lastTimestamp``. So a lasting cause costs one Event whose count grows, and a new occurrence
(a new restart count, another Pod) is a new Event.
"""

from __future__ import annotations

import asyncio
import datetime
from dataclasses import replace
from typing import Any

from gpustack_controller.kube import ApiError
from gpustack_controller.recorder import EventRecorder
from gpustack_render.api.modeldeployment import ModelDeployment
from gpustack_render.reconcile.events import REPLICA_RESTARTED, departure_events
from gpustack_render.reconcile.observed import ObservedPod
from gpustack_render.schema.decoding import decode_deployment

MD: dict[str, Any] = {
    "apiVersion": "worker.gpustack.ai/v1",
    "kind": "ModelDeployment",
    "metadata": {"name": "qwen", "namespace": "team-a", "uid": "md-uid"},
}


def _pooled() -> ModelDeployment:
    """The same deployment, decoded, on a KV cache pool (departure events are about the
    pool)."""
    md, errs = decode_deployment(
        {
            **MD,
            "spec": {
                "model": {"name": "Qwen/Qwen3-8B"},
                "engine": {"name": "vLLM", "image": "vllm/vllm-openai:v0.25.1"},
                "roles": [{"name": "server", "instanceType": "a10g"}],
                "kvCache": {"poolRef": {"name": "cache"}},
            },
        }
    )
    assert md is not None, errs
    return md


POOLED = _pooled()
POD = ObservedPod(name="qwen-server-x", uid="u", role="server", ordinal=0, phase="Running")
T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


class FakeKube:
    """Records Event creates and patches; ``events`` is what the API server would hold."""

    def __init__(self) -> None:
        self.events: dict[str, dict[str, Any]] = {}
        self.calls: list[str] = []

    async def create(self, resource: Any, body: dict[str, Any], namespace: str) -> dict[str, Any]:
        name = f"{body['metadata']['generateName']}{len(self.events)}"
        stored = {**body, "metadata": {**body["metadata"], "name": name}}
        self.events[name] = stored
        self.calls.append("create")
        return stored

    async def merge_patch(
        self, resource: Any, name: str, patch: dict[str, Any], namespace: str
    ) -> dict[str, Any]:
        self.calls.append("patch")
        if name not in self.events:
            raise ApiError(404, "NotFound")
        self.events[name].update(patch)
        return self.events[name]


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime.datetime:
        return self.now


def _pass(recorder: EventRecorder, pods: list[ObservedPod]) -> None:
    async def run() -> None:
        for event in departure_events(POOLED, pods):
            await recorder.record(MD, event)

    asyncio.run(run())


def _recorder() -> tuple[EventRecorder, FakeKube, Clock]:
    kube, clock = FakeKube(), Clock()
    return EventRecorder(kube, instance="test", clock=clock), kube, clock  # type: ignore[arg-type]


def test_a_lasting_restart_is_one_event_counted_per_pass() -> None:
    recorder, kube, clock = _recorder()
    restarted = replace(POD, restarts=1)
    for _ in range(3):
        _pass(recorder, [restarted])
        clock.now += datetime.timedelta(seconds=2)
    assert kube.calls == ["create", "patch", "patch"]
    (event,) = kube.events.values()
    assert event["reason"] == REPLICA_RESTARTED and event["count"] == 3
    assert event["type"] == "Warning"
    assert event["involvedObject"]["uid"] == "md-uid"
    assert event["lastTimestamp"] == "2026-01-01T00:00:04Z"


def test_a_new_restart_count_is_a_new_event() -> None:
    recorder, kube, _ = _recorder()
    _pass(recorder, [replace(POD, restarts=1)])
    _pass(recorder, [replace(POD, restarts=2)])
    assert kube.calls == ["create", "create"]
    messages = sorted(e["message"] for e in kube.events.values())
    assert "(1 container restart(s))" in messages[0] and "(2 container" in messages[1]


def test_a_repeat_after_the_window_or_of_a_deleted_event_is_created_again() -> None:
    recorder, kube, clock = _recorder()
    leaving = replace(POD, terminating=True)
    _pass(recorder, [leaving])
    clock.now += datetime.timedelta(minutes=10)
    _pass(recorder, [leaving])
    assert kube.calls == ["create", "create"]
    kube.events.clear()
    clock.now += datetime.timedelta(seconds=1)
    _pass(recorder, [leaving])
    assert kube.calls[-2:] == ["patch", "create"]
    assert [e["count"] for e in kube.events.values()] == [1]


def test_a_healthy_pod_records_nothing() -> None:
    recorder, kube, _ = _recorder()
    _pass(recorder, [POD])
    assert kube.calls == []
