"""Reads for one review (ReviewReads), live reads and Settings (LiveSources).

The reader here is an in-memory table with a call log: it stands for the transport only (what
the API server answers is covered by tests/integration/test_webhook_admission.py).
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest

from gpustack_render.api.inputs import InstanceType, KVCacheBackend, KVCachePool, KVCachePoolBinding
from gpustack_render.core.settings import Settings
from gpustack_render.schema.lookups import LookupFailed
from gpustack_webhook import logs
from gpustack_webhook.lookups import LiveSources, NeedRead, ReadError, ReadKey, ReviewReads

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
SETTINGS_KEY = ("ConfigMap", "ops", "gpustack-settings")


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
        if self.stall:
            await asyncio.sleep(self.stall)
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


# ---- ReviewReads ---------------------------------------------------------------------------


def test_review_reads_ask_for_what_they_have_not_read() -> None:
    reads = ReviewReads()
    with pytest.raises(NeedRead) as need:
        reads.get(KVCachePoolBinding, "team-a", "chat")
    assert need.value.key == ReadKey("KVCachePoolBinding", "team-a", "chat")
    # NeedRead is no Exception: a library's ``except Exception`` cannot swallow it.
    assert not isinstance(need.value, Exception)
    binding = KVCachePoolBinding.model_validate(BINDING)
    reads.answers[need.value.key] = binding
    assert reads.get(KVCachePoolBinding, "team-a", "chat") is binding
    reads.answers[ReadKey("KVCachePool", "", "gone")] = None
    assert reads.get(KVCachePool, "", "gone") is None
    failure = LookupFailed("KVCacheBackend", "be", "timed out")
    reads.answers[ReadKey("KVCacheBackend", "", "be")] = failure
    with pytest.raises(LookupFailed) as failed:
        reads.get(KVCacheBackend, "", "be")
    assert failed.value is failure
    # An empty name names no object: absent, no read.
    assert reads.get(InstanceType, "", "") is None


# ---- LiveSources.read ----------------------------------------------------------------------


async def test_live_reads_decode_into_models(reader: TableReader) -> None:
    seen: list[tuple[str, str]] = []
    sources = LiveSources(reader, namespace="ops", observe=lambda k, r: seen.append((k, r)))
    obj = await sources.read(ReadKey("InstanceType", "", "a10g"))
    assert isinstance(obj, InstanceType) and obj.spec.acceleratable is True
    assert await sources.read(ReadKey("KVCachePool", "", "missing")) is None
    assert seen == [("InstanceType", "found"), ("KVCachePool", "not_found")]
    # Nothing is cached between reads: every call is a GET.
    await sources.read(ReadKey("InstanceType", "", "a10g"))
    assert reader.calls.count(("InstanceType", "", "a10g")) == 2


async def test_concurrent_reviews_share_only_a_get_sent_after_they_began(
    reader: TableReader,
) -> None:
    reader.stall = 0.05
    sources = LiveSources(reader, namespace="ops")
    key = ReadKey("InstanceType", "", "a10g")
    before = time.monotonic()
    first = asyncio.ensure_future(sources.read(key, since=before))
    await asyncio.sleep(0)
    # Began before that GET was sent: shares it.
    joined = asyncio.ensure_future(sources.read(key, since=before))
    await asyncio.sleep(0.01)
    # Began after it was sent: sends its own, even though one is in flight.
    later = asyncio.ensure_future(sources.read(key, since=time.monotonic()))
    # No ``since``: always its own GET.
    own = asyncio.ensure_future(sources.read(key))
    answers = await asyncio.gather(first, joined, later, own)
    assert all(isinstance(a, InstanceType) for a in answers)
    assert reader.calls.count(("InstanceType", "", "a10g")) == 3
    # Nothing outlives the GETs: the next review reads again.
    await sources.read(key, since=before)
    assert reader.calls.count(("InstanceType", "", "a10g")) == 4


async def test_a_shared_get_that_fails_fails_every_review_and_a_cancelled_one_not_the_others(
    reader: TableReader,
) -> None:
    reader.stall = 0.05
    reader.fail.add(("InstanceType", "", "a10g"))
    sources = LiveSources(reader, namespace="ops")
    key = ReadKey("InstanceType", "", "a10g")
    since = time.monotonic()
    reads = [asyncio.ensure_future(sources.read(key, since=since)) for _ in range(3)]
    await asyncio.sleep(0.01)
    reads[0].cancel()
    results = await asyncio.gather(*reads, return_exceptions=True)
    assert isinstance(results[0], asyncio.CancelledError)
    assert all(isinstance(r, LookupFailed) and "403" in r.reason for r in results[1:])
    assert reader.calls == [("InstanceType", "", "a10g")]


@pytest.mark.parametrize(
    ("key", "setup", "reason"),
    [
        pytest.param(
            ReadKey("InstanceType", "", "a10g"),
            lambda r: r.fail.add(("InstanceType", "", "a10g")),
            "403 Forbidden",
            id="error-answer",
        ),
        pytest.param(
            ReadKey("KVCachePool", "", "broken"),
            lambda r: None,
            "does not decode",
            id="undecodable",
        ),
        pytest.param(
            ReadKey("KVCachePoolBinding", "team-a", "chat"),
            lambda r: setattr(r, "stall", 1.0),
            "no answer within",
            id="timeout",
        ),
        pytest.param(ReadKey("Secret", "team-a", "x"), lambda r: None, "not a kind", id="kind"),
    ],
)
async def test_failed_reads_raise_lookup_failed(
    reader: TableReader, key: ReadKey, setup: Any, reason: str
) -> None:
    setup(reader)
    sources = LiveSources(reader, namespace="ops", request_timeout=0.1)
    with pytest.raises(LookupFailed) as info:
        await sources.read(key)
    assert info.value.kind == key.kind
    assert info.value.name == key.name
    assert reason in info.value.reason


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
    assert reader.calls == [SETTINGS_KEY]


async def test_settings_are_read_for_every_review_by_default_and_bad_keys_logged_once(
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


async def test_settings_read_is_shared_and_reused_until_it_is_too_old(reader: TableReader) -> None:
    now = [100.0]
    sources = LiveSources(reader, namespace="ops", settings_max_age=2.0, clock=lambda: now[0])
    reader.stall = 0.05
    # Concurrent reviews share one read.
    await asyncio.gather(*(sources.settings() for _ in range(5)))
    assert reader.calls == [SETTINGS_KEY]
    now[0] += 1.9
    await sources.settings()
    assert reader.calls == [SETTINGS_KEY]
    now[0] += 0.2
    await sources.settings()
    assert reader.calls == [SETTINGS_KEY] * 2


async def test_unreadable_settings_fail_the_review_and_no_old_copy_is_served(
    reader: TableReader,
) -> None:
    now = [100.0]
    sources = LiveSources(reader, namespace="ops", settings_max_age=2.0, clock=lambda: now[0])
    await sources.settings()
    reader.fail.add(SETTINGS_KEY)
    now[0] += 5
    with pytest.raises(LookupFailed) as info:
        await sources.settings()
    assert info.value.kind == "ConfigMap"
    assert info.value.namespace == "ops"
