"""``ModelDeployment.status``, assembled every pass from what was observed
(docs/contract/controller.md §13–§15).

:func:`deployment_status` builds the whole status of a converging deployment: per-role counts
read from the :class:`~gpustack_render.reconcile.replicas.ReplicaIndex`, the eight conditions
(:mod:`gpustack_render.reconcile.conditions`) and the three summary conditions computed from them
(``Ready``, ``Reconciling``, ``Stalled``), with ``lastTransitionTime`` carried over while a
condition's ``status`` is unchanged, and ``observedGeneration``; ``phase``/``phaseMessage``,
``roleSummary``, ``roleReadiness``, ``endpoint``, ``kvCache`` and ``router``
(:mod:`gpustack_render.reconcile.statusfields`). :func:`deleting_status` is the teardown status,
:func:`render_failed_status` the status of a generation that cannot be rendered. None reads a
clock: the caller passes ``now`` (RFC 3339), which only ever lands in a
``lastTransitionTime``.

The only state carried across passes is the previous ``ReplicasUpToDate`` reason and
``roles[].replacing`` (D6); everything else is recomputed. Terminating Pods are not counted.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

from gpustack_render.api.modeldeployment import (
    ModelDeployment,
    ModelDeploymentStatus,
    RoleStatus,
)
from gpustack_render.core.errors import RenderError
from gpustack_render.core.vocabulary import ConditionStatus
from gpustack_render.reconcile.conditions.common import (
    ALL_CONDITION_TYPES,
    CACHE_ATTACHED,
    DOMAIN_REGISTERED,
    KV_EVENTS_PUBLISHING,
    QUOTA_RESERVED,
    READY,
    RECONCILING,
    REPLICAS_UP_TO_DATE,
    ROLE_KINDS_READY,
    ROUTER_READY,
    STALLED,
    SUMMARY_CONDITION_TYPES,
    WEIGHTS_READY,
    ConditionVerdict,
    bounded_message,
    conditions_with_times,
    few,
)
from gpustack_render.reconcile.conditions.kvcache import cache_attached, domain_registered
from gpustack_render.reconcile.conditions.quota import PARKED, no_node_yet, quota_reserved
from gpustack_render.reconcile.conditions.readiness import (
    deleting_readiness,
    readiness,
    render_failed_readiness,
)
from gpustack_render.reconcile.conditions.router import kv_events_publishing, router_ready
from gpustack_render.reconcile.conditions.serving import replicas_up_to_date, role_kinds_ready
from gpustack_render.reconcile.conditions.weights import (
    STALLING_REASONS,
    blocked_verdict,
    model_status,
    rollout_held,
    weights_ready,
)
from gpustack_render.reconcile.observed import ObservedPod, ObservedWorkload
from gpustack_render.reconcile.replicas import ReplicaIndex
from gpustack_render.reconcile.rollout import RolloutStep
from gpustack_render.reconcile.rolloutinputs import desired_from_rendering
from gpustack_render.reconcile.routerstate import RouterObservation
from gpustack_render.reconcile.scaling import ScalingState
from gpustack_render.reconcile.statusfields import (
    PHASE_DEGRADED,
    PHASE_DELETING,
    PHASE_STARTING,
    endpoint,
    kv_cache_status,
    parallelism_status,
    phase,
    render_failed_phase,
    role_readiness,
    role_summary,
    router_status,
    summary_router_ready,
)
from gpustack_render.rendering.renderer import Rendering
from gpustack_render.weights.delivery import WeightsBlock, WeightsPlan


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


def _observed_counts(index: ReplicaIndex, role: str, *, desired: int, size: int) -> dict[str, Any]:
    """What ``status.roles[]`` reads of the observed replicas of ``role`` at ordinals below
    ``desired`` (``size`` Pods each, unless a replica's own Pods say otherwise): the ready,
    quota-reserved, admitted and quota-pending counts, whether a live Pod runs a take-over
    command, and the ResourceFlavors Kueue assigned, as ``RoleStatus`` fields."""
    replicas = index.replicas_of(role, desired)
    flavors = sorted({f for r in replicas for w in r.workloads for f in w.flavors.get(role, ())})
    return {
        "ready": sum(1 for r in replicas if r.serving(size)),
        "quota_reserved": sum(1 for r in replicas if r.quota_reserved),
        "admitted": sum(1 for r in replicas if r.admitted),
        "quota_pending": sum(1 for r in replicas if r.quota_pending),
        # Status claims what is deployed (docs/contract/controller.md §13): a role with no live
        # Pod running a take-over command is not (yet) unmanaged.
        "unmanaged": any(p.takeover for p in index.live_of(role)),
        "assigned_flavors": flavors or None,
    }


def deployment_status(
    md: ModelDeployment,
    *,
    rendering: Rendering,
    pods: Sequence[ObservedPod] = (),
    workloads: Sequence[ObservedWorkload] = (),
    index: ReplicaIndex | None = None,
    plan: RolloutStep | None,
    system_namespace: str,
    now: str,
    queue_conflicts: Sequence[str] = (),
    router: RouterObservation | None = None,
    scaling: ScalingState | None = None,
    weights: WeightsPlan | None = None,
) -> ModelDeploymentStatus:
    """The status of a converging deployment, from the Pods re-listed after the pass.

    ``plan`` supplies ``roles[].replacing`` and the cache hold of this pass (without it the
    previous ``replacing`` is kept). ``now`` is the RFC 3339 time written into conditions
    whose status changed. ``queue_conflicts`` are the messages of the LocalQueues found
    feeding another ClusterQueue (``reconcile/queues.py``); ``router`` the stored router
    Deployment (``reconcile/routerstate.py``; ``None``: not observed).
    feeding another ClusterQueue (``reconcile/queues.py``). ``scaling`` says where each
    role's count came from (``status.roles[].scaling``, D27). ``weights`` is the delivery
    of the artifact the deployment names (``None``: none): ``WeightsReady`` and
    ``status.model`` (D28).
    """
    if index is None:
        index = ReplicaIndex.of(pods, workloads)
    elif pods or workloads:
        raise ValueError("deployment_status: pass the observed Pods and Workloads or their index")
    ready_by_role: dict[str, int] = {}
    roles: list[RoleStatus] = []
    for role in rendering.roles:
        step = plan.role(role.name) if plan is not None else None
        replacing = step.replacing if step is not None else _replacing(md, role.name)
        counted = RoleStatus(
            name=role.name,
            kind=role.kind,
            desired=role.replicas,
            scaling=scaling.status_of(role.name) if scaling is not None else None,
            replacing=replacing,
            parallelism=parallelism_status(role.parallelism, managed=role.managed),
        ).model_copy(
            update=_observed_counts(index, role.name, desired=role.replicas, size=role.size)
        )
        ready_by_role[role.name] = counted.ready or 0
        roles.append(counted)
    cache = rendering.cache
    quota = quota_reserved(
        md, rendering, index, system_namespace=system_namespace, queue_conflicts=queue_conflicts
    )
    unmanaged_roles = [r.name for r in roles if r.unmanaged]
    verdicts = {
        DOMAIN_REGISTERED: domain_registered(md, cache),
        QUOTA_RESERVED: quota,
        REPLICAS_UP_TO_DATE: replicas_up_to_date(
            rendering,
            desired_from_rendering(rendering),
            index,
            plan=plan,
            previous_reason=_previous_reason(md, REPLICAS_UP_TO_DATE),
        ),
        ROLE_KINDS_READY: role_kinds_ready(rendering, ready_by_role),
        CACHE_ATTACHED: cache_attached(
            md, unmanaged_roles=unmanaged_roles, any_ready=any(ready_by_role.values())
        ),
        KV_EVENTS_PUBLISHING: kv_events_publishing(md, rendering),
        ROUTER_READY: router_ready(md, rendering, router),
        WEIGHTS_READY: weights_ready(weights, index.live),
    }
    total_ready = sum(ready_by_role.values())
    total_desired = sum(r.replicas for r in rendering.roles)
    no_node = no_node_yet(rendering, index)
    summary = readiness(
        verdicts,
        ready=total_ready,
        desired=total_desired,
        scaled_to_zero=total_desired == 0 and scaling is not None and scaling.all_scaled(),
        no_node=no_node,
    )
    previous = md.status.conditions if md.status is not None else None
    conditions = conditions_with_times(
        {**summary, **verdicts},
        previous,
        generation=md.metadata.generation or None,
        now=now,
        types=ALL_CONDITION_TYPES,
    )
    notes = []
    if quota.reason == PARKED:
        notes.append("parked: its Workloads are deactivated")
    evicted = [p.name for p in index.live if p.evicted]
    if evicted:
        notes.append("evicted: " + few(sorted(evicted)))
    router_verdict = verdicts[ROUTER_READY]
    router_up = md.spec.router is not None and router_verdict.status == ConditionStatus.TRUE
    # phaseMessage quotes briefly: the detail is in the condition that carries it.
    starting = no_node if quota.status == ConditionStatus.TRUE and no_node else quota.brief
    value, message = phase(
        ready=total_ready,
        desired=total_desired,
        quota_message=starting,
        notes=notes,
        router_waiting=(
            router_verdict.message if md.spec.router is not None and not router_up else None
        ),
    )
    router_pods = router.ready if router is not None and router.deployed else 0
    return ModelDeploymentStatus(
        phase=value,
        phase_message=message,
        conditions=conditions,
        endpoint=endpoint(rendering, router_ready=router_up),
        roles=roles,
        kv_cache=kv_cache_status(md, cache),
        router=router_status(md, rendering, ready=router_up),
        role_summary=role_summary(
            roles, router_ready=router_pods if rendering.router is not None else None
        ),
        role_readiness=role_readiness(roles),
        model=model_status(weights),
        observed_generation=md.metadata.generation or None,
    )


def deleting_status(md: ModelDeployment, *, remaining: int, now: str) -> ModelDeploymentStatus:
    """The teardown status: phase ``Deleting`` and the summary conditions ``Reconciling``
    (reason ``Deleting``, at the current generation); every other field kept as it was (the
    Binding is not re-read, the eight conditions untouched)."""
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


def render_failed_status(
    md: ModelDeployment, error: RenderError, *, index: ReplicaIndex, now: str
) -> ModelDeploymentStatus:
    """The status of a deployment whose generation cannot be rendered (``error``, the
    renderer's own message), from the Pods observed in the same pass.

    Nothing is rendered, so nothing is created, replaced or deleted: the status says so and
    keeps describing what runs. ``observedGeneration`` is the generation that failed; the
    summary conditions are ``Stalled``, ``RenderFailed`` (the generation, the renderer's
    message naming the field or object, and the way out); ``phase`` is never ``Ready``
    (:func:`~gpustack_render.reconcile.statusfields.render_failed_phase`). The roles the last
    rendered pass listed are counted again on ``index`` (ready, quota, admitted, flavors), and
    ``roleSummary`` and ``roleReadiness`` follow the counts (the router's part of the summary,
    like ``RouterReady``, is as that pass observed it). Every other field — the eight
    conditions at the generation they were computed from, ``endpoint``, ``kvCache``,
    ``router``, ``roles[].replacing`` — is kept: the replicas it describes are untouched. A
    first generation that cannot render gets the summary conditions, ``phase`` and
    ``observedGeneration`` only. ``now`` lands only in a ``lastTransitionTime`` that moves.
    """
    generation = md.metadata.generation or None
    which = f"generation {generation}" if generation else "the deployment"
    failure = f"{which} cannot be rendered: {error}"
    return _held_status(
        md,
        render_failed_readiness(failure),
        index=index,
        now=now,
        phase_of=partial(render_failed_phase, failure),
    )


def weights_held_status(
    md: ModelDeployment, block: WeightsBlock, *, index: ReplicaIndex, now: str
) -> ModelDeploymentStatus:
    """The status of a deployment whose weights cannot be delivered (``block``, from
    :func:`~gpustack_render.weights.delivery.weights_of`): nothing is created, replaced or
    deleted, so the status says why and keeps describing what runs (as
    :func:`render_failed_status` does). ``WeightsReady`` carries the block's reason and message,
    ``ReplicasUpToDate`` is ``False RolloutHeldByWeights``; the deployment is ``Stalled`` when
    someone must act and ``Reconciling`` while the artifact resolves; ``phaseMessage`` leads
    with the ``WeightsReady`` message."""
    verdict = blocked_verdict(block)
    summary_type = STALLED if block.reason in STALLING_REASONS else RECONCILING
    quoted = f"{WEIGHTS_READY}: {block.message}"
    verdicts: dict[str, ConditionVerdict] = {}
    for type_ in SUMMARY_CONDITION_TYPES:
        if type_ == summary_type:
            verdicts[type_] = ConditionVerdict(ConditionStatus.TRUE, block.reason, quoted)
        elif type_ == READY:
            verdicts[type_] = ConditionVerdict(ConditionStatus.FALSE, block.reason, quoted)
        else:
            verdicts[type_] = ConditionVerdict(ConditionStatus.FALSE, summary_type, "")
    verdicts[WEIGHTS_READY] = verdict
    verdicts[REPLICAS_UP_TO_DATE] = rollout_held(block)
    return _held_status(
        md, verdicts, index=index, now=now, phase_of=partial(_weights_held_phase, block.message)
    )


def _weights_held_phase(message: str, *, ready: int, desired: int) -> tuple[str, str]:
    if ready > 0:
        return PHASE_DEGRADED, bounded_message(
            f"{message}; {ready} of {desired} replicas keep serving"
        )
    return PHASE_STARTING, bounded_message(message)


def _held_status(
    md: ModelDeployment,
    verdicts: Mapping[str, ConditionVerdict],
    *,
    index: ReplicaIndex,
    now: str,
    phase_of: Callable[..., tuple[str, str]],
) -> ModelDeploymentStatus:
    """The status of a pass that renders nothing: ``verdicts`` over the stored conditions, the
    roles the last rendered pass listed counted again on ``index``, ``phase_of(ready=,
    desired=)`` for the phase; every other field kept."""
    base = md.status or ModelDeploymentStatus()
    generation = md.metadata.generation or None
    sizes = {role.name: role.size for role in md.spec.roles}
    roles = [
        role.model_copy(
            update=_observed_counts(
                index, role.name, desired=role.desired or 0, size=sizes.get(role.name, 1)
            )
        )
        for role in base.roles or ()
    ]
    conditions = conditions_with_times(
        verdicts,
        base.conditions,
        generation=generation,
        now=now,
        types=ALL_CONDITION_TYPES,
    )
    value, message = phase_of(
        ready=sum(role.ready or 0 for role in roles),
        desired=sum(role.desired or 0 for role in roles),
    )
    update: dict[str, Any] = {
        "phase": value,
        "phase_message": message,
        "conditions": conditions,
        "observed_generation": generation,
    }
    if roles:
        update |= {
            "roles": roles,
            "role_summary": role_summary(
                roles, router_ready=summary_router_ready(base.role_summary)
            ),
            "role_readiness": role_readiness(roles),
        }
    return base.model_copy(update=update)


def status_to_json(status: ModelDeploymentStatus) -> dict[str, Any]:
    """The wire form of a status (camelCase keys, unset fields left out)."""
    return status.model_dump(mode="json", by_alias=True, exclude_none=True)


def status_changed(stored: ModelDeploymentStatus | None, new: ModelDeploymentStatus) -> bool:
    """True when ``new`` differs from the stored status on the wire (nothing stored: true)."""
    return stored is None or status_to_json(new) != status_to_json(stored)
