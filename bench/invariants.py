"""The invariants a fault must not break, checked on what was observed (no I/O, no clock).

``bench.controller``'s fault phases (and ``tests/integration/test_controller_faults.py``) record
the life of every Pod and Workload of a namespace as a watch delivered it (:class:`PodLife`,
:class:`WorkloadLife`: when it appeared, turned Ready, started deleting, went), the
ModelDeployments as stored (:class:`DeploymentState`) and the controller's writes from its API
server's audit log (:class:`Write`), and ask :func:`check` what is wrong. Each rule is its own
function, so a unit test can break each on purpose (``tests/unit/test_bench_invariants.py``):

* :func:`doubled_ordinals`: two replicas (Pod groups) of one ordinal of one role live at once.
  A replica is live from its first Pod's creation until its last Pod starts deleting; the
  controller creates a replacement only once the old group is gone, so the intervals of one
  slot never overlap.
* :func:`orphans`: a Pod with no Workload, or a Workload with no Pod, past ``grace`` seconds
  (Kueue creates a group's Workload after its Pods; the garbage collector and Kueue remove a
  Workload after its Pods).
* :func:`unserved`: a deployment that was serving when its rollout started with a role of two
  replicas or more that had no serving replica (a Ready Pod not being deleted) at some moment
  of the rollout.
* :func:`write_loops`: one object written more than ``limit`` times within ``window`` seconds,
  or twice or more while the cluster is at rest.
* :func:`lost_statuses`: a converged deployment whose status is missing, is of an older
  generation, or counts another number of Ready replicas per role than the Pods show.

Times are seconds on one clock (the observer's ``time.perf_counter``), ``None`` for never.
"""

from __future__ import annotations

import itertools
import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from gpustack_render.core import labels

INF = float("inf")
#: The verbs of a write in an audit event.
AUDIT_WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})


@dataclass(frozen=True)
class PodLife:
    """One Pod (by uid) as a watch saw it."""

    name: str
    uid: str
    deployment: str
    role: str
    ordinal: str
    group: str
    created: float
    ready: float | None = None
    deleting: float | None = None
    deleted: float | None = None

    @classmethod
    def of(
        cls,
        obj: Mapping[str, Any],
        *,
        created: float,
        ready: float | None = None,
        deleting: float | None = None,
        deleted: float | None = None,
    ) -> PodLife:
        meta = obj.get("metadata") or {}
        lab = meta.get("labels") or {}
        return cls(
            name=str(meta.get("name") or ""),
            uid=str(meta.get("uid") or ""),
            deployment=str(lab.get(labels.INSTANCE) or ""),
            role=str(lab.get(labels.COMPONENT) or ""),
            ordinal=str(lab.get(labels.POD_ORDINAL) or ""),
            group=str(lab.get(labels.POD_GROUP_NAME) or ""),
            created=created,
            ready=ready,
            deleting=deleting,
            deleted=deleted,
        )

    def exists(self, now: float) -> bool:
        return self.created <= now and (self.deleted is None or self.deleted > now)

    def live_until(self) -> float:
        """When it stopped counting as a replica: its delete started (or it went)."""
        ends = [t for t in (self.deleting, self.deleted) if t is not None]
        return min(ends) if ends else INF

    def serving_interval(self) -> tuple[float, float] | None:
        if self.ready is None:
            return None
        end = self.live_until()
        return (self.ready, end) if end > self.ready else None


@dataclass(frozen=True)
class WorkloadLife:
    """One Workload (by uid) as a watch saw it, with the uids of the Pods that own it."""

    name: str
    owner_uids: frozenset[str]
    created: float
    deleted: float | None = None

    @classmethod
    def of(
        cls, obj: Mapping[str, Any], *, created: float, deleted: float | None = None
    ) -> WorkloadLife:
        meta = obj.get("metadata") or {}
        owners = frozenset(
            str(ref.get("uid"))
            for ref in meta.get("ownerReferences") or ()
            if ref.get("kind") == "Pod" and ref.get("uid")
        )
        return cls(str(meta.get("name") or ""), owners, created, deleted)

    def exists(self, now: float) -> bool:
        return self.created <= now and (self.deleted is None or self.deleted > now)


@dataclass(frozen=True)
class DeploymentState:
    """One ModelDeployment as stored at the check (``stored``: the object, with its status)."""

    name: str
    stored: Mapping[str, Any]
    #: When the rollout being checked started, for a deployment that was serving then.
    rollout_since: float | None = None

    @property
    def generation(self) -> int:
        return int((self.stored.get("metadata") or {}).get("generation") or 0)

    def desired(self) -> dict[str, int]:
        roles = (self.stored.get("spec") or {}).get("roles") or ()
        return {str(r.get("name")): int(r.get("replicas") or 0) for r in roles}


@dataclass(frozen=True)
class Write:
    """One write the controller made (from its API server's audit log)."""

    at: float
    verb: str
    resource: str
    namespace: str
    name: str
    subresource: str = ""

    @property
    def target(self) -> str:
        sub = f"/{self.subresource}" if self.subresource else ""
        return f"{self.resource}{sub} {self.namespace}/{self.name}"


@dataclass(frozen=True)
class Violation:
    rule: str
    subject: str
    detail: str

    def __str__(self) -> str:
        return f"{self.rule}: {self.subject}: {self.detail}"


@dataclass
class Observed:
    """Everything one check reads."""

    pods: Sequence[PodLife]
    workloads: Sequence[WorkloadLife]
    deployments: Sequence[DeploymentState]
    writes: Sequence[Write] = ()
    #: When the rollout ended (the run converged) and when the check runs.
    converged: float = 0.0
    now: float = 0.0
    #: The rest window: the writes in it are repeats at rest (``None``: no window checked).
    rest: tuple[float, float] | None = None
    grace: float = 30.0
    loop_window: float = 10.0
    #: A two-replica deployment rolled under a fault had its status written 10 times in 4 s,
    #: each a transition of one of its replicas (created, quota, admitted, Ready ...) and each
    #: answered 200: a burst that size is status tracking, not a loop. A loop shows as writes
    #: at rest (``rest``) or as more writes than a deployment has transitions.
    loop_limit: int = 20


# ---- the rules -------------------------------------------------------------------------------


def doubled_ordinals(pods: Iterable[PodLife]) -> list[Violation]:
    """Two Pod groups of one (deployment, role, ordinal) live at the same moment."""
    groups: dict[tuple[str, str, str], dict[str, tuple[float, float]]] = defaultdict(dict)
    for pod in pods:
        if not pod.group:
            continue
        slot = groups[(pod.deployment, pod.role, pod.ordinal)]
        start, end = slot.get(pod.group, (INF, -INF))
        slot[pod.group] = (min(start, pod.created), max(end, pod.live_until()))
    found = []
    for (deployment, role, ordinal), lives in sorted(groups.items()):
        ordered = sorted(lives.items(), key=lambda kv: kv[1])
        for (a, (_, a_end)), (b, (b_start, _)) in itertools.pairwise(ordered):
            if b_start < a_end:
                found.append(
                    Violation(
                        "doubled-ordinal",
                        f"{deployment} role {role} ordinal {ordinal}",
                        f"groups {a} and {b} live at once",
                    )
                )
    return found


def orphans(
    pods: Iterable[PodLife], workloads: Iterable[WorkloadLife], *, now: float, grace: float
) -> list[Violation]:
    """A Pod of a group with no Workload owning it, or a Workload none of whose owner Pods
    exists, for longer than ``grace`` seconds at ``now``."""
    pods = list(pods)
    workloads = list(workloads)
    by_uid = {p.uid: p for p in pods}
    owned: dict[str, list[WorkloadLife]] = defaultdict(list)
    for w in workloads:
        for uid in w.owner_uids:
            owned[uid].append(w)
    found = []
    for pod in pods:
        if not pod.group or not pod.exists(now):
            continue
        held = [w for w in owned.get(pod.uid, ()) if w.exists(now)]
        if held:
            continue
        since = max([pod.created, *(w.deleted for w in owned.get(pod.uid, ()) if w.deleted)])
        if now - since > grace:
            found.append(
                Violation(
                    "pod-without-workload",
                    pod.name,
                    f"group {pod.group}: no Workload for {now - since:.0f} s",
                )
            )
    for w in workloads:
        if not w.exists(now):
            continue
        owners = [by_uid.get(uid) for uid in w.owner_uids]
        if any(p is not None and p.exists(now) for p in owners):
            continue
        since = max([w.created, *(p.deleted for p in owners if p is not None and p.deleted)])
        if now - since > grace:
            found.append(
                Violation(
                    "workload-without-pod",
                    w.name,
                    f"no owner Pod for {now - since:.0f} s",
                )
            )
    return found


def unserved(
    pods: Iterable[PodLife], deployments: Iterable[DeploymentState], *, until: float
) -> list[Violation]:
    """A role of two replicas or more of a deployment whose rollout started at
    ``rollout_since`` with no serving replica at some moment before ``until``."""
    serving: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    for pod in pods:
        interval = pod.serving_interval()
        if interval is not None:
            serving[(pod.deployment, pod.role)].append(interval)
    found = []
    for d in deployments:
        if d.rollout_since is None:
            continue
        for role, replicas in sorted(d.desired().items()):
            if replicas < 2:
                continue  # one replica cannot be replaced without a gap
            gap = _first_gap(serving.get((d.name, role), []), d.rollout_since, until)
            if gap is not None:
                found.append(
                    Violation(
                        "role-unserved",
                        f"{d.name} role {role}",
                        f"no serving replica for {gap[1] - gap[0]:.1f} s, "
                        f"{gap[0] - d.rollout_since:.1f} s into the rollout",
                    )
                )
    return found


def _first_gap(
    intervals: list[tuple[float, float]], start: float, end: float
) -> tuple[float, float] | None:
    covered = start
    for a, b in sorted(intervals):
        if a > covered:
            return (covered, min(a, end))
        covered = max(covered, b)
        if covered >= end:
            return None
    return None if covered >= end else (covered, end)


def write_loops(
    writes: Iterable[Write],
    *,
    window: float,
    limit: int,
    rest: tuple[float, float] | None = None,
) -> list[Violation]:
    """One object written more than ``limit`` times within ``window`` seconds, or twice or more
    within ``rest`` (a single late write at rest is not a loop; a repeated one is)."""
    by_target: dict[str, list[float]] = defaultdict(list)
    for w in writes:
        if w.name:  # a create by generateName names no object: each is a new one
            by_target[w.target].append(w.at)
    found = []
    for target, times in sorted(by_target.items()):
        times.sort()
        left = 0
        for right, t in enumerate(times):
            while t - times[left] > window:
                left += 1
            if right - left + 1 > limit:
                found.append(
                    Violation(
                        "write-loop",
                        target,
                        f"{right - left + 1} writes within {window:.0f} s",
                    )
                )
                break
        if rest is not None:
            at_rest = [t for t in times if rest[0] <= t <= rest[1]]
            if len(at_rest) >= 2:
                found.append(
                    Violation("write-at-rest", target, f"written {len(at_rest)} times at rest")
                )
    return found


def lost_statuses(
    pods: Iterable[PodLife], deployments: Iterable[DeploymentState], *, now: float
) -> list[Violation]:
    """A deployment whose status is missing, names an older generation, or counts a role's
    Ready replicas otherwise than its Pods (a replica serves when all its existing Pods are
    Ready and none is being deleted)."""
    replicas: dict[tuple[str, str], dict[str, bool]] = defaultdict(dict)
    for pod in pods:
        if not pod.group or not pod.exists(now):
            continue
        serving = pod.ready is not None and pod.ready <= now and pod.live_until() > now
        key = (pod.deployment, pod.role)
        replicas[key][pod.group] = replicas[key].get(pod.group, True) and serving
    found = []
    for d in deployments:
        status = d.stored.get("status")
        if not isinstance(status, Mapping) or not status:
            found.append(Violation("lost-status", d.name, "no status"))
            continue
        observed = int(status.get("observedGeneration") or 0)
        if observed != d.generation:
            found.append(
                Violation(
                    "lost-status",
                    d.name,
                    f"observedGeneration {observed}, generation {d.generation}",
                )
            )
        stated = {str(r.get("name")): int(r.get("ready") or 0) for r in status.get("roles") or ()}
        for role in sorted(d.desired()):
            actual = sum(1 for ok in replicas.get((d.name, role), {}).values() if ok)
            if stated.get(role, 0) != actual:
                found.append(
                    Violation(
                        "lost-status",
                        f"{d.name} role {role}",
                        f"status says {stated.get(role, 0)} ready, the Pods {actual}",
                    )
                )
    return found


def audit_writes(lines: Iterable[str], *, offset: float = 0.0) -> list[Write]:
    """The writes of an API server's audit log (JSON lines, one event per request at its
    ``ResponseComplete`` stage), timed on the observer's clock: ``offset`` is added to each
    event's Unix time (``time.perf_counter() - time.time()`` taken by the observer)."""
    found = []
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if not isinstance(event, dict) or event.get("stage") != "ResponseComplete":
            continue
        verb = str(event.get("verb") or "")
        if verb not in AUDIT_WRITE_VERBS:
            continue
        ref = event.get("objectRef") or {}
        try:
            at = datetime.fromisoformat(str(event.get("stageTimestamp"))).timestamp()
        except ValueError:
            continue
        group = ref.get("apiGroup")
        resource = f"{ref.get('resource', '')}.{group}" if group else str(ref.get("resource", ""))
        found.append(
            Write(
                at + offset,
                verb,
                resource,
                str(ref.get("namespace") or ""),
                str(ref.get("name") or ""),
                str(ref.get("subresource") or ""),
            )
        )
    return found


def check(observed: Observed) -> list[Violation]:
    """Every rule over one observation."""
    o = observed
    return [
        *doubled_ordinals(o.pods),
        *orphans(o.pods, o.workloads, now=o.now, grace=o.grace),
        *unserved(o.pods, o.deployments, until=o.converged),
        *write_loops(o.writes, window=o.loop_window, limit=o.loop_limit, rest=o.rest),
        *lost_statuses(o.pods, o.deployments, now=o.now),
    ]
