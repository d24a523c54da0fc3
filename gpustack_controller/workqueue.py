"""A work queue with per-key de-duplication, delayed adds and rate-limited retries.

The client-go shape: a key waiting in the queue is held once however often it is added; a key
being processed is never handed to a second worker, and an add while it is processed marks it
dirty so it runs again afterwards; :meth:`WorkQueue.add_after` schedules a later add (2 s holds,
15 s joint-check retries); :meth:`WorkQueue.retry` re-adds with a per-key exponential backoff
that :meth:`WorkQueue.forget` resets.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from gpustack_controller import metrics
from gpustack_controller.kube import ApiError
from gpustack_render.core.errors import RenderError
from gpustack_render.reconcile.servicesync import ServiceConflict

log = logging.getLogger(__name__)

#: A reconcile returns the seconds after which to run again (``None``: only on events).
Reconcile = Callable[[str], Awaitable[float | None]]


class WorkQueue:
    """De-duplicating queue of string keys."""

    def __init__(self, name: str, *, base_delay: float = 0.5, max_delay: float = 60.0) -> None:
        self.name = name
        self.base_delay = base_delay
        self.max_delay = max_delay
        self._queue: asyncio.Queue[str] = asyncio.Queue()
        self._queued: set[str] = set()
        self._processing: set[str] = set()
        self._dirty: set[str] = set()
        self._failures: dict[str, int] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._closed = False
        # The series exist from the start: an idle queue reads 0, not "no data".
        metrics.QUEUE_DEPTH.labels(name).set(0)
        metrics.QUEUE_ADDS.labels(name)
        metrics.QUEUE_RETRIES.labels(name)

    def __len__(self) -> int:
        return self._queue.qsize()

    def add(self, key: str) -> None:
        """Queue ``key`` unless it is already waiting; mark it dirty while it is processed."""
        if self._closed:
            return
        if key in self._processing:
            if key not in self._dirty:
                self._dirty.add(key)
                metrics.QUEUE_ADDS.labels(self.name).inc()
            return
        if key in self._queued:
            return
        metrics.QUEUE_ADDS.labels(self.name).inc()
        self._enqueue(key)

    def _enqueue(self, key: str) -> None:
        self._queued.add(key)
        self._queue.put_nowait(key)
        metrics.QUEUE_DEPTH.labels(self.name).set(self._queue.qsize())

    def add_after(self, key: str, delay: float) -> None:
        """Add ``key`` after ``delay`` seconds (an earlier pending timer wins)."""
        if self._closed:
            return
        if delay <= 0:
            self.add(key)
            return
        loop = asyncio.get_running_loop()
        existing = self._timers.get(key)
        due = loop.time() + delay
        if existing is not None and existing.when() <= due:
            return
        if existing is not None:
            existing.cancel()
        self._timers[key] = loop.call_at(due, self._fire, key)

    def _fire(self, key: str) -> None:
        self._timers.pop(key, None)
        self.add(key)

    def retry(self, key: str) -> float:
        """Re-add ``key`` after its next backoff; returns the delay."""
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        metrics.QUEUE_RETRIES.labels(self.name).inc()
        delay = float(min(self.base_delay * (2.0**failures), self.max_delay))
        self.add_after(key, delay)
        return delay

    def forget(self, key: str) -> None:
        """Reset ``key``'s backoff (a pass succeeded)."""
        self._failures.pop(key, None)

    async def get(self) -> str:
        key = await self._queue.get()
        self._queued.discard(key)
        self._processing.add(key)
        metrics.QUEUE_DEPTH.labels(self.name).set(self._queue.qsize())
        return key

    def done(self, key: str) -> None:
        self._processing.discard(key)
        if key in self._dirty:
            self._dirty.discard(key)
            if not self._closed:
                self._enqueue(key)  # counted when it was added

    def close(self) -> None:
        self._closed = True
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()

    async def run_workers(self, reconcile: Reconcile, *, workers: int) -> None:
        """Process keys with ``workers`` concurrent workers until cancelled."""
        await asyncio.gather(*(self._worker(reconcile) for _ in range(workers)))

    async def _worker(self, reconcile: Reconcile) -> None:
        loop = asyncio.get_running_loop()
        while True:
            key = await self.get()
            started = loop.time()
            result = metrics.ERROR
            try:
                after = await reconcile(key)
            except asyncio.CancelledError:
                result = ""  # stopped, not a pass
                raise
            except Exception as exc:
                delay = self.retry(key)
                metrics.RECONCILE_ERRORS.labels(self.name, *metrics.error_labels(exc)).inc()
                log.warning(
                    "%s: reconcile of %s failed (retry in %.1fs): %s",
                    self.name,
                    key,
                    delay,
                    exc,
                    exc_info=not _expected(exc),
                )
            else:
                self.forget(key)
                if after is not None:
                    self.add_after(key, after)
                result = metrics.SUCCESS if after is None else metrics.REQUEUE
            finally:
                if result:
                    metrics.RECONCILES.labels(self.name, result).inc()
                    seconds = loop.time() - started
                    metrics.RECONCILE_SECONDS.labels(self.name, result).observe(seconds)
                self.done(key)


def _expected(exc: BaseException) -> bool:
    """Failures worth a line, not a traceback (API answers, render errors, a Service held by
    another owner)."""
    return isinstance(exc, ApiError | RenderError | ServiceConflict)
