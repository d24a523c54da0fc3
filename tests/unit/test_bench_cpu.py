"""Where a bench phase's CPU went (bench/cpu.py): per process and for the machine."""

from __future__ import annotations

import os
import time

from bench.controller import cpu_beyond_floor
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
