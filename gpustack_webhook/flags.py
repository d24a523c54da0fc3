"""The webhook server's command line: its flags, their value types and their defaults
(``python -m gpustack_webhook --help`` groups them as here)."""

from __future__ import annotations

import argparse
import datetime
from pathlib import Path
from typing import NoReturn

from gpustack_render.core.settings import DEFAULT_SYSTEM_NAMESPACE
from gpustack_webhook import certificates
from gpustack_webhook.limits import ConnectionLimits
from gpustack_webhook.server import DEFAULT_MAX_BODY_BYTES, DEFAULT_REVIEW_TIMEOUT

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


def _certificate_flags(p: argparse.ArgumentParser) -> None:
    """The serving certificate: mounted files, or self-managed in a Secret."""
    g = p.add_argument_group("serving certificate")
    g.add_argument(
        "--tls-secret",
        default="",
        help="self-managed certificates: keep a CA and serving certificate in this Secret of the "
        "namespace, write the CA into the webhook configurations' caBundle and rotate them "
        "(instead of --cert-file/--key-file)",
    )
    g.add_argument("--cert-file", type=Path, help="PEM serving certificate chain (mounted)")
    g.add_argument("--key-file", type=Path, help="PEM private key (mounted)")
    g.add_argument(
        "--service-name",
        default=DEFAULT_SERVICE,
        help="self-managed: the Service the API server calls, in the namespace; its DNS names "
        f"are in the certificate and its webhooks get the caBundle (default {DEFAULT_SERVICE})",
    )
    g.add_argument(
        "--cert-host",
        action="append",
        default=[],
        help="self-managed: one more DNS name or IP address for the certificate; webhooks "
        "calling a URL with that host also get the caBundle (repeatable)",
    )
    g.add_argument(
        "--mutating-webhook-configuration",
        action="append",
        help=f"self-managed: a MutatingWebhookConfiguration whose caBundle is written "
        f"(repeatable; default {DEFAULT_MUTATING})",
    )
    g.add_argument(
        "--validating-webhook-configuration",
        action="append",
        help=f"self-managed: a ValidatingWebhookConfiguration whose caBundle is written "
        f"(repeatable; default {DEFAULT_VALIDATING})",
    )
    g.add_argument(
        "--ca-lifetime",
        type=duration,
        default=certificates.DEFAULT_CA_LIFETIME,
        help="self-managed: lifetime of a new CA (default 3650d)",
    )
    g.add_argument(
        "--cert-lifetime",
        type=duration,
        default=certificates.DEFAULT_CERT_LIFETIME,
        help="self-managed: lifetime of a new serving certificate (default 365d)",
    )
    g.add_argument(
        "--renew-before",
        type=duration,
        default=certificates.DEFAULT_RENEW_BEFORE,
        help="self-managed: a certificate is renewed once less than a third of its lifetime, "
        "or this, remains (default 90d)",
    )
    g.add_argument(
        "--cert-reload-interval",
        type=seconds,
        default=10.0,
        help="seconds between checks of the certificate files, or of the Secret when "
        "self-managed (also the longest wait between attempts before the first certificate "
        "is in service; default 10)",
    )


def _listener_flags(p: argparse.ArgumentParser) -> None:
    """Where it listens, and the cluster it reads."""
    g = p.add_argument_group("listeners and cluster")
    g.add_argument(
        "--host", default="", help="address to listen on (default: every address, IPv4 and IPv6)"
    )
    g.add_argument("--port", type=port, default=9443, help="HTTPS port (default 9443)")
    g.add_argument(
        "--probe-port",
        type=port,
        default=0,
        help="plain-HTTP port for /healthz, /readyz and /metrics (default 0: none; the HTTPS "
        "port serves them too)",
    )
    g.add_argument(
        "--namespace",
        default="",
        help=f"namespace holding the gpustack-settings ConfigMap (default ${NAMESPACE_ENV}, "
        f"else the service account's, else {DEFAULT_SYSTEM_NAMESPACE})",
    )
    g.add_argument(
        "--kubeconfig",
        default="",
        help="kubeconfig file (default: the in-cluster service account, else $KUBECONFIG, "
        "else ~/.kube/config)",
    )


def _limit_flags(p: argparse.ArgumentParser) -> None:
    """What one review, request and connection may take."""
    g = p.add_argument_group("limits")
    g.add_argument(
        "--max-body-bytes",
        type=count,
        default=DEFAULT_MAX_BODY_BYTES,
        help="larger review bodies are answered 413 (default 3 MiB)",
    )
    g.add_argument(
        "--review-timeout",
        type=seconds,
        default=DEFAULT_REVIEW_TIMEOUT,
        help="time budget of one review in seconds, reads included (default 9)",
    )
    g.add_argument(
        "--header-timeout",
        type=seconds,
        default=ConnectionLimits.header_timeout,
        help="seconds for the TLS handshake and for a request's headers from its first byte "
        f"(default {ConnectionLimits.header_timeout:g})",
    )
    g.add_argument(
        "--body-timeout",
        type=seconds,
        default=ConnectionLimits.body_timeout,
        help="seconds for a request's body once its headers arrived; also the longest a "
        "client may take none of an answer still being sent "
        f"(default {ConnectionLimits.body_timeout:g})",
    )
    g.add_argument(
        "--idle-timeout",
        type=seconds,
        default=ConnectionLimits.idle_timeout,
        help="seconds a keep-alive connection may wait for its next request "
        f"(default {ConnectionLimits.idle_timeout:g})",
    )
    g.add_argument(
        "--max-connections",
        type=count,
        default=ConnectionLimits.max_connections,
        help="connections open at once per listener; more are refused at accept "
        f"(default {ConnectionLimits.max_connections})",
    )
    g.add_argument(
        "--request-timeout",
        type=seconds,
        default=5.0,
        help="time budget of one read from the API server in seconds (default 5)",
    )


def _read_flags(p: argparse.ArgumentParser) -> None:
    """How the reviews read what they judge by."""
    g = p.add_argument_group("reads")
    g.add_argument(
        "--settings-max-age",
        type=seconds_or_zero,
        default=2.0,
        help="seconds a read of the gpustack-settings ConfigMap is reused by later reviews "
        "(default 2; 0 reads it for every review). The ModelDeployment hooks read every object "
        "live",
    )
    g.add_argument(
        "--watch-cache",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="answer the Pod hooks' reads (the input kinds, the Settings) from watch-fed caches, "
        "a miss or an object being deleted read live (default: on; needs list and watch on "
        "those kinds)",
    )
    g.add_argument(
        "--watch-inactivity",
        type=seconds,
        default=10.0,
        help="seconds a silent watch stream is trusted before it is dropped and reads go live "
        "until it is followed again: the bound on a cache's staleness (default 10)",
    )


def _lifecycle_flags(p: argparse.ArgumentParser) -> None:
    """Shutting down, and the logs."""
    g = p.add_argument_group("shutdown and logs")
    g.add_argument(
        "--shutdown-delay",
        type=seconds_or_zero,
        default=5.0,
        help="seconds to keep serving while not ready after SIGTERM (default 5)",
    )
    g.add_argument(
        "--shutdown-timeout",
        type=seconds_or_zero,
        default=15.0,
        help="seconds in-flight reviews get to finish after the listener closes (default 15)",
    )
    g.add_argument(
        "--log-level",
        default="info",
        choices=["debug", "info", "warning", "error"],
        help="log threshold (default info)",
    )


def parser() -> argparse.ArgumentParser:
    """The server's flags, in groups."""
    p = _Parser(
        prog="gpustack-webhook",
        description="HTTPS admission server for ModelDeployments and KV-cache Pod injection.",
    )
    for add in (_certificate_flags, _listener_flags, _limit_flags, _read_flags, _lifecycle_flags):
        add(p)
    return p
