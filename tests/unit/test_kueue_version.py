"""The project speaks one Kueue version, v1beta2 (Kueue v0.17.0's storage version; v1beta1 is
deprecated): every Kueue kind the controller reads, watches or writes, every Kueue object the
library builds, and the API server's warnings are logged, not dropped
(docs/contract/kubernetes-notes.md §4)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest
from multidict import CIMultiDict, CIMultiDictProxy

from gpustack_controller import kube
from gpustack_kube import client
from gpustack_render.reconcile.jointcheck import (
    PENDING,
    CheckVerdict,
    active_condition_apply,
    admission_check_object,
    check_entry_apply,
)
from gpustack_render.rendering.localqueues import local_queue
from gpustack_render.schema.kinds import KUEUE_GROUP

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def test_every_kueue_resource_the_controller_uses_is_v1beta2() -> None:
    resources = [v for v in vars(kube).values() if isinstance(v, kube.Resource)]
    kueue = {r.kind: r for r in resources if r.group == KUEUE_GROUP}
    assert set(kueue) == {"Workload", "LocalQueue", "ClusterQueue", "AdmissionCheck"}
    assert {r.version for r in kueue.values()} == {"v1beta2"}
    assert (
        kueue["Workload"].path("ns", "w")
        == "/apis/kueue.x-k8s.io/v1beta2/namespaces/ns/workloads/w"
    )
    assert (
        kueue["AdmissionCheck"].path("ns", "c") == "/apis/kueue.x-k8s.io/v1beta2/admissionchecks/c"
    )


def test_every_kueue_object_the_library_builds_is_v1beta2() -> None:
    verdict = CheckVerdict(PENDING, "waiting")
    objects = [
        local_queue("q", namespace="ns"),
        admission_check_object(),
        active_condition_apply(previous_since=None, now=NOW),
        check_entry_apply(namespace="ns", workload="w", verdict=verdict, previous=None, now=NOW),
    ]
    assert {o["apiVersion"] for o in objects} == {"kueue.x-k8s.io/v1beta2"}


class _Answer:
    def __init__(self, *warnings: str) -> None:
        self.headers = CIMultiDictProxy(CIMultiDict([("Warning", w) for w in warnings]))


def test_api_server_warnings_are_logged(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger=client.log.name):
        client.log_warnings("GET", "/apis/x", _Answer('299 - "old"', '299 - "older"'))
        client.log_warnings("GET", "/apis/y", _Answer())
        client.log_warnings("GET", "/apis/z", object())
    assert [r.getMessage() for r in caplog.records] == [
        'the API server warns about GET /apis/x: 299 - "old"',
        'the API server warns about GET /apis/x: 299 - "older"',
    ]
