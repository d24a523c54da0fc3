"""What the replicas run and serve: ``ReplicasUpToDate`` (every replica on the current
configuration, or the rollout in progress and what holds it) and ``RoleKindsReady`` (a ready
instance of every declared kind) (docs/contract/controller.md §14)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from gpustack_render.core.vocabulary import ConditionStatus
from gpustack_render.reconcile.conditions.common import ConditionVerdict, declared_replicas, few
from gpustack_render.reconcile.replicas import ReplicaIndex
from gpustack_render.reconcile.rollout import Desired, RolloutStep, is_pod_outdated
from gpustack_render.rendering.renderer import Rendering

ROLLOUT_IN_PROGRESS: Final = "RolloutInProgress"


def replicas_up_to_date(
    rendering: Rendering,
    desired: Desired,
    index: ReplicaIndex,
    *,
    plan: RolloutStep | None,
    previous_reason: str | None,
) -> ConditionVerdict:
    """``ReplicasUpToDate`` (docs/contract/controller.md §14). ``previous_reason`` is the
    condition's reason in the stored status: the last recreated replicas of a rollout still
    read ``RolloutInProgress``."""
    replicas = declared_replicas(rendering, index)
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
        present = index.replicas_of(role.name, role.replicas)
        have = {r.ordinal for r in present}
        absent = [o for o in range(role.replicas) if o not in have]
        if not absent:
            continue
        label = f"role {role.name} replica(s) " + few(str(o) for o in absent)
        missing.append(label)
        if any(r.workloads for r in present):
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
