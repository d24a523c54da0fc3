"""Entry point: ``python -m gpustack_webhook --cert-file … --key-file … [--port 9443] …``.

Wires the pieces together: JSON logs, the API client (kubeconfig or in-cluster), live Settings and
lookups, the reloading serving certificate, the HTTPS listener and an optional plain-HTTP probe
listener; then waits for SIGTERM or SIGINT and shuts down gracefully (not-ready, drain, finish
in-flight reviews).
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
from pathlib import Path
from typing import NoReturn

from gpustack_render.core.settings import DEFAULT_SYSTEM_NAMESPACE
from gpustack_webhook import logs
from gpustack_webhook.kube import ClusterConfigError, KubeReader, own_namespace
from gpustack_webhook.limits import ConnectionLimits
from gpustack_webhook.lookups import LiveSources, ReadError
from gpustack_webhook.metrics import Metrics
from gpustack_webhook.server import DEFAULT_MAX_BODY_BYTES, DEFAULT_REVIEW_TIMEOUT, WebhookServer
from gpustack_webhook.tls import CertificateFiles, ReloadingCertificate

log = logging.getLogger(f"{logs.LOGGER_NAME}.main")

#: Environment variable the Deployment fills from the downward API (``metadata.namespace``).
NAMESPACE_ENV = "POD_NAMESPACE"


#: Bad usage: a flag the parser refuses or a kubeconfig that does not exist.
EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    """Bad flags are one line on stderr and exit 2 (the usage is in --help)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see --help)\n")


def parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="gpustack-webhook",
        description="HTTPS admission server for ModelDeployments and KV-cache Pod injection.",
    )
    p.add_argument("--cert-file", required=True, type=Path, help="PEM serving certificate chain")
    p.add_argument("--key-file", required=True, type=Path, help="PEM private key")
    p.add_argument(
        "--host", default="", help="address to listen on (default: every address, IPv4 and IPv6)"
    )
    p.add_argument("--port", type=int, default=9443, help="HTTPS port (default 9443)")
    p.add_argument(
        "--probe-port",
        type=int,
        default=0,
        help="plain-HTTP port for /healthz, /readyz and /metrics (default 0: none; the HTTPS "
        "port serves them too)",
    )
    p.add_argument(
        "--namespace",
        default="",
        help=f"namespace holding the gpustack-settings ConfigMap (default ${NAMESPACE_ENV}, "
        f"else the service account's, else {DEFAULT_SYSTEM_NAMESPACE})",
    )
    p.add_argument(
        "--kubeconfig",
        default="",
        help="kubeconfig file (default: in-cluster service account, else $KUBECONFIG)",
    )
    p.add_argument(
        "--max-body-bytes",
        type=int,
        default=DEFAULT_MAX_BODY_BYTES,
        help="larger review bodies are answered 413 (default 3 MiB)",
    )
    p.add_argument(
        "--review-timeout",
        type=float,
        default=DEFAULT_REVIEW_TIMEOUT,
        help="time budget of one review in seconds, reads included (default 9)",
    )
    p.add_argument(
        "--header-timeout",
        type=float,
        default=ConnectionLimits.header_timeout,
        help="seconds for the TLS handshake and for a request's headers from its first byte "
        f"(default {ConnectionLimits.header_timeout:g})",
    )
    p.add_argument(
        "--body-timeout",
        type=float,
        default=ConnectionLimits.body_timeout,
        help="seconds for a request's body once its headers arrived "
        f"(default {ConnectionLimits.body_timeout:g})",
    )
    p.add_argument(
        "--idle-timeout",
        type=float,
        default=ConnectionLimits.idle_timeout,
        help="seconds a keep-alive connection may wait for its next request "
        f"(default {ConnectionLimits.idle_timeout:g})",
    )
    p.add_argument(
        "--max-connections",
        type=int,
        default=ConnectionLimits.max_connections,
        help="connections open at once per listener; more are refused at accept "
        f"(default {ConnectionLimits.max_connections})",
    )
    p.add_argument(
        "--request-timeout",
        type=float,
        default=5.0,
        help="time budget of one read from the API server in seconds (default 5)",
    )
    p.add_argument(
        "--settings-max-age",
        type=float,
        default=2.0,
        help="seconds a read of the gpustack-settings ConfigMap is reused by later reviews "
        "(default 2; 0 reads it for every review). The objects rules read are always read live",
    )
    p.add_argument(
        "--cert-reload-interval",
        type=float,
        default=10.0,
        help="seconds between checks of the certificate files (default 10)",
    )
    p.add_argument(
        "--shutdown-delay",
        type=float,
        default=5.0,
        help="seconds to keep serving while not ready after SIGTERM (default 5)",
    )
    p.add_argument(
        "--shutdown-timeout",
        type=float,
        default=15.0,
        help="seconds in-flight reviews get to finish after the listener closes (default 15)",
    )
    p.add_argument(
        "--log-level",
        default="info",
        choices=["debug", "info", "warning", "error"],
        help="log threshold",
    )
    return p


def resolve_namespace(flag: str) -> str:
    return flag or os.environ.get(NAMESPACE_ENV) or own_namespace(DEFAULT_SYSTEM_NAMESPACE)


async def serve(args: argparse.Namespace) -> int:
    """Run the server until SIGTERM/SIGINT; returns the exit code."""
    namespace = resolve_namespace(args.namespace)
    tune_tls_buffers()
    metrics = Metrics()
    try:
        certificate = ReloadingCertificate(
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
        sources = LiveSources(
            reader,
            namespace=namespace,
            observe=metrics.observe_lookup,
            request_timeout=args.request_timeout,
            settings_max_age=args.settings_max_age,
        )
        server = WebhookServer(
            sources,
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
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await server.start(
            host=args.host,
            port=args.port,
            ssl_context=certificate.context,
            probe_port=args.probe_port or None,
        )
        settle_heap()
        log.info("serving", extra=logs.fields(namespace=namespace))
        watcher = asyncio.create_task(certificate.watch(args.cert_reload_interval))
        try:
            await stop.wait()
            log.info("shutting down")
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
            await server.stop(drain_delay=args.shutdown_delay)
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
    """The flags; a refused one, or a --kubeconfig that is not a file, exits 2 with one line."""
    p = parser()
    args = p.parse_args(argv)
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
