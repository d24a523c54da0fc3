"""Slow clients are closed within the configured limits, the connection count is capped, and a
correct review still answers promptly while slow clients are held (loopback only; small limits
and counts so the whole file runs in a few seconds; the 1,000-connection figures are in
bench/webhook_slowloris.py)."""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from test_webhook_tls import write_pair

from gpustack_render.core.errors import Verdict
from gpustack_render.core.review import AdmissionRequest
from gpustack_render.core.settings import Settings
from gpustack_render.schema.lookups import Lookups
from gpustack_webhook.limits import ConnectionLimits
from gpustack_webhook.lookups import StaticSources
from gpustack_webhook.server import PATH_POD_INJECT, Webhook, WebhookServer

pytestmark = pytest.mark.asyncio(loop_scope="session")

LIMITS = ConnectionLimits(
    header_timeout=0.5, body_timeout=0.5, idle_timeout=0.8, max_connections=24, linger=0.3
)
#: What "within the limit" allows on a shared, loaded machine.
SLACK = 1.5

REVIEW = json.dumps(
    {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u-1",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "operation": "CREATE",
            "namespace": "team-a",
            "object": {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "p", "namespace": "team-a"},
                "spec": {"containers": [{"name": "main", "image": "x"}]},
            },
        },
    }
).encode()


def post(body: bytes, *, keep_alive: bool = True) -> bytes:
    head = (
        f"POST {PATH_POD_INJECT} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        f"Connection: {'keep-alive' if keep_alive else 'close'}\r\n\r\n"
    )
    return head.encode() + body


@pytest_asyncio.fixture(loop_scope="session")
async def served() -> AsyncIterator[tuple[WebhookServer, int]]:
    server = WebhookServer(StaticSources(), limits=LIMITS)
    await server.start(host="127.0.0.1", port=0, ssl_context=None)
    try:
        yield server, server.port
    finally:
        await server.stop()


async def closed_after(reader: asyncio.StreamReader, *, within: float) -> tuple[float, bytes]:
    """Seconds until the server closes the connection, and what it sent before."""
    started = time.monotonic()
    data = b""
    async with asyncio.timeout(within):
        while chunk := await reader.read(65536):
            data += chunk
    return time.monotonic() - started, data


async def open_conn(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", port)


async def answer_time(port: int) -> float:
    reader, writer = await open_conn(port)
    started = time.monotonic()
    writer.write(post(REVIEW, keep_alive=False))
    _, data = await closed_after(reader, within=5)
    writer.close()
    assert data.startswith(b"HTTP/1.1 200"), data[:200]
    return time.monotonic() - started


async def test_a_silent_connection_is_closed_within_the_header_timeout(
    served: tuple[WebhookServer, int],
) -> None:
    _, port = served
    reader, writer = await open_conn(port)
    took, data = await closed_after(reader, within=LIMITS.header_timeout + SLACK)
    writer.close()
    assert data == b"" and took >= LIMITS.header_timeout * 0.9


async def test_partial_headers_are_closed_within_the_header_timeout(
    served: tuple[WebhookServer, int],
) -> None:
    _, port = served
    reader, writer = await open_conn(port)
    request = post(REVIEW)
    writer.write(request[:30])

    async def dribble() -> None:  # slowloris: one more header byte every 0.1 s
        for byte in request[30:60]:
            await asyncio.sleep(0.1)
            writer.write(bytes([byte]))

    task = asyncio.create_task(dribble())
    took, data = await closed_after(reader, within=LIMITS.header_timeout + SLACK)
    task.cancel()
    writer.close()
    assert data == b"" and took < LIMITS.header_timeout + SLACK


async def test_a_partial_body_is_answered_408_and_closed_within_the_body_timeout(
    served: tuple[WebhookServer, int],
) -> None:
    _, port = served
    reader, writer = await open_conn(port)
    writer.write(post(REVIEW)[:-20])
    took, data = await closed_after(reader, within=LIMITS.body_timeout + LIMITS.linger + SLACK)
    writer.close()
    assert data.startswith(b"HTTP/1.1 408"), data[:100]
    assert b"body did not arrive" in data and took >= LIMITS.body_timeout * 0.9


async def test_an_idle_keep_alive_connection_is_closed_within_the_idle_timeout(
    served: tuple[WebhookServer, int],
) -> None:
    server, port = served
    reader, writer = await open_conn(port)
    writer.write(post(REVIEW))
    head = await reader.readuntil(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200")
    length = int(
        next(h for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")).split(b":")[
            1
        ]
    )
    await reader.readexactly(length)
    # Answered and kept alive: closed only once idle for the limit, not by the header limit.
    took, data = await closed_after(reader, within=LIMITS.idle_timeout + SLACK)
    writer.close()
    assert data == b"" and took >= LIMITS.idle_timeout * 0.9
    await asyncio.sleep(0.05)
    metrics = server.metrics.render().decode()
    assert 'gpustack_webhook_connections_closed_total{reason="idle_timeout"} 1.0' in metrics


async def test_connections_over_the_cap_are_refused_and_a_review_still_answers(
    served: tuple[WebhookServer, int],
) -> None:
    server, port = served
    # Hold all but two slots with slow clients (half partial headers, half partial bodies).
    held = [await open_conn(port) for _ in range(LIMITS.max_connections - 2)]
    for i, (_, writer) in enumerate(held):
        writer.write(post(REVIEW)[: 20 if i % 2 else -20])
    await asyncio.sleep(0.05)
    assert len(server.guards[0].open) == LIMITS.max_connections - 2
    # A correct review answers while they are held (generous bound: a loaded CI machine).
    assert await answer_time(port) < 1.0
    # Fill the cap: the next connection is dropped at accept.
    extra = [await open_conn(port) for _ in range(2)]
    await asyncio.sleep(0.05)
    reader, writer = await open_conn(port)
    took, data = await closed_after(reader, within=1.0)
    writer.close()
    assert data == b"" and took < 1.0
    # Every held connection is closed within its limit; then reviews are served again.
    for reader, writer in [*held, *extra]:
        await closed_after(reader, within=LIMITS.body_timeout + LIMITS.linger + SLACK)
        writer.close()
    assert await answer_time(port) < 1.0
    assert not server.guards[0].open or len(server.guards[0].open) <= 1
    metrics = server.metrics.render().decode()
    for reason in ("header_timeout", "body_timeout", "over_capacity"):
        assert f'gpustack_webhook_connections_closed_total{{reason="{reason}"}}' in metrics


async def test_the_tls_handshake_is_bounded_by_the_header_timeout(tmp_path: Path) -> None:
    cert, key = write_pair(tmp_path, "limits")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server = WebhookServer(StaticSources(), limits=LIMITS)
    await server.start(host="127.0.0.1", port=0, ssl_context=context)
    try:
        reader, writer = await open_conn(server.port)  # plain TCP, never says hello
        took, _ = await closed_after(reader, within=LIMITS.header_timeout + SLACK)
        writer.close()
        assert took >= LIMITS.header_timeout * 0.9
        await asyncio.sleep(1.1)  # the slot of a failed handshake is given back
        assert not server.guards[0].open
    finally:
        await server.stop()


def big_answer(request: AdmissionRequest, *, lookups: Lookups, settings: Settings) -> Verdict:
    """An answer far larger than the socket buffers between client and server can hold."""
    return Verdict.allow(
        patch=[{"op": "add", "path": "/metadata/annotations/x", "value": "a" * (12 << 20)}]
    )


@pytest.mark.parametrize("tls", [False, True], ids=["http", "https"])
async def test_an_answer_the_client_does_not_read_is_aborted_within_the_body_timeout(
    tmp_path: Path, tls: bool
) -> None:
    """A client that sends a review and never reads the answer held the connection (its slot
    and the answer in the send buffers): for ever on plain HTTP (aiohttp's keep-alive timer
    waits for the write to finish, the header timer sleeps while a request is handled), and
    over TLS until the idle timeout plus asyncio's 30 s TLS shutdown timeout (the TLS layer
    passes the whole answer to the TCP transport, so the app protocol is never paused)."""
    context = None
    if tls:
        cert, key = write_pair(tmp_path, "limits")
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
    hook = Webhook("big", "/big", "", "v1", "Pod", big_answer)
    server = WebhookServer(StaticSources(), webhooks=[hook], limits=LIMITS)
    await server.start(host="127.0.0.1", port=0, ssl_context=context)
    sock = socket.socket()
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", server.port))
        request = post(REVIEW).replace(PATH_POD_INJECT.encode(), b"/big", 1)
        if tls:
            client = ssl.create_default_context()
            client.check_hostname = False
            client.verify_mode = ssl.CERT_NONE
            sock.setblocking(False)
            tls_sock = client.wrap_socket(sock, do_handshake_on_connect=False)
            await _handshake(tls_sock)
            tls_sock.setblocking(True)
            tls_sock.sendall(request)
        else:
            sock.sendall(request)
        # Never read. The server gives up once its send buffer waited the body timeout.
        async with asyncio.timeout(LIMITS.body_timeout + 10 * SLACK):
            while not server.guards[0].open:  # accepted
                await asyncio.sleep(0.01)
            while server.guards[0].open:
                await asyncio.sleep(0.05)
        metrics = server.metrics.render().decode()
        assert 'gpustack_webhook_connections_closed_total{reason="write_timeout"} 1.0' in metrics
        assert 'reason="idle_timeout"' not in metrics
    finally:
        sock.close()
        await server.stop()


async def _handshake(sock: ssl.SSLSocket) -> None:
    """The client's TLS handshake without blocking the loop the server runs on."""
    while True:
        try:
            sock.do_handshake()
            return
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
            await asyncio.sleep(0.01)
