"""A work queue with per-key de-duplication, priorities, delayed adds and rate-limited retries.

The client-go shape: a key waiting in the queue is held once however often it is added; a key
being processed is never handed to a second worker, and an add while it is processed marks it
dirty so it runs again afterwards; :meth:`WorkQueue.add_after` schedules a later add (2 s holds,
15 s joint-check retries); :meth:`WorkQueue.retry` re-adds with a per-key exponential backoff
that :meth:`WorkQueue.forget` resets.

Keys wait in three lanes (:class:`Priority`): a user's edit of the object itself (``HIGH``),
events about one object's own children, holds and retries (``NORMAL``, the default), and
fan-outs that queue many keys at once: an input or the Settings changed, a periodic recheck
(``LOW``). A worker takes the oldest key of the highest non-empty lane, except that every
:data:`LOW_SHARE`-th take goes to the lowest non-empty lane, so a full lane of fan-out passes
neither delays an edit by more than one pass nor is starved by a steady stream of events. A
key added again at a higher priority moves up; it never moves down. With ``max_low``, at most
that many ``LOW`` keys are processed at once: the other workers stay free for an edit, and the
passes a fan-out asks for share the event loop with fewer others, so an edit's own pass is not
slowed by a thousand of them in flight.
"""

from __future__ import annotations

import asyncio
import collections
import enum
import logging
from collections.abc import Awaitable, Callable
from typing import Final

from gpustack_controller import metrics
from gpustack_controller.kube import ApiError
from gpustack_render.core.errors import RenderError
from gpustack_render.core.ownerrefs import OwnedConflict

log = logging.getLogger(__name__)

#: A reconcile returns the seconds after which to run again (``None``: only on events).
Reconcile = Callable[[str], Awaitable[float | None]]


class Priority(enum.IntEnum):
    """Which lane a key waits in (lower value, served first)."""

    #: A user's edit of the object itself (a new generation, a deletion).
    HIGH = 0
    #: Events about the object's own children, holds and retries.
    NORMAL = 1
    #: Fan-outs queuing many keys at once (an input or the Settings changed) and rechecks.
    LOW = 2


#: One take in this many serves the lowest non-empty lane first (no lane starves).
LOW_SHARE: Final = 10


class WorkQueue:
    """De-duplicating queue of string keys, served by priority."""

    def __init__(
        self,
        name: str,
        *,
        base_delay: float = 0.5,
        max_delay: float = 60.0,
        max_low: int | None = None,
    ) -> None:
        self.name = name
        self.base_delay = base_delay
        self.max_delay = max_delay
        #: The most ``LOW`` keys processed at once (``None``: no bound).
        self.max_low = max_low
        self._low_in_flight: set[str] = set()
        self._lanes: tuple[collections.deque[str], ...] = tuple(
            collections.deque() for _ in Priority
        )
        #: Keys waiting, and the lane each waits in (a lane may hold stale entries of a key
        #: that moved up: they are skipped when taken).
        self._queued: dict[str, Priority] = {}
        self._processing: set[str] = set()
        #: Keys added while processed, and the priority they come back with.
        self._dirty: dict[str, Priority] = {}
        self._failures: dict[str, int] = {}
        self._timers: dict[str, tuple[asyncio.TimerHandle, Priority]] = {}
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._takes = 0
        self._closed = False
        # The series exist from the start: an idle queue reads 0, not "no data".
        metrics.QUEUE_DEPTH.labels(name).set(0)
        metrics.QUEUE_ADDS.labels(name)
        metrics.QUEUE_RETRIES.labels(name)

    def __len__(self) -> int:
        return len(self._queued)

    def add(self, key: str, *, priority: Priority = Priority.NORMAL) -> None:
        """Queue ``key`` unless it is already waiting (a higher ``priority`` moves it up);
        mark it dirty while it is processed."""
        if self._closed:
            return
        if key in self._processing:
            if key not in self._dirty:
                self._dirty[key] = priority
                metrics.QUEUE_ADDS.labels(self.name).inc()
            elif priority < self._dirty[key]:
                self._dirty[key] = priority
            return
        waiting = self._queued.get(key)
        if waiting is not None:
            if priority < waiting:
                self._enqueue(key, priority)  # moves up; the old entry is skipped when taken
            return
        metrics.QUEUE_ADDS.labels(self.name).inc()
        self._enqueue(key, priority)

    def _enqueue(self, key: str, priority: Priority) -> None:
        self._queued[key] = priority
        self._lanes[priority].append(key)
        metrics.QUEUE_DEPTH.labels(self.name).set(len(self._queued))
        self._wake_one()

    def add_after(self, key: str, delay: float, *, priority: Priority = Priority.NORMAL) -> None:
        """Add ``key`` after ``delay`` seconds (an earlier pending timer wins)."""
        if self._closed:
            return
        if delay <= 0:
            self.add(key, priority=priority)
            return
        loop = asyncio.get_running_loop()
        existing = self._timers.get(key)
        due = loop.time() + delay
        if existing is not None and existing[0].when() <= due:
            return
        if existing is not None:
            existing[0].cancel()
        self._timers[key] = (loop.call_at(due, self._fire, key), priority)

    def _fire(self, key: str) -> None:
        timer = self._timers.pop(key, None)
        self.add(key, priority=Priority.NORMAL if timer is None else timer[1])

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

    def _take(self) -> str | None:
        """The next key to process, or ``None`` when none waits."""
        if not self._queued:
            return None
        order = list(Priority)
        if (self._takes + 1) % LOW_SHARE == 0:
            order.reverse()
        low_full = self.max_low is not None and len(self._low_in_flight) >= self.max_low
        for priority in order:
            if priority == Priority.LOW and low_full:
                continue
            lane = self._lanes[priority]
            while lane:
                key = lane.popleft()
                if self._queued.get(key) == priority:
                    del self._queued[key]
                    self._takes += 1
                    if priority == Priority.LOW:
                        self._low_in_flight.add(key)
                    return key
        return None

    async def get(self) -> str:
        while True:
            key = self._take()
            if key is not None:
                break
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled() and self._queued:
                    self._wake_one()  # pass the wake-up on: a key is waiting
                raise
        self._processing.add(key)
        metrics.QUEUE_DEPTH.labels(self.name).set(len(self._queued))
        return key

    def _wake_one(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def done(self, key: str) -> None:
        self._processing.discard(key)
        if key in self._low_in_flight:
            self._low_in_flight.discard(key)
            if self._queued:
                self._wake_one()  # a LOW key may be takeable again
        priority = self._dirty.pop(key, None)
        if priority is not None and not self._closed:
            self._enqueue(key, priority)  # counted when it was added

    def close(self) -> None:
        self._closed = True
        for timer, _ in self._timers.values():
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
    """Failures worth a line, not a traceback (API answers, render errors, a Service or router
    object held by another owner)."""
    return isinstance(exc, ApiError | RenderError | OwnedConflict)
