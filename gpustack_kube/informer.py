"""Informers: list + watch with bookmarks, a re-list on ``410 Gone``, and an inactivity watchdog.

An :class:`Informer` keeps a cache of one resource (optionally one namespace, a label and a
field selector) and calls its handlers with ``(event type, new object, old object)`` for every
change, including the synthetic ``ADDED`` events of each (re-)list and ``DELETED`` for objects
that vanished between two lists; handlers must be cheap and never raise. The controller
(``gpustack_controller.watches``, its event mapping and caches) and the webhook server
(``gpustack_webhook.cache``, the objects a review reads) both run it.

What the cache keeps of an object is its ``transform``'s answer (applied as the object arrives,
before any handler sees it); a shell passes one that drops what its readers never read
(``metadata.managedFields`` above all, on every object:
docs/design/0006-control-plane-at-scale.md). ``indexers`` name functions of an object returning
index values; :meth:`Informer.by_index` answers the objects holding a value in time
proportional to the answer (client-go's Indexer), so a reader that needs "this deployment's
Services" or "the Workloads owning these Pods" never walks the whole cache.

A quiet stream is not a dead one. The API server's watch cache sends a bookmark about once a
minute and two seconds before the stream's own timeout (``nextBookmarkTime`` in
k8s.io/apiserver's ``cache_watcher.go``), and nothing else while nothing changes. An informer
whose inactivity bound is shorter than that minute therefore asks for streams that end before
the bound (:func:`stream_timeout`): a quiet stream ends on time, with its bookmark, and is
resumed from its version, never taken for a half-open connection. A stream that ran and then
fell silent all the same is resumed at once, without the back-off meant for an API server that
refuses connections.

Why it is written here and not taken from kubernetes_asyncio: docs/design/0005-kube-client.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from gpustack_kube.client import ApiError, Kube
from gpustack_render.schema.resources import Resource

log = logging.getLogger(__name__)

Handler = Callable[[str, dict[str, Any], dict[str, Any] | None], None]
#: What the cache keeps of an object as it arrives.
Transform = Callable[[dict[str, Any]], dict[str, Any]]
#: The index values of an object (none: not indexed).
IndexFunc = Callable[[Mapping[str, Any]], Iterable[str]]


def _same(obj: dict[str, Any]) -> dict[str, Any]:
    return obj


def _ignore(resource: str) -> None:
    return None


#: Seconds between the bookmarks the API server sends on a quiet stream, with a margin (its
#: ``defaultBookmarkFrequency`` is a minute, scheduled in one-second buckets).
BOOKMARK_INTERVAL = 62.0


def stream_timeout(watch_timeout: int, inactivity: float) -> int:
    """The ``timeoutSeconds`` to ask for: ``watch_timeout``, shortened below ``inactivity``
    when the API server's periodic bookmark would come later than that bound, so that a quiet
    stream ends (with the bookmark sent two seconds before its end) before it counts as
    silent."""
    if inactivity > BOOKMARK_INTERVAL:
        return watch_timeout
    return max(1, min(watch_timeout, math.ceil(inactivity) - 1))


def object_key(obj: Mapping[str, Any]) -> str:
    """``<namespace>/<name>`` (or ``<name>`` for a cluster-scoped object)."""
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace") or ""
    return f"{ns}/{meta.get('name')}" if ns else str(meta.get("name"))


class Informer:
    """A list+watch cache of one resource.

    ``on_relist`` and ``on_error`` are called (with the resource's plural) after each full list
    and each failed or silent stream, for a shell's metrics. :attr:`current` is true while the
    cache follows an open stream: from the first event, bookmark or list answered after a
    (re)connection until the stream fails; a reader that must not trust a cache cut off from
    the API server reads live meanwhile.
    """

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
        transform: Transform | None = None,
        indexers: Mapping[str, IndexFunc] | None = None,
        on_relist: Callable[[str], None] | None = None,
        on_error: Callable[[str], None] | None = None,
    ) -> None:
        self.kube = kube
        self.resource = resource
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.handlers: list[Handler] = list(handlers or ())
        self.watch_timeout = watch_timeout
        self.inactivity = inactivity
        self.transform: Transform = transform or _same
        self._on_relist = on_relist or _ignore
        self._on_error = on_error or _ignore
        #: True while the cache follows an open stream (see the class docstring).
        self.current = False
        self.indexers: dict[str, IndexFunc] = dict(indexers or {})
        self.cache: dict[str, dict[str, Any]] = {}
        #: index name → value → keys; and each key's values, to remove them.
        self._indices: dict[str, dict[str, set[str]]] = {name: {} for name in self.indexers}
        self._indexed: dict[str, dict[str, tuple[str, ...]]] = {n: {} for n in self.indexers}
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

    def add_indexer(self, name: str, func: IndexFunc) -> None:
        """Index the cache by ``func`` under ``name`` from now on (the objects cached already
        included); a name already indexed is kept as it is."""
        if name in self.indexers:
            return
        self.indexers[name] = func
        self._indices[name] = {}
        self._indexed[name] = {}
        for key, obj in self.cache.items():
            self._index_one(name, func, key, obj)

    def by_index(self, index: str, value: str) -> list[dict[str, Any]]:
        """The cached objects whose ``index`` function answered ``value``."""
        keys = self._indices[index].get(value, ())
        return [self.cache[k] for k in keys if k in self.cache]

    def _store(self, key: str, obj: dict[str, Any]) -> dict[str, Any] | None:
        """Cache ``obj`` under ``key`` (re-indexed); the object it replaces."""
        old = self.cache.get(key)
        self.cache[key] = obj
        for name, func in self.indexers.items():
            self._unindex(name, key)
            self._index_one(name, func, key, obj)
        return old

    def _index_one(self, name: str, func: IndexFunc, key: str, obj: dict[str, Any]) -> None:
        try:
            values = tuple(dict.fromkeys(func(obj)))
        except Exception:  # an index function bug must not stop the stream
            log.exception("informer index %s failed", name, extra={"resource": self.name})
            values = ()
        if values:
            self._indexed[name][key] = values
            by_value = self._indices[name]
            for value in values:
                by_value.setdefault(value, set()).add(key)

    def _remove(self, key: str) -> dict[str, Any] | None:
        for name in self.indexers:
            self._unindex(name, key)
        return self.cache.pop(key, None)

    def _unindex(self, name: str, key: str) -> None:
        by_value = self._indices[name]
        for value in self._indexed[name].pop(key, ()):
            keys = by_value.get(value)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del by_value[value]

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
        fresh = {object_key(o): self.transform(o) for o in items}
        del items
        for key in list(self.cache):
            if key not in fresh:
                gone = self._remove(key)
                assert gone is not None
                self._emit("DELETED", gone, gone)
        for key, obj in fresh.items():
            old = self._store(key, obj)
            if old is None or _rv(old) != _rv(obj):
                self._emit("ADDED" if old is None else "MODIFIED", obj, old)
        self._rv = rv
        self._on_relist(self.name)
        self.synced.set()

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        backoff = 0.5
        need_list = True
        timeout = stream_timeout(self.watch_timeout, self.inactivity)
        while True:
            opened = loop.time()
            try:
                if need_list:
                    await self._relist()
                    need_list = False
                self.current = not need_list and self.synced.is_set()
                opened = loop.time()
                async for event in self.kube.watch(
                    self.resource,
                    namespace=self.namespace,
                    label_selector=self.label_selector,
                    field_selector=self.field_selector,
                    resource_version=self._rv,
                    timeout_seconds=timeout,
                    inactivity_seconds=self.inactivity,
                ):
                    self.current = True
                    self._apply(event.type, event.object)
                backoff = 0.5
            except asyncio.CancelledError:
                self.current = False
                raise
            except ApiError as exc:
                self.current = False
                if exc.gone:
                    # The history we asked for is compacted away: start again from a list.
                    need_list = True
                    continue
                self._on_error(self.name)
                # 429 while the API server's cache (re)initializes is routine: retry quietly.
                log.log(
                    logging.DEBUG if exc.status == 429 else logging.WARNING,
                    "watch of %s failed: %s; retrying",
                    self.name,
                    exc,
                )
                # A 0 status is a silent or broken stream: resume from the last version seen.
                need_list = exc.status != 0
                if exc.status == 0 and loop.time() - opened >= self.inactivity:
                    # It ran, then fell silent: resume at once (a connection lost, not an API
                    # server refusing them, which the back-off is for).
                    backoff = 0.5
                    continue
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 30.0)
            except Exception:  # keep the informer alive whatever happened
                self.current = False
                self._on_error(self.name)
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
        obj = self.transform(obj)
        key = object_key(obj)
        if rv:
            self._rv = rv
        if kind == "DELETED":
            old = self._remove(key)
            self._emit("DELETED", obj, old)
            return
        old = self._store(key, obj)
        self._emit(kind if old is None else "MODIFIED", obj, old)


def _rv(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")
