"""The startup, readiness and liveness probes of a replica's ``main`` container
(docs/contract/render.md §12).

Every role that serves TCP gets them, take-over roles included (D13), unless its own ``--host``
is a loopback address (D22) or it serves TLS demanding client certificates. A direct decoder
always gets them, on the routing proxy's external port at ``/v1/models``. The startup budget is
``ceil(startupTimeoutSeconds / 10)`` failures at a 10 s period (D7).
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Sequence
from typing import Any, Final

from gpustack_render.core.vocabulary import Engine
from gpustack_render.engines.flags import find_flag, last_value
from gpustack_render.engines.owned import (
    HOST_FLAG,
    SSL_CERT_REQS_FLAG,
    SSL_CERTFILE_FLAG,
    SSL_KEYFILE_FLAG,
)

#: The engine's health endpoint, probed on every role but a direct decoder.
HEALTH_PATH: Final = "/health"
#: A direct decoder's probe path, served through the routing proxy (per seed).
MODELS_PATH: Final = "/v1/models"
#: The period of every probe, and the unit of the startup budget (D7).
PERIOD_SECONDS: Final = 10
#: Startup probe timeout (D7).
STARTUP_TIMEOUT_SECONDS: Final = 5
#: Readiness and liveness timeouts and thresholds (docs/contract/render.md §12).
READINESS_TIMEOUT_SECONDS: Final = 3
READINESS_FAILURE_THRESHOLD: Final = 3
LIVENESS_TIMEOUT_SECONDS: Final = 3
LIVENESS_FAILURE_THRESHOLD: Final = 6

_LOOPBACK_NAMES = {"localhost"}


def startup_failure_threshold(startup_timeout_seconds: int) -> int:
    """``ceil(startupTimeoutSeconds / 10)``: 180 for the default 1800 s."""
    return math.ceil(startup_timeout_seconds / PERIOD_SECONDS)


def is_loopback(host: str) -> bool:
    """True for ``127.0.0.0/8``, ``localhost`` and ``::1`` (brackets allowed)."""
    text = host.strip().lower()
    if text in _LOOPBACK_NAMES:
        return True
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    try:
        return ipaddress.ip_address(text).is_loopback
    except ValueError:
        return False


def own_host(argv: Sequence[str], engine: Engine) -> str | None:
    """The ``--host`` the role's own arguments pass (the last one), or None."""
    return last_value(argv, HOST_FLAG, engine)


def serves_tls(argv: Sequence[str], engine: Engine) -> bool:
    """True when the argv carries ``--ssl-certfile`` or ``--ssl-keyfile`` (either alone)."""
    return bool(
        find_flag(argv, SSL_CERTFILE_FLAG, engine) or find_flag(argv, SSL_KEYFILE_FLAG, engine)
    )


def demands_client_certificates(argv: Sequence[str], engine: Engine) -> bool:
    """TLS on and the last ``--ssl-cert-reqs`` value, trimmed, is not the integer 0 or 1.

    An absent flag is the engine's default (0, no client certificates). A flag whose value is
    missing or not an integer demands them (the conservative reading of
    docs/contract/render.md §12).
    """
    if not serves_tls(argv, engine):
        return False
    hits = find_flag(argv, SSL_CERT_REQS_FLAG, engine)
    if not hits:
        return False
    value = hits[-1].value
    if value is None:
        return True
    try:
        number = int(value.strip())
    except ValueError:
        return True
    return number not in (0, 1)


def _http_get(path: str, port: int, scheme: str) -> dict[str, Any]:
    return {"path": path, "port": port, "scheme": scheme}


def probes(
    *, port: int, https: bool, startup_timeout_seconds: int, path: str = HEALTH_PATH
) -> dict[str, dict[str, Any]]:
    """``startupProbe``, ``readinessProbe`` and ``livenessProbe`` on ``port``, in that order."""
    scheme = "HTTPS" if https else "HTTP"
    return {
        "startupProbe": {
            "httpGet": _http_get(path, port, scheme),
            "periodSeconds": PERIOD_SECONDS,
            "timeoutSeconds": STARTUP_TIMEOUT_SECONDS,
            "failureThreshold": startup_failure_threshold(startup_timeout_seconds),
        },
        "readinessProbe": {
            "httpGet": _http_get(path, port, scheme),
            "periodSeconds": PERIOD_SECONDS,
            "timeoutSeconds": READINESS_TIMEOUT_SECONDS,
            "failureThreshold": READINESS_FAILURE_THRESHOLD,
        },
        "livenessProbe": {
            "httpGet": _http_get(path, port, scheme),
            "periodSeconds": PERIOD_SECONDS,
            "timeoutSeconds": LIVENESS_TIMEOUT_SECONDS,
            "failureThreshold": LIVENESS_FAILURE_THRESHOLD,
        },
    }
