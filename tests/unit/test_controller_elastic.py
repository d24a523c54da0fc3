"""The controller's Elastic EP step (gpustack_controller/elastic.py) against an in-memory API
server and a stand-in engine on loopback: the loop writes the intent record before the scale
call and sends the call only once that write succeeded, records the answer, proves the new
width with the engine's own answers and clears the record; a failed write sends nothing.

The stand-in follows vLLM 0.33.0's routes as docs/elastic-ep.md ("Width changes") words them
(``vllm/entrypoints/serve/elastic_ep/api_router.py``): ``/is_scaling_elastic_ep`` answers
``{"is_scaling_elastic_ep": false}``, a completion to rank -1 answers 400 ``data_parallel_rank -1
is out of range [0, N).``, a completion to a rank below N serves one token, and
``/scale_elastic_ep`` answers 200 ``{"message": "Scaled to N data parallel engines"}``."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, cast

import pytest
from aiohttp import web
from controller_support import MemoryKube
from elastic_support import MD, MD_UID, NS, OWNER, facts

from gpustack_controller.elastic import ElasticStep
from gpustack_controller.kube import ApiError, Kube
from gpustack_controller.owned import OwnedWriter
from gpustack_render.core import labels
from gpustack_render.elastic.machine import Action
from gpustack_render.elastic.records import intent_name, observation_name
from gpustack_render.schema.decoding import decode_deployment


@dataclass
class Engine:
    """The stand-in engine: its width, and what the intent record said at each scale call."""

    kube: MemoryKube
    width: int = 2
    scale_calls: list[dict[str, Any]] = field(default_factory=list)

    async def is_scaling(self, request: web.Request) -> web.Response:
        return web.json_response({"is_scaling_elastic_ep": False})

    async def completions(self, request: web.Request) -> web.Response:
        rank = int(request.headers["X-data-parallel-rank"])
        if not 0 <= rank < self.width:
            message = f"data_parallel_rank {rank} is out of range [0, {self.width})."
            return web.json_response({"error": {"message": message}}, status=400)
        return web.json_response(
            {
                "object": "text_completion",
                "choices": [{"text": "!"}],
                "usage": {"completion_tokens": 1},
            }
        )

    async def scale(self, request: web.Request) -> web.Response:
        body = await request.json()
        stored = self.kube.stored("ConfigMap", NS, intent_name(MD_UID))
        record = json.loads(stored["data"]["operation.json"]) if stored else None
        self.scale_calls.append({"body": body, "record": record})
        self.width = int(body["new_data_parallel_size"])
        return web.json_response({"message": f"Scaled to {self.width} data parallel engines"})


@pytest.fixture
async def engine() -> AsyncIterator[tuple[Engine, MemoryKube, int]]:
    kube = MemoryKube()
    stand_in = Engine(kube)
    app = web.Application()
    app.router.add_post("/is_scaling_elastic_ep", stand_in.is_scaling)
    app.router.add_post("/v1/completions", stand_in.completions)
    app.router.add_post("/scale_elastic_ep", stand_in.scale)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield stand_in, kube, port
    finally:
        await runner.cleanup()


def _md() -> Any:
    md, errs = decode_deployment(
        {
            "apiVersion": "worker.gpustack.ai/v1",
            "kind": "ModelDeployment",
            "metadata": {"name": MD, "namespace": NS, "uid": MD_UID, "generation": 1},
            "spec": {
                "model": {"name": "m"},
                "engine": {"name": "vLLM", "image": "vllm/vllm-openai:v0.33.0"},
                "roles": [{"name": "server", "instanceType": "t", "elasticEp": {"width": 4}}],
            },
        }
    )
    assert md is not None, errs
    return md


def _master(port: int) -> dict[str, Any]:
    return {
        "metadata": {"uid": "pod-0", "annotations": {labels.PROMETHEUS_PORT: str(port)}},
        "status": {"podIP": "127.0.0.1"},
    }


async def _pass(step: ElasticStep, port: int) -> Any:
    intent, observation = await step._records(OWNER)
    return await step._loop(
        _md(),
        OWNER,
        facts(4, 4),
        intent,
        observation,
        by_uid={"pod-0": _master(port)},
        nodes={},
    )


async def test_a_raise_is_recorded_sent_after_the_write_proven_and_cleared(
    engine: tuple[Engine, MemoryKube, int],
) -> None:
    stand_in, kube, port = engine
    step = ElasticStep(cast(Kube, kube), OwnedWriter(cast(Kube, kube)))
    decisions = [await _pass(step, port) for _ in range(3)]
    assert decisions[-1].action is Action.NONE, decisions[-1].reason
    (call,) = stand_in.scale_calls
    assert call["body"] == {"new_data_parallel_size": 4, "drain_timeout": 120}
    # The record said it was sent before the call arrived.
    record = call["record"]
    assert record is not None
    assert (record["state"], record["commandSent"], record["scaleAttempts"]) == (
        "CommandSent",
        True,
        1,
    )
    assert record["commandIntent"] == "scale to 4"
    assert kube.stored("ConfigMap", NS, intent_name(MD_UID)) is None
    stored = kube.stored("ConfigMap", NS, observation_name(MD_UID))
    assert stored is not None
    observation = json.loads(stored["data"]["observation.json"])
    assert (observation["stableWidth"], observation["masterUID"]) == (4, "pod-0")
    # Steady at the desired width, the engine is no longer asked: the stable width says it.
    assert observation["effective"]["known"] is False


async def test_a_failed_command_sent_write_sends_nothing(
    engine: tuple[Engine, MemoryKube, int],
) -> None:
    stand_in, kube, port = engine
    step = ElasticStep(cast(Kube, kube), OwnedWriter(cast(Kube, kube)))
    kube.fail("replace", "ConfigMap", ApiError(409, "Conflict", "modified"))
    with pytest.raises(ApiError):
        await _pass(step, port)
    assert stand_in.scale_calls == []
    stored = kube.stored("ConfigMap", NS, intent_name(MD_UID))
    assert stored is not None
    assert json.loads(stored["data"]["operation.json"])["state"] == "Recorded"
    # The next pass, with the API server answering again, carries the change through.
    kube.fail("replace", "ConfigMap", None)
    decisions = [await _pass(step, port) for _ in range(3)]
    assert decisions[-1].action is Action.NONE and len(stand_in.scale_calls) == 1
