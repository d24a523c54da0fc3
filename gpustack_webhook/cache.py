"""Watch-fed reads for the Pod hooks: the objects an injection reads, without a GET per review.

Every Pod the API server creates in a watched namespace is reviewed, and an injection reads
four things: the Settings ConfigMap, the KVCachePoolBinding its label names, that Binding's
KVCachePool and the pool's KVCacheBackend. Read live, that is four GETs per Pod, which cost the
server more than the review's own rules (``bench/webhook_load.py``). :class:`WatchedSources`
answers them from informers (:class:`gpustack_kube.informer.Informer`: list, then watch from the
list's version) over the four input kinds and the one ConfigMap, and falls back to the live
reads of :class:`~gpustack_webhook.lookups.LiveSources` wherever the cache cannot answer for
the API server. The ModelDeployment hooks keep reading live (``gpustack_webhook.server``): an
admission decision on a deployment never rests on a cache.

When the cache answers is the one rule the controller follows too
(:mod:`gpustack_kube.cachedread`); what it means here:

- **A miss is read live.** An object the cache does not hold (created a moment ago, its watch
  event not yet delivered; or absent) is GET from the API server, so a Binding created just
  before the Pod is found, and a missing one is answered by the API server, not the cache.
- **A deleted object is never served from the cache after its deletion is known.** A
  ``DELETED`` event removes it; an object carrying a ``deletionTimestamp`` (being deleted,
  held by a finalizer) is never served from the cache either: it is read live, so it is
  answered exactly as without a cache. What remains is the window between the API server
  committing a delete and this server receiving the watch event: the API server's watch
  delivery delay, milliseconds on a healthy stream (the same order as the race a live GET
  sent just before the delete already has).
- **A cache cut off from the API server is not used.** An informer serves reads only while it
  follows an open stream (:attr:`~gpustack_kube.informer.Informer.current`): from its list or
  the first event after a reconnect until the stream fails. A stream that fails says so at
  once (an error, a closed connection); one that falls silent without failing (a half-open
  connection) is dropped after ``inactivity`` seconds (10 by default) and reads go live until
  it is followed again. That is the bound on serving a deleted object when the network loses
  the delete's event: ``inactivity`` seconds, never more. A stream that is quiet because
  nothing changes is not silent in that sense: the informers ask for streams that end before
  the bound (``gpustack_kube.informer.stream_timeout``: 9 s, each ending with the API server's
  bookmark) and resume them from their version, so in a quiet cluster the cache stays in use.

Decoding an object into its model costs more than finding it, so each stored version is decoded
once (a cache of ``(resourceVersion, model)`` per object, replaced by the next event); an object
that does not decode is a :class:`~gpustack_render.schema.lookups.LookupFailed` as a live read
would report it.

The server's RBAC (deploy/webhook/rbac.yaml) grants ``list`` and ``watch`` on the four kinds and
on the one ConfigMap by name (a ``metadata.name`` field selector is authorized against
``resourceNames``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any, Final

from gpustack_kube.cachedread import from_cache, usable
from gpustack_kube.client import Kube
from gpustack_kube.informer import Informer
from gpustack_render.api.inputs import InputObject
from gpustack_render.core.settings import CONFIGMAP_NAME, Settings
from gpustack_render.schema.kinds import INPUT_MODELS
from gpustack_render.schema.lookups import LookupFailed, decode_stored
from gpustack_render.schema.resources import CONFIGMAPS, PROJECT_RESOURCES
from gpustack_webhook.logs import LOGGER_NAME, fields
from gpustack_webhook.lookups import (
    FOUND,
    NOT_FOUND,
    UNANSWERED,
    LiveSources,
    LookupObserver,
    ReadKey,
    Unanswered,
)

#: The kinds the cache watches: the ones a review reads. ModelArtifact is an input kind too, but
#: no rule reads it while ``model.artifactRef`` is refused, and the RBAC grants it nothing.
CACHED_KINDS: Final[tuple[str, ...]] = (
    "InstanceType",
    "KVCachePoolBinding",
    "KVCachePool",
    "KVCacheBackend",
)

log = logging.getLogger(f"{LOGGER_NAME}.cache")

#: Seconds a stream may stay silent before it is dropped (and reads go live until it is
#: followed again): the bound on staleness when a connection dies without failing.
DEFAULT_INACTIVITY: Final = 10.0
#: Seconds the server waits for its caches' first lists at start (reads go live until then).
SYNC_TIMEOUT: Final = 10.0
#: The ``lookup`` label of a read answered from the cache.
CACHED: Final = "cached"


def _strip(obj: dict[str, Any]) -> dict[str, Any]:
    """What the cache keeps: the object without ``managedFields`` (no review reads them)."""
    meta = obj.get("metadata")
    if isinstance(meta, dict) and "managedFields" in meta:
        obj = {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}
    return obj


class WatchedSources:
    """Sources answered from watch-fed caches, falling back to ``live`` (see the module
    docstring for when)."""

    def __init__(
        self,
        kube: Kube,
        live: LiveSources,
        *,
        inactivity: float = DEFAULT_INACTIVITY,
        observe: LookupObserver | None = None,
    ) -> None:
        self.live = live
        self.namespace = live.namespace
        self._observe = observe or (lambda kind, result: None)
        self.informers: dict[str, Informer] = {
            kind: Informer(
                kube,
                PROJECT_RESOURCES[kind],
                transform=_strip,
                inactivity=inactivity,
                handlers=[self._forget],
            )
            for kind in CACHED_KINDS
        }
        self.settings_informer = Informer(
            kube,
            CONFIGMAPS,
            namespace=self.namespace,
            field_selector=f"metadata.name={CONFIGMAP_NAME}",
            transform=_strip,
            inactivity=inactivity,
            handlers=[self._settings_changed],
        )
        #: (kind, key) → (resourceVersion, the decoded model or the decode's failure).
        self._decoded: dict[tuple[str, str], tuple[str, InputObject | LookupFailed]] = {}
        self._settings: Settings | None = None
        self._tasks: list[asyncio.Task[None]] = []

    def _all(self) -> list[Informer]:
        return [*self.informers.values(), self.settings_informer]

    async def start(self, *, timeout: float = SYNC_TIMEOUT) -> None:
        """Start every informer and wait up to ``timeout`` for their first lists (a cache not
        synced yet is simply not used: reads go live)."""
        self._tasks = [informer.start() for informer in self._all()]
        waits = [asyncio.ensure_future(i.synced.wait()) for i in self._all()]
        _, pending = await asyncio.wait(waits, timeout=timeout)
        for wait in pending:
            wait.cancel()
        if pending:
            log.warning(
                "caches not synced yet; reading live until they are",
                extra=fields(pending=[i.name for i in self._all() if not i.synced.is_set()]),
            )

    async def stop(self) -> None:
        for informer in self._all():
            await informer.stop()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.clear()

    # ---- objects ---------------------------------------------------------------------------

    def _forget(self, kind: str, new: dict[str, Any], old: dict[str, Any] | None) -> None:
        """Drop the decoded model of an object that changed or went."""
        obj_kind = str(new.get("kind") or "")
        meta = new.get("metadata") or {}
        namespace = str(meta.get("namespace") or "")
        self._decoded.pop((obj_kind, f"{namespace}/{meta.get('name')}"), None)

    def resolve(self, key: ReadKey) -> InputObject | LookupFailed | Unanswered | None:
        """The object from the cache when it can answer for the API server (decoded once per
        stored version; a failure to decode is returned to be raised where the rule asked),
        else :data:`~gpustack_webhook.lookups.UNANSWERED`: a miss, an object being deleted, or
        a cache not following its stream is read live."""
        raw = from_cache(
            self.informers.get(key.kind),
            f"{key.namespace}/{key.name}" if key.namespace else key.name,
        )
        if not isinstance(raw, dict):
            return UNANSWERED
        rv = str((raw.get("metadata") or {}).get("resourceVersion") or "")
        memo_key = (key.kind, f"{key.namespace}/{key.name}")
        memo = self._decoded.get(memo_key)
        if memo is None or memo[0] != rv:
            try:
                model: InputObject | LookupFailed = decode_stored(
                    INPUT_MODELS[key.kind], raw, name=key.name, namespace=key.namespace
                )
            except LookupFailed as exc:
                model = exc
            memo = (rv, model)
            self._decoded[memo_key] = memo
        self._observe(key.kind, CACHED)
        return memo[1]

    async def read(self, key: ReadKey, *, since: float | None = None) -> InputObject | None:
        """:meth:`resolve`, else a live read."""
        found = self.resolve(key)
        if isinstance(found, Unanswered):
            return await self.live.read(key, since=since)
        if isinstance(found, LookupFailed):
            raise found
        return found

    # ---- settings --------------------------------------------------------------------------

    def _settings_changed(self, kind: str, new: dict[str, Any], old: dict[str, Any] | None) -> None:
        self._settings = None

    async def settings(self) -> Settings:
        """The Settings of the watched ConfigMap (every default when it does not exist), or a
        live read while the cache cannot answer."""
        informer = self.settings_informer
        if not usable(informer):
            return await self.live.settings()
        if self._settings is None:
            raw = informer.get(f"{self.namespace}/{CONFIGMAP_NAME}")
            data = None if raw is None else raw.get("data") or {}
            self._observe("ConfigMap", FOUND if raw is not None else NOT_FOUND)
            self._settings = self.live.settings_of(
                None if data is None else {str(k): str(v) for k, v in dict(data).items()}
            )
        return self._settings
