"""Where a phase's CPU went: each process of the simulated cluster and the machine as a whole,
read from ``/proc`` (Linux) before and after the phase.

On a machine of two cores every component of the simulated cluster (etcd, three API servers,
Kueue, the scheduler, the controller-manager, KWOK) and the controller share the same CPUs, so a
converge can be slower than the honest floor only because something used CPU the floor did not.
:class:`CpuProbe` answers with figures: the machine's busy core-seconds over the phase (from
``/proc/stat``: everything but ``idle`` and ``iowait``), and each process's user and system
seconds (``/proc/<pid>/stat`` fields 14 and 15), named by its executable and, for an API server,
by the audit log that tells the three apart (``audit-controller.log`` is the controller's own,
``audit-kueue.log`` Kueue's; ``tests/integration/cluster.py``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

TICKS: Final = os.sysconf("SC_CLK_TCK")
CORES: Final = os.cpu_count() or 1
_AUDIT = re.compile(r"--audit-log-path=.*?/audit(?:-([a-z]+))?\.log")


def process_seconds(pid: int) -> float | None:
    """User plus system CPU seconds of ``pid`` (``None``: it has exited)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / TICKS


def process_name(pid: int) -> str:
    """The executable's name; an API server's with the audit log that names its clients."""
    try:
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
        args = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return f"pid {pid}"
    if comm == "kube-apiserver":
        found = _AUDIT.search(args)
        who = found.group(1) if found else None
        return f"kube-apiserver ({who})" if who else "kube-apiserver"
    return comm


def machine_seconds() -> tuple[float, float]:
    """(busy, total) core-seconds since boot: the first line of ``/proc/stat``."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    return (sum(values) - idle) / TICKS, sum(values) / TICKS


@dataclass(frozen=True)
class CpuUse:
    """What a phase used: the machine's busy core-seconds and each process's seconds."""

    wall: float
    busy: float
    total: float
    by_process: dict[str, float] = field(default_factory=dict)

    @property
    def busy_cores(self) -> float:
        """Cores busy on average over the phase."""
        return self.busy / self.wall if self.wall else float("nan")

    def line(self) -> str:
        """``CPU: 1.9 of 2 cores busy (190 core-s); by process (s): ...``, largest first."""
        parts = ", ".join(
            f"{name} {s:.1f}"
            for name, s in sorted(self.by_process.items(), key=lambda kv: -kv[1])
            if s >= 0.05
        )
        return (
            f"CPU: {self.busy_cores:.2f} of {CORES} cores busy ({self.busy:.0f} core-s over "
            f"{self.wall:.1f} s); by process (s): {parts}"
        )


@dataclass(frozen=True)
class Snapshot:
    wall: float
    machine: tuple[float, float]
    processes: dict[int, tuple[str, float]]


class CpuProbe:
    """Snapshots of the cluster's processes (``pids`` is asked each time: a component restarted
    by a fault has a new one) plus any named ones the caller adds."""

    def __init__(self, pids: Callable[[], Iterable[int]]) -> None:
        self.pids = pids

    def snapshot(self, wall: float, extra: Mapping[str, int] | None = None) -> Snapshot:
        processes: dict[int, tuple[str, float]] = {}
        named = {pid: name for name, pid in (extra or {}).items()}
        for pid in [*self.pids(), *named]:
            seconds = process_seconds(pid)
            if seconds is not None:
                processes[pid] = (named.get(pid) or process_name(pid), seconds)
        return Snapshot(wall, machine_seconds(), processes)

    @staticmethod
    def since(before: Snapshot, after: Snapshot) -> CpuUse:
        """The CPU used between two snapshots (a process in only one of them is left out)."""
        by_process: dict[str, float] = {}
        for pid, (name, seconds) in after.processes.items():
            if pid in before.processes:
                by_process[name] = by_process.get(name, 0.0) + seconds - before.processes[pid][1]
        return CpuUse(
            wall=after.wall - before.wall,
            busy=after.machine[0] - before.machine[0],
            total=after.machine[1] - before.machine[1],
            by_process=by_process,
        )
