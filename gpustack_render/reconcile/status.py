"""``ModelDeployment.status``: rebuilt every pass from what was observed
(docs/contract/controller.md §13–§15).

:func:`deployment_status` computes the whole status of a converging deployment: per-role counts,
the seven conditions and the three summary conditions computed from them (``Ready``,
``Reconciling``, ``Stalled``: :func:`readiness`), with ``lastTransitionTime`` carried over while a
condition's ``status`` is unchanged, and ``observedGeneration``; ``phase``/``phaseMessage``,
``roleSummary``, ``roleReadiness``, ``endpoint``, ``kvCache`` and ``router``.
:func:`deleting_status` is the teardown status. Neither reads a clock: the caller passes ``now``
(RFC 3339), which only ever lands in a ``lastTransitionTime``.

The only state carried across passes is the previous ``ReplicasUpToDate`` reason and
``roles[].replacing`` (D6); everything else is recomputed. Terminating Pods are not counted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from gpustack_render.api.common import Condition
from gpustack_render.api.modeldeployment import (
    DomainStatus,
    KVCacheStatus,
    ModelDeployment,
    ModelDeploymentStatus,
    ParallelDegrees,
    ParallelSource,
    RoleParallelism,
    RoleStatus,
    RouterKVEvents,
    RouterRoleStatus,
    RouterStatus,
)
from gpustack_render.core import labels
from gpustack_render.core.vocabulary import ConditionStatus, Engine, RoleKind
from gpustack_render.engines.flags import engine_of
from gpustack_render.engines.owned import KV_EVENTS_PORT, KV_REPLAY_PORT, LLM_D_ROUTER
from gpustack_render.engines.parallelism import Parallelism, flag_table
from gpustack_render.engines.transfer import KV_EVENTS_TOPIC
from gpustack_render.reconcile.jointcheck import CHECK_NAME as JOINT_CHECK
from gpustack_render.reconcile.observed import ObservedPod, ObservedWorkload
from gpustack_render.reconcile.replicas import ReplicaIndex
from gpustack_render.reconcile.rollout import (
    Desired,
    DesiredRole,
    Plan,
    expected_size,
    is_complete,
    is_pod_outdated,
    is_serving,
)
from gpustack_render.rendering.renderer import Rendering, RoleRendering
from gpustack_render.rendering.roleplan import (
    BINDING_DELETING,
    BINDING_NOT_FOUND,
    REGISTERED,
    CacheResolution,
)

# --- condition types and reasons (docs/contract/controller.md §14) --------------------------------

DOMAIN_REGISTERED: Final = "DomainRegistered"
QUOTA_RESERVED: Final = "QuotaReserved"
REPLICAS_UP_TO_DATE: Final = "ReplicasUpToDate"
ROLE_KINDS_READY: Final = "RoleKindsReady"
CACHE_ATTACHED: Final = "CacheAttached"
KV_EVENTS_PUBLISHING: Final = "KVEventsPublishing"
ROUTER_READY: Final = "RouterReady"
#: Condition order in ``status.conditions``.
CONDITION_TYPES: Final = (
    DOMAIN_REGISTERED,
    QUOTA_RESERVED,
    REPLICAS_UP_TO_DATE,
    ROLE_KINDS_READY,
    CACHE_ATTACHED,
    KV_EVENTS_PUBLISHING,
    ROUTER_READY,
)

#: The summary conditions tools read (kstatus: ``Ready`` normal-true, ``Reconciling`` and
#: ``Stalled`` abnormal-true), computed from the seven above (docs/decisions.md, "Readiness for
#: tools"). Exactly one of the three is ``True``.
READY: Final = "Ready"
RECONCILING: Final = "Reconciling"
STALLED: Final = "Stalled"
SUMMARY_CONDITION_TYPES: Final = (READY, RECONCILING, STALLED)
#: Every condition, in ``status.conditions`` order: the summary first, then the seven.
ALL_CONDITION_TYPES: Final = (*SUMMARY_CONDITION_TYPES, *CONDITION_TYPES)

NOT_APPLICABLE: Final = "NotApplicable"
ROLLOUT_IN_PROGRESS: Final = "RolloutInProgress"
#: ``Ready=False``/``Reconciling=True`` when every condition holds but not every replica is ready.
REPLICAS_NOT_READY: Final = "ReplicasNotReady"
#: The summary conditions' reason while the deployment is being deleted.
DELETING: Final = "Deleting"

#: The longest condition message (and ``phaseMessage``) written: Kubernetes' bound on a
#: condition's message, which Kueue applies to its own. A message naming every waiting
#: replica's downstream check grows with the replica count; unbounded, the status of a large
#: deployment would outgrow what the API server stores and no status would be written at all.
MAX_MESSAGE_CHARS: Final = 32768
_TRUNCATED: Final = " ..."

PHASE_STARTING: Final = "Starting"
PHASE_READY: Final = "Ready"
PHASE_DEGRADED: Final = "Degraded"
PHASE_DELETING: Final = "Deleting"

#: roleSummary letters per effective kind, in the order they are written (D24).
_SUMMARY_LETTERS: Final = (("Server", "S"), ("Prefill", "P"), ("Decode", "D"), ("Encode", "E"))


@dataclass(frozen=True, slots=True)
class ConditionVerdict:
    """One condition's ``status``/``reason``/``message`` before times are attached."""

    status: ConditionStatus
    reason: str
    message: str = ""


# --- desired state from a rendering ------------------------------------------------------------


def desired_from_rendering(rendering: Rendering) -> Desired:
    """The planner's view of a rendering: per role the seats' hashes and group names."""
    return Desired(
        roles=tuple(
            DesiredRole(
                name=role.name,
                replicas=role.replicas,
                size=role.size,
                hashes=role.hashes(),
                groups=tuple(role.groups()),
            )
            for role in rendering.roles
        ),
        floor=rendering.floor,
        render_version=rendering.render_version,
    )


def cache_hold(md: ModelDeployment, cache: CacheResolution | None) -> bool:
    """Outdated roles delete nothing while a deployment that resolved a cache connection before
    (``status.kvCache`` set) resolves none this pass (docs/contract/controller.md §6 step 3)."""
    if md.spec.kv_cache is None or md.status is None or md.status.kv_cache is None:
        return False
    return cache is None or cache.connection is None


# --- per-replica readings ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _ReplicaReading:
    role: str
    ordinal: int
    pods: tuple[ObservedPod, ...]
    workloads: tuple[ObservedWorkload, ...]
    size: int

    @property
    def expected(self) -> int:
        return expected_size(self.pods, self.size)

    @property
    def complete(self) -> bool:
        return is_complete(self.pods, self.size)

    @property
    def ready(self) -> bool:
        return is_serving(self.pods, self.size)

    @property
    def quota_reserved(self) -> bool:
        return any(w.quota_reserved for w in self.workloads)

    @property
    def admitted(self) -> bool:
        return any(w.admitted for w in self.workloads)


class _View:
    """Observed Pods and Workloads of one deployment, read per role for the status rules."""

    def __init__(self, desired: Desired, index: ReplicaIndex) -> None:
        self.owned = list(index.owned)
        self.live = list(index.live)
        self.terminating = list(index.terminating)
        self.workloads = index.owned_workloads()
        self.replicas: dict[str, list[_ReplicaReading]] = {}
        for role in desired.roles:
            out = []
            for ordinal in range(role.replicas):
                live = index.live_at(role.name, ordinal)
                if not live:
                    continue
                members = tuple(sorted(live, key=lambda p: (p.member, p.name)))
                workloads = tuple(index.workloads_of(members))
                out.append(_ReplicaReading(role.name, ordinal, members, workloads, role.size))
            self.replicas[role.name] = out

    def all_replicas(self) -> list[_ReplicaReading]:
        return [r for rs in self.replicas.values() for r in rs]


# --- conditions ------------------------------------------------------------------------------


def domain_registered(md: ModelDeployment, cache: CacheResolution | None) -> ConditionVerdict:
    """``DomainRegistered`` from the Binding's registration (docs/contract/controller.md §4 step
    1, §14)."""
    if md.spec.kv_cache is None or cache is None:
        return ConditionVerdict(
            ConditionStatus.TRUE, NOT_APPLICABLE, "the deployment names no KV cache pool"
        )
    ns = md.metadata.namespace
    name = cache.binding_name
    if cache.registration == REGISTERED:
        return ConditionVerdict(
            ConditionStatus.TRUE, REGISTERED, f"KVCachePoolBinding {ns}/{name} is Ready"
        )
    if cache.registration == BINDING_NOT_FOUND:
        return ConditionVerdict(
            ConditionStatus.FALSE,
            BINDING_NOT_FOUND,
            f"KVCachePoolBinding {ns}/{name} does not exist; an administrator creates it to "
            "grant this namespace access to a pool",
        )
    if cache.registration == BINDING_DELETING:
        return ConditionVerdict(
            ConditionStatus.FALSE,
            BINDING_DELETING,
            f"KVCachePoolBinding {ns}/{name} is being deleted",
        )
    binding = cache.binding
    phase = binding.status.phase if binding is not None else None
    extra = (binding.status.model_extra or {}) if binding is not None else {}
    phase_message = str(extra.get("phaseMessage") or "")
    said = f"its phase is {phase}" if phase else "no phase is observed yet"
    granted = ""
    if phase == "Ready":
        granted = " but QuotaGranted is not True"
    tail = f": {phase_message}" if phase_message else ""
    return ConditionVerdict(
        ConditionStatus.FALSE,
        cache.registration,
        f"KVCachePoolBinding {ns}/{name} is not ready: {said}{granted}{tail}",
    )


def _queue_of(rendering: Rendering, role: str) -> str:
    r = rendering.role(role)
    return r.queue if r is not None else ""


def quota_reserved(  # noqa: C901 (the QuotaReserved table, first matching row wins, read top to bottom)
    md: ModelDeployment,
    rendering: Rendering,
    view: _View,
    *,
    system_namespace: str,
    queue_conflicts: Sequence[str] = (),
) -> ConditionVerdict:
    """``QuotaReserved``: the first matching row of docs/contract/controller.md §14."""
    if queue_conflicts:
        return ConditionVerdict(
            ConditionStatus.FALSE, "LocalQueueConflict", "; ".join(queue_conflicts)
        )
    replicas = view.all_replicas()
    declared = sum(r.replicas for r in rendering.roles)
    preempted = [w for w in view.workloads if w.preempted]
    admitted = [r for r in replicas if r.admitted]
    note = ""
    if preempted:
        names = ", ".join(sorted(w.name for w in preempted))
        note = f"; Kueue preempted {len(preempted)} replica(s) (Workload {names})"
    parked = [
        w
        for w in view.workloads
        if not w.active
        and w.checks.get(JOINT_CHECK) is not None
        and w.checks[JOINT_CHECK].state == "Pending"
    ]
    if parked:
        # Every deactivated Workload of the set: parking deactivates them all at once.
        names = ", ".join(sorted(w.name for w in view.workloads if not w.active))
        return ConditionVerdict(
            ConditionStatus.FALSE,
            "Parked",
            f"the deployment is parked: its Workloads ({names}) were deactivated after waiting "
            "for the joint admission check, and no longer ask for quota; free the capacity and "
            "reactivate them, or delete and recreate the deployment" + note,
        )
    if preempted and admitted:
        return ConditionVerdict(
            ConditionStatus.FALSE,
            "PreemptedInPart",
            f"{len(admitted)} of {declared} replicas are admitted while Kueue preempted "
            f"{len(preempted)}{note}",
        )
    if not view.owned:
        return ConditionVerdict(
            ConditionStatus.UNKNOWN, "NoReplicas", "no replica Pod exists yet" + note
        )
    if not view.live:
        return ConditionVerdict(
            ConditionStatus.UNKNOWN,
            "AllReplicasTerminating",
            f"all {len(view.terminating)} replica Pods are terminating" + note,
        )
    for replica in replicas:
        if len(replica.pods) < replica.expected:
            queue = _queue_of(rendering, replica.role)
            return ConditionVerdict(
                ConditionStatus.FALSE,
                "PodGroupIncomplete",
                f"role {replica.role} replica {replica.ordinal} has {len(replica.pods)} of "
                f"{replica.expected} Pods; Kueue waits for the whole group in queue {queue}" + note,
            )
    if (md.metadata.namespace or "") == system_namespace:
        return ConditionVerdict(
            ConditionStatus.FALSE,
            "NoQueueInReservedNamespace",
            f"namespace {system_namespace} is the controller's own: no LocalQueue is created "
            "there, so Kueue admits nothing; deploy into another namespace" + note,
        )
    without = [r for r in replicas if not r.workloads]
    if without:
        first = without[0]
        return ConditionVerdict(
            ConditionStatus.UNKNOWN,
            "AdmissionInFlight",
            f"{len(without)} replica(s) have no Workload yet (role {first.role} replica "
            f"{first.ordinal}); Kueue composes one per complete group" + note,
        )
    reserved = [r for r in replicas if r.quota_reserved]
    if len(reserved) == declared:
        queue = ""
        if len(rendering.roles) == 1:
            queue = f" in queue {rendering.roles[0].queue}"
        return ConditionVerdict(
            ConditionStatus.TRUE,
            "Reserved",
            f"{declared} of {declared} replicas reserved quota{queue}" + note,
        )
    waiting_roles = sorted(
        {r.role for r in replicas if not r.quota_reserved}
        | {
            role.name
            for role in rendering.roles
            if len(view.replicas.get(role.name, ())) < role.replicas
        }
    )
    if len(rendering.roles) == 1:
        where = f"in queue {rendering.roles[0].queue}"
    else:
        where = "roles " + ", ".join(waiting_roles)
    downstream = []
    for replica in replicas:
        for wl in replica.workloads:
            for name, check in sorted(wl.checks.items()):
                if check.state != "Ready" and check.message:
                    downstream.append(
                        f"role {replica.role} replica {replica.ordinal} Workload {wl.name} "
                        f"check {name}: {check.message}"
                    )
    message = f"{declared - len(reserved)} of {declared} replicas wait for quota {where}"
    if downstream:
        message += "; " + "; ".join(downstream)
    return ConditionVerdict(ConditionStatus.FALSE, "Pending", message + note)


def replicas_up_to_date(
    rendering: Rendering,
    desired: Desired,
    view: _View,
    *,
    plan: Plan | None,
    previous_reason: str | None,
) -> ConditionVerdict:
    """``ReplicasUpToDate`` (docs/contract/controller.md §14)."""
    replicas = view.all_replicas()
    if not replicas:
        return ConditionVerdict(
            ConditionStatus.UNKNOWN, "RolloutNotObserved", "no replica is running yet"
        )
    outdated = 0
    compatible = 0
    for replica in replicas:
        wanted = desired.role(replica.role)
        assert wanted is not None
        if any(is_pod_outdated(p, wanted, floor=desired.floor) for p in replica.pods):
            outdated += 1
        elif any(p.render_version < desired.render_version for p in replica.pods):
            compatible += 1
    older = (
        f"; {compatible} replica(s) run an older, still supported render-version"
        if compatible
        else ""
    )
    held = [s for s in (plan.roles if plan else ()) if s.held_by_cache]
    if held and outdated:
        held_replicas = sum(s.outdated for s in held)
        return ConditionVerdict(
            ConditionStatus.FALSE,
            "RolloutHeldByCache",
            f"{held_replicas} replica(s) held of {outdated} outdated: role(s) "
            f"{', '.join(s.role for s in held)} hold their rollout until the KV cache "
            "connection resolves again" + older,
        )
    if outdated:
        return ConditionVerdict(
            ConditionStatus.FALSE,
            ROLLOUT_IN_PROGRESS,
            f"{outdated} replica(s) run an outdated configuration; they are replaced one per "
            "role at a time" + older,
        )
    missing: list[str] = []
    missing_with_workload: list[str] = []
    for role in rendering.roles:
        have = {r.ordinal for r in view.replicas.get(role.name, ())}
        absent = [o for o in range(role.replicas) if o not in have]
        if not absent:
            continue
        label = f"role {role.name} replica(s) " + ", ".join(str(o) for o in absent)
        missing.append(label)
        if any(r.workloads for r in view.replicas.get(role.name, ())):
            missing_with_workload.append(label)
    if missing and previous_reason == ROLLOUT_IN_PROGRESS:
        return ConditionVerdict(
            ConditionStatus.FALSE,
            ROLLOUT_IN_PROGRESS,
            "the last outdated replicas are being recreated: " + "; ".join(missing) + older,
        )
    if missing_with_workload:
        return ConditionVerdict(
            ConditionStatus.FALSE,
            "ReplacementInProgress",
            "replicas are being recreated: " + "; ".join(missing_with_workload) + older,
        )
    return ConditionVerdict(
        ConditionStatus.TRUE, "UpToDate", "every replica runs the current configuration" + older
    )


def role_kinds_ready(rendering: Rendering, ready_by_role: Mapping[str, int]) -> ConditionVerdict:
    """``RoleKindsReady``: at least one ready instance per declared kind."""
    if not rendering.roles:
        return ConditionVerdict(ConditionStatus.UNKNOWN, "NoRoleStatuses", "no role is declared")
    kinds: dict[str, int] = {}
    for role in rendering.roles:
        kinds[role.kind] = kinds.get(role.kind, 0) + ready_by_role.get(role.name, 0)
    missing = [k for k, n in kinds.items() if n == 0]
    if missing:
        roles = [r.name for r in rendering.roles if r.kind in missing]
        return ConditionVerdict(
            ConditionStatus.FALSE,
            "KindsNotReady",
            f"no ready instance of kind(s) {', '.join(missing)} (role(s) {', '.join(roles)})",
        )
    return ConditionVerdict(
        ConditionStatus.TRUE, "AllKindsReady", "every declared kind has a ready instance"
    )


def cache_attached(
    md: ModelDeployment, *, unmanaged_roles: Sequence[str], any_ready: bool
) -> ConditionVerdict:
    """``CacheAttached`` (docs/contract/controller.md §14; no observation source in this
    release)."""
    if md.spec.kv_cache is None:
        return ConditionVerdict(
            ConditionStatus.TRUE, NOT_APPLICABLE, "the deployment names no KV cache pool"
        )
    if unmanaged_roles:
        return ConditionVerdict(
            ConditionStatus.UNKNOWN,
            "Unmanaged",
            f"role(s) {', '.join(unmanaged_roles)} run a take-over command: the operator "
            "cannot tell whether it attaches the cache",
        )
    if not any_ready:
        return ConditionVerdict(
            ConditionStatus.UNKNOWN, "NoReplicaReady", "no replica is ready yet"
        )
    return ConditionVerdict(
        ConditionStatus.UNKNOWN,
        "NoObservationAvailable",
        "this release has no source that observes cache operations",
    )


def kv_events_publishing(md: ModelDeployment, rendering: Rendering) -> ConditionVerdict:
    """``KVEventsPublishing`` (D9): configuration, not traffic."""
    router = md.spec.router
    if router is None:
        return ConditionVerdict(ConditionStatus.TRUE, NOT_APPLICABLE, "no router is declared")
    if router.name != LLM_D_ROUTER:
        return ConditionVerdict(
            ConditionStatus.FALSE,
            "NoRouter",
            f"router {router.name} consumes no KV events; only {LLM_D_ROUTER} does",
        )
    publishing = [r.name for r in rendering.roles if r.publishes_kv_events]
    if publishing:
        return ConditionVerdict(
            ConditionStatus.TRUE,
            "Publishing",
            "role(s) " + ", ".join(publishing) + " publish KV events",
        )
    producers = [r for r in rendering.roles if r.kind_label != RoleKind.DECODE]
    if any(r.engine == Engine.SGLANG for r in rendering.roles):
        # D9 lists SGLang before the take-over row: SGLang renders no publisher at all.
        return ConditionVerdict(
            ConditionStatus.FALSE,
            "PublisherDisabled",
            f"engine {Engine.SGLANG} behind {LLM_D_ROUTER} renders no KV event publisher",
        )
    if producers and all(not r.managed for r in producers):
        return ConditionVerdict(
            ConditionStatus.UNKNOWN,
            "RoleUnmanaged",
            "every producing role runs a take-over command: "
            + ", ".join(r.name for r in producers),
        )
    engines = sorted({r.engine for r in producers}) or [engine_of(md.spec.engine.name)]
    return ConditionVerdict(
        ConditionStatus.FALSE,
        "PublisherDisabled",
        f"engine {', '.join(engines)} behind {LLM_D_ROUTER} renders no KV event publisher",
    )


def router_ready(md: ModelDeployment) -> ConditionVerdict:
    """``RouterReady`` (D8, D9)."""
    if md.spec.router is None:
        return ConditionVerdict(ConditionStatus.TRUE, NOT_APPLICABLE, "no router is declared")
    return ConditionVerdict(
        ConditionStatus.FALSE,
        "NotRendered",
        f"router {md.spec.router.name} is declared but this release does not render the router "
        "itself; its effects on engine Pods are rendered",
    )


def bounded_message(message: str) -> str:
    """``message`` cut to :data:`MAX_MESSAGE_CHARS`, ending in `` ...`` when cut."""
    if len(message) <= MAX_MESSAGE_CHARS:
        return message
    return message[: MAX_MESSAGE_CHARS - len(_TRUNCATED)] + _TRUNCATED


def conditions_with_times(
    verdicts: Mapping[str, ConditionVerdict],
    previous: Sequence[Condition] | None,
    *,
    generation: int | None,
    now: str,
    types: Sequence[str] = CONDITION_TYPES,
) -> list[Condition]:
    """Conditions in ``types`` order (default :data:`CONDITION_TYPES`); ``lastTransitionTime``
    moves only when ``status`` changes. Types not in ``verdicts`` keep their previous value
    untouched."""
    before = {c.type: c for c in previous or ()}
    out: list[Condition] = []
    for type_ in types:
        verdict = verdicts.get(type_)
        if verdict is None:
            if type_ in before:
                out.append(before[type_])
            continue
        old = before.get(type_)
        when = (
            old.last_transition_time
            if old is not None and old.status == verdict.status and old.last_transition_time
            else now
        )
        out.append(
            Condition(
                type=type_,
                status=verdict.status,
                reason=verdict.reason,
                message=bounded_message(verdict.message),
                last_transition_time=when,
                observed_generation=generation,
            )
        )
    return out


# --- readiness for tools (kstatus) -------------------------------------------------------------

#: (condition, reason) pairs that need someone to act: the deployment is ``Stalled``, not
#: ``Reconciling`` (the condition's message names the way out).
STALLING: Final = frozenset(
    {
        (DOMAIN_REGISTERED, BINDING_NOT_FOUND),
        (DOMAIN_REGISTERED, BINDING_DELETING),
        (QUOTA_RESERVED, "Parked"),
        (QUOTA_RESERVED, "NoQueueInReservedNamespace"),
    }
)
#: The conditions ``Ready`` needs ``True``, in the order the first unmet one is reported.
#: ``CacheAttached`` counts only when ``False`` (``Unknown`` is all this release can observe);
#: ``KVEventsPublishing`` reports configuration and ``RouterReady`` a router this release does
#: not render (D9): neither holds readiness back.
READY_NEEDS: Final = (DOMAIN_REGISTERED, QUOTA_RESERVED, REPLICAS_UP_TO_DATE, ROLE_KINDS_READY)


def _summary(true_type: str, reason: str, message: str) -> dict[str, ConditionVerdict]:
    """The three summary verdicts with ``true_type`` the one that is ``True``; the others are
    ``False`` with the name of the true one as their reason (``Ready``'s keeps ``reason``)."""
    out: dict[str, ConditionVerdict] = {}
    for type_ in SUMMARY_CONDITION_TYPES:
        if type_ == true_type:
            out[type_] = ConditionVerdict(ConditionStatus.TRUE, reason, message)
        elif type_ == READY:
            out[type_] = ConditionVerdict(ConditionStatus.FALSE, reason, message)
        else:
            out[type_] = ConditionVerdict(ConditionStatus.FALSE, true_type, "")
    return out


def readiness(
    verdicts: Mapping[str, ConditionVerdict], *, ready: int, desired: int
) -> dict[str, ConditionVerdict]:
    """``Ready``, ``Reconciling`` and ``Stalled`` from the seven conditions and the ready count
    (docs/decisions.md, "Readiness for tools"), first match:

    1. a condition with a reason of :data:`STALLING` → ``Stalled`` (its reason and message);
    2. the first of :data:`READY_NEEDS` that is not ``True``, or ``CacheAttached`` ``False`` →
       ``Reconciling`` (its reason and message);
    3. fewer ready replicas than declared → ``Reconciling``, ``ReplicasNotReady``;
    4. otherwise ``Ready``.
    """
    for type_ in CONDITION_TYPES:
        verdict = verdicts.get(type_)
        if verdict is not None and (type_, verdict.reason) in STALLING:
            return _summary(STALLED, verdict.reason, f"{type_}: {verdict.message}")
    waiting = [
        t for t in READY_NEEDS if t in verdicts and verdicts[t].status != ConditionStatus.TRUE
    ]
    cache = verdicts.get(CACHE_ATTACHED)
    if cache is not None and cache.status == ConditionStatus.FALSE:
        waiting.append(CACHE_ATTACHED)
    if waiting:
        verdict = verdicts[waiting[0]]
        return _summary(RECONCILING, verdict.reason, f"{waiting[0]}: {verdict.message}")
    if not desired or ready < desired:
        return _summary(RECONCILING, REPLICAS_NOT_READY, f"{ready} of {desired} replicas are ready")
    return _summary(READY, READY, f"{ready} of {desired} replicas are ready and up to date")


def deleting_readiness(remaining: int) -> dict[str, ConditionVerdict]:
    """The summary verdicts of a deployment being deleted: ``Reconciling``, ``Deleting``."""
    return _summary(
        RECONCILING, DELETING, f"the deployment is being deleted: {remaining} replica Pod(s) remain"
    )


# --- phase, summary, endpoint, echoes ---------------------------------------------------------


def role_summary(rendering: Rendering, ready_by_role: Mapping[str, int]) -> str:
    """``<n>S<n>P<n>D`` over the declared kinds, ``0`` included (D24; no ``R`` part, D9)."""
    totals: dict[str, int] = {}
    for role in rendering.roles:
        totals[role.kind] = totals.get(role.kind, 0) + ready_by_role.get(role.name, 0)
    return "".join(f"{totals[kind]}{letter}" for kind, letter in _SUMMARY_LETTERS if kind in totals)


def role_readiness(rendering: Rendering, ready_by_role: Mapping[str, int]) -> str:
    """``<role> <ready>/<desired> <Kind>`` per role in spec order, joined by ``, `` (the ROLES
    printer column: what each role serves and how much of it is ready)."""
    return ", ".join(
        f"{role.name} {ready_by_role.get(role.name, 0)}/{role.replicas} {role.kind}"
        for role in rendering.roles
    )


def endpoint(rendering: Rendering) -> str:
    """The deployment-wide Service's URL (the no-router form, D9)."""
    first = rendering.roles[0]
    scheme = "https" if first.https else "http"
    return f"{scheme}://{rendering.name}.{rendering.namespace}.svc:{first.serving_port}"


def phase(
    *, ready: int, desired: int, quota_message: str, notes: Sequence[str] = ()
) -> tuple[str, str]:
    """``phase`` and ``phaseMessage`` of a converging deployment
    (docs/contract/controller.md §15)."""
    if desired and ready >= desired:
        value, message = PHASE_READY, ""
    elif ready > 0:
        value, message = PHASE_DEGRADED, f"{ready} of {desired} replicas ready"
    else:
        value, message = PHASE_STARTING, quota_message
    for note in notes:
        message = f"{message}; {note}" if message else note
    return value, bounded_message(message)


def parallelism_status(parallelism: Parallelism, *, managed: bool) -> RoleParallelism:
    """``status.roles[].parallelism`` from the parser (docs/contract/admission.md §14)
    [inferred]."""
    declared: dict[str, int] = {}
    degrees = parallelism.degrees
    for spec in flag_table(parallelism.engine):
        if (
            spec.kind == "degree"
            and spec.canonical in parallelism.declared
            and spec.attr in ParallelDegrees.model_fields
        ):
            declared[spec.attr] = int(getattr(degrees, spec.attr))
    if "VLLM_DP_SIZE" in parallelism.declared:
        declared["data_parallel"] = degrees.data_parallel
    ep = parallelism.expert_parallel_degree()
    if ep > 1:
        declared["expert_parallel"] = ep
    kind = "ExtraArgs" if managed else "UnmanagedCommand"
    return RoleParallelism(
        declared=ParallelDegrees(**declared) if declared else None,
        modes={m: "true" for m in sorted(parallelism.modes)} or None,
        load_balance=parallelism.load_balance,
        source=ParallelSource(
            kind=kind,
            complete=parallelism.complete,
            unreadable_reason=parallelism.unreadable_reason or None,
        ),
    )


def kv_cache_status(md: ModelDeployment, cache: CacheResolution | None) -> KVCacheStatus | None:
    """``{binding, pool, domain}`` from a registered Binding; absent until resolved once, then
    kept (the previous value when this pass resolved none)."""
    previous = md.status.kv_cache if md.status is not None else None
    if cache is None or cache.binding is None or cache.registration != REGISTERED:
        return previous
    binding = cache.binding
    return KVCacheStatus(
        binding=binding.name,
        pool=binding.spec.pool_ref.name,
        domain=DomainStatus(
            name=binding.domain_name,
            block_size=binding.spec.domain.block_size,
            dtype=binding.spec.domain.dtype,
        ),
    )


def router_status(md: ModelDeployment, rendering: Rendering) -> RouterStatus | None:
    """``status.router``: its name and per role the selector and endpoints (D8) [inferred]."""
    if md.spec.router is None:
        return None
    roles = []
    for role in rendering.roles:
        service = f"{rendering.name}-{role.name}.{rendering.namespace}.svc"
        scheme = "https" if role.https else "http"
        events = None
        if role.publishes_kv_events:
            events = RouterKVEvents(
                endpoint=f"tcp://{service}:{KV_EVENTS_PORT}",
                replay_endpoint=f"tcp://{service}:{KV_REPLAY_PORT}",
                topic=KV_EVENTS_TOPIC,
            )
        roles.append(
            RouterRoleStatus(
                name=role.name,
                kind=role.kind_label,
                selector=labels.role_selector(rendering.name, role.name),
                endpoint=f"{scheme}://{service}:{role.serving_port}",
                kv_events=events,
            )
        )
    return RouterStatus(name=md.spec.router.name, roles=roles)


def _unmanaged(role: RoleRendering, view: _View) -> bool:
    """The role's deployed Pods run a take-over command (docs/contract/controller.md §13,
    docs/contract/api-notes.md): status claims what is deployed, so a role with no live Pod is not
    (yet) unmanaged whatever its spec says."""
    return any(p.takeover for p in view.live if p.role == role.name)


def _previous_reason(md: ModelDeployment, type_: str) -> str | None:
    for cond in (md.status.conditions or ()) if md.status is not None else ():
        if cond.type == type_:
            return cond.reason
    return None


def _replacing(md: ModelDeployment, role: str) -> int | None:
    for rs in (md.status.roles or ()) if md.status is not None else ():
        if rs.name == role:
            return rs.replacing
    return None


def deployment_status(
    md: ModelDeployment,
    *,
    rendering: Rendering,
    pods: Sequence[ObservedPod] = (),
    workloads: Sequence[ObservedWorkload] = (),
    index: ReplicaIndex | None = None,
    plan: Plan | None,
    system_namespace: str,
    now: str,
    queue_conflicts: Sequence[str] = (),
) -> ModelDeploymentStatus:
    """The status of a converging deployment, from the Pods re-listed after the pass.

    ``plan`` supplies ``roles[].replacing`` and the cache hold of this pass (without it the
    previous ``replacing`` is kept). ``now`` is the RFC 3339 time written into conditions
    whose status changed. ``queue_conflicts`` are the messages of the LocalQueues found
    feeding another ClusterQueue (``reconcile/queues.py``).
    """
    desired = desired_from_rendering(rendering)
    if index is None:
        index = ReplicaIndex.of(pods, workloads)
    elif pods or workloads:
        raise ValueError("deployment_status: pass the observed Pods and Workloads or their index")
    view = _View(desired, index)
    ready_by_role: dict[str, int] = {}
    roles: list[RoleStatus] = []
    for role in rendering.roles:
        replicas = view.replicas.get(role.name, [])
        ready = sum(1 for r in replicas if r.ready)
        ready_by_role[role.name] = ready
        flavors = sorted(
            {f for r in replicas for w in r.workloads for f in w.flavors.get(role.name, ())}
        )
        step = plan.role(role.name) if plan is not None else None
        replacing = step.replacing if step is not None else _replacing(md, role.name)
        roles.append(
            RoleStatus(
                name=role.name,
                kind=role.kind,
                desired=role.replicas,
                ready=ready,
                quota_reserved=sum(1 for r in replicas if r.quota_reserved),
                unmanaged=_unmanaged(role, view),
                assigned_flavors=flavors or None,
                replacing=replacing,
                parallelism=parallelism_status(role.parallelism, managed=role.managed),
            )
        )
    cache = rendering.cache
    quota = quota_reserved(
        md, rendering, view, system_namespace=system_namespace, queue_conflicts=queue_conflicts
    )
    unmanaged_roles = [r.name for r in roles if r.unmanaged]
    verdicts = {
        DOMAIN_REGISTERED: domain_registered(md, cache),
        QUOTA_RESERVED: quota,
        REPLICAS_UP_TO_DATE: replicas_up_to_date(
            rendering,
            desired,
            view,
            plan=plan,
            previous_reason=_previous_reason(md, REPLICAS_UP_TO_DATE),
        ),
        ROLE_KINDS_READY: role_kinds_ready(rendering, ready_by_role),
        CACHE_ATTACHED: cache_attached(
            md, unmanaged_roles=unmanaged_roles, any_ready=any(ready_by_role.values())
        ),
        KV_EVENTS_PUBLISHING: kv_events_publishing(md, rendering),
        ROUTER_READY: router_ready(md),
    }
    total_ready = sum(ready_by_role.values())
    total_desired = sum(r.replicas for r in rendering.roles)
    summary = readiness(verdicts, ready=total_ready, desired=total_desired)
    previous = md.status.conditions if md.status is not None else None
    conditions = conditions_with_times(
        {**summary, **verdicts},
        previous,
        generation=md.metadata.generation or None,
        now=now,
        types=ALL_CONDITION_TYPES,
    )
    notes = []
    if quota.reason == "Parked":
        notes.append("parked: its Workloads are deactivated")
    evicted = [p.name for p in view.live if p.evicted]
    if evicted:
        notes.append("evicted: " + ", ".join(sorted(evicted)))
    value, message = phase(
        ready=total_ready,
        desired=total_desired,
        quota_message=quota.message,
        notes=notes,
    )
    return ModelDeploymentStatus(
        phase=value,
        phase_message=message,
        conditions=conditions,
        endpoint=endpoint(rendering),
        roles=roles,
        kv_cache=kv_cache_status(md, cache),
        router=router_status(md, rendering),
        role_summary=role_summary(rendering, ready_by_role),
        role_readiness=role_readiness(rendering, ready_by_role),
        observed_generation=md.metadata.generation or None,
    )


def deleting_status(md: ModelDeployment, *, remaining: int, now: str) -> ModelDeploymentStatus:
    """The teardown status: phase ``Deleting`` and the summary conditions ``Reconciling``
    (reason ``Deleting``, at the current generation); every other field kept as it was (the
    Binding is not re-read, the seven conditions untouched)."""
    base = md.status or ModelDeploymentStatus()
    conditions = conditions_with_times(
        deleting_readiness(remaining),
        base.conditions,
        generation=md.metadata.generation or None,
        now=now,
        types=ALL_CONDITION_TYPES,
    )
    return base.model_copy(
        update={
            "phase": PHASE_DELETING,
            "phase_message": f"deleting: {remaining} replica Pod(s) remain",
            "conditions": conditions,
        }
    )


def status_to_json(status: ModelDeploymentStatus) -> dict[str, Any]:
    """The wire form of a status (camelCase keys, unset fields left out)."""
    return status.model_dump(mode="json", by_alias=True, exclude_none=True)


def status_changed(stored: ModelDeploymentStatus | None, new: ModelDeploymentStatus) -> bool:
    """True when ``new`` differs from the stored status on the wire (nothing stored: true)."""
    return stored is None or status_to_json(new) != status_to_json(stored)


def with_replacing(
    md: ModelDeployment, replacing: Mapping[str, int | None]
) -> ModelDeploymentStatus:
    """The stored status with ``roles[].replacing`` set to ``replacing`` (D6): what the
    controller writes before it deletes the replica it chose."""
    base = md.status or ModelDeploymentStatus()
    by_name = {r.name: r for r in base.roles or ()}
    roles = []
    for name in [r.name for r in md.spec.roles]:
        old = by_name.get(name) or RoleStatus(name=name)
        roles.append(old.model_copy(update={"replacing": replacing.get(name, old.replacing)}))
    return base.model_copy(update={"roles": roles})
