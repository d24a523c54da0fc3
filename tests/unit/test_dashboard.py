"""The Grafana dashboard the chart ships queries only metrics the code exports.

The exported metrics are read from the source (every prometheus_client ``Counter``, ``Gauge``,
``Histogram`` or ``Summary`` constructed with a literal name in gpustack_controller/ and
gpustack_webhook/, with its label names), not imported, so the test follows the definitions
wherever they move. Every panel's every query must name at least one exported series (a
counter's ``_total``, a histogram's ``_bucket``/``_sum``/``_count``, ...), nothing that is not
exported, and group or filter only by that metric's labels (or a scrape target's).
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "charts" / "gpustack-render" / "files" / "dashboards" / "gpustack-render.json"
PACKAGES = ("gpustack_controller", "gpustack_webhook")
#: Labels Prometheus adds to every scraped series (the target's, from the ServiceMonitor).
TARGET_LABELS = {"job", "instance", "namespace", "pod", "service", "container", "endpoint"}
SUFFIXES = {
    "Counter": ("_total", "_created"),
    "Gauge": ("",),
    "Histogram": ("_bucket", "_sum", "_count", "_created"),
    "Summary": ("", "_sum", "_count", "_created"),
}
#: Metric names in PromQL (every project metric starts with gpustack_), their matchers, groupings.
SERIES = re.compile(r"\b(gpustack_[a-z0-9_]+)\b")
MATCHERS = re.compile(r"\b(gpustack_[a-z0-9_]+)\{([^}]*)\}")
GROUPING = re.compile(r"\b(?:by|without)\s*\(([^)]*)\)")


@dataclass(frozen=True)
class Metric:
    name: str
    kind: str
    labels: frozenset[str]


def _literal_strings(node: ast.expr | None) -> list[str]:
    if isinstance(node, (ast.List, ast.Tuple)):
        return [
            e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)
        ]
    return []


def exported_metrics() -> dict[str, Metric]:
    """Series name -> metric, for every metric defined in the two packages."""
    series: dict[str, Metric] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if not isinstance(node, ast.Call):
                    continue
                func = node.func
                kind = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if kind not in SUFFIXES or not node.args:
                    continue
                first = node.args[0]
                if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
                    continue
                labels = _literal_strings(node.args[2] if len(node.args) > 2 else None)
                for kw in node.keywords:
                    if kw.arg == "labelnames":
                        labels = _literal_strings(kw.value)
                base = first.value.removesuffix("_total") if kind == "Counter" else first.value
                metric = Metric(base, kind, frozenset(labels))
                for suffix in SUFFIXES[kind]:
                    series[base + suffix] = metric
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
            for group in GROUPING.findall(expr):
                keys = {k.strip() for k in group.split(",") if k.strip()}
                allowed = labels | ({"le"} if histogram else set())
                assert keys <= allowed, (panel["title"], keys - allowed)
    # Reconcile duration and errors, queue depth, review latency by webhook and verdict.
    assert {
        "gpustack_controller_reconcile",
        "gpustack_controller_reconcile_duration_seconds",
        "gpustack_controller_queue_depth",
        "gpustack_webhook_reviews",
        "gpustack_webhook_review_duration_seconds",
    } <= queried


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
