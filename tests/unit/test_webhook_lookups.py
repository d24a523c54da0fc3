"""The bridge from the library's synchronous Lookups to live reads on the event loop.

The reader here is an in-memory table with a call log: it stands for the transport only (what
the API server answers is covered by tests/integration/test_webhook_admission.py).
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest

from gpustack_render.api.inputs import InstanceType
from gpustack_render.lookups import LookupFailed
from gpustack_render.settings import Settings
from gpustack_webhook import logs
from gpustack_webhook.lookups import LiveLookups, LiveSources, ReadError

T = TypeVar("T")

IT = {
    "apiVersion": "worker.gpustack.ai/v1",
    "kind": "InstanceType",
    "metadata": {"name": "a10g"},
    "spec": {"acceleratable": True},
    "status": {"accelerator": {"capacity": 8}},
}
BINDING = {
    "apiVersion": "worker.gpustack.ai/v1",
    "kind": "KVCachePoolBinding",
    "metadata": {"name": "chat", "namespace": "team-a"},
    "spec": {"poolRef": {"name": "pool"}, "domain": {"blockSize": 16, "dtype": "bfloat16"}},
}


class TableReader:
    """Answers from a dict; records every read; can fail or stall on request."""

    def __init__(self, objects: dict[tuple[str, str, str], dict[str, Any]]) -> None:
        self.objects = objects
        self.config_maps: dict[tuple[str, str], dict[str, str]] = {}
        self.calls: list[tuple[str, str, str]] = []
        self.fail: set[tuple[str, str, str]] = set()
        self.stall = 0.0

    async def get_object(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        self.calls.append((kind, namespace, name))
        if self.stall:
            await asyncio.sleep(self.stall)
        if (kind, namespace, name) in self.fail:
            raise ReadError("the API server answered 403 Forbidden")
        return self.objects.get((kind, namespace, name))

    async def get_config_map_data(self, namespace: str, name: str) -> dict[str, str] | None:
        self.calls.append(("ConfigMap", namespace, name))
        if ("ConfigMap", namespace, name) in self.fail:
            raise ReadError("the API server answered 500 Internal Server Error")
        return self.config_maps.get((namespace, name))


@pytest.fixture
def reader() -> TableReader:
    return TableReader(
        {
            ("InstanceType", "", "a10g"): IT,
            ("KVCachePoolBinding", "team-a", "chat"): BINDING,
            ("KVCachePool", "", "broken"): {"metadata": {"name": "broken"}, "spec": {}},
        }
    )


def lookups_for(reader: TableReader, *, budget: float = 5.0) -> LiveLookups:
    return LiveLookups(reader, loop=asyncio.get_running_loop(), deadline=time.monotonic() + budget)


async def in_thread(fn: Callable[[], T]) -> T:
    return await asyncio.to_thread(fn)


async def test_reads_decode_into_models_and_are_memoised_per_review(reader: TableReader) -> None:
    lookups = lookups_for(reader)
    first = await in_thread(lambda: lookups.instance_type("a10g"))
    again = await in_thread(lambda: lookups.instance_type("a10g"))
    assert isinstance(first, InstanceType)
    assert first is again
    assert first.spec.acceleratable is True
    binding = await in_thread(lambda: lookups.binding("team-a", "chat"))
    assert binding is not None and binding.domain_name == "default"
    assert reader.calls == [
        ("InstanceType", "", "a10g"),
        ("KVCachePoolBinding", "team-a", "chat"),
    ]
    # A new review reads again: nothing is cached across reviews.
    fresh = lookups_for(reader)
    await in_thread(lambda: fresh.instance_type("a10g"))
    assert len(reader.calls) == 3


async def test_not_found_is_none_and_memoised(reader: TableReader) -> None:
    lookups = lookups_for(reader)
    assert await in_thread(lambda: lookups.pool("missing")) is None
    assert await in_thread(lambda: lookups.pool("missing")) is None
    assert await in_thread(lambda: lookups.backend("")) is None  # no GET for an empty name
    assert reader.calls == [("KVCachePool", "", "missing")]


@pytest.mark.parametrize(
    ("setup", "kind", "call", "reason"),
    [
        pytest.param(
            lambda r: r.fail.add(("InstanceType", "", "a10g")),
            "InstanceType",
            lambda lk: lk.instance_type("a10g"),
            "403 Forbidden",
            id="error-answer",
        ),
        pytest.param(
            lambda r: None,
            "KVCachePool",
            lambda lk: lk.pool("broken"),
            "does not decode",
            id="undecodable",
        ),
        pytest.param(
            lambda r: setattr(r, "stall", 1.0),
            "KVCachePoolBinding",
            lambda lk: lk.binding("team-a", "chat"),
            "no answer within",
            id="timeout",
        ),
    ],
)
async def test_failed_reads_raise_lookup_failed(
    reader: TableReader,
    setup: Callable[[TableReader], None],
    kind: str,
    call: Callable[[LiveLookups], Any],
    reason: str,
) -> None:
    setup(reader)
    lookups = lookups_for(reader, budget=0.2)
    with pytest.raises(LookupFailed) as info:
        await in_thread(lambda: call(lookups))
    assert info.value.kind == kind
    assert reason in info.value.reason
    # The failure is memoised too: one review sees one answer per name.
    calls = len(reader.calls)
    with pytest.raises(LookupFailed):
        await in_thread(lambda: call(lookups))
    assert len(reader.calls) == calls


async def test_reads_after_the_deadline_fail_without_a_request(reader: TableReader) -> None:
    lookups = lookups_for(reader, budget=-1)
    with pytest.raises(LookupFailed, match="deadline"):
        await in_thread(lambda: lookups.instance_type("a10g"))
    assert reader.calls == []


async def test_use_on_the_event_loop_thread_is_refused(reader: TableReader) -> None:
    lookups = lookups_for(reader)
    with pytest.raises(RuntimeError, match="worker thread"):
        lookups.instance_type("a10g")


# ---- Settings --------------------------------------------------------------------------------


@pytest.fixture
def log_lines() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logs.JSONFormatter())
    logger = logging.getLogger(logs.LOGGER_NAME)
    logger.addHandler(handler)
    try:
        yield stream
    finally:
        logger.removeHandler(handler)


async def test_settings_default_without_the_config_map(reader: TableReader) -> None:
    sources = LiveSources(reader, namespace="ops")
    settings = await sources.settings()
    assert settings == Settings(system_namespace="ops")
    assert reader.calls == [("ConfigMap", "ops", "gpustack-settings")]


async def test_settings_are_read_live_and_bad_keys_logged_once(
    reader: TableReader, log_lines: io.StringIO
) -> None:
    seen: list[tuple[str, str]] = []
    sources = LiveSources(reader, namespace="ops", observe=lambda k, r: seen.append((k, r)))
    reader.config_maps[("ops", "gpustack-settings")] = {
        "instance-privileged-allowed": "false",
        "native-sidecars": "maybe",
    }
    for _ in range(3):
        settings = await sources.settings()
        assert settings.privileged_allowed is False
        assert settings.native_sidecars is True  # the bad value keeps its default
        assert settings.system_namespace == "ops"
    warnings = [json.loads(line) for line in log_lines.getvalue().splitlines()]
    assert len(warnings) == 1
    assert warnings[0]["problems"] == [
        {"field": "data[native-sidecars]", "reason": "FieldValueInvalid"}
    ]
    # An edit takes effect on the next review.
    reader.config_maps[("ops", "gpustack-settings")] = {"instance-privileged-allowed": "true"}
    assert (await sources.settings()).privileged_allowed is True
    assert seen == [("ConfigMap", "found")] * 4


async def test_unreadable_settings_fail_the_review(reader: TableReader) -> None:
    reader.fail.add(("ConfigMap", "ops", "gpustack-settings"))
    sources = LiveSources(reader, namespace="ops")
    with pytest.raises(LookupFailed) as info:
        await sources.settings()
    assert info.value.kind == "ConfigMap"
    assert info.value.namespace == "ops"
