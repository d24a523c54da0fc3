"""Autoscaling configuration rules (``scaling.*``, D27, docs/autoscaling.md): answered from the
submitted object alone.

- a role's bounds are ordered, and an External role starts within them;
- a ratio group names declared roles, each in one group only and with no ``scaling`` of its
  own (the group scales it), is not named like a role (its scaler would take the role's name),
  fits every role within the replica ceiling, and starts in its ratio within its bounds.

Rule ids (``origin``) are listed in ``docs/rules.md``.
"""

from __future__ import annotations

from gpustack_render.api.modeldeployment import (
    MAX_REPLICAS,
    ModelDeployment,
    RoleSpec,
    ScalingGroup,
)
from gpustack_render.core import errors
from gpustack_render.core.errors import ErrorList
from gpustack_render.core.paths import ROLES, SCALING_GROUPS, FieldPath
from gpustack_render.deployment.scaling import group_max_units


def validate_role_scaling(role: RoleSpec, path: FieldPath) -> ErrorList:
    """``scaling.bounds-inverted`` and ``scaling.start-outside-bounds`` of one role."""
    out = ErrorList()
    scaling = role.scaling
    if scaling is None:
        return out
    spath = path.child("scaling")
    if scaling.min_replicas > scaling.max_replicas:
        out.append(
            errors.invalid(
                spath.child("minReplicas"),
                scaling.min_replicas,
                f"minReplicas {scaling.min_replicas} exceeds maxReplicas "
                f"{scaling.max_replicas}: no count would be accepted",
                origin="scaling.bounds-inverted",
            )
        )
    elif scaling.mode == "External" and not (
        scaling.min_replicas <= role.replicas <= scaling.max_replicas
    ):
        out.append(
            errors.invalid(
                path.child("replicas"),
                role.replicas,
                f"role {role.name!r} starts at replicas {role.replicas}, outside its scaling "
                f"bounds {scaling.min_replicas}..{scaling.max_replicas}: its scaler would be "
                "created with a count it refuses. Start within the bounds",
                origin="scaling.start-outside-bounds",
            )
        )
    return out


def _group_roles(
    md: ModelDeployment, gi: int, group: ScalingGroup, seen: dict[str, str]
) -> tuple[ErrorList, dict[str, RoleSpec]]:
    """``scaling.group-role-unknown``, ``scaling.role-in-two-groups`` and
    ``scaling.grouped-role-has-scaling``; the group's declared roles, by name."""
    out = ErrorList()
    roles = {r.name: (i, r) for i, r in enumerate(md.spec.roles)}
    found: dict[str, RoleSpec] = {}
    gpath = SCALING_GROUPS.index(gi)
    for ri, member in enumerate(group.roles):
        where = gpath.child("roles").index(ri).child("name")
        known = roles.get(member.name)
        if known is None:
            out.append(
                errors.not_found(
                    where,
                    member.name,
                    f"scaling group {group.name!r} names role {member.name!r}, which "
                    f"spec.roles does not declare ({', '.join(roles) or 'none'})",
                    origin="scaling.group-role-unknown",
                )
            )
            continue
        other = seen.get(member.name)
        if other is not None:
            out.append(
                errors.invalid(
                    where,
                    member.name,
                    f"role {member.name!r} is already scaled by group {other!r}: a role moves "
                    "with one ratio, so it belongs to one group at most",
                    origin="scaling.role-in-two-groups",
                )
            )
            continue
        seen[member.name] = group.name
        i, role = known
        if role.scaling is not None:
            out.append(
                errors.forbidden(
                    ROLES.index(i).child("scaling"),
                    f"role {member.name!r} is scaled by group {group.name!r}, whose scaler sets "
                    "its count and whose minUnits/maxUnits bound it: remove roles[].scaling",
                    origin="scaling.grouped-role-has-scaling",
                )
            )
        found[member.name] = role
    return out, found


def _group_shape(
    md: ModelDeployment, gi: int, group: ScalingGroup, roles: dict[str, RoleSpec]
) -> ErrorList:
    """``scaling.group-name-taken``, ``scaling.group-too-large``, ``scaling.bounds-inverted``,
    ``scaling.group-not-in-ratio`` and ``scaling.start-outside-bounds`` of one group."""
    out = ErrorList()
    gpath = SCALING_GROUPS.index(gi)
    if any(r.name == group.name for r in md.spec.roles):
        out.append(
            errors.invalid(
                gpath.child("name"),
                group.name,
                f"group {group.name!r} is named like a role: its scaler <md>-{group.name} would "
                "take the name a role's scaler has. Name the group differently",
                origin="scaling.group-name-taken",
            )
        )
    per_unit = {m.name: m.per_unit for m in group.roles if m.name in roles}
    top = group_max_units(per_unit)
    most = group.max_units if group.max_units is not None else top
    for field, value in (("maxUnits", group.max_units), ("minUnits", group.min_units)):
        if value is None or value <= top:
            continue
        widest = max(per_unit, key=lambda n: per_unit[n])
        out.append(
            errors.invalid(
                gpath.child(field),
                value,
                f"{value} units hold {value * per_unit[widest]} replicas of role {widest!r}, "
                f"above the {MAX_REPLICAS} a role may have: at most {top} units",
                origin="scaling.group-too-large",
            )
        )
        return out
    if group.min_units > most:
        out.append(
            errors.invalid(
                gpath.child("minUnits"),
                group.min_units,
                f"minUnits {group.min_units} exceeds maxUnits {most}: no count would be accepted",
                origin="scaling.bounds-inverted",
            )
        )
        return out
    if not roles:
        return out
    units = {name: divmod(r.replicas, per_unit[name]) for name, r in roles.items()}
    counts = sorted({u for u, rest in units.values() if rest == 0})
    if any(rest for _, rest in units.values()) or len(counts) != 1:
        ratio = ":".join(f"{n} {per_unit[n]}" for n in roles)
        have = ", ".join(f"{n} {r.replicas}" for n, r in roles.items())
        out.append(
            errors.invalid(
                gpath,
                have,
                f"the starting replicas ({have}) are not whole units of group {group.name!r} "
                f"({ratio}): every role of a group starts at the same number of units times "
                "its perUnit",
                origin="scaling.group-not-in-ratio",
            )
        )
        return out
    (start,) = counts
    if not group.min_units <= start <= most:
        out.append(
            errors.invalid(
                gpath,
                start,
                f"group {group.name!r} starts at {start} units (its roles' replicas), outside "
                f"its bounds {group.min_units}..{most}: its scaler would be created with a count "
                "it refuses. Start within the bounds",
                origin="scaling.start-outside-bounds",
            )
        )
    return out


def validate_scaling(md: ModelDeployment) -> ErrorList:
    """Every ``scaling.*`` rule, roles in order, then groups in order."""
    out = ErrorList()
    for i, role in enumerate(md.spec.roles):
        out.extend(validate_role_scaling(role, ROLES.index(i)))
    seen: dict[str, str] = {}
    for gi, group in enumerate(md.spec.scaling_groups or ()):
        found, roles = _group_roles(md, gi, group, seen)
        out.extend(found)
        out.extend(_group_shape(md, gi, group, roles))
    return out
