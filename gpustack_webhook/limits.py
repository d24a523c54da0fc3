"""Connection limits of the webhook listeners: slow clients are timed out, connections capped.

A webhook with ``failurePolicy: Fail`` that any Pod can reach must not be held open: each TLS
connection costs the server memory whether or not it ever sends a request, so

* a connection is refused at accept, before the TLS handshake allocates anything, while
  ``max_connections`` are open (handshakes in progress count);
* the TLS handshake must finish within ``header_timeout``;
* a request's headers must arrive within ``header_timeout`` of its first byte (of the
  connection's opening for its first request);
* its body within ``body_timeout`` of its headers (enforced where the body is read,
  :mod:`gpustack_webhook.server`; the rest of a refused body is drained for ``linger``);
* a keep-alive connection with no request is closed ``idle_timeout`` after its last answer;
* an answer the client does not take is bounded by ``body_timeout`` too: while part of it is
  still in the server's send buffers (TLS and TCP), each ``body_timeout`` must see some of it
  taken, or the connection is aborted; a client that never reads would otherwise hold its
  slot and the answer's memory for ever on plain HTTP, and until the idle timeout plus
  asyncio's 30 s TLS shutdown timeout over TLS.

Only the asyncio ``Protocol`` interface is used: each connection's aiohttp handler is wrapped
by a :class:`_Guarded` protocol that watches its bytes, and a middleware marks when a request
is being handled (no limit then: the review has its own time budget).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from aiohttp.web_protocol import RequestHandler

from gpustack_webhook.logs import LOGGER_NAME, fields

log = logging.getLogger(f"{LOGGER_NAME}.limits")

#: Reasons a connection is closed or refused (the metric's label).
HEADER_TIMEOUT, IDLE_TIMEOUT, OVER_CAPACITY = "header_timeout", "idle_timeout", "over_capacity"
WRITE_TIMEOUT = "write_timeout"

#: Called with a reason each time a connection is closed or refused by a limit.
CloseObserver = Callable[[str], None]


@dataclass(frozen=True)
class ConnectionLimits:
    """How long a client may take, and how many connections may be open at once."""

    #: Seconds for the TLS handshake, and for a request's headers from its first byte.
    header_timeout: float = 5.0
    #: Seconds for a request's body once its headers have arrived; also the longest a client
    #: may take none of an answer still in the send buffers.
    body_timeout: float = 5.0
    #: Seconds a keep-alive connection may wait for its next request.
    idle_timeout: float = 30.0
    #: Connections open at once (accepted, handshaking or serving); more are refused.
    max_connections: int = 2000
    #: Seconds the rest of a refused body (408, 413) is read and dropped so the answer reaches
    #: the client before the connection closes (aiohttp's lingering close, 10 s by default).
    linger: float = 1.0


class OverCapacityError(ConnectionError):
    """Raised by the protocol factory: asyncio then drops the accepted socket before any TLS
    state is allocated for it."""


class Guard:
    """The open connections of one listener and their deadlines."""

    def __init__(self, limits: ConnectionLimits, *, observe: CloseObserver | None = None) -> None:
        self.limits = limits
        self.observe = observe or (lambda reason: None)
        #: aiohttp's handler factory (the runner's server), bound when the listener starts.
        self.factory: Callable[[], RequestHandler] | None = None
        self.open: set[_Guarded] = set()
        self._by_handler: dict[RequestHandler, _Guarded] = {}

    def __call__(self) -> asyncio.Protocol:
        """A protocol for one accepted connection, or :class:`OverCapacityError`."""
        if len(self.open) >= self.limits.max_connections:
            self.observe(OVER_CAPACITY)
            raise OverCapacityError(f"{len(self.open)} connections are open")
        assert self.factory is not None, "the listener binds the factory before accepting"
        return _Guarded(self, self.factory())

    def busy(self, handler: Any, value: bool) -> None:
        guarded = self._by_handler.get(handler)
        if guarded is not None:
            guarded.set_busy(value)

    def middleware(self) -> Callable[..., Awaitable[web.StreamResponse]]:
        """Marks a connection busy while one of its requests is handled."""

        @web.middleware
        async def guard(
            request: web.Request,
            handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
        ) -> web.StreamResponse:
            self.busy(request.protocol, True)
            try:
                return await handler(request)
            finally:
                self.busy(request.protocol, False)

        return guard


class _Guarded(asyncio.Protocol):
    """One connection: aiohttp's handler behind a header deadline and the capacity count."""

    def __init__(self, guard: Guard, inner: RequestHandler) -> None:
        self.guard = guard
        self.inner = inner
        self.transport: asyncio.Transport | None = None
        self.busy = False
        self.loop = asyncio.get_running_loop()
        #: When the last answer was given (None before the first request).
        self.idle_since: float | None = None
        guard.open.add(self)
        guard._by_handler[inner] = self
        # Until connection_made: a handshake that fails is never reported to the protocol,
        # so the slot is given back once the handshake's own limit has passed.
        self.timer: asyncio.TimerHandle | None = self.loop.call_later(
            guard.limits.header_timeout + 1.0, self._release
        )
        #: Armed from an answer (or a paused write) until the send buffers are empty.
        self.write_timer: asyncio.TimerHandle | None = None
        #: Bytes the send buffers held at the last check (None: not checked yet).
        self.pending: int | None = None
        #: Closed by a limit here (counted under its own reason, not as idle).
        self.aborted = False

    # ---- asyncio.Protocol ----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self._arm()  # the first request's headers are due from the connection's opening
        self.inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if not self.busy and self.timer is None:
            self._arm()
        self.inner.data_received(data)

    def eof_received(self) -> None:
        self.inner.eof_received()

    def pause_writing(self) -> None:
        self._watch_output()
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        idle = self.idle_since
        # Idle past the limit: aiohttp's keep-alive timer closed it.
        if (
            not self.busy
            and not self.aborted
            and idle is not None
            and self.timer is None
            and self.loop.time() - idle >= self.guard.limits.idle_timeout * 0.99
        ):
            self.guard.observe(IDLE_TIMEOUT)
        self._release()
        self.inner.connection_lost(exc)

    # ---- deadlines -------------------------------------------------------------------------

    def set_busy(self, value: bool) -> None:
        self.busy = value
        self.idle_since = None if value else self.loop.time()
        self._cancel()
        # Idle again: aiohttp's keep-alive timer (idle_timeout) runs from the answer; the
        # next request's header deadline starts with its first byte.
        if not value:
            self._watch_output()  # the answer is written once the handler returns

    def _arm(self) -> None:
        self._cancel()
        self.timer = self.loop.call_later(self.guard.limits.header_timeout, self._expire)

    def _cancel(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def _expire(self) -> None:
        self.timer = None
        if not self.busy:
            self._abort(HEADER_TIMEOUT, "request headers did not arrive", "header_timeout")

    def _cancel_write(self) -> None:
        if self.write_timer is not None:
            self.write_timer.cancel()
            self.write_timer = None

    def _watch_output(self) -> None:
        if self.write_timer is None:
            self.pending = None
            self.write_timer = self.loop.call_later(
                self.guard.limits.body_timeout, self._write_expired
            )

    def _pending_output(self) -> int:
        """Bytes of answers not yet sent: the transport's buffer and, over TLS, the buffer
        of the TCP transport beneath it (asyncio hands the app protocol no pause for that
        one until the TLS layer's own 512 KiB buffer fills)."""
        if self.transport is None:
            return 0
        size = self.transport.get_write_buffer_size()
        below = getattr(getattr(self.transport, "_ssl_protocol", None), "_transport", None)
        if below is not None:
            size += int(below.get_write_buffer_size())
        return size

    def _write_expired(self) -> None:
        self.write_timer = None
        pending = self._pending_output()
        if pending == 0 or self.busy:
            return
        if self.pending is None or pending < self.pending:
            self.pending = pending  # some of it was taken: another period
            self.write_timer = self.loop.call_later(
                self.guard.limits.body_timeout, self._write_expired
            )
            return
        self._abort(WRITE_TIMEOUT, "client did not read its answer", "body_timeout")

    def _abort(self, reason: str, what: str, limit: str) -> None:
        if self.transport is None:
            return
        self.aborted = True
        self.guard.observe(reason)
        seconds = getattr(self.guard.limits, limit)
        log.info(f"closing a connection whose {what} in time", extra=fields(seconds=seconds))
        self.transport.abort()

    def _release(self) -> None:
        self._cancel()
        self._cancel_write()
        self.guard.open.discard(self)
        self.guard._by_handler.pop(self.inner, None)


class GuardedSite(web.TCPSite):
    """A TCP (optionally TLS) listener whose connections go through a :class:`Guard`."""

    def __init__(
        self,
        runner: web.BaseRunner,
        host: str | None,
        port: int,
        *,
        ssl_context: Any,
        guard: Guard,
    ) -> None:
        super().__init__(runner, host, port, ssl_context=ssl_context)
        self.guard = guard

    async def start(self) -> None:
        # BaseSite.start registers the site with its runner; TCPSite.start would listen with
        # the bare handler factory, so the listening is done here instead.
        await web.BaseSite.start(self)
        server = self._runner.server
        assert server is not None
        self.guard.factory = server
        loop = asyncio.get_running_loop()
        kwargs: dict[str, Any] = {}
        if self._ssl_context is not None:
            kwargs["ssl_handshake_timeout"] = self.guard.limits.header_timeout
        self._server = await loop.create_server(
            self.guard,
            self._host,
            self._port,
            ssl=self._ssl_context,
            backlog=self._backlog,
            reuse_address=self._reuse_address,
            reuse_port=self._reuse_port,
            **kwargs,
        )
        if self._server.sockets:
            self._bound_port = self._server.sockets[0].getsockname()[1]
