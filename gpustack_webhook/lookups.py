"""Where one review's inputs come from: Settings and the objects its rules read.

The library is synchronous and pure; it asks a :class:`~gpustack_render.lookups.Lookups` for the
objects a rule needs. The server runs the library in a worker thread and gives it a
:class:`LiveLookups`: every read is a GET issued on the event loop (through an
:class:`ObjectReader`, the client module) and awaited from the worker thread, memoised per name
for the one review and never shared between reviews — a stale cache must not decide admission.

Not-found is ``None``; any other failure (an error answer, a timeout, the review's deadline, a
stored object that does not decode) raises :class:`~gpustack_render.lookups.LookupFailed`, which
the server answers as an internal error instead of a verdict on the object.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel

from gpustack_render.api.inputs import (
    InstanceType,
    KVCacheBackend,
    KVCachePool,
    KVCachePoolBinding,
    ModelArtifact,
)
from gpustack_render.decoding import decode_model
from gpustack_render.lookups import LookupFailed, Lookups, StaticLookups
from gpustack_render.settings import CONFIGMAP_NAME, Settings, settings_from_data
from gpustack_webhook.logs import LOGGER_NAME, fields

log = logging.getLogger(f"{LOGGER_NAME}.lookups")

M = TypeVar("M", bound=BaseModel)

#: Result labels of :attr:`LookupObserver`.
FOUND, NOT_FOUND, FAILED = "found", "not_found", "failed"

#: Called once per live read with (kind, result).
LookupObserver = Callable[[str, str], None]


class ReadError(Exception):
    """A read that failed for a reason other than "not found" (raised by an ObjectReader)."""


class ObjectReader(Protocol):
    """Live reads from the API server (implemented by :mod:`gpustack_webhook.kube`)."""

    async def get_object(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        """The stored object of ``kind`` (a worker.gpustack.ai/v1 kind), or None when absent."""
        ...

    async def get_config_map_data(self, namespace: str, name: str) -> dict[str, str] | None:
        """A ConfigMap's ``data`` (empty when it has none), or None when it does not exist."""
        ...


class Sources(Protocol):
    """Settings and lookups for one review."""

    async def settings(self) -> Settings:
        """The Settings that apply to this review; raises ``LookupFailed`` when unreadable."""
        ...

    def lookups(self, loop: asyncio.AbstractEventLoop, deadline: float) -> Lookups:
        """Lookups for one review, usable from a worker thread until ``deadline``
        (a :func:`time.monotonic` instant)."""
        ...


@dataclass
class StaticSources:
    """Sources answered from memory: fixed Settings and objects (tests, offline use)."""

    objects: StaticLookups = field(default_factory=StaticLookups)
    fixed_settings: Settings = field(default_factory=Settings)

    async def settings(self) -> Settings:
        return self.fixed_settings

    def lookups(self, loop: asyncio.AbstractEventLoop, deadline: float) -> Lookups:
        return self.objects


class LiveSources:
    """Sources read live through an :class:`ObjectReader` for every review."""

    def __init__(
        self,
        reader: ObjectReader,
        *,
        namespace: str,
        observe: LookupObserver | None = None,
        request_timeout: float = 5.0,
    ) -> None:
        self.reader = reader
        self.namespace = namespace
        self._observe = observe or (lambda kind, result: None)
        self._request_timeout = request_timeout
        self._reported: tuple[str, ...] = ()

    async def settings(self) -> Settings:
        """Settings from the ConfigMap ``gpustack-settings`` in the server's namespace.

        A missing ConfigMap means every default. A bad or unknown key keeps its default and is
        logged (once per distinct set of problems, not on every review).
        """
        try:
            data = await asyncio.wait_for(
                self.reader.get_config_map_data(self.namespace, CONFIGMAP_NAME),
                self._request_timeout,
            )
        except (ReadError, TimeoutError) as exc:
            self._observe("ConfigMap", FAILED)
            reason = str(exc) or f"timed out after {self._request_timeout:g}s"
            raise LookupFailed(
                "ConfigMap", CONFIGMAP_NAME, reason, namespace=self.namespace
            ) from exc
        self._observe("ConfigMap", NOT_FOUND if data is None else FOUND)
        settings, errs = settings_from_data(data or {})
        problems = tuple(e.message() for e in errs)
        if problems != self._reported:
            self._reported = problems
            if problems:
                log.warning(
                    "settings ConfigMap has problems; those keys keep their defaults",
                    extra=fields(
                        configmap=f"{self.namespace}/{CONFIGMAP_NAME}",
                        problems=[{"field": e.field, "reason": e.type.value} for e in errs],
                    ),
                )
        return replace(settings, system_namespace=self.namespace)

    def lookups(self, loop: asyncio.AbstractEventLoop, deadline: float) -> Lookups:
        return LiveLookups(
            self.reader,
            loop=loop,
            deadline=deadline,
            observe=self._observe,
            request_timeout=self._request_timeout,
        )


class LiveLookups:
    """The library's Lookups for one review: live GETs on the loop, memoised per name.

    Call it from a worker thread only; a call on the loop's own thread would wait for itself.
    """

    def __init__(
        self,
        reader: ObjectReader,
        *,
        loop: asyncio.AbstractEventLoop,
        deadline: float,
        observe: LookupObserver | None = None,
        request_timeout: float = 5.0,
    ) -> None:
        self._reader = reader
        self._loop = loop
        self._deadline = deadline
        self._observe = observe or (lambda kind, result: None)
        self._request_timeout = request_timeout
        self._memo: dict[tuple[str, str, str], object] = {}
        self._lock = threading.Lock()

    def instance_type(self, name: str) -> InstanceType | None:
        return self._read(InstanceType, "", name)

    def binding(self, namespace: str, name: str) -> KVCachePoolBinding | None:
        return self._read(KVCachePoolBinding, namespace, name)

    def pool(self, name: str) -> KVCachePool | None:
        return self._read(KVCachePool, "", name)

    def backend(self, name: str) -> KVCacheBackend | None:
        return self._read(KVCacheBackend, "", name)

    def artifact(self, namespace: str, name: str) -> ModelArtifact | None:
        return self._read(ModelArtifact, namespace, name)

    @property
    def reads(self) -> int:
        """How many distinct objects this review has read so far."""
        return len(self._memo)

    def _read(self, model: type[M], namespace: str, name: str) -> M | None:
        kind = model.__name__
        key = (kind, namespace, name)
        with self._lock:
            if key in self._memo:
                return self._replay(self._memo[key], model)
        outcome = self._fetch(model, kind, namespace, name)
        with self._lock:
            self._memo.setdefault(key, outcome)
            return self._replay(self._memo[key], model)

    @staticmethod
    def _replay(outcome: object, model: type[M]) -> M | None:
        if isinstance(outcome, LookupFailed):
            raise outcome
        if outcome is None or isinstance(outcome, model):
            return outcome
        raise TypeError(f"memoised {type(outcome).__name__} is not a {model.__name__}")

    def _fetch(
        self, model: type[M], kind: str, namespace: str, name: str
    ) -> M | LookupFailed | None:
        def failed(reason: str) -> LookupFailed:
            self._observe(kind, FAILED)
            return LookupFailed(kind, name, reason, namespace=namespace)

        if not name:
            # No GET can name an empty object; rules treat it as absent.
            return None
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            raise RuntimeError("LiveLookups must be used from a worker thread, not the event loop")
        remaining = self._deadline - time.monotonic()
        if remaining <= 0:
            return failed("the review's deadline passed before the read")
        timeout = min(remaining, self._request_timeout)
        future = asyncio.run_coroutine_threadsafe(
            self._reader.get_object(kind, namespace, name), self._loop
        )
        try:
            data = future.result(timeout=timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            return failed(f"no answer within {timeout:.2f}s")
        except ReadError as exc:
            return failed(str(exc))
        except Exception as exc:  # anything else the client raises is a failed read too
            return failed(f"{type(exc).__name__}: {exc}")
        if data is None:
            self._observe(kind, NOT_FOUND)
            return None
        obj, errs = decode_model(model, data)
        if obj is None:
            first = errs[0].message() if errs else "does not decode"
            return failed(f"the stored object does not decode ({first})")
        self._observe(kind, FOUND)
        return obj
