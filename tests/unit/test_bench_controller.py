"""The figures bench.controller derives: the smallest size's CPU per deployment is the median
of its converges, and the CPU per pass divides by every queue's passes."""

from __future__ import annotations

import math

from prometheus_client import CollectorRegistry, Histogram, generate_latest

from bench.controller import (
    Figures,
    controller_watches,
    pass_times,
    request_counts,
    request_seconds,
    watch_events,
)
from gpustack_controller.metrics import RECONCILE_BUCKETS, RECONCILE_SECONDS, RESULTS


def _metrics_text() -> str:
    """What the controller's /metrics says after 300 deployment passes (150 s in all, split over
    two results) and 100 admission-check passes (5 s), from the same histogram it keeps."""
    registry = CollectorRegistry()
    seconds = Histogram(
        RECONCILE_SECONDS._name,
        "A pass.",
        ["controller", "result"],
        buckets=RECONCILE_BUCKETS,
        registry=registry,
    )
    for _ in range(200):
        seconds.labels("deployment", RESULTS[0]).observe(0.5)
    for _ in range(100):
        seconds.labels("deployment", RESULTS[1]).observe(0.5)
    for _ in range(100):
        seconds.labels("admissioncheck", RESULTS[0]).observe(0.05)
    return generate_latest(registry).decode()


def test_the_cpu_per_deployment_is_the_median_of_the_converges() -> None:
    figures = Figures(deployments=64, pods=128, cpu_s=6.4)
    assert figures.cpu_ms_per_deployment == 100.0
    figures.cpu_repeats = [3.2, 4.8]
    # Median of 6.4, 3.2 and 4.8 s over 64 deployments: 4.8 s -> 75 ms, not the first 100 ms.
    assert figures.cpu_ms_per_deployment == 75.0


def test_the_cpu_per_pass_counts_every_queue() -> None:
    figures = Figures(deployments=64, pods=128, cpu_s=4.0)
    assert math.isnan(figures.cpu_ms_per_pass)
    figures.passes = pass_times(_metrics_text())
    assert set(figures.passes) == {"admissioncheck", "deployment"}
    assert figures.passes["deployment"][0] == 300
    assert math.isclose(figures.passes["deployment"][1], 150.0)
    assert figures.passes["admissioncheck"][0] == 100
    assert figures.cpu_ms_per_pass == 10.0


def test_watch_events_count_only_what_the_controller_may_watch() -> None:
    # Lines as kube-apiserver 1.35 writes them (group, resource, version labels).
    text = "\n".join(
        [
            "# TYPE apiserver_watch_events_total counter",
            'apiserver_watch_events_total{group="",resource="pods",version="v1"} 160',
            'apiserver_watch_events_total{group="discovery.k8s.io",resource="endpointslices",'
            'version="v1"} 48',
            'apiserver_watch_events_total{group="kueue.x-k8s.io",resource="workloads",'
            'version="v1beta2"} 80',
            'apiserver_watch_events_sizes_sum{group="",resource="pods",version="v1"} 1.2e+06',
            'apiserver_watch_events_sizes_count{group="",resource="pods",version="v1"} 160',
        ]
    )
    watched = controller_watches()
    assert "pods" in watched and "workloads.kueue.x-k8s.io" in watched
    assert "endpointslices.discovery.k8s.io" not in watched
    assert watch_events(text, watched) == {
        ("events", "pods"): 160,
        ("events", "workloads.kueue.x-k8s.io"): 80,
        ("bytes", "pods"): 1_200_000,
    }


def test_request_counts_leave_out_the_servers_own_requests() -> None:
    text = "\n".join(
        [
            'apiserver_request_total{code="201",component="apiserver",dry_run="",group="",'
            'resource="pods",scope="resource",subresource="",verb="POST",version="v1"} 10',
            'apiserver_request_total{code="200",component="apiserver",dry_run="",'
            'group="worker.gpustack.ai",resource="modeldeployments",scope="resource",'
            'subresource="status",verb="APPLY",version="v1alpha1"} 4',
            'apiserver_selfrequest_total{group="",resource="pods",subresource="",verb="POST",'
            'version="v1"} 3',
        ]
    )
    assert request_counts(text) == {
        ("POST", "pods"): 7,
        ("APPLY", "modeldeployments.worker.gpustack.ai/status"): 4,
    }


def test_request_seconds_leave_out_watches() -> None:
    text = "\n".join(
        [
            'apiserver_request_duration_seconds_sum{component="apiserver",dry_run="",group="",'
            'resource="pods",scope="namespace",subresource="",verb="LIST",version="v1"} 3.5',
            'apiserver_request_duration_seconds_count{component="apiserver",dry_run="",group="",'
            'resource="pods",scope="namespace",subresource="",verb="LIST",version="v1"} 10',
            'apiserver_request_duration_seconds_sum{component="apiserver",dry_run="",group="",'
            'resource="pods",scope="namespace",subresource="",verb="WATCH",version="v1"} 900',
            'apiserver_request_duration_seconds_count{component="apiserver",dry_run="",group="",'
            'resource="pods",scope="namespace",subresource="",verb="WATCH",version="v1"} 3',
        ]
    )
    assert request_seconds(text) == {"LIST": (10, 3.5)}
