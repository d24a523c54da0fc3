"""The fault checker (bench/invariants.py): a clean rollout reports nothing, and each invariant
broken on purpose is reported by its rule."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.faults import audit_lines
from bench.invariants import (
    DeploymentState,
    Observed,
    PodLife,
    WorkloadLife,
    Write,
    audit_writes,
    check,
)


def _pod(name: str, group: str, ordinal: str, **times: float | None) -> PodLife:
    return PodLife(
        name=name,
        uid=f"uid-{name}",
        deployment="md",
        role="server",
        ordinal=ordinal,
        group=group,
        created=float(times.pop("created", 0.0) or 0.0),
        **times,
    )


def _wl(pod: PodLife, deleted: float | None = None) -> WorkloadLife:
    return WorkloadLife(pod.group, frozenset({pod.uid}), pod.created + 0.1, deleted)


def _md(ready: int = 2, generation: int = 2, observed: int = 2) -> DeploymentState:
    return DeploymentState(
        "md",
        {
            "metadata": {"name": "md", "generation": generation},
            "spec": {"roles": [{"name": "server", "replicas": 2}]},
            "status": {
                "observedGeneration": observed,
                "roles": [{"name": "server", "ready": ready}],
            },
        },
        rollout_since=10.0,
    )


def _clean() -> Observed:
    """Two replicas rolled one after the other from 10 s: ordinal 0's old group starts deleting
    at 11 s and goes at 12 s, its replacement is created at 13 s and Ready at 14 s; then ordinal
    1 likewise from 15 s. Statuses and writes are what a converged controller leaves."""
    old0 = _pod("a0", "g-a0", "0", created=0.0, ready=1.0, deleting=11.0, deleted=12.0)
    old1 = _pod("a1", "g-a1", "1", created=0.0, ready=1.0, deleting=15.0, deleted=16.0)
    new0 = _pod("b0", "g-b0", "0", created=13.0, ready=14.0)
    new1 = _pod("b1", "g-b1", "1", created=17.0, ready=18.0)
    pods = [old0, old1, new0, new1]
    workloads = [_wl(old0, 12.5), _wl(old1, 16.5), _wl(new0), _wl(new1)]
    writes = [
        Write(11.0 + i, "patch", "modeldeployments.worker.gpustack.ai", "ns", "md", "status")
        for i in range(6)
    ]
    return Observed(
        pods=pods,
        workloads=workloads,
        deployments=[_md()],
        writes=writes,
        converged=19.0,
        now=60.0,
        rest=(30.0, 60.0),
        grace=30.0,
    )


def _rules(observed: Observed) -> list[str]:
    return sorted({v.rule for v in check(observed)})


def test_a_clean_rollout_reports_nothing() -> None:
    assert check(_clean()) == []


def test_two_live_replicas_of_one_ordinal() -> None:
    o = _clean()
    pods = list(o.pods)
    pods[2] = replace(pods[2], created=10.5)  # the replacement before the old one is deleted
    assert _rules(replace(o, pods=pods)) == ["doubled-ordinal"]


def test_a_pod_without_workload_past_the_grace() -> None:
    o = _clean()
    assert _rules(replace(o, workloads=list(o.workloads)[:3])) == ["pod-without-workload"]
    # within the grace it is not yet one
    assert _rules(replace(o, workloads=list(o.workloads)[:3], now=40.0)) == []


def test_a_workload_without_pod_past_the_grace() -> None:
    o = _clean()
    workloads = list(o.workloads)
    workloads[0] = replace(workloads[0], deleted=None)  # the old group's Workload stays
    assert _rules(replace(o, workloads=workloads)) == ["workload-without-pod"]
    assert _rules(replace(o, workloads=workloads, now=35.0)) == []


def test_a_role_with_no_serving_replica_during_its_rollout() -> None:
    o = _clean()
    pods = list(o.pods)
    pods[1] = replace(pods[1], deleting=12.0, deleted=12.5)  # both old replicas at once
    pods[3] = replace(pods[3], created=13.0, ready=14.5)
    assert _rules(replace(o, pods=pods)) == ["role-unserved"]


def test_a_write_repeated_in_a_loop() -> None:
    o = _clean()
    loop = [
        Write(20.0 + i * 0.2, "patch", "pods", "ns", "a0", "") for i in range(25)
    ]  # 25 writes in 5 s
    assert _rules(replace(o, writes=[*o.writes, *loop])) == ["write-loop"]
    at_rest = [Write(40.0 + i * 10, "patch", "services", "ns", "md", "") for i in range(2)]
    assert _rules(replace(o, writes=[*o.writes, *at_rest])) == ["write-at-rest"]
    # one late write at rest is not a loop
    assert _rules(replace(o, writes=[*o.writes, at_rest[0]])) == []


def test_a_lost_status() -> None:
    o = _clean()
    assert _rules(replace(o, deployments=[_md(ready=1)])) == ["lost-status"]
    assert _rules(replace(o, deployments=[_md(observed=1)])) == ["lost-status"]
    stored: dict[str, Any] = dict(_md().stored)
    stored.pop("status")
    assert _rules(replace(o, deployments=[DeploymentState("md", stored)])) == ["lost-status"]


def test_audit_writes_reads_the_writes_of_an_audit_log() -> None:
    def event(verb: str, stage: str = "ResponseComplete") -> str:
        return json.dumps(
            {
                "stage": stage,
                "verb": verb,
                "objectRef": {
                    "resource": "workloads",
                    "apiGroup": "kueue.x-k8s.io",
                    "namespace": "ns",
                    "name": "w",
                    "subresource": "status",
                },
                "stageTimestamp": "2026-12-07T11:00:00.500000Z",
            }
        )

    lines = [event("patch"), event("get"), event("patch", "ResponseStarted"), "not json"]
    writes = audit_writes(lines, offset=-1_796_641_200.0)
    assert [(w.verb, w.target) for w in writes] == [
        ("patch", "workloads.kueue.x-k8s.io/status ns/w")
    ]
    assert abs(writes[0].at - 0.5) < 1e-6


def test_the_checker_reads_the_audit_log_backups_rotated_during_its_round(tmp_path: Path) -> None:
    """The API server rotates its audit log at 100 MB: a round's writes that went into a backup
    must still reach the checker (a round at 1,024 saw a sixteenth of them before this)."""
    live = tmp_path / "audit-controller.log"
    old = tmp_path / "audit-controller-2026-12-07T15-54-07.244.log"
    rotated = tmp_path / "audit-controller-2026-12-07T16-55-27.811.log"
    other = tmp_path / "audit-kueue-2026-12-07T16-55-27.811.log"
    for file, text in ((old, "old\n"), (rotated, "a\nb\n"), (live, "c\n"), (other, "x\n")):
        file.write_text(text)
    os.utime(old, (1000.0, 1000.0))
    os.utime(rotated, (3000.0, 3000.0))
    assert audit_lines(live, since_wall=2000.0) == ["a", "b", "c"]
    assert audit_lines(live, since_wall=500.0) == ["old", "a", "b", "c"]
    assert audit_lines(tmp_path / "gone.log", since_wall=0.0) == []
