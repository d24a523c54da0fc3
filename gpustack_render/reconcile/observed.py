"""What the controller observed, read into small typed values the planner and status rules use.

The controller lists Pods and Kueue Workloads as plain JSON objects; :func:`observe_pod` and
:func:`observe_workload` turn each into an immutable summary holding only the facts the rules
read (docs/contract/controller.md §5, §6, §8, §13). Reading is lenient: a missing or malformed field
reads as its neutral value, never as an error, because an object someone else wrote must not stop a
pass.

Identity comes from labels and owner references, never from names (conventions.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import dataclass, field
from typing import Any

from gpustack_render.core import jsonview, labels, ownerrefs
from gpustack_render.core.vocabulary import ConditionStatus
from gpustack_render.rendering.hashing import pod_render_version
from gpustack_render.rendering.pods import MAIN_CONTAINER

#: Scheduling gate Kueue's Pod webhook adds to every member of a group and removes on admission
#: (docs/contract/kubernetes-notes.md §4). A Pod still carrying it has never run.
KUEUE_ADMISSION_GATE = "kueue.x-k8s.io/admission"
#: Workload condition types the rules read (docs/contract/controller.md §8).
QUOTA_RESERVED = "QuotaReserved"
ADMITTED = "Admitted"
EVICTED = "Evicted"
PREEMPTED = "Preempted"
FINISHED = "Finished"
#: The Pod condition the scheduler writes (``False``, reason ``Unschedulable``, when no node fits).
POD_SCHEDULED = "PodScheduled"
#: The kubelet's condition once a Pod's sandbox and volumes are ready.
POD_READY_TO_START_CONTAINERS = "PodReadyToStartContainers"
#: The reason of an ``Evicted`` condition written by a preemption.
PREEMPTED_REASON = "Preempted"
#: ``status.reason`` a kubelet writes on a Pod it evicted.
POD_EVICTED_REASON = "Evicted"


def _non_negative_int(text: str | None) -> int | None:
    if text is None:
        return None
    text = text.strip()
    if not text or not text.isascii() or not text.isdigit():
        return None
    return int(text)


@dataclass(frozen=True, slots=True)
class ObservedPod:
    """One Pod as the rules see it.

    ``ordinal`` is ``None`` when the ordinal label is missing or not a number (an *orphan*);
    a missing member label reads 0 (docs/contract/controller.md §6). ``render_version`` is 0 when
    absent. ``owned`` is the ownership test against the deployment being reconciled.
    """

    name: str
    uid: str = ""
    role: str | None = None
    ordinal: int | None = None
    member: int = 0
    group: str | None = None
    pod_spec_hash: str | None = None
    render_version: int = 0
    #: ``kueue.x-k8s.io/pod-group-total-count``: the size the replica was created with.
    group_total: int | None = None
    phase: str = "Pending"
    reason: str = ""
    terminating: bool = False
    ready: bool = False
    gated: bool = False
    restarts: int = 0
    owned: bool = True
    #: The Pod runs a take-over command (its ``main`` container was not built by the operator).
    takeover: bool = False
    node_name: str = ""
    #: Every ``spec.schedulingGates[].name``, in order (Kueue's admission gate among them).
    scheduling_gates: tuple[str, ...] = ()
    #: ``PodScheduled=False``: its reason (``Unschedulable``) and message, else empty.
    unscheduled_reason: str = ""
    unscheduled_message: str = ""
    #: ``state.waiting.reason`` of each container still waiting (``CrashLoopBackOff``, …).
    waiting_reasons: tuple[str, ...] = ()
    #: ``PodReadyToStartContainers=True``: its volumes are mounted (weights delivered by a
    #: mount have arrived).
    volumes_ready: bool = False
    #: The ``main`` container reports ready (Engine delivery: its download is done).
    main_ready: bool = False

    @property
    def failed(self) -> bool:
        """Phase ``Failed`` (a kubelet eviction, a crashed Pod that will not restart)."""
        return self.phase == "Failed"

    @property
    def evicted(self) -> bool:
        """The kubelet evicted the Pod (``status.reason: Evicted``)."""
        return self.reason == POD_EVICTED_REASON


#: Annotation keys a managed (operator-built) engine Pod always carries and a take-over Pod
#: never does: the Prometheus scrape annotations (docs/contract/render.md §5, "managed roles only").
_MANAGED_MARKER = labels.PROMETHEUS_SCRAPE


def observe_pod(obj: Mapping[str, Any], *, owner_uid: str = "") -> ObservedPod:
    """Summarize a Pod object (plain JSON) for the planner and the status rules."""
    meta = jsonview.view(obj.get("metadata"))
    spec = jsonview.view(obj.get("spec"))
    status = jsonview.view(obj.get("status"))
    pod_labels = jsonview.strings(meta.get("labels"))
    annotations = jsonview.strings(meta.get("annotations"))
    ready = volumes_ready = main_ready = False
    unscheduled: Mapping[str, Any] = {}
    for c in jsonview.items(status.get("conditions")):
        c = jsonview.view(c)
        if c.get("type") == "Ready" and c.get("status") == ConditionStatus.TRUE:
            ready = True
        elif (
            c.get("type") == POD_READY_TO_START_CONTAINERS
            and c.get("status") == ConditionStatus.TRUE
        ):
            volumes_ready = True
        elif c.get("type") == POD_SCHEDULED and c.get("status") == ConditionStatus.FALSE:
            unscheduled = c
    gates = tuple(
        str(name)
        for name in (
            jsonview.view(g).get("name") for g in jsonview.items(spec.get("schedulingGates"))
        )
        if name is not None
    )
    restarts = 0
    waiting: list[str] = []
    for cs in jsonview.items(status.get("containerStatuses")):
        cs = jsonview.view(cs)
        count = cs.get("restartCount")
        if isinstance(count, int) and count > 0:
            restarts += count
        if cs.get("name") == MAIN_CONTAINER and cs.get("ready") is True:
            main_ready = True
        reason = jsonview.view(jsonview.view(cs.get("state")).get("waiting")).get("reason")
        if isinstance(reason, str) and reason:
            waiting.append(reason)
    member = _non_negative_int(pod_labels.get(labels.MEMBER_INDEX))
    total = _non_negative_int(annotations.get(labels.POD_GROUP_TOTAL_COUNT))
    return ObservedPod(
        name=str(meta.get("name") or ""),
        uid=str(meta.get("uid") or ""),
        role=pod_labels.get(labels.COMPONENT),
        ordinal=_non_negative_int(pod_labels.get(labels.POD_ORDINAL)),
        member=member if member is not None else 0,
        group=pod_labels.get(labels.POD_GROUP_NAME),
        pod_spec_hash=annotations.get(labels.POD_SPEC_HASH),
        render_version=pod_render_version(annotations),
        group_total=total if total else None,
        phase=str(status.get("phase") or "Pending"),
        reason=str(status.get("reason") or ""),
        terminating=meta.get("deletionTimestamp") is not None,
        ready=ready,
        gated=KUEUE_ADMISSION_GATE in gates,
        restarts=restarts,
        owned=ownerrefs.controlled_by(obj, owner_uid) if owner_uid else True,
        takeover=_MANAGED_MARKER not in annotations,
        node_name=str(spec.get("nodeName") or ""),
        scheduling_gates=gates,
        unscheduled_reason=str(unscheduled.get("reason") or ""),
        unscheduled_message=str(unscheduled.get("message") or ""),
        waiting_reasons=tuple(waiting),
        volumes_ready=volumes_ready,
        main_ready=main_ready,
    )


@dataclass(frozen=True, slots=True)
class CheckState:
    """One entry of a Workload's ``status.admissionChecks[]``."""

    state: str
    message: str = ""
    last_transition_time: str | None = None


@dataclass(frozen=True, slots=True)
class ObservedWorkload:
    """One Kueue Workload as the rules see it (docs/contract/controller.md §8)."""

    name: str
    #: uids of the Pods named by ``apiVersion: v1, kind: Pod`` owner references.
    owner_pods: frozenset[str] = frozenset()
    quota_reserved: bool = False
    #: ``lastTransitionTime`` of ``QuotaReserved=True`` (``None`` when quota is not reserved).
    quota_reserved_since: str | None = None
    #: Admitted now: ``Admitted=True``, no ``Evicted=True`` and no ``deletionTimestamp``
    #: (Kueue keeps ``Admitted=True`` on an evicted Workload until its Pods stopped, and keeps
    #: a deleted one until its group is stopped). The cadence gate, the resolution of a
    #: remembered replacement and status all read this one fact.
    admitted: bool = False
    #: Admitted now or before: an ``Admitted`` condition that was ever True, an eviction, a
    #: preemption or a requeue record all disqualify a "never admitted" (queued) group.
    ever_admitted: bool = False
    preempted: bool = False
    evicted: bool = False
    finished: bool = False
    active: bool = True
    checks: Mapping[str, CheckState] = field(default_factory=dict)
    #: PodSet name → flavors assigned to it (``status.admission.podSetAssignments[].flavors``).
    flavors: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    queue: str = ""
    uid: str = ""
    #: The Workload carries a ``deletionTimestamp`` (Kueue's finalizer holds it).
    deleting: bool = False
    #: Why Kueue has not reserved quota or admitted it: the reason and message of a
    #: ``QuotaReserved`` condition that is not ``True`` (``Pending``: "couldn't assign flavors…"),
    #: and of an ``Admitted`` condition that is not ``True``; empty when absent.
    quota_reason: str = ""
    quota_message: str = ""
    admitted_reason: str = ""
    admitted_message: str = ""
    #: The reason and message of an ``Evicted=True`` condition.
    evicted_reason: str = ""
    evicted_message: str = ""
    #: ``spec.podSets[]`` as (name, count), in order (a count that is not an integer reads -1).
    #: The Elastic EP admitted layer reads these three (docs/contract/elastic-ep.md §4.2).
    pod_sets: tuple[tuple[str, int], ...] = ()
    #: ``status.admission.podSetAssignments[]`` as (name, count), in order (an absent or
    #: malformed count reads -1).
    assignments: tuple[tuple[str, int], ...] = ()
    #: ``status.admission.clusterQueue``: the ClusterQueue that admitted it (empty before).
    cluster_queue: str = ""

    def owns_any(self, uids: Set[str]) -> bool:
        """True when one of ``uids`` is among this Workload's owner Pods."""
        return not self.owner_pods.isdisjoint(uids)

    def of_deployment(self, *, pod_uids: Set[str], groups: Set[str]) -> bool:
        """Whether this Workload, one of the namespace's, is the deployment's: it owns one of
        the deployment's Pods (``pod_uids``) or is named after one of its Kueue ``groups`` (a
        group's Workload outlives its Pods). The controller's pass, ``explain`` and its live
        reader all pick the Workloads they read by this rule."""
        return self.owns_any(pod_uids) or self.name in groups


def _transition(condition: Mapping[str, Any] | None) -> str | None:
    when = (condition or {}).get("lastTransitionTime")
    return str(when) if when else None


def _unmet(condition: Mapping[str, Any] | None) -> tuple[str, str]:
    """(reason, message) of a condition that is present and not ``True``."""
    if condition is None or condition.get("status") == ConditionStatus.TRUE:
        return "", ""
    return str(condition.get("reason") or ""), str(condition.get("message") or "")


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else -1


def _name_counts(entries: object) -> tuple[tuple[str, int], ...]:
    out = []
    for entry in jsonview.items(entries):
        entry = jsonview.view(entry)
        name = entry.get("name")
        if isinstance(name, str):
            out.append((name, _count(entry.get("count"))))
    return tuple(out)


def observe_workload(obj: Mapping[str, Any]) -> ObservedWorkload:
    """Summarize a Kueue Workload object (``v1beta2``, plain JSON)."""
    meta = jsonview.view(obj.get("metadata"))
    spec = jsonview.view(obj.get("spec"))
    status = jsonview.view(obj.get("status"))
    owners = frozenset(
        str(ref.get("uid"))
        for ref in ownerrefs.owners_of_kind(obj, kind="Pod", api_version="v1")
        if ref.get("uid")
    )
    conditions = {
        str(jsonview.view(c).get("type")): jsonview.view(c)
        for c in jsonview.items(status.get("conditions"))
    }

    def true(type_: str) -> bool:
        return conditions.get(type_, {}).get("status") == ConditionStatus.TRUE

    evicted = true(EVICTED)
    deleting = meta.get("deletionTimestamp") is not None
    preempted = true(PREEMPTED) or (
        evicted and conditions.get(EVICTED, {}).get("reason") == PREEMPTED_REASON
    )
    admitted_cond = conditions.get(ADMITTED)
    ever_admitted = (
        true(ADMITTED)
        # An Admitted=False condition with a transition time was True once (Kueue writes the
        # condition only on admission and flips it on eviction).
        or (admitted_cond is not None and admitted_cond.get("status") == ConditionStatus.FALSE)
        or EVICTED in conditions
        or PREEMPTED in conditions
        # Not PodsReady: Kueue's waitForPodsReady writes PodsReady=False (WaitForStart) on a
        # Workload it has never admitted.
        or bool(jsonview.view(status.get("requeueState")))
    )
    checks: dict[str, CheckState] = {}
    for entry in jsonview.items(status.get("admissionChecks")):
        entry = jsonview.view(entry)
        name = entry.get("name")
        if isinstance(name, str):
            checks[name] = CheckState(
                state=str(entry.get("state") or ""),
                message=str(entry.get("message") or ""),
                last_transition_time=_transition(entry),
            )
    flavors: dict[str, tuple[str, ...]] = {}
    admission = jsonview.view(status.get("admission"))
    for assignment in jsonview.items(admission.get("podSetAssignments")):
        assignment = jsonview.view(assignment)
        name = assignment.get("name")
        if isinstance(name, str):
            values = jsonview.view(assignment.get("flavors")).values()
            flavors[name] = tuple(sorted({str(v) for v in values if isinstance(v, str)}))
    active = spec.get("active")
    quota_reason, quota_message = _unmet(conditions.get(QUOTA_RESERVED))
    admitted_reason, admitted_message = _unmet(admitted_cond)
    evicted_cond = conditions.get(EVICTED, {}) if evicted else {}
    return ObservedWorkload(
        name=str(meta.get("name") or ""),
        owner_pods=owners,
        quota_reserved=true(QUOTA_RESERVED),
        quota_reserved_since=_transition(conditions.get(QUOTA_RESERVED))
        if true(QUOTA_RESERVED)
        else None,
        admitted=true(ADMITTED) and not evicted and not deleting,
        ever_admitted=ever_admitted,
        preempted=preempted,
        evicted=evicted,
        finished=true(FINISHED),
        active=active is not False,
        checks=checks,
        flavors=flavors,
        queue=str(spec.get("queueName") or ""),
        uid=str(meta.get("uid") or ""),
        deleting=deleting,
        quota_reason=quota_reason,
        quota_message=quota_message,
        admitted_reason=admitted_reason,
        admitted_message=admitted_message,
        evicted_reason=str(evicted_cond.get("reason") or ""),
        evicted_message=str(evicted_cond.get("message") or ""),
        pod_sets=_name_counts(spec.get("podSets")),
        assignments=_name_counts(admission.get("podSetAssignments")),
        cluster_queue=str(admission.get("clusterQueue") or ""),
    )
