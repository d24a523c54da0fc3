"""Where one review's inputs come from: Settings and the objects its rules read.

The library is synchronous and pure; it asks a :class:`~gpustack_render.schema.lookups.Lookups` for
the objects a rule needs. The server answers with :class:`ReviewReads`, the reads of one review: an
object already read is returned (memoised per name for that review only, never shared between
reviews — a stale cache must not decide admission); an object not yet read stops the library
with :class:`NeedRead`, the server GETs it live on the event loop (through :class:`Sources`) and
runs the library again. Because the library is pure and deterministic, the rerun takes the same
path up to the new object and goes on from there; a review that reads *n* objects runs the
library *n + 1* times, each run stopping early, and never blocks a thread on the network.

Concurrent reviews that need the same object may share one GET, but only a GET sent after the
review began (``since``): its answer is never older than one the review would have read itself,
so it is as live as a read of its own. A GET sent before the review began is never joined, and
nothing is kept once a GET has answered.

Not-found is ``None``; any other failure (an error answer, a timeout, the review's deadline, a
stored object that does not decode) is a :class:`~gpustack_render.schema.lookups.LookupFailed`,
raised to the library where it asked, so it is reported as the library reports read failures,
never as a verdict on a missing object.

Settings come from the ConfigMap ``gpustack-settings`` in the server's namespace. They are
operator configuration, not an object a rule reads, so :class:`LiveSources` may reuse a read for
``settings_max_age`` seconds (one GET shared by every concurrent review; 0 reads it for every
review) and never serves an expired copy when a read fails.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Final, Protocol, TypeVar, runtime_checkable

from gpustack_render.api.inputs import (
    InputObject,
)
from gpustack_render.core.settings import CONFIGMAP_NAME, Settings, settings_from_data
from gpustack_render.schema.kinds import INPUT_MODELS
from gpustack_render.schema.lookups import LookupFailed, StaticLookups, decode_stored
from gpustack_webhook.logs import LOGGER_NAME, fields

log = logging.getLogger(f"{LOGGER_NAME}.lookups")

M = TypeVar("M", bound=InputObject)


#: Result labels passed to a :data:`LookupObserver`.
FOUND, NOT_FOUND, FAILED = "found", "not_found", "failed"

#: Called once per live read with (kind, result).
LookupObserver = Callable[[str, str], None]


class ReadError(Exception):
    """A read that failed for a reason other than "not found" (raised by an ObjectReader)."""


@dataclass(frozen=True)
class ReadKey:
    """One object a review reads."""

    kind: str
    namespace: str
    name: str


class NeedRead(BaseException):
    """The library asked for an object this review has not read yet.

    A ``BaseException`` so that no ``except Exception`` in the library can swallow it.
    """

    def __init__(self, key: ReadKey) -> None:
        super().__init__(f"{key.kind} {key.namespace}/{key.name}")
        self.key = key


class Unanswered:
    """What a synchronous resolver answers when it cannot answer (the read goes live)."""


#: The one :class:`Unanswered`.
UNANSWERED: Final = Unanswered()

#: Answers a read at once when it can (a watch-fed cache), else :data:`UNANSWERED`.
Resolver = Callable[[ReadKey], InputObject | LookupFailed | Unanswered | None]


class ReviewReads:
    """The library's Lookups for one review: answers what was read, asks for the rest.

    With a ``resolver`` (the watch-fed cache's synchronous side), a read it can answer is
    answered where the library asks, so a review whose reads are all cached runs the library
    once instead of once per read plus one.
    """

    def __init__(self, resolver: Resolver | None = None) -> None:
        self.answers: dict[ReadKey, InputObject | LookupFailed | None] = {}
        self._resolver = resolver

    def get(self, kind: type[M], namespace: str, name: str) -> M | None:
        return self._answer(kind, namespace, name)

    def _answer(self, model: type[M], namespace: str, name: str) -> M | None:
        if not name:
            return None  # no GET can name an empty object; rules treat it as absent
        key = ReadKey(model.__name__, namespace, name)
        if key not in self.answers:
            found = UNANSWERED if self._resolver is None else self._resolver(key)
            if isinstance(found, Unanswered):
                raise NeedRead(key)
            self.answers[key] = found
        answer = self.answers[key]
        if isinstance(answer, LookupFailed):
            raise answer
        if answer is None or isinstance(answer, model):
            return answer
        raise TypeError(f"read {key} answered a {type(answer).__name__}")


class ObjectReader(Protocol):
    """Live reads from the API server (implemented by :mod:`gpustack_webhook.kube`)."""

    async def get_object(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        """The stored object of ``kind`` (a worker.gpustack.ai/v1 kind), or None when absent."""
        ...

    async def get_config_map_data(self, namespace: str, name: str) -> dict[str, str] | None:
        """A ConfigMap's ``data`` (empty when it has none), or None when it does not exist."""
        ...


class Sources(Protocol):
    """Settings and object reads for reviews."""

    async def settings(self) -> Settings:
        """The Settings that apply to a review; raises ``LookupFailed`` when unreadable."""
        ...

    async def read(self, key: ReadKey, *, since: float | None = None) -> InputObject | None:
        """The object ``key`` names, None when absent; raises ``LookupFailed`` otherwise.

        ``since`` (a :func:`time.monotonic` time, the review's start) allows answering from a
        GET already in flight that was sent no earlier; None asks for a GET of its own.
        """
        ...


@runtime_checkable
class ResolvingSources(Sources, Protocol):
    """Sources that can answer some reads at once, without a round trip (a watch-fed cache)."""

    def resolve(self, key: ReadKey) -> InputObject | LookupFailed | Unanswered | None:
        """The object ``key`` names, a failure to report, or :data:`UNANSWERED`."""
        ...


@dataclass
class StaticSources:
    """Sources answered from memory: fixed Settings and objects (tests, offline use)."""

    objects: StaticLookups = field(default_factory=StaticLookups)
    fixed_settings: Settings = field(default_factory=Settings)

    async def settings(self) -> Settings:
        return self.fixed_settings

    async def read(self, key: ReadKey, *, since: float | None = None) -> InputObject | None:
        return self.objects.get(INPUT_MODELS[key.kind], key.namespace, key.name)


class LiveSources:
    """Sources read from the API server through an :class:`ObjectReader`."""

    def __init__(
        self,
        reader: ObjectReader,
        *,
        namespace: str,
        observe: LookupObserver | None = None,
        request_timeout: float = 5.0,
        settings_max_age: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.reader = reader
        self.namespace = namespace
        self.settings_max_age = settings_max_age
        self._observe = observe or (lambda kind, result: None)
        self._request_timeout = request_timeout
        self._clock = clock
        self._reported: tuple[str, ...] = ()
        self._settings: tuple[float, Settings] | None = None
        self._settings_read: asyncio.Future[Settings] | None = None
        #: GETs in flight: when each was started (monotonic) and its decoded answer.
        self._flights: dict[ReadKey, tuple[float, asyncio.Future[InputObject | None]]] = {}

    async def read(self, key: ReadKey, *, since: float | None = None) -> InputObject | None:
        """A live GET, decoded; ``LookupFailed`` for anything but found or not found.

        With ``since``, a GET of the same object started at or after ``since`` and still in
        flight is shared instead of sending another.
        """
        flight = self._flights.get(key)
        if since is not None and flight is not None and flight[0] >= since:
            # Shield: one waiting review that is cancelled must not cancel the others' read.
            return await asyncio.shield(flight[1])
        started = time.monotonic()  # at or before the GET is sent
        future = asyncio.ensure_future(self._get(key))
        self._flights[key] = (started, future)
        future.add_done_callback(lambda done: self._landed(key, done))
        return await asyncio.shield(future)

    def _landed(self, key: ReadKey, future: asyncio.Future[InputObject | None]) -> None:
        """Forget a GET that answered (nothing outlives it) and mark its failure as seen."""
        flight = self._flights.get(key)
        if flight is not None and flight[1] is future:
            del self._flights[key]
        _consume(future)

    async def _get(self, key: ReadKey) -> InputObject | None:
        """One live GET, decoded; ``LookupFailed`` for anything but found or not found."""

        def failed(reason: str) -> LookupFailed:
            self._observe(key.kind, FAILED)
            return LookupFailed(key.kind, key.name, reason, namespace=key.namespace)

        model = INPUT_MODELS.get(key.kind)  # the kinds a review may read
        if model is None:
            raise failed("not a kind this server reads")
        try:
            async with asyncio.timeout(self._request_timeout):
                data = await self.reader.get_object(key.kind, key.namespace, key.name)
        except TimeoutError:
            raise failed(f"no answer within {self._request_timeout:g}s") from None
        except ReadError as exc:
            raise failed(str(exc)) from None
        if data is None:
            self._observe(key.kind, NOT_FOUND)
            return None
        try:
            obj = decode_stored(model, data, name=key.name, namespace=key.namespace)
        except LookupFailed:
            self._observe(key.kind, FAILED)
            raise
        self._observe(key.kind, FOUND)
        return obj

    async def settings(self) -> Settings:
        """The Settings of ``gpustack-settings`` in the server's namespace.

        A missing ConfigMap means every default. A bad or unknown key keeps its default and is
        logged (once per distinct set of problems, not on every review). Concurrent reviews share
        one read; a read younger than ``settings_max_age`` is reused.
        """
        cached = self._settings
        if cached is not None and self._clock() - cached[0] < self.settings_max_age:
            return cached[1]
        if self._settings_read is None or self._settings_read.done():
            self._settings_read = asyncio.ensure_future(self._read_settings())
            # Every waiter may have given up (its review's budget) before a failure arrives.
            self._settings_read.add_done_callback(_consume)
        # Shield: one waiting review that is cancelled must not cancel the others' read.
        return await asyncio.shield(self._settings_read)

    async def _read_settings(self) -> Settings:
        started = self._clock()
        try:
            data = await asyncio.wait_for(
                self.reader.get_config_map_data(self.namespace, CONFIGMAP_NAME),
                self._request_timeout,
            )
        except (ReadError, TimeoutError) as exc:
            self._observe("ConfigMap", FAILED)
            reason = str(exc) or f"no answer within {self._request_timeout:g}s"
            raise LookupFailed(
                "ConfigMap", CONFIGMAP_NAME, reason, namespace=self.namespace
            ) from None
        self._observe("ConfigMap", NOT_FOUND if data is None else FOUND)
        settings = self.settings_of(data)
        self._settings = (started, settings)
        return settings

    def settings_of(self, data: dict[str, str] | None) -> Settings:
        """The Settings of the ConfigMap's ``data`` (``None``: it does not exist, every
        default), its problems logged once per distinct set."""
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


def _consume(future: asyncio.Future[Any]) -> None:
    """Mark a shared read's failure as seen (its waiters report it themselves)."""
    if not future.cancelled():
        future.exception()
