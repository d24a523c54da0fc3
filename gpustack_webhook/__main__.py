"""Entry point: ``python -m gpustack_webhook (--tls-secret NAME | --cert-file … --key-file …)
[--port 9443] …``.

Wires the pieces together: JSON logs, the API client (kubeconfig or in-cluster), live Settings and
lookups, the serving certificate (self-managed in a Secret with ``--tls-secret``, else reloaded
from mounted files), the HTTPS listener and an optional plain-HTTP probe listener; then waits for
SIGTERM or SIGINT and shuts down gracefully (not-ready, drain, finish in-flight reviews).
"""

from __future__ import annotations

import argparse
import asyncio
import asyncio.sslproto
import contextlib
import gc
import logging
import os
import signal
import sys
from collections.abc import Sequence

from gpustack_render.core.settings import DEFAULT_SYSTEM_NAMESPACE
from gpustack_webhook import certificates, logs
from gpustack_webhook.cache import WatchedSources
from gpustack_webhook.flags import (
    DEFAULT_MUTATING,
    DEFAULT_SERVICE,
    DEFAULT_VALIDATING,
    EXIT_USAGE,
    NAMESPACE_ENV,
    duration,
    parser,
)
from gpustack_webhook.kube import ClusterConfigError, KubeReader, own_namespace
from gpustack_webhook.limits import ConnectionLimits
from gpustack_webhook.lookups import LiveSources, ReadError
from gpustack_webhook.metrics import Metrics
from gpustack_webhook.rotation import MUTATING, VALIDATING, SelfManagedCertificates, Setup
from gpustack_webhook.server import WebhookServer
from gpustack_webhook.tls import CertificateFiles, ReloadingCertificate

log = logging.getLogger(f"{logs.LOGGER_NAME}.main")

__all__ = [
    "DEFAULT_MUTATING",
    "DEFAULT_SERVICE",
    "DEFAULT_VALIDATING",
    "EXIT_USAGE",
    "NAMESPACE_ENV",
    "duration",
    "main",
    "parse_args",
    "parser",
]


def resolve_namespace(flag: str) -> str:
    return flag or os.environ.get(NAMESPACE_ENV) or own_namespace(DEFAULT_SYSTEM_NAMESPACE)


def certificate_setup(args: argparse.Namespace, namespace: str) -> Setup:
    """Where the self-managed certificates live and what they cover, from the flags."""
    hosts = (*certificates.service_hosts(args.service_name, namespace), *args.cert_host)
    return Setup(
        namespace=namespace,
        secret_name=args.tls_secret,
        policy=certificates.Policy(
            hosts=tuple(dict.fromkeys(hosts)),
            ca_lifetime=args.ca_lifetime,
            cert_lifetime=args.cert_lifetime,
            renew_before=args.renew_before,
        ),
        target=certificates.Target(namespace, args.service_name, tuple(hosts)),
        configurations=(
            *((MUTATING, n) for n in args.mutating_webhook_configuration or [DEFAULT_MUTATING]),
            *(
                (VALIDATING, n)
                for n in args.validating_webhook_configuration or [DEFAULT_VALIDATING]
            ),
        ),
    )


async def serve(args: argparse.Namespace) -> int:
    """Run the server until SIGTERM/SIGINT; returns the exit code."""
    namespace = resolve_namespace(args.namespace)
    tune_tls_buffers()
    metrics = Metrics()
    files: ReloadingCertificate | None = None
    if not args.tls_secret:
        try:
            files = ReloadingCertificate(
                CertificateFiles(args.cert_file, args.key_file), metrics=metrics
            )
        except (OSError, ValueError) as exc:
            log.error("cannot load the serving certificate", extra=logs.fields(error=str(exc)))
            return 1
    try:
        reader = await KubeReader.connect(
            kubeconfig=args.kubeconfig or None, request_timeout=args.request_timeout
        )
    except ClusterConfigError as exc:
        sys.stderr.write(f"gpustack-webhook: error: {exc}\n")
        return EXIT_USAGE
    try:
        try:
            await reader.ping()
        except ReadError as exc:
            # Not fatal: reviews answer InternalError until the API server is reachable.
            log.warning("the API server is not reachable yet", extra=logs.fields(error=str(exc)))
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        sources = LiveSources(
            reader,
            namespace=namespace,
            observe=metrics.observe_lookup,
            request_timeout=args.request_timeout,
            settings_max_age=args.settings_max_age,
        )
        cached: WatchedSources | None = None
        if args.watch_cache:
            cached = WatchedSources(
                reader.kube,
                sources,
                inactivity=args.watch_inactivity,
                observe=metrics.observe_lookup,
            )
            await cached.start()
        server = WebhookServer(
            sources,
            cached_sources=cached,
            metrics=metrics,
            max_body_bytes=args.max_body_bytes,
            review_timeout=args.review_timeout,
            shutdown_timeout=args.shutdown_timeout,
            limits=ConnectionLimits(
                header_timeout=args.header_timeout,
                body_timeout=args.body_timeout,
                idle_timeout=args.idle_timeout,
                max_connections=args.max_connections,
            ),
        )
        if args.probe_port:
            # Alive and not ready while the certificate is awaited (self-managed: the Secret
            # may be missing or unwritable for a while; restarting would not help).
            await server.start_probes(host=args.host, port=args.probe_port)
        if files is not None:
            context = files.context
            check = files.watch(args.cert_reload_interval)
        else:
            managed = SelfManagedCertificates(
                reader, certificate_setup(args, namespace), metrics=metrics
            )
            starting = asyncio.create_task(managed.start(retry_max=args.cert_reload_interval))
            stopping = asyncio.create_task(stop.wait())
            await asyncio.wait({starting, stopping}, return_when=asyncio.FIRST_COMPLETED)
            stopping.cancel()
            if not starting.done():
                # Stopped before any certificate was in service: no review to drain.
                starting.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await starting
                await server.stop()
                return 0
            context = starting.result()
            check = managed.watch(args.cert_reload_interval)
        await server.start(
            host=args.host,
            port=args.port,
            ssl_context=context,
            probe_port=args.probe_port or None,
        )
        settle_heap()
        log.info("serving", extra=logs.fields(namespace=namespace))
        watcher = asyncio.create_task(check)
        try:
            await stop.wait()
            log.info("shutting down")
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
            await server.stop(drain_delay=args.shutdown_delay)
            if cached is not None:
                await cached.stop()
    finally:
        await reader.close()
    return 0


#: Bytes each TLS connection's read buffer holds (asyncio allocates 256 KiB per connection by
#: default, from accept on: most of a held connection's cost). 16 KiB is one TLS record.
TLS_READ_BUFFER = 16 * 1024


def tune_tls_buffers(size: int = TLS_READ_BUFFER) -> None:
    """Shrink asyncio's per-connection TLS read buffer (``SSLProtocol.max_size``, CPython 3.11
    and later; a no-op where the attribute does not exist). Measured with
    ``bench/webhook_slowloris.py``: the memory a held connection costs drops by most of the
    buffer, and reviews read their bodies in TLS-record-sized steps anyway."""
    protocol = getattr(asyncio.sslproto, "SSLProtocol", None)
    if protocol is not None and isinstance(getattr(protocol, "max_size", None), int):
        protocol.max_size = size


def settle_heap() -> None:
    """Move everything alive after startup out of the garbage collector's sight.

    The modules, the client configuration and the library's schemas are hundreds of thousands of
    objects that live as long as the process; a full collection walked all of them (~40 ms,
    every review in flight waiting, about once every 1.5 s under load). Frozen, they are never
    scanned again. A review allocates thousands of container objects, so the youngest generation
    is collected every 10,000 allocations instead of 700: measured, a third of the collector's
    time, with pauses still under 10 ms.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(10_000, 10, 10)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The flags; a refused one, a certificate source missing or given twice, or a --kubeconfig
    that is not a file, exits 2 with one line."""
    p = parser()
    args = p.parse_args(argv)
    if args.tls_secret and (args.cert_file or args.key_file):
        p.error("--tls-secret (self-managed) and --cert-file/--key-file exclude each other")
    if not args.tls_secret and not (args.cert_file and args.key_file):
        p.error("give --tls-secret, or both --cert-file and --key-file")
    if args.kubeconfig and not os.path.isfile(args.kubeconfig):
        p.error(f"--kubeconfig {args.kubeconfig}: no such file")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logs.configure(args.log_level)
    try:
        return asyncio.run(serve(args))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
