"""Prometheus metrics of the controller, served on ``/metrics`` (``server.py``).

One private registry, so an in-process test can run several controllers' worth of code without
colliding with the global default registry's collectors. docs/operations.md lists every metric
with its labels; the chart's Grafana dashboard queries them.

Two kinds of series live here: process counters (passes, errors, queue traffic, watches, writes)
and gauges read from the status the controller computes (:class:`StatusGauges`: replicas by
state per role, rollouts in progress). The latter exist only for the deployments this process
reconciles (the leader) and are removed when a deployment is gone.
"""

from __future__ import annotations

import re
from typing import Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from gpustack_controller.kube import ApiError
from gpustack_render.api.modeldeployment import ModelDeploymentStatus
from gpustack_render.core.errors import RenderError
from gpustack_render.core.ownerrefs import OwnedConflict

REGISTRY: Final = CollectorRegistry(auto_describe=True)

#: Results of a pass (``result`` label of the pass counter and the duration histogram).
SUCCESS: Final = "success"
REQUEUE: Final = "requeue"
ERROR: Final = "error"
RESULTS: Final = (SUCCESS, REQUEUE, ERROR)

#: Reconcile wall time buckets in seconds: a pass is tens of milliseconds of reads and writes,
#: a large deployment's first pass (hundreds of Pod creates) seconds.
RECONCILE_BUCKETS: Final = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

RECONCILES: Final = Counter(
    "gpustack_controller_reconcile_total",
    f"Reconcile passes by controller and result ({', '.join(RESULTS)}).",
    ["controller", "result"],
    registry=REGISTRY,
)
RECONCILE_SECONDS: Final = Histogram(
    "gpustack_controller_reconcile_duration_seconds",
    f"Wall time of one reconcile pass, by controller and result ({', '.join(RESULTS)}).",
    ["controller", "result"],
    buckets=RECONCILE_BUCKETS,
    registry=REGISTRY,
)
RECONCILE_ERRORS: Final = Counter(
    "gpustack_controller_reconcile_errors_total",
    "Failed reconcile passes by controller and the kind (api, transport, render, internal) and "
    "reason of the error that ended them.",
    ["controller", "kind", "reason"],
    registry=REGISTRY,
)
QUEUE_DEPTH: Final = Gauge(
    "gpustack_controller_queue_depth",
    "Keys waiting in the work queue.",
    ["controller"],
    registry=REGISTRY,
)
QUEUE_ADDS: Final = Counter(
    "gpustack_controller_queue_adds_total",
    "Keys added to the work queue (an add of a key already waiting is not counted).",
    ["controller"],
    registry=REGISTRY,
)
QUEUE_RETRIES: Final = Counter(
    "gpustack_controller_queue_retries_total",
    "Keys re-added with a backoff after a failed pass.",
    ["controller"],
    registry=REGISTRY,
)
#: Where a pass read its deployment's Pods (``source`` label): the Pod cache (a pass that only
#: reports) or a live list (a pass that acts, or a cache not yet following its stream).
POD_OBSERVATIONS: Final = Counter(
    "gpustack_controller_pod_observations_total",
    "Pod observations of deployment passes, by source (cache, live).",
    ["source"],
    registry=REGISTRY,
)
#: Where a deployment pass or a joint-check verdict read its deployment (``source`` label): the
#: watch cache, the answer to the controller's own last write of it (newer than the cache), or
#: a live GET (a cache not following its stream, a miss, a deletion, unordered versions).
DEPLOYMENT_READS: Final = Counter(
    "gpustack_controller_deployment_reads_total",
    "Reads of a ModelDeployment by passes and joint-check verdicts, by source "
    "(cache, own-write, live).",
    ["source"],
    registry=REGISTRY,
)
WATCH_RELISTS: Final = Counter(
    "gpustack_controller_watch_relists_total",
    "Full lists taken by an informer (start, 410 Gone, errors).",
    ["resource"],
    registry=REGISTRY,
)
WATCH_ERRORS: Final = Counter(
    "gpustack_controller_watch_errors_total",
    "Watch streams that failed or fell silent.",
    ["resource"],
    registry=REGISTRY,
)
POD_WRITES: Final = Counter(
    "gpustack_controller_pod_writes_total",
    "Replica Pods created or deleted by the controller.",
    ["verb"],
    registry=REGISTRY,
)
EVENTS_RECORDED: Final = Counter(
    "gpustack_controller_events_total",
    "Events written, by reason and whether a repeat only updated the count.",
    ["reason", "repeat"],
    registry=REGISTRY,
)
LEADER: Final = Gauge(
    "gpustack_controller_leader",
    "1 while this process holds the leader Lease.",
    registry=REGISTRY,
)
REPLICAS: Final = Gauge(
    "gpustack_controller_replicas",
    "Replicas (instances, not Pods) of each role as the last written status counts them, by "
    "state: desired (declared), ready (status.roles[].ready), quota_reserved "
    "(status.roles[].quotaReserved), replacing (1 while status.roles[].replacing is set).",
    ["namespace", "deployment", "role", "state"],
    registry=REGISTRY,
)
ROLLOUTS: Final = Gauge(
    "gpustack_controller_rollouts_in_progress",
    "Roles with a replacement in flight (status.roles[].replacing set), over every deployment "
    "this process reconciles.",
    registry=REGISTRY,
)

#: The ``state`` values of :data:`REPLICAS`.
REPLICA_STATES: Final = ("desired", "ready", "quota_reserved", "replacing")

#: Kubernetes ``Status.reason`` values (metav1.StatusReason) and the ones this controller's
#: client reports itself; any other reason of an API answer is read from its HTTP status.
API_REASONS: Final = frozenset(
    {
        "AlreadyExists",
        "BadRequest",
        "Conflict",
        "Expired",
        "Forbidden",
        "Gone",
        "InternalError",
        "Invalid",
        "MethodNotAllowed",
        "NotAcceptable",
        "NotFound",
        "RequestEntityTooLarge",
        "ServerTimeout",
        "ServiceUnavailable",
        "Timeout",
        "TooManyRequests",
        "Unauthorized",
        "UndecodableBody",
        "UnsupportedMediaType",
    }
)
_STATUS_REASONS: Final = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Gone",
    413: "RequestEntityTooLarge",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}
#: A reason label taken from code (an exception class, a rule id) is kept when it looks like one.
_IDENTIFIER: Final = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,63}$")


def _bounded(value: str, fallback: str) -> str:
    return value if _IDENTIFIER.match(value) else fallback


def error_labels(exc: BaseException) -> tuple[str, str]:
    """``(kind, reason)`` of the error that ended a pass, from a bounded vocabulary.

    * ``api``: the API server answered an error; the reason is its ``Status.reason``
      (``Conflict``, ``NotFound``, ``Forbidden``, ...), else the one its HTTP status implies,
      else ``Other``; a rendered Service held by another owner is counted here too, as
      ``AlreadyExists`` (the name is taken; the controller never sends the write);
    * ``transport``: no answer (refused, reset, timed out); the reason is the client's error
      class (``ClientConnectorError``, ``TimeoutError``, ...);
    * ``render``: the deployment does not render; the reason is the rule that refused it
      (``instance-type.must-exist``, ...);
    * ``internal``: anything else; the reason is the exception class.
    """
    if isinstance(exc, ApiError):
        if exc.status == 0:
            return "transport", _bounded(exc.reason, "Unknown")
        if exc.reason in API_REASONS:
            return "api", exc.reason
        return "api", _STATUS_REASONS.get(exc.status, "Other")
    if isinstance(exc, OwnedConflict):
        return "api", OwnedConflict.REASON
    if isinstance(exc, RenderError):
        return "render", _bounded(exc.origin, "unknown")
    return "internal", _bounded(type(exc).__name__, "Exception")


def replica_counts(status: ModelDeploymentStatus) -> dict[str, dict[str, int]]:
    """Role -> state -> replicas, read from a status as the controller wrote it."""
    out: dict[str, dict[str, int]] = {}
    for role in status.roles or ():
        out[role.name] = {
            "desired": role.desired or 0,
            "ready": role.ready or 0,
            "quota_reserved": role.quota_reserved or 0,
            "replacing": 0 if role.replacing is None else 1,
        }
    return out


class StatusGauges:
    """:data:`REPLICAS` and :data:`ROLLOUTS` from each deployment's last written status.

    :meth:`observe` after every status the controller computes, :meth:`forget` when the
    deployment is gone: its series are removed, so a deleted deployment leaves none behind.
    """

    def __init__(self, replicas: Gauge = REPLICAS, rollouts: Gauge = ROLLOUTS) -> None:
        self.replicas = replicas
        self.rollouts = rollouts
        self._counts: dict[tuple[str, str], dict[str, dict[str, int]]] = {}
        #: Roles replacing now, over every deployment (kept as each changes: no sum per pass).
        self._replacing = 0

    def observe(self, namespace: str, name: str, status: ModelDeploymentStatus) -> None:
        counts = replica_counts(status)
        before = self._counts.get((namespace, name), {})
        for role in before.keys() - counts.keys():
            self._remove(namespace, name, role)
        for role, states in counts.items():
            if before.get(role) == states:
                continue
            for state, value in states.items():
                self.replicas.labels(namespace, name, role, state).set(value)
        self._counts[(namespace, name)] = counts
        self._total(_replacing(counts) - _replacing(before))

    def forget(self, namespace: str, name: str) -> None:
        before = self._counts.pop((namespace, name), {})
        for role in before:
            self._remove(namespace, name, role)
        self._total(-_replacing(before))

    def tracked(self) -> set[tuple[str, str]]:
        """The deployments that have series now."""
        return set(self._counts)

    def _remove(self, namespace: str, name: str, role: str) -> None:
        for state in REPLICA_STATES:
            self.replicas.remove(namespace, name, role, state)

    def _total(self, change: int) -> None:
        self._replacing += change
        self.rollouts.set(self._replacing)


def _replacing(counts: dict[str, dict[str, int]]) -> int:
    return sum(s["replacing"] for s in counts.values())


#: The process's status gauges (one controller per process; tests may build their own).
STATUS: Final = StatusGauges()
