"""Slow clients against the webhook server: held TLS connections, slowloris, and a correct
review meanwhile.

Starts an envtest control plane and ``python -m gpustack_webhook`` as the Deployment runs it
(TLS, live reads), with the shipped connection limits unless flags say otherwise, then:

1. measures the server's resident memory after a warm-up review (the baseline);
2. opens ``--held`` TLS connections that complete the handshake and then send nothing, and
   ``--slowloris`` connections that send one byte of headers every ``--drip`` seconds;
3. while they are held, sends ``--reviews`` correct injection reviews one after another on a
   connection of its own and records each latency;
4. records the peak resident memory and how long each held connection stayed open.

Prints the baseline and peak memory, the memory per held connection, the review latencies
(p50, p99, max) against the 100 ms target, how many held connections the server refused at
its cap, and the longest time any held connection stayed open against the configured header
timeout; the last line is ``key=value`` pairs. No figure is asserted here; the unit test
tests/unit/test_webhook_limits.py checks the behaviour with small limits.

Run: ``python -m bench.webhook_slowloris [--held 1000] [--slowloris 50] [--reviews 50]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import ssl
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

import aiohttp
from integration.controlplane import started_control_plane
from integration.webhook_fixtures import (
    WebhookProcess,
    create_inputs,
    create_namespace,
    delete_inputs,
    labelled_pod,
)

from bench.webhook_load import INJECT_PATH, check_inject, review
from gpustack_webhook.limits import ConnectionLimits


def rss_kib(pid: int) -> int:
    """Resident memory of ``pid`` in KiB (0 where /proc cannot tell)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


class Held:
    """Connections held open by this process, and how long each one lasted."""

    def __init__(self) -> None:
        self.durations: list[float] = []
        self.opened = 0
        self.refused = 0

    async def hold(
        self, port: int, context: ssl.SSLContext, *, drip: float | None, gate: asyncio.Semaphore
    ) -> None:
        async with gate:  # at most so many handshakes at once
            try:
                reader, writer = await asyncio.open_connection(
                    "127.0.0.1", port, ssl=context, server_hostname="127.0.0.1"
                )
            except (OSError, ssl.SSLError, ConnectionError):
                self.refused += 1
                return
        started = time.monotonic()
        self.opened += 1
        request = f"POST {INJECT_PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: ".encode()
        try:
            if drip is not None:
                for i in range(10_000):
                    writer.write(request[i % len(request) : i % len(request) + 1])
                    await writer.drain()
                    if reader.at_eof():
                        break
                    await asyncio.sleep(drip)
            await reader.read()  # until the server closes it
        except (OSError, ssl.SSLError, ConnectionError):
            pass
        finally:
            self.durations.append(time.monotonic() - started)
            writer.close()


async def reviews(url: str, context: ssl.SSLContext, body: bytes, count: int) -> list[float]:
    connector = aiohttp.TCPConnector(limit=1, ssl=context)
    out: list[float] = []
    async with aiohttp.ClientSession(
        connector=connector, timeout=aiohttp.ClientTimeout(total=10)
    ) as session:
        for _ in range(count):
            started = time.perf_counter()
            async with session.post(
                url, data=body, headers={"Content-Type": "application/json"}
            ) as resp:
                answer = json.loads(await resp.read())
            problem = check_inject(answer)
            if problem:
                raise RuntimeError(problem)
            out.append(time.perf_counter() - started)
    return out


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))] * 1000


async def drive(server: WebhookProcess, body: bytes, args: argparse.Namespace) -> dict[str, float]:
    context = ssl.create_default_context(cadata=server.ca.cert_pem.decode())
    await reviews(server.url + INJECT_PATH, context, body, 5)  # warm-up
    baseline = rss_kib(server.pid)
    held = Held()
    gate = asyncio.Semaphore(args.concurrency)
    tasks = [
        asyncio.create_task(held.hold(server.port, context, drip=drip, gate=gate))
        for drip in [None] * args.held + [args.drip] * args.slowloris
    ]
    peak = baseline
    began = time.monotonic()
    # Reviews start once every connection is open (the handshakes themselves are CPU work).
    while held.opened + held.refused < len(tasks) and time.monotonic() - began < 60:
        peak = max(peak, rss_kib(server.pid))
        await asyncio.sleep(0.02)
    all_open = time.monotonic() - began
    review_task = asyncio.create_task(
        reviews(server.url + INJECT_PATH, context, body, args.reviews)
    )
    while not all(t.done() for t in tasks) or not review_task.done():
        peak = max(peak, rss_kib(server.pid))
        await asyncio.sleep(0.05)
        if time.monotonic() - began > 120:
            raise RuntimeError("held connections still open after 120 s")
    latencies = review_task.result()
    after = rss_kib(server.pid)
    opened = len(held.durations)
    per_conn = (peak - baseline) / max(opened, 1)
    figures = {
        "baseline_mib": baseline / 1024,
        "peak_mib": peak / 1024,
        "after_mib": after / 1024,
        "per_connection_kib": per_conn,
        "held": float(opened),
        "refused": float(held.refused),
        "longest_open_s": max(held.durations, default=0.0),
        "all_open_after_s": all_open,
        "review_p50_ms": pct(latencies, 0.5),
        "review_p99_ms": pct(latencies, 0.99),
        "review_max_ms": max(latencies) * 1000,
    }
    return figures


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.webhook_slowloris", description=__doc__)
    p.add_argument("--held", type=int, default=1000, help="idle TLS connections (default 1000)")
    p.add_argument("--slowloris", type=int, default=50, help="dripping clients (default 50)")
    p.add_argument("--drip", type=float, default=1.0, help="seconds between dripped bytes")
    p.add_argument("--reviews", type=int, default=50, help="correct reviews while held")
    p.add_argument(
        "--concurrency", type=int, default=100, help="handshakes in flight at once (default 100)"
    )
    p.add_argument("--server-args", default="", help="extra flags for the server, space-separated")
    args = p.parse_args(argv if argv is not None else [])
    limits = ConnectionLimits()
    # Both ends hold every connection: raise the soft descriptor limit (the server inherits it).
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 2 * (args.held + args.slowloris) + 256
    if soft < wanted:
        limit = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))
    scope = uuid.uuid4().hex[:8]
    namespace = f"bench-{scope}"
    with started_control_plane() as cp, tempfile.TemporaryDirectory(prefix="bench-sl-") as tmp:
        create_namespace(cp, namespace, {})
        _, binding, _ = create_inputs(cp, scope, namespace)
        pod = labelled_pod("bench", binding)
        pod["metadata"]["namespace"] = namespace
        body = json.dumps(review({"group": "", "version": "v1", "kind": "Pod"}, pod, namespace))
        server = WebhookProcess(
            kubeconfig=cp.kubeconfig,
            ca=cp.ca,
            namespace=namespace,
            workdir=Path(tmp),
            extra_args=["--log-level=warning", *args.server_args.split()],
        )
        try:
            server.start()
            figures = asyncio.run(drive(server, body.encode(), args))
        finally:
            server.close()
            delete_inputs(cp, scope)
    print(
        f"memory: baseline {figures['baseline_mib']:.1f} MiB, peak {figures['peak_mib']:.1f} MiB "
        f"with {args.held} held + {args.slowloris} slowloris connections "
        f"({figures['per_connection_kib']:.0f} KiB per connection), "
        f"{figures['after_mib']:.1f} MiB after they were closed"
    )
    print(
        f"held connections: {figures['held']:.0f} opened (all within "
        f"{figures['all_open_after_s']:.1f} s), {figures['refused']:.0f} refused at the cap "
        f"({limits.max_connections}); longest open after its handshake "
        f"{figures['longest_open_s']:.1f} s against a {limits.header_timeout:g} s header timeout"
    )
    print(
        f"correct reviews meanwhile: p50 {figures['review_p50_ms']:.1f} ms, "
        f"p99 {figures['review_p99_ms']:.1f} ms, max {figures['review_max_ms']:.1f} ms "
        f"(target 100 ms: {figures['review_max_ms'] / 100:.2f} of it)"
    )
    print(" ".join(f"{k}={v:.2f}" for k, v in figures.items()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
