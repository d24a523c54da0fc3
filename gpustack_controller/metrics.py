"""Prometheus metrics of the controller, served on ``/metrics`` (``server.py``).

One private registry, so an in-process test can run several controllers' worth of code without
colliding with the global default registry's collectors.
"""

from __future__ import annotations

from typing import Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

REGISTRY: Final = CollectorRegistry(auto_describe=True)

RECONCILES: Final = Counter(
    "gpustack_controller_reconcile_total",
    "Reconcile passes by controller and result (success, requeue, error).",
    ["controller", "result"],
    registry=REGISTRY,
)
RECONCILE_SECONDS: Final = Histogram(
    "gpustack_controller_reconcile_duration_seconds",
    "Wall time of one reconcile pass.",
    ["controller"],
    registry=REGISTRY,
)
QUEUE_DEPTH: Final = Gauge(
    "gpustack_controller_queue_depth",
    "Keys waiting in the work queue.",
    ["controller"],
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
