"""Informers: list + watch with bookmarks, a re-list on ``410 Gone``, and an inactivity watchdog.

An :class:`Informer` keeps a cache of one resource (optionally one namespace and a label
selector) and calls its handler with ``(event type, new object, old object)`` for every change,
including the synthetic ``ADDED`` events of each (re-)list and ``DELETED`` for objects that
vanished between two lists. Handlers map events to work-queue keys
(``docs/contract/controller.md`` §2); they must be cheap and never raise.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from gpustack_controller import metrics
from gpustack_controller.kube import ApiError, Kube, Resource

log = logging.getLogger(__name__)

Handler = Callable[[str, dict[str, Any], dict[str, Any] | None], None]


def object_key(obj: dict[str, Any]) -> str:
    """``<namespace>/<name>`` (or ``<name>`` for a cluster-scoped object)."""
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace") or ""
    return f"{ns}/{meta.get('name')}" if ns else str(meta.get("name"))


class Informer:
    """A list+watch cache of one resource."""

    def __init__(
        self,
        kube: Kube,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        handlers: list[Handler] | None = None,
        watch_timeout: int = 300,
        inactivity: float = 70.0,
    ) -> None:
        self.kube = kube
        self.resource = resource
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.handlers: list[Handler] = list(handlers or ())
        self.watch_timeout = watch_timeout
        self.inactivity = inactivity
        self.cache: dict[str, dict[str, Any]] = {}
        self.synced = asyncio.Event()
        self._rv = ""
        self._task: asyncio.Task[None] | None = None

    @property
    def name(self) -> str:
        return self.resource.plural

    def start(self) -> asyncio.Task[None]:
        self._task = asyncio.create_task(self.run(), name=f"informer-{self.name}")
        return self._task

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

    def get(self, key: str) -> dict[str, Any] | None:
        return self.cache.get(key)

    def items(self) -> list[dict[str, Any]]:
        return list(self.cache.values())

    def _emit(self, kind: str, new: dict[str, Any], old: dict[str, Any] | None) -> None:
        for handler in self.handlers:
            try:
                handler(kind, new, old)
            except Exception:  # a handler bug must not stop the stream
                log.exception("informer handler failed", extra={"resource": self.name})

    async def _relist(self) -> None:
        items, rv = await self.kube.list(
            self.resource,
            self.namespace,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
        )
        fresh = {object_key(o): o for o in items}
        for key in list(self.cache):
            if key not in fresh:
                gone = self.cache.pop(key)
                self._emit("DELETED", gone, gone)
        for key, obj in fresh.items():
            old = self.cache.get(key)
            self.cache[key] = obj
            if old is None or _rv(old) != _rv(obj):
                self._emit("ADDED" if old is None else "MODIFIED", obj, old)
        self._rv = rv
        metrics.WATCH_RELISTS.labels(self.name).inc()
        self.synced.set()

    async def run(self) -> None:
        backoff = 0.5
        need_list = True
        while True:
            try:
                if need_list:
                    await self._relist()
                    need_list = False
                async for event in self.kube.watch(
                    self.resource,
                    namespace=self.namespace,
                    label_selector=self.label_selector,
                    field_selector=self.field_selector,
                    resource_version=self._rv,
                    timeout_seconds=self.watch_timeout,
                    inactivity_seconds=self.inactivity,
                ):
                    self._apply(event.type, event.object)
                backoff = 0.5
            except asyncio.CancelledError:
                raise
            except ApiError as exc:
                if exc.gone:
                    # The history we asked for is compacted away: start again from a list.
                    need_list = True
                    continue
                metrics.WATCH_ERRORS.labels(self.name).inc()
                # 429 while the API server's cache (re)initializes is routine: retry quietly.
                log.log(
                    logging.DEBUG if exc.status == 429 else logging.WARNING,
                    "watch of %s failed: %s; retrying",
                    self.name,
                    exc,
                )
                # A 0 status is a silent or broken stream: resume from the last version seen.
                need_list = exc.status != 0
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 30.0)
            except Exception:  # keep the informer alive whatever happened
                metrics.WATCH_ERRORS.labels(self.name).inc()
                log.exception("watch of %s crashed; re-listing", self.name)
                need_list = True
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 30.0)

    def _apply(self, kind: str, obj: dict[str, Any]) -> None:
        rv = _rv(obj)
        if kind == "BOOKMARK":
            if rv:
                self._rv = rv
            return
        obj.setdefault("kind", self.resource.kind)
        obj.setdefault("apiVersion", self.resource.api_version)
        key = object_key(obj)
        if rv:
            self._rv = rv
        if kind == "DELETED":
            old = self.cache.pop(key, None)
            self._emit("DELETED", obj, old)
            return
        old = self.cache.get(key)
        self.cache[key] = obj
        self._emit(kind if old is None else "MODIFIED", obj, old)


def _rv(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")
