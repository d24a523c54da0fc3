"""The Grafana dashboard the chart ships queries only metrics the code exports, and shows each.

The exported metrics are collected from the real registries: the controller's
(``gpustack_controller.metrics.REGISTRY``) and a webhook server's (a fresh
``gpustack_webhook.metrics.Metrics``), each metric with its type and label names, so the test
follows the definitions wherever they move. Every panel's every query must name at least one
exported series (a counter's ``_total``, a histogram's ``_bucket``/``_sum``/``_count``, ...),
nothing that is not exported, and group or filter only by that metric's labels (or a scrape
target's), filtering by values the code writes (its own constants); every exported metric
is on some panel and in docs/operations.md with its labels.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.metrics import MetricWrapperBase

from gpustack_controller import metrics as controller_metrics
from gpustack_controller.metrics import REGISTRY as CONTROLLER_REGISTRY
from gpustack_webhook import metrics as webhook_metrics
from gpustack_webhook.metrics import Metrics as WebhookMetrics

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "charts" / "gpustack-render" / "files" / "dashboards" / "gpustack-render.json"
OPERATIONS = ROOT / "docs" / "operations.md"
#: Labels Prometheus adds to every scraped series (the target's, from the ServiceMonitor).
TARGET_LABELS = {"job", "instance", "namespace", "pod", "service", "container", "endpoint"}
SUFFIXES = {
    "counter": ("_total", "_created"),
    "gauge": ("",),
    "histogram": ("_bucket", "_sum", "_count", "_created"),
    "summary": ("", "_sum", "_count", "_created"),
}
#: Metric names in PromQL (every project metric starts with gpustack_), their matchers, groupings.
SERIES = re.compile(r"\b(gpustack_[a-z0-9_]+)\b")
MATCHERS = re.compile(r"\b(gpustack_[a-z0-9_]+)\{([^}]*)\}")
#: One label matcher: label, operator, quoted value.
MATCHER = re.compile(r'^\s*([a-z_]+)\s*(=~|!~|!=|=)\s*"([^"]*)"\s*$')
#: The values the code gives a label (metric family, label) -> vocabulary, from the code's own
#: constants: a panel filtering on a value the code never writes shows nothing, silently.
LABEL_VALUES: dict[tuple[str, str], frozenset[str]] = {
    ("gpustack_controller_reconcile", "result"): frozenset(controller_metrics.RESULTS),
    ("gpustack_controller_reconcile_duration_seconds", "result"): frozenset(
        controller_metrics.RESULTS
    ),
    ("gpustack_controller_replicas", "state"): frozenset(controller_metrics.REPLICA_STATES),
    ("gpustack_webhook_reviews", "verdict"): frozenset(webhook_metrics.VERDICTS),
    ("gpustack_webhook_review_duration_seconds", "verdict"): frozenset(webhook_metrics.VERDICTS),
    ("gpustack_webhook_certificate_reloads", "result"): frozenset(webhook_metrics.RELOAD_RESULTS),
}
GROUPING = re.compile(r"\b(?:by|without)\s*\(([^)]*)\)")


@dataclass(frozen=True)
class Metric:
    name: str
    kind: str
    labels: frozenset[str]


def _collectors(registry: CollectorRegistry) -> list[MetricWrapperBase]:
    """The metrics registered in ``registry``. prometheus_client has no public way to read a
    metric's label names before it has a child, so this reads the registry's own map and the
    metric's ``_labelnames`` (checked to be there: a change in the client fails here loudly)."""
    found = list(registry._collector_to_names)
    assert found and all(isinstance(c, MetricWrapperBase) for c in found)
    return found  # type: ignore[return-value]


def exported_metrics() -> dict[str, Metric]:
    """Series name -> metric, for every metric the controller and a webhook server export."""
    series: dict[str, Metric] = {}
    for registry in (CONTROLLER_REGISTRY, WebhookMetrics().registry):
        for collector in _collectors(registry):
            (family,) = collector.describe()
            metric = Metric(family.name, family.type, frozenset(collector._labelnames))
            for suffix in SUFFIXES[family.type]:
                series[family.name + suffix] = metric
    return series


def dashboard() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return data


def panels() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for panel in dashboard()["panels"]:
        out += [panel] if panel["type"] != "row" else panel.get("panels", [])
    return out


def test_the_sources_define_the_metrics_the_dashboard_is_about() -> None:
    exported = exported_metrics()
    # The scan found both shells' metrics (guards against a scan that silently finds nothing).
    assert "gpustack_controller_reconcile_total" in exported
    assert "gpustack_controller_reconcile_duration_seconds_bucket" in exported
    assert "gpustack_webhook_review_duration_seconds_bucket" in exported
    assert exported["gpustack_webhook_reviews_total"].labels == {"webhook", "verdict"}
    assert exported["gpustack_controller_replicas"].labels == {
        "namespace",
        "deployment",
        "role",
        "state",
    }


def test_every_query_names_only_exported_metrics_and_their_labels() -> None:
    exported = exported_metrics()
    queried = set()
    for panel in panels():
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            expr = target["expr"]
            names = set(SERIES.findall(expr))
            assert names, f"{panel['title']}: {expr} names no gpustack metric"
            unknown = names - set(exported)
            assert not unknown, f"{panel['title']}: {sorted(unknown)} are not exported"
            queried |= {exported[n].name for n in names}
            labels = set().union(*(exported[n].labels for n in names)) | TARGET_LABELS
            histogram = any(n.endswith("_bucket") for n in names)
            for metric, matchers in MATCHERS.findall(expr):
                keys = {m.split("=")[0].strip(" !~") for m in matchers.split(",") if m.strip()}
                assert keys <= exported[metric].labels | TARGET_LABELS, (panel["title"], keys)
                for matcher in filter(str.strip, matchers.split(",")):
                    found = MATCHER.match(matcher)
                    assert found, f'{panel["title"]}: matcher {matcher!r} is not label op "value"'
                    label, op, value = found.groups()
                    if label in TARGET_LABELS:
                        continue
                    vocabulary = LABEL_VALUES.get((exported[metric].name, label))
                    assert vocabulary is not None, (
                        f"{panel['title']}: {metric}{{{label}}} has no vocabulary in LABEL_VALUES"
                    )
                    if op in ("=", "!="):
                        assert value in vocabulary, (
                            f"{panel['title']}: {label}{op}{value!r}: the code writes "
                            f"{sorted(vocabulary)}"
                        )
            for group in GROUPING.findall(expr):
                keys = {k.strip() for k in group.split(",") if k.strip()}
                allowed = labels | ({"le"} if histogram else set())
                assert keys <= allowed, (panel["title"], keys - allowed)
    # Every metric the code exports is on some panel.
    missing = {m.name for m in exported.values()} - queried
    assert not missing, f"no panel shows {sorted(missing)}"


def test_every_exported_metric_is_documented_with_its_labels() -> None:
    """docs/operations.md, "Metrics": one table row per metric, naming each of its labels."""
    text = OPERATIONS.read_text()
    rows = {
        m.group(1): m.group(0)
        for m in re.finditer(r"^\| `(gpustack_[a-z0-9_]+)` \|.*$", text, re.MULTILINE)
    }
    for metric in {m.name: m for m in exported_metrics().values()}.values():
        shown = metric.name + ("_total" if metric.kind == "counter" else "")
        assert shown in rows, f"docs/operations.md does not list {shown}"
        for label in metric.labels:
            assert f"`{label}`" in rows[shown], f"{shown}: label {label} is not documented"
    exported = {
        m.name + ("_total" if m.kind == "counter" else "") for m in exported_metrics().values()
    }
    assert not set(rows) - exported, f"documented but not exported: {set(rows) - exported}"


def test_the_dashboard_is_well_formed() -> None:
    board = dashboard()
    assert board["uid"] and board["title"] and board["schemaVersion"] >= 36
    (variable,) = board["templating"]["list"]
    assert variable["type"] == "datasource" and variable["query"] == "prometheus"
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    for panel in panels():
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        refs = [t["refId"] for t in panel["targets"]]
        assert len(refs) == len(set(refs)), panel["title"]
