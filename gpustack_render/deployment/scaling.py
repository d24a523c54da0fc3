"""Which scale targets a deployment asks for, decided once for admission, rendering and the
controller (D27, docs/autoscaling.md).

A role with ``roles[].scaling.mode: External`` is a target of its own; a ratio group
(``spec.scalingGroups[]``) is one target for all its roles, counted in units (one unit holds
``perUnit`` replicas of each role). Each target is one ``ModelDeploymentScaler`` named
``<md>-<target>``. A role named by a group is scaled by the group, whatever its own ``scaling``
says (admission refuses the combination; reading it here never fails).

Nothing here reads a cluster: the targets, their bounds, the replica counts a unit count
means, the most replicas a role can reach (for names), and the label selector of a target's
serving Pods.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gpustack_render.api.modeldeployment import MAX_REPLICAS, ModelDeployment, RoleSpec
from gpustack_render.core import labels


@dataclass(frozen=True, slots=True)
class ScaleTarget:
    """One scale target: an External role, or a ratio group.

    ``roles`` holds (role, replicas per unit) in the group's order; a role target has one
    entry with 1 per unit, so its units are its replicas. ``min_replicas``/``max_replicas``
    bound the scaler's count (units for a group).
    """

    name: str
    group: bool
    roles: tuple[tuple[str, int], ...]
    min_replicas: int
    max_replicas: int

    def scaler_name(self, deployment: str) -> str:
        """``<md>-<role>`` or ``<md>-<group>``."""
        return f"{deployment}-{self.name}"

    @property
    def role_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.roles)

    def per_unit(self, role: str) -> int:
        """Replicas of ``role`` in one unit (1 for a role target)."""
        return dict(self.roles).get(role, 1)

    def counts(self, units: int) -> dict[str, int]:
        """The replicas of each role at ``units`` units."""
        return {name: units * per for name, per in self.roles}

    def units_of(self, counts: Mapping[str, int]) -> int:
        """The fewest units holding ``counts`` (each role's count rounded up to a whole unit),
        within the bounds: how many units a group starts from, so that no role loses a
        replica when the group is formed."""
        need = max(
            (-(-counts.get(name, 0) // per) for name, per in self.roles),
            default=0,
        )
        return self.clamp(need)

    def clamp(self, count: int) -> int:
        """``count`` within the bounds."""
        return max(self.min_replicas, min(self.max_replicas, count))


def _role_target(role: RoleSpec) -> ScaleTarget | None:
    scaling = role.scaling
    if scaling is None or scaling.mode != "External":
        return None
    return ScaleTarget(
        name=role.name,
        group=False,
        roles=((role.name, 1),),
        min_replicas=scaling.min_replicas,
        max_replicas=scaling.max_replicas,
    )


def group_max_units(per_units: Mapping[str, int] | tuple[int, ...]) -> int:
    """The most units keeping every role within :data:`MAX_REPLICAS` replicas."""
    values = list(per_units.values()) if isinstance(per_units, Mapping) else list(per_units)
    return MAX_REPLICAS // max([*values, 1])


def scale_targets(md: ModelDeployment) -> tuple[ScaleTarget, ...]:
    """Every scale target of ``md``: the External roles no group names, in role order, then
    the groups in their order. A group keeps only the roles the spec declares, each in the
    first group naming it; a group left with none is no target."""
    declared = {r.name for r in md.spec.roles}
    grouped: set[str] = set()
    groups: list[ScaleTarget] = []
    for group in md.spec.scaling_groups or ():
        roles = []
        for member in group.roles:
            if member.name in declared and member.name not in grouped:
                grouped.add(member.name)
                roles.append((member.name, member.per_unit))
        if not roles:
            continue
        top = group_max_units(tuple(per for _, per in roles))
        most = min(group.max_units, top) if group.max_units is not None else top
        groups.append(
            ScaleTarget(
                name=group.name,
                group=True,
                roles=tuple(roles),
                min_replicas=min(group.min_units, most),
                max_replicas=most,
            )
        )
    singles = [
        target
        for role in md.spec.roles
        if role.name not in grouped and (target := _role_target(role)) is not None
    ]
    return (*singles, *groups)


def targets_by_role(md: ModelDeployment) -> dict[str, ScaleTarget]:
    """The target scaling each scaled role, by role name (unscaled roles are absent)."""
    return {name: t for t in scale_targets(md) for name in t.role_names}


def most_replicas(md: ModelDeployment, role: RoleSpec) -> int:
    """The most replicas ``role`` can be asked for: its ``replicas``, or what its target's upper
    bound allows (what the longest generated name must fit)."""
    target = targets_by_role(md).get(role.name)
    if target is None:
        return role.replicas
    return max(role.replicas, target.max_replicas * target.per_unit(role.name))


def metrics_role(target: ScaleTarget) -> str:
    """The role whose Pods a target's selector finds: the role itself, or the group's role with
    the fewest replicas per unit (the first of equals)."""
    return min(target.roles, key=lambda pair: pair[1])[0]


def serving_selector(deployment: str, target: ScaleTarget) -> str:
    """The label selector (text, as ``/scale`` reports it) of the target's serving Pods: the
    leader (member 0) of every replica of its role; for a ratio group, of its role with the
    fewest replicas per unit (:func:`metrics_role`).

    The HPA sizes the count it asks for by the number of Pods the selector finds (a Resource or
    Pods metric: the average usage ratio times that number, ``replica_calculator.go``), so the
    selector finds one Pod per replica, and one per unit for a group whose smallest ``perUnit``
    is 1. Targets never share a role, so no two scalers' selectors find the same Pod (an HPA
    refuses such a pair: ``AmbiguousSelector``)."""
    return ",".join(
        (
            f"{labels.NAME}={labels.NAME_VALUE}",
            f"{labels.INSTANCE}={deployment}",
            f"{labels.COMPONENT}={metrics_role(target)}",
            f"{labels.MEMBER_INDEX}=0",
        )
    )
