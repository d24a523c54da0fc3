"""Faults at scale: the controller, one API server, Kueue and etcd failing in the middle of a
converge and of a rollout of every deployment, with the invariants of :mod:`bench.invariants`
checked after each.

One round per fault, on a namespace whose deployments have converged (``bench.controller``'s
controller phase, or the integration test's): an eighth of the deployments (at least one) is
deleted and as many new ones are created (a converge: their Pods wait on the quota the deleted
ones free), every other deployment's role env is edited (a rollout of every deployment), and
once a quarter of the replacements have been created the fault strikes:

* ``controller``: SIGKILL, and the same command started again (its informers list everything
  anew);
* ``apiserver``: the controller's own kube-apiserver (one of the HA set on the same etcd) is
  stopped and started again on the same port;
* ``kueue``: Kueue is stopped and started again;
* ``etcd``: etcd is paused (SIGSTOP) for 10 s, then continued.

Then the round waits until every live deployment has its replicas Ready, all of its latest
spec, and no Pod of a deleted deployment is left (the re-converge, timed from the fault's end),
lets the cluster rest ``REST_SECONDS``, and checks: no two live replicas of one ordinal, no
Pod without a Workload or Workload without a Pod past ``GRACE_SECONDS``, no status still wrong
``STATUS_BOUND_SECONDS`` after the re-converge (a lost one), no edited deployment
without a serving replica during its rollout, no write the controller repeats in a loop (its
API server's audit log: the controller runs as the audited identity).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from integration.cluster import Cluster
from integration.controlplane import ApiServer

from bench.invariants import (
    DeploymentState,
    Observed,
    PodLife,
    Violation,
    WorkloadLife,
    audit_writes,
    check,
    lost_statuses,
    orphans,
)
from gpustack_controller.kube import MODEL_DEPLOYMENTS, ApiError, Kube
from gpustack_render.core import labels

FAULTS = ("controller", "apiserver", "kueue", "etcd")
ETCD_PAUSE_SECONDS = 10.0
GRACE_SECONDS = 30.0
REST_SECONDS = 10.0
STATUS_BOUND_SECONDS = 75.0
#: Edits of a round start at this value (the bench's own edits use 1 to ``--edits``).
EDIT_BASE = 1000


@dataclass
class FaultRound:
    fault: str
    deployments: int
    created: int
    deleted: int
    #: Seconds from the round's start (the edits) to the fault, the fault's own length, and
    #: from its end to the re-converge.
    struck_at: float = 0.0
    lasted: float = 0.0
    reconverge_s: float = float("nan")
    violations: list[Violation] = field(default_factory=list)
    writes: int = 0
    #: Seconds from the re-converge until every status said what the Pods show.
    status_settled_s: float = float("nan")

    def rule_counts(self) -> Counter[str]:
        return Counter(v.rule for v in self.violations)

    def line(self) -> str:
        rules = Counter(v.rule for v in self.violations)
        # The rarest rules first: one broken write outweighs the rollout gaps of every role.
        shown = sorted(self.violations, key=lambda v: (rules[v.rule], v.rule))[:6]
        found = (
            "none"
            if not self.violations
            else ", ".join(f"{rule} {n}" for rule, n in sorted(rules.items()))
            + " (e.g. "
            + "; ".join(map(str, shown))
            + ")"
        )
        return (
            f"fault {self.fault}: {self.deployments} deployments rolling out, {self.created} "
            f"created and {self.deleted} deleted; struck {self.struck_at:.1f} s in, lasted "
            f"{self.lasted:.1f} s; re-converged {self.reconverge_s:.1f} s after it, statuses "
            f"{self.status_settled_s:.1f} s later; "
            f"{self.writes} controller writes; violations: {found}"
        )


@dataclass
class FaultContext:
    """What a round acts on: the admin client, the namespace and its watches (the bench's
    :class:`bench.controller.NamespaceWatch` of Pods and Workloads), the controller process,
    its API server and its audit log, and the cluster."""

    kube: Kube
    namespace: str
    pods: Any
    workloads: Any
    controller: Any
    server: ApiServer
    cluster: Cluster
    audit_log: Path
    replicas: int
    #: Builds a ModelDeployment body: (name, namespace, replicas, edit) → body.
    deployment: Callable[[str, str, int, int], dict[str, Any]]
    #: The role body of an edit: (replicas, edit) → role.
    role: Callable[[int, int], dict[str, Any]]
    live: list[str] = field(default_factory=list)
    deleted: set[str] = field(default_factory=set)
    next_index: int = 0
    #: How long the cluster rests after a re-converge before the check (writes in the second
    #: half of it are writes at rest), and the grace of a Pod or Workload without its peer.
    rest_seconds: float = REST_SECONDS
    grace_seconds: float = GRACE_SECONDS
    #: A status not right this long after the re-converge is lost: a pass that failed while
    #: a component was down retries after a backoff of up to 60 s (the work queue's bound).
    status_bound: float = STATUS_BOUND_SECONDS


async def _gather_limited(jobs: list[Callable[[], Any]], limit: int = 16) -> None:
    gate = asyncio.Semaphore(limit)

    async def one(job: Callable[[], Any]) -> None:
        async with gate:
            await job()

    await asyncio.gather(*(one(j) for j in jobs))


async def strike(ctx: FaultContext, fault: str) -> None:
    """One fault, until the component is back (blocking steps run in a thread)."""
    cp = ctx.cluster.control_plane
    if fault == "controller":
        ctx.controller.kill_and_restart()
        await ctx.controller.started()
    elif fault == "apiserver":
        await asyncio.to_thread(cp.restart_apiserver, ctx.server.name)
    elif fault == "kueue":
        await asyncio.to_thread(ctx.cluster.restart_kueue)
    elif fault == "etcd":
        pid = cp.etcd_pid()
        os.kill(pid, signal.SIGSTOP)
        try:
            await asyncio.sleep(ETCD_PAUSE_SECONDS)
        finally:
            os.kill(pid, signal.SIGCONT)
    else:
        raise ValueError(f"unknown fault {fault!r}")


def _instance(seen: Any) -> str:
    return str(seen.labels.get(labels.INSTANCE) or "")


def converged(ctx: FaultContext, edited_at: dict[str, float]) -> bool:
    """Every live deployment has ``replicas`` live Pods, all Ready, none older than its last
    edit, and no Pod of a deleted deployment is left."""
    count: dict[str, int] = {}
    for name, obj in ctx.pods.objects.items():
        history = ctx.pods.seen.get(name) or []
        if not history:
            return False
        seen = history[-1]
        md = _instance(seen)
        if md in ctx.deleted:
            return False
        if obj["metadata"].get("deletionTimestamp"):
            return False
        if seen.added < edited_at.get(md, 0.0) or seen.ready is None:
            return False
        count[md] = count.get(md, 0) + 1
    return all(count.get(md, 0) == ctx.replicas for md in ctx.live)


def audit_lines(path: Path, *, since_wall: float) -> list[str]:
    """The audit log's lines that may hold entries since ``since_wall`` (epoch seconds): the API
    server rotates its log at 100 MB into ``<stem>-<time><suffix>`` backups (a round at 1,024
    deployments writes several), so every backup rotated after that moment is read first, oldest
    first, then the live file."""
    backups = sorted(path.parent.glob(f"{path.stem}-*{path.suffix}"))
    lines: list[str] = []
    for file in [*backups, path]:
        try:
            if file != path and file.stat().st_mtime < since_wall:
                continue  # rotated before the round began: nothing of it is in there
            lines += file.read_text(errors="replace").splitlines()
        except OSError:
            continue
    return lines


def observe(
    ctx: FaultContext,
    since: float,
    rollout_since: dict[str, float],
    stored: list[dict[str, Any]],
    *,
    converged_at: float,
    now: float,
) -> Observed:
    """The round's observation: the Pods and Workloads that existed at some moment since
    ``since``, the stored deployments, the controller's writes since ``since``."""
    pods = [
        PodLife(
            name=name,
            uid=s.uid,
            deployment=_instance(s),
            role=str(s.labels.get(labels.COMPONENT) or ""),
            ordinal=str(s.labels.get(labels.POD_ORDINAL) or ""),
            group=str(s.labels.get(labels.POD_GROUP_NAME) or ""),
            created=s.added,
            ready=s.ready,
            deleting=s.deleting,
            deleted=s.deleted,
        )
        for name, history in ctx.pods.seen.items()
        for s in history
        if s.deleted is None or s.deleted >= since
    ]
    workloads = [
        WorkloadLife(name, s.owners, s.added, s.deleted)
        for name, history in ctx.workloads.seen.items()
        for s in history
        if s.deleted is None or s.deleted >= since
    ]
    deployments = [
        DeploymentState(
            str(md["metadata"]["name"]),
            md,
            rollout_since=rollout_since.get(str(md["metadata"]["name"])),
        )
        for md in stored
    ]
    offset = time.perf_counter() - time.time()
    lines = audit_lines(ctx.audit_log, since_wall=since - offset)
    writes = [w for w in audit_writes(lines, offset=offset) if w.at >= since]
    return Observed(
        pods=pods,
        workloads=workloads,
        deployments=deployments,
        writes=writes,
        converged=converged_at,
        now=now,
        rest=(converged_at + ctx.rest_seconds / 2, now),
        grace=ctx.grace_seconds,
    )


async def fault_round(
    ctx: FaultContext, fault: str, round_no: int, *, timeout: float = 1800.0
) -> FaultRound:
    """One round (see the module's docstring)."""
    churn = max(1, len(ctx.live) // 8)
    going, ctx.live = ctx.live[:churn], ctx.live[churn:]
    new = [f"bench-{ctx.next_index + i}" for i in range(churn)]
    ctx.next_index += churn
    started = time.perf_counter()
    edit = EDIT_BASE + round_no
    edited_at: dict[str, float] = {}

    async def delete(name: str) -> None:
        ctx.deleted.add(name)
        await ctx.kube.delete(MODEL_DEPLOYMENTS, name, ctx.namespace)

    async def create(name: str) -> None:
        edited_at[name] = time.perf_counter()
        await ctx.kube.create(
            MODEL_DEPLOYMENTS, ctx.deployment(name, ctx.namespace, ctx.replicas, 0), ctx.namespace
        )

    async def roll(name: str) -> None:
        edited_at[name] = time.perf_counter()
        await ctx.kube.merge_patch(
            MODEL_DEPLOYMENTS,
            name,
            {"spec": {"roles": [ctx.role(ctx.replicas, edit)]}},
            ctx.namespace,
        )

    rolled = list(ctx.live)
    jobs: list[Callable[[], Any]] = [
        *(partial(delete, n) for n in going),
        *(partial(create, n) for n in new),
        *(partial(roll, n) for n in rolled),
    ]
    result = FaultRound(fault, len(rolled), len(new), len(going))
    rollout_since = {n: started for n in rolled}
    ctx.live += new
    changes = asyncio.create_task(_gather_limited(jobs))

    def replaced() -> int:
        return sum(
            1
            for history in ctx.pods.seen.values()
            for s in history[-1:]
            if s.added >= edited_at.get(_instance(s), float("inf"))
        )

    want = max(1, (len(rolled) + len(new)) * ctx.replicas // 4)
    with contextlib.suppress(RuntimeError):  # strike anyway: the round checks what happened
        await ctx.pods.until(lambda: replaced() >= want, 600.0, f"{fault}: a quarter replaced")
    struck = time.perf_counter()
    result.struck_at = struck - started
    await strike(ctx, fault)
    ended = time.perf_counter()
    result.lasted = ended - struck
    await changes
    try:
        await ctx.pods.until(lambda: converged(ctx, edited_at), timeout, f"after {fault}")
    except RuntimeError as exc:
        result.violations.append(Violation("no-reconverge", fault, str(exc)))
        return result
    converged_at = time.perf_counter()
    result.reconverge_s = converged_at - ended
    await asyncio.sleep(ctx.rest_seconds)
    while True:
        try:
            stored, _ = await ctx.kube.list(MODEL_DEPLOYMENTS, ctx.namespace)
        except ApiError:
            await asyncio.sleep(1.0)
            continue
        now = time.perf_counter()
        observed = observe(ctx, started, rollout_since, stored, converged_at=converged_at, now=now)
        pending = orphans(observed.pods, observed.workloads, now=now, grace=0.0)
        stale = lost_statuses(observed.pods, observed.deployments, now=now)
        if not stale and result.status_settled_s != result.status_settled_s:
            result.status_settled_s = now - converged_at
        waited = now - converged_at
        if (not pending or waited > ctx.grace_seconds + 2) and (
            not stale or waited > ctx.status_bound
        ):
            break
        await asyncio.sleep(1.0)
    result.violations += check(observed)
    result.writes = len(observed.writes)
    return result


async def fault_rounds(ctx: FaultContext, faults: tuple[str, ...] = FAULTS) -> list[FaultRound]:
    results = []
    for n, fault in enumerate(faults):
        result = await fault_round(ctx, fault, n)
        print(f"   [{len(ctx.live)}] {result.line()}", flush=True)
        results.append(result)
    return results
