"""Informers against the real API server (410 Gone, silent streams, bookmarks) and the work
queue's de-duplication and retries (docs/contract/kubernetes-notes.md §2)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from gpustack_controller.kube import CONFIGMAPS, ApiError, Kube
from gpustack_controller.watches import Informer
from gpustack_controller.workqueue import WorkQueue
from gpustack_kube import informer as shared

from .controller_fixtures import eventually, new_namespace

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


def config_map(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {}}


async def test_an_informer_relists_after_410_and_keeps_delivering(
    kube: Kube, monkeypatch: pytest.MonkeyPatch
) -> None:
    ns = await new_namespace(kube, "relist")
    seen: list[tuple[str, str]] = []
    lists: list[str] = []
    real_list, real_watch = kube.list, kube.watch
    expire = asyncio.Event()

    async def counting_list(*args: Any, **kw: Any) -> Any:
        lists.append("list")
        return await real_list(*args, **kw)

    async def expiring_watch(*args: Any, **kw: Any) -> AsyncIterator[Any]:
        # The API server's watch cache replays instead of answering 410 for an old version on
        # a fresh etcd, so the expiry is injected here, the way the stream reports it.
        if expire.is_set():
            expire.clear()
            raise ApiError(410, "Expired", "too old resource version")
        async for event in real_watch(*args, **kw):
            yield event

    monkeypatch.setattr(kube, "list", counting_list)
    monkeypatch.setattr(kube, "watch", expiring_watch)
    informer = Informer(
        kube,
        CONFIGMAPS,
        namespace=ns,
        handlers=[lambda kind, obj, old: seen.append((kind, obj["metadata"]["name"]))],
        watch_timeout=1,
    )
    await kube.create(CONFIGMAPS, config_map("before"), ns)
    informer.start()
    try:
        await asyncio.wait_for(informer.synced.wait(), 10)
        assert ("ADDED", "before") in seen and len(lists) == 1
        expire.set()
        await eventually(lambda: _true(len(lists) == 2), timeout=10, what="a re-list after 410")
        await kube.create(CONFIGMAPS, config_map("after"), ns)

        async def delivered() -> bool:
            return ("ADDED", "after") in seen and informer.get(f"{ns}/after") is not None

        await eventually(delivered, timeout=15, what="an object created after the 410")
        await kube.delete(CONFIGMAPS, "before", ns)
        await eventually(
            lambda: _true(("DELETED", "before") in seen), timeout=15, what="the deletion"
        )
        assert informer.get(f"{ns}/before") is None
    finally:
        await informer.stop()


async def test_a_silent_stream_is_restarted_by_the_inactivity_watchdog(kube: Kube) -> None:
    ns = await new_namespace(kube, "quiet")
    seen: list[str] = []
    informer = Informer(
        kube,
        CONFIGMAPS,
        namespace=ns,
        handlers=[lambda kind, obj, old: seen.append(obj["metadata"]["name"])],
        inactivity=0.5,
    )
    informer.start()
    try:
        await asyncio.wait_for(informer.synced.wait(), 10)
        await asyncio.sleep(2)  # several silent periods: the stream is dropped and resumed
        await kube.create(CONFIGMAPS, config_map("late"), ns)
        await eventually(lambda: _true("late" in seen), timeout=10, what="an event after silence")
    finally:
        await informer.stop()


async def test_a_quiet_stream_keeps_the_cache_current(kube: Kube) -> None:
    # Nothing changes in the namespace for several inactivity windows: the informer must keep
    # following its stream (the webhook's cache serves reads only while it does), with no
    # failed stream reported. It asks for streams that end before the inactivity bound; before
    # that, each quiet window ended in a "silent stream" error and a growing back-off during
    # which the cache was not used (half of the webhook's paced reviews read live).
    ns = await new_namespace(kube, "still")
    errors: list[str] = []
    informer = shared.Informer(kube, CONFIGMAPS, namespace=ns, inactivity=3, on_error=errors.append)
    informer.start()
    try:
        await asyncio.wait_for(informer.synced.wait(), 10)
        samples = []
        for _ in range(240):  # 12 s: four inactivity windows
            samples.append(informer.current)
            await asyncio.sleep(0.05)
        assert errors == []
        assert all(samples), f"not following its stream in {samples.count(False)} of 240 samples"
    finally:
        await informer.stop()


async def _true(value: bool) -> bool:
    return value


async def test_the_queue_deduplicates_marks_dirty_and_backs_off() -> None:
    queue = WorkQueue("test", base_delay=0.05, max_delay=0.2)
    calls: list[str] = []
    gate = asyncio.Event()
    failures = {"flaky": 2}

    async def reconcile(key: str) -> float | None:
        calls.append(key)
        if key == "slow":
            await gate.wait()
        if failures.get(key):
            failures[key] -= 1
            raise RuntimeError("transient")
        return None

    for _ in range(5):
        queue.add("a")
    queue.add("slow")
    workers = asyncio.create_task(queue.run_workers(reconcile, workers=2))
    try:
        await eventually(lambda: _true("slow" in calls), timeout=5, what="slow started")
        queue.add("slow")  # while processing: runs once more afterwards, never concurrently
        queue.add("slow")
        gate.set()
        await eventually(lambda: _true(calls.count("slow") == 2), timeout=5, what="dirty rerun")
        assert calls.count("a") == 1
        queue.add("flaky")
        await eventually(lambda: _true(calls.count("flaky") == 3), timeout=5, what="retries")
        queue.add_after("later", 0.2)
        queue.add_after("later", 5)  # an earlier pending timer wins
        await eventually(lambda: _true("later" in calls), timeout=2, what="a delayed add")
        await asyncio.sleep(0.3)
        assert calls.count("slow") == 2 and calls.count("later") == 1
    finally:
        workers.cancel()
        with pytest.raises(asyncio.CancelledError):
            await workers
        queue.close()
