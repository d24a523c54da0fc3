"""Prometheus metrics of the webhook server: reviews and their latency per webhook and verdict.

Each server owns its registry, so several servers (tests, the benchmark) never collide on metric
names; ``/metrics`` renders that registry.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from gpustack_render.core.errors import VerdictKind

#: Verdict label of a request that never became a review (bad JSON, wrong kind, too large).
MALFORMED = "malformed"
#: Every ``verdict`` label value: the library's verdict kinds (``allowed``; refused as
#: ``invalid`` or ``forbidden``; ``internal`` when the review could not be judged) and
#: :data:`MALFORMED`.
VERDICTS = (*(kind.value for kind in VerdictKind), MALFORMED)

#: ``result`` label values of the certificate reload counter: a new serving certificate in
#: service, or one that did not load (the previous one stays).
RELOAD_LOADED, RELOAD_FAILED = "loaded", "failed"
RELOAD_RESULTS = (RELOAD_LOADED, RELOAD_FAILED)

#: Latency buckets in seconds: the API server's budget is ``timeoutSeconds`` (10 s), the target
#: is milliseconds.
LATENCY_BUCKETS = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.02,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)

CONTENT_TYPE = CONTENT_TYPE_LATEST


class Metrics:
    """The server's counters and histograms, registered in their own registry."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry(auto_describe=True)
        self.reviews = Counter(
            "gpustack_webhook_reviews",
            f"Admission reviews answered, by webhook and verdict ({', '.join(VERDICTS)}).",
            ["webhook", "verdict"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "gpustack_webhook_review_duration_seconds",
            "Time from receiving a review to answering it, by webhook and verdict.",
            ["webhook", "verdict"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.lookups = Counter(
            "gpustack_webhook_lookups",
            "Live reads made for reviews, by kind and result (found, not_found, failed).",
            ["kind", "result"],
            registry=self.registry,
        )
        self.connections_closed = Counter(
            "gpustack_webhook_connections_closed",
            "Connections closed or refused by a limit, by reason (header_timeout, body_timeout, "
            "write_timeout, idle_timeout, over_capacity).",
            ["reason"],
            registry=self.registry,
        )
        # Each labelled child, found once: ``labels()`` validates and locks on every call, and a
        # review observes three lookups and itself. (A bounded set: webhooks x verdicts, kinds
        # x results.)
        self._review_children: dict[tuple[str, str], tuple[Any, Any]] = {}
        self._lookup_children: dict[tuple[str, str], Any] = {}
        self.cert_reloads = Counter(
            "gpustack_webhook_certificate_reloads",
            f"Serving certificate reloads, by result ({', '.join(RELOAD_RESULTS)}).",
            ["result"],
            registry=self.registry,
        )

    def prepare(self, webhooks: Iterable[str]) -> None:
        """Create each webhook's review counters at 0, so a rate reads 0 before the first
        review of a verdict instead of no data."""
        for webhook in webhooks:
            for verdict in VERDICTS:
                self.reviews.labels(webhook, verdict)

    def observe_review(self, webhook: str, verdict: str, seconds: float) -> None:
        """Count one answered request and record how long it took."""
        children = self._review_children.get((webhook, verdict))
        if children is None:
            children = self._review_children[(webhook, verdict)] = (
                self.reviews.labels(webhook, verdict),
                self.latency.labels(webhook, verdict),
            )
        children[0].inc()
        children[1].observe(seconds)

    def observe_closed(self, reason: str) -> None:
        self.connections_closed.labels(reason).inc()

    def observe_lookup(self, kind: str, result: str) -> None:
        child = self._lookup_children.get((kind, result))
        if child is None:
            child = self._lookup_children[(kind, result)] = self.lookups.labels(kind, result)
        child.inc()

    def render(self) -> bytes:
        """The registry in the Prometheus text exposition format."""
        data: bytes = generate_latest(self.registry)
        return data
