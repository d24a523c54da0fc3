"""The Pod hooks' watch-fed cache (gpustack_webhook/cache.py): what it answers itself, what it
leaves to a live read, and the Settings it keeps.

The informers are fed event by event here (never started); the reader behind the live reads
is the in-memory table of test_webhook_lookups.py. tests/integration/test_webhook_admission.py
runs the server with the cache against a real API server.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any, cast

import pytest
from test_webhook_lookups import BINDING, IT, TableReader

from gpustack_kube.client import Kube
from gpustack_render.api.inputs import InstanceType, KVCachePoolBinding
from gpustack_render.core.settings import CONFIGMAP_NAME
from gpustack_render.schema.lookups import LookupFailed
from gpustack_webhook.cache import CACHED, WatchedSources
from gpustack_webhook.lookups import UNANSWERED, LiveSources, ReadKey, ReviewReads

NS = "ops"
BINDING_KEY = ReadKey("KVCachePoolBinding", "team-a", "chat")


def _sources(reader: TableReader) -> tuple[WatchedSources, list[tuple[str, str]]]:
    seen: list[tuple[str, str]] = []
    live = LiveSources(reader, namespace=NS)
    cache = WatchedSources(
        cast(Kube, object()), live, observe=lambda kind, result: seen.append((kind, result))
    )
    for informer in (*cache.informers.values(), cache.settings_informer):
        informer.synced.set()
        informer.current = True
    return cache, seen


def _stored(obj: dict[str, Any], rv: str, **meta: Any) -> dict[str, Any]:
    stored = copy.deepcopy(obj)
    stored["metadata"].update(resourceVersion=rv, **meta)
    return stored


@pytest.fixture
def reader() -> TableReader:
    return TableReader({("KVCachePoolBinding", "team-a", "chat"): BINDING})


def test_a_cached_object_is_answered_without_a_read_and_decoded_once(
    reader: TableReader,
) -> None:
    cache, seen = _sources(reader)
    cache.informers["KVCachePoolBinding"]._apply("ADDED", _stored(BINDING, "5"))
    first = cache.resolve(BINDING_KEY)
    assert isinstance(first, KVCachePoolBinding) and first.name == "chat"
    assert cache.resolve(BINDING_KEY) is first  # the same stored version: decoded once
    assert reader.calls == []
    assert seen == [("KVCachePoolBinding", CACHED)] * 2
    cache.informers["KVCachePoolBinding"]._apply("MODIFIED", _stored(BINDING, "6"))
    assert cache.resolve(BINDING_KEY) is not first


def test_a_miss_is_read_live(reader: TableReader) -> None:
    cache, _ = _sources(reader)
    assert cache.resolve(BINDING_KEY) is UNANSWERED
    found = asyncio.run(cache.read(BINDING_KEY))
    assert isinstance(found, KVCachePoolBinding)
    assert reader.calls == [("KVCachePoolBinding", "team-a", "chat")]


def test_a_deleted_or_deleting_object_is_never_answered_from_the_cache(
    reader: TableReader,
) -> None:
    cache, _ = _sources(reader)
    informer = cache.informers["KVCachePoolBinding"]
    informer._apply("ADDED", _stored(BINDING, "5", deletionTimestamp="2026-01-01T00:00:00Z"))
    assert cache.resolve(BINDING_KEY) is UNANSWERED  # being deleted: as the API server says
    informer._apply("MODIFIED", _stored(BINDING, "6"))
    assert isinstance(cache.resolve(BINDING_KEY), KVCachePoolBinding)
    informer._apply("DELETED", _stored(BINDING, "7"))
    assert cache.resolve(BINDING_KEY) is UNANSWERED
    reader.objects.clear()
    assert asyncio.run(cache.read(BINDING_KEY)) is None  # the live answer: gone


def test_a_cache_not_following_its_stream_is_not_used(reader: TableReader) -> None:
    cache, _ = _sources(reader)
    informer = cache.informers["KVCachePoolBinding"]
    informer._apply("ADDED", _stored(BINDING, "5"))
    informer.current = False  # the stream failed: reads go live until it is followed again
    assert cache.resolve(BINDING_KEY) is UNANSWERED
    informer.current = True
    assert isinstance(cache.resolve(BINDING_KEY), KVCachePoolBinding)


def test_an_undecodable_cached_object_is_a_failed_read(reader: TableReader) -> None:
    cache, _ = _sources(reader)
    broken = {"metadata": {"name": "it", "resourceVersion": "1"}, "spec": {"acceleratable": 7}}
    cache.informers["InstanceType"]._apply("ADDED", {"kind": "InstanceType", **broken})
    failed = cache.resolve(ReadKey("InstanceType", "", "it"))
    assert isinstance(failed, LookupFailed)
    with pytest.raises(LookupFailed):
        asyncio.run(cache.read(ReadKey("InstanceType", "", "it")))


def test_a_review_whose_reads_are_cached_runs_without_asking(reader: TableReader) -> None:
    cache, _ = _sources(reader)
    cache.informers["InstanceType"]._apply("ADDED", _stored(IT, "3"))
    reads = ReviewReads(cache.resolve)
    found = reads.get(InstanceType, "", "a10g")
    assert found is not None and found.name == "a10g"
    assert reader.calls == []


def test_settings_come_from_the_watched_config_map(reader: TableReader) -> None:
    cache, seen = _sources(reader)
    assert asyncio.run(cache.settings()).system_namespace == NS  # none: every default
    config_map = {
        "kind": "ConfigMap",
        "metadata": {"name": CONFIGMAP_NAME, "namespace": NS, "resourceVersion": "2"},
        "data": {"model-deployment-park-after-seconds": "120"},
    }
    cache.settings_informer._apply("ADDED", config_map)
    settings = asyncio.run(cache.settings())
    assert settings.park_after_seconds == 120 and settings.system_namespace == NS
    assert reader.calls == []
    assert ("ConfigMap", "found") in seen
    cache.settings_informer.current = False
    reader.config_maps[(NS, CONFIGMAP_NAME)] = {"model-deployment-park-after-seconds": "300"}
    assert asyncio.run(cache.settings()).park_after_seconds == 300  # read live meanwhile
