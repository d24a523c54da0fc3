"""``ModelDeployment.status``, assembled every pass from what was observed
(docs/contract/controller.md §13–§15).

:func:`deployment_status` builds the whole status of a converging deployment: per-role counts
read from the :class:`~gpustack_render.reconcile.replicas.ReplicaIndex`, the seven conditions
(:mod:`gpustack_render.reconcile.conditions`) and the three summary conditions computed from them
(``Ready``, ``Reconciling``, ``Stalled``), with ``lastTransitionTime`` carried over while a
condition's ``status`` is unchanged, and ``observedGeneration``; ``phase``/``phaseMessage``,
``roleSummary``, ``roleReadiness``, ``endpoint``, ``kvCache`` and ``router``
(:mod:`gpustack_render.reconcile.statusfields`). :func:`deleting_status` is the teardown status.
Neither reads a clock: the caller passes ``now`` (RFC 3339), which only ever lands in a
``lastTransitionTime``.

The only state carried across passes is the previous ``ReplicasUpToDate`` reason and
``roles[].replacing`` (D6); everything else is recomputed. Terminating Pods are not counted.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpustack_render.api.modeldeployment import (
    ModelDeployment,
    ModelDeploymentStatus,
    RoleStatus,
)
from gpustack_render.core.vocabulary import ConditionStatus
from gpustack_render.reconcile.conditions.common import (
    ALL_CONDITION_TYPES,
    CACHE_ATTACHED,
    DOMAIN_REGISTERED,
    KV_EVENTS_PUBLISHING,
    QUOTA_RESERVED,
    REPLICAS_UP_TO_DATE,
    ROLE_KINDS_READY,
    ROUTER_READY,
    conditions_with_times,
    few,
)
from gpustack_render.reconcile.conditions.kvcache import cache_attached, domain_registered
from gpustack_render.reconcile.conditions.quota import PARKED, no_node_yet, quota_reserved
from gpustack_render.reconcile.conditions.readiness import deleting_readiness, readiness
from gpustack_render.reconcile.conditions.router import kv_events_publishing, router_ready
from gpustack_render.reconcile.conditions.serving import replicas_up_to_date, role_kinds_ready
from gpustack_render.reconcile.observed import ObservedPod, ObservedWorkload
from gpustack_render.reconcile.replicas import ReplicaIndex
from gpustack_render.reconcile.rollout import RolloutStep
from gpustack_render.reconcile.rolloutinputs import desired_from_rendering
from gpustack_render.reconcile.routersync import RouterObservation
from gpustack_render.reconcile.scaling import ScalingState
from gpustack_render.reconcile.statusfields import (
    PHASE_DELETING,
    endpoint,
    kv_cache_status,
    parallelism_status,
    phase,
    role_readiness,
    role_summary,
    router_status,
)
from gpustack_render.rendering.renderer import Rendering


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
    plan: RolloutStep | None,
    system_namespace: str,
    now: str,
    queue_conflicts: Sequence[str] = (),
    router: RouterObservation | None = None,
    scaling: ScalingState | None = None,
) -> ModelDeploymentStatus:
    """The status of a converging deployment, from the Pods re-listed after the pass.

    ``plan`` supplies ``roles[].replacing`` and the cache hold of this pass (without it the
    previous ``replacing`` is kept). ``now`` is the RFC 3339 time written into conditions
    whose status changed. ``queue_conflicts`` are the messages of the LocalQueues found
    feeding another ClusterQueue (``reconcile/queues.py``); ``router`` the stored router
    Deployment (``reconcile/routersync.py``; ``None``: not observed).
    feeding another ClusterQueue (``reconcile/queues.py``). ``scaling`` says where each
    role's count came from (``status.roles[].scaling``, D27).
    """
    if index is None:
        index = ReplicaIndex.of(pods, workloads)
    elif pods or workloads:
        raise ValueError("deployment_status: pass the observed Pods and Workloads or their index")
    ready_by_role: dict[str, int] = {}
    roles: list[RoleStatus] = []
    for role in rendering.roles:
        replicas = index.replicas_of(role.name, role.replicas)
        ready = sum(1 for r in replicas if r.serving(role.size))
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
                admitted=sum(1 for r in replicas if r.admitted),
                quota_pending=sum(1 for r in replicas if r.quota_pending),
                scaling=scaling.status_of(role.name) if scaling is not None else None,
                # Status claims what is deployed (docs/contract/controller.md §13): a role with
                # no live Pod running a take-over command is not (yet) unmanaged.
                unmanaged=any(p.takeover for p in index.live_of(role.name)),
                assigned_flavors=flavors or None,
                replacing=replacing,
                parallelism=parallelism_status(role.parallelism, managed=role.managed),
            )
        )
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
        role_summary=role_summary(rendering, ready_by_role, router_ready=router_pods),
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
