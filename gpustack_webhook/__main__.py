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
import datetime
import gc
import logging
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from gpustack_render.core.settings import DEFAULT_SYSTEM_NAMESPACE
from gpustack_webhook import certificates, logs
from gpustack_webhook.cache import WatchedSources
from gpustack_webhook.kube import ClusterConfigError, KubeReader, own_namespace
from gpustack_webhook.limits import ConnectionLimits
from gpustack_webhook.lookups import LiveSources, ReadError
from gpustack_webhook.metrics import Metrics
from gpustack_webhook.rotation import MUTATING, VALIDATING, SelfManagedCertificates, Setup
from gpustack_webhook.server import DEFAULT_MAX_BODY_BYTES, DEFAULT_REVIEW_TIMEOUT, WebhookServer
from gpustack_webhook.tls import CertificateFiles, ReloadingCertificate

log = logging.getLogger(f"{logs.LOGGER_NAME}.main")

#: Environment variable the Deployment fills from the downward API (``metadata.namespace``).
NAMESPACE_ENV = "POD_NAMESPACE"


#: Bad usage: a flag the parser refuses or a kubeconfig that does not exist.
EXIT_USAGE = 2

#: Defaults of the self-managed certificate flags: the Service the API server calls and the
#: webhook configurations deploy/webhook/webhooks.yaml ships.
DEFAULT_SERVICE = "gpustack-webhook"
DEFAULT_MUTATING = "gpustack-worker-mutation"
DEFAULT_VALIDATING = "gpustack-worker-validation"

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def duration(text: str) -> datetime.timedelta:
    """``90d``, ``2160h``, ``30m``, ``15s`` or plain seconds; positive."""
    value = text.strip()
    unit = _UNITS.get(value[-1:], 0)
    number = value[:-1] if unit else value
    try:
        seconds = float(number) * (unit or 1)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a duration (a number with s, m, h or d)"
        ) from None
    if not seconds > 0 or seconds == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive duration")
    return datetime.timedelta(seconds=seconds)


def _number(text: str, kind: type[int] | type[float]) -> float:
    try:
        value = kind(text)
    except ValueError:
        what = "a whole number" if kind is int else "a number"
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def seconds(text: str) -> float:
    """A positive, finite number of seconds."""
    value = _number(text, float)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds")
    return value


def seconds_or_zero(text: str) -> float:
    """A finite number of seconds, 0 or more."""
    value = _number(text, float)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is negative")
    return value


def count(text: str) -> int:
    """A whole number, 1 or more."""
    value = int(_number(text, int))
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not 1 or more")
    return value


def port(text: str) -> int:
    """A TCP port, 0 (any free port) to 65535."""
    value = int(_number(text, int))
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port (0 to 65535)")
    return value


class _Parser(argparse.ArgumentParser):
    """Bad flags are one line on stderr and exit 2 (the usage is in --help)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see --help)\n")


def parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="gpustack-webhook",
        description="HTTPS admission server for ModelDeployments and KV-cache Pod injection.",
    )
    p.add_argument(
        "--tls-secret",
        default="",
        help="self-managed certificates: keep a CA and serving certificate in this Secret of the "
        "namespace, write the CA into the webhook configurations' caBundle and rotate them "
        "(instead of --cert-file/--key-file)",
    )
    p.add_argument("--cert-file", type=Path, help="PEM serving certificate chain (mounted)")
    p.add_argument("--key-file", type=Path, help="PEM private key (mounted)")
    p.add_argument(
        "--service-name",
        default=DEFAULT_SERVICE,
        help="self-managed: the Service the API server calls, in the namespace; its DNS names "
        f"are in the certificate and its webhooks get the caBundle (default {DEFAULT_SERVICE})",
    )
    p.add_argument(
        "--cert-host",
        action="append",
        default=[],
        help="self-managed: one more DNS name or IP address for the certificate; webhooks "
        "calling a URL with that host also get the caBundle (repeatable)",
    )
    p.add_argument(
        "--mutating-webhook-configuration",
        action="append",
        help=f"self-managed: a MutatingWebhookConfiguration whose caBundle is written "
        f"(repeatable; default {DEFAULT_MUTATING})",
    )
    p.add_argument(
        "--validating-webhook-configuration",
        action="append",
        help=f"self-managed: a ValidatingWebhookConfiguration whose caBundle is written "
        f"(repeatable; default {DEFAULT_VALIDATING})",
    )
    p.add_argument(
        "--ca-lifetime",
        type=duration,
        default=certificates.DEFAULT_CA_LIFETIME,
        help="self-managed: lifetime of a new CA (default 3650d)",
    )
    p.add_argument(
        "--cert-lifetime",
        type=duration,
        default=certificates.DEFAULT_CERT_LIFETIME,
        help="self-managed: lifetime of a new serving certificate (default 365d)",
    )
    p.add_argument(
        "--renew-before",
        type=duration,
        default=certificates.DEFAULT_RENEW_BEFORE,
        help="self-managed: a certificate is renewed once less than a third of its lifetime, "
        "or this, remains (default 90d)",
    )
    p.add_argument(
        "--host", default="", help="address to listen on (default: every address, IPv4 and IPv6)"
    )
    p.add_argument("--port", type=port, default=9443, help="HTTPS port (default 9443)")
    p.add_argument(
        "--probe-port",
        type=port,
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
        help="kubeconfig file (default: the in-cluster service account, else $KUBECONFIG, "
        "else ~/.kube/config)",
    )
    p.add_argument(
        "--max-body-bytes",
        type=count,
        default=DEFAULT_MAX_BODY_BYTES,
        help="larger review bodies are answered 413 (default 3 MiB)",
    )
    p.add_argument(
        "--review-timeout",
        type=seconds,
        default=DEFAULT_REVIEW_TIMEOUT,
        help="time budget of one review in seconds, reads included (default 9)",
    )
    p.add_argument(
        "--header-timeout",
        type=seconds,
        default=ConnectionLimits.header_timeout,
        help="seconds for the TLS handshake and for a request's headers from its first byte "
        f"(default {ConnectionLimits.header_timeout:g})",
    )
    p.add_argument(
        "--body-timeout",
        type=seconds,
        default=ConnectionLimits.body_timeout,
        help="seconds for a request's body once its headers arrived; also the longest a "
        "client may take none of an answer still being sent "
        f"(default {ConnectionLimits.body_timeout:g})",
    )
    p.add_argument(
        "--idle-timeout",
        type=seconds,
        default=ConnectionLimits.idle_timeout,
        help="seconds a keep-alive connection may wait for its next request "
        f"(default {ConnectionLimits.idle_timeout:g})",
    )
    p.add_argument(
        "--max-connections",
        type=count,
        default=ConnectionLimits.max_connections,
        help="connections open at once per listener; more are refused at accept "
        f"(default {ConnectionLimits.max_connections})",
    )
    p.add_argument(
        "--request-timeout",
        type=seconds,
        default=5.0,
        help="time budget of one read from the API server in seconds (default 5)",
    )
    p.add_argument(
        "--settings-max-age",
        type=seconds_or_zero,
        default=2.0,
        help="seconds a read of the gpustack-settings ConfigMap is reused by later reviews "
        "(default 2; 0 reads it for every review). The ModelDeployment hooks read every object "
        "live",
    )
    p.add_argument(
        "--watch-cache",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="answer the Pod hooks' reads (the input kinds, the Settings) from watch-fed caches, "
        "a miss or an object being deleted read live (default: on; needs list and watch on "
        "those kinds)",
    )
    p.add_argument(
        "--watch-inactivity",
        type=seconds,
        default=10.0,
        help="seconds a silent watch stream is trusted before it is dropped and reads go live "
        "until it is followed again: the bound on a cache's staleness (default 10)",
    )
    p.add_argument(
        "--cert-reload-interval",
        type=seconds,
        default=10.0,
        help="seconds between checks of the certificate files, or of the Secret when "
        "self-managed (also the longest wait between attempts before the first certificate "
        "is in service; default 10)",
    )
    p.add_argument(
        "--shutdown-delay",
        type=seconds_or_zero,
        default=5.0,
        help="seconds to keep serving while not ready after SIGTERM (default 5)",
    )
    p.add_argument(
        "--shutdown-timeout",
        type=seconds_or_zero,
        default=15.0,
        help="seconds in-flight reviews get to finish after the listener closes (default 15)",
    )
    p.add_argument(
        "--log-level",
        default="info",
        choices=["debug", "info", "warning", "error"],
        help="log threshold (default info)",
    )
    return p


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
