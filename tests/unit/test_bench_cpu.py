"""Where a bench phase's CPU went (bench/cpu.py): per process and for the machine."""

from __future__ import annotations

import os
import time
from typing import Any, cast

from bench.controller import (
    STAGES,
    NamespaceWatch,
    Seen,
    _workload_stages,
    cpu_beyond_floor,
    stages,
    stages_line,
)
from bench.cpu import CpuProbe, CpuUse, Snapshot, process_name, process_seconds


def test_a_phase_is_charged_what_each_process_used_in_it() -> None:
    before = Snapshot(10.0, (100.0, 400.0), {1: ("etcd", 5.0), 2: ("kueue", 1.0), 3: ("gone", 9.0)})
    after = Snapshot(
        20.0,
        (118.0, 420.0),
        {1: ("etcd", 8.0), 2: ("kueue", 4.5), 4: ("controller", 2.0)},
    )
    use = CpuProbe.since(before, after)
    # A process in only one snapshot (exited, or started during the phase) is left out.
    assert use.by_process == {"etcd": 3.0, "kueue": 3.5}
    assert use.busy == 18.0 and use.wall == 10.0
    assert use.busy_cores == 1.8
    assert use.line().startswith("CPU: 1.80 of ")
    assert "kueue 3.5, etcd 3.0" in use.line()


def test_the_converge_is_compared_with_the_floor_process_by_process() -> None:
    floor = CpuUse(wall=80.0, busy=150.0, total=160.0, by_process={"kueue": 40.0, "etcd": 20.0})
    controlled = CpuUse(
        wall=100.0,
        busy=190.0,
        total=200.0,
        by_process={"kueue": 41.0, "etcd": 22.0, "controller": 20.0},
    )
    line = cpu_beyond_floor(controlled, floor)
    assert line.startswith("beyond the honest floor: +40 core-s")
    assert "controller +20.0, etcd +2.0, kueue +1.0" in line


def test_this_process_is_read_from_proc() -> None:
    pid = os.getpid()
    start = process_seconds(pid)
    assert start is not None
    deadline = time.process_time() + 0.3
    while time.process_time() < deadline:
        pass
    end = process_seconds(pid)
    assert end is not None and end - start >= 0.2
    assert process_name(pid).startswith("python") or process_name(pid).startswith("pytest")
    assert process_seconds(2**22 + 7) is None  # no such process


def test_a_pods_wait_is_split_into_kueues_stages() -> None:
    kube = cast(Any, None)
    pods = NamespaceWatch(kube, cast(Any, None), "ns")
    workloads = NamespaceWatch(kube, cast(Any, None), "ns")
    pods.seen = {
        "p0": [Seen(added=10.0, labels={}, uid="u0", ready=30.0)],
        "early": [Seen(added=1.0, labels={}, uid="u9", ready=2.0)],  # before the phase
    }
    wl = Seen(added=11.0, labels={}, owners=frozenset({"u0"}))
    _workload_stages(
        wl, {"status": {"conditions": [{"type": "QuotaReserved", "status": "True"}]}}, 12.0
    )
    checks: dict[str, Any] = {"admissionChecks": [{"name": "a", "state": "Pending"}]}
    _workload_stages(wl, {"status": checks}, 13.0)
    assert wl.checked is None  # a check not Ready yet
    checks["admissionChecks"][0]["state"] = "Ready"
    _workload_stages(wl, {"status": checks}, 15.0)
    admitted = {"conditions": [{"type": "Admitted", "status": "True"}]}
    _workload_stages(wl, {"status": admitted}, 16.0)
    _workload_stages(wl, {"status": admitted}, 99.0)  # the first time counts
    workloads.seen = {"w0": [wl], "w9": [Seen(added=1.5, labels={}, owners=frozenset({"u9"}))]}
    measured = stages(pods, workloads, started=5.0)
    assert list(measured) == list(STAGES)
    assert [measured[name] for name in STAGES] == [[1.0], [1.0], [3.0], [1.0], [14.0]]
    assert stages_line(measured).startswith("stages p50 / p99 (s): Pod -> Workload 1.0 / 1.0")
