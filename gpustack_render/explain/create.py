"""Explaining a create: per role its replicas, Pods per replica, group (Workload) names, the
entrance each group queues on and what one replica requests; per entrance the total the
ClusterQueue must hold; and the set of groups admitted together.

Every figure is read off the rendering: the groups are the Pods' own
``kueue.x-k8s.io/pod-group-name``, the requests the Pods' own containers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from gpustack_render.explain.model import Cost, EntranceLoad, JointSet, RoleExplanation
from gpustack_render.explain.resourcetotals import Amounts, add, formatted, pods_requests
from gpustack_render.rendering.renderer import Rendering, RoleRendering


def replica_amounts(role: RoleRendering) -> Amounts:
    """What one replica of ``role`` requests (every member Pod of ordinal 0; every replica of
    a role is stamped from one template)."""
    return pods_requests(s.pod for s in role.instance(0)) if role.replicas else {}


def elastic_profile_cost(role: RoleRendering) -> Cost:
    """What an Elastic EP role renders, said once at its create (docs/elastic-ep.md)."""
    elastic = role.elastic
    assert elastic is not None
    return Cost(
        "explain.elastic-profile",
        f"Elastic EP at width {elastic.width}: ordinal 0 is the master, the only member serving "
        f"HTTP, booting the engine at data-parallel size {elastic.boot_width}; ordinals "
        f"1..{elastic.width - 1} are Ray workers; each member is a group of one on entrance "
        f"{role.queue}, and the {elastic.width} are admitted together as one set. A CPU-only Ray "
        "head Pod and its Service are rendered beside them, outside Kueue (they hold no quota)",
    )


def create_role(role: RoleRendering) -> RoleExplanation:
    """One role of a create: every ordinal is added (an Elastic EP role says what it renders)."""
    costs = (elastic_profile_cost(role),) if role.elastic is not None else ()
    return RoleExplanation(
        name=role.name,
        kind=role.kind,
        engine=role.engine,
        action="create",
        replicas=role.replicas,
        size=role.size,
        instance_type=role.instance_type,
        entrance=role.queue,
        groups=tuple(role.groups()),
        replica_requests=formatted(replica_amounts(role)),
        added=tuple(range(role.replicas)),
        costs=costs,
    )


def entrance_totals(
    rendering: Rendering, *, counts: Mapping[str, int] | None = None
) -> dict[str, Amounts]:
    """Per entrance, what the deployment's replicas request (``counts`` overrides a role's
    replica count)."""
    totals: dict[str, Amounts] = {}
    for role in rendering.roles:
        n = role.replicas if counts is None else counts.get(role.name, role.replicas)
        totals[role.queue] = add(totals.get(role.queue, {}), replica_amounts(role), times=n)
    return totals


def entrance_loads(
    rendering: Rendering,
    *,
    after: Mapping[str, Amounts],
    before: Mapping[str, Amounts] | None = None,
    peak: Mapping[str, Amounts] | None = None,
    roles_by_entrance: Mapping[str, Iterable[str]] | None = None,
) -> tuple[EntranceLoad, ...]:
    """One :class:`EntranceLoad` per entrance named in ``after`` or ``before``, by name."""
    names = sorted({*after, *(before or {})} - {""})
    by_entrance: dict[str, list[str]] = {}
    if roles_by_entrance is None:
        for role in rendering.roles:
            by_entrance.setdefault(role.queue, []).append(role.name)
    else:
        by_entrance = {k: list(v) for k, v in roles_by_entrance.items()}

    def shown(amounts: Mapping[str, Amounts] | None, name: str) -> dict[str, str] | None:
        if amounts is None:
            return None
        return formatted(amounts.get(name, {}))

    return tuple(
        EntranceLoad(
            entrance=name,
            local_queue=f"{rendering.namespace}/{name}",
            roles=tuple(by_entrance.get(name, ())),
            after=formatted(after.get(name, {})),
            before=shown(before, name),
            peak=shown(peak, name),
        )
        for name in names
    )


def joint_set(rendering: Rendering, *, previous: Rendering | None = None) -> JointSet:
    """A multi-role deployment's groups are admitted as one set by the joint admission check;
    a single role's groups are admitted one by one, except an Elastic EP role's members (D29):
    its boot width is admitted as one set, and the members a width increase adds (over
    ``previous``, the stored object's rendering) as one unit."""
    roles = tuple(r.name for r in rendering.roles)
    groups = sum(r.replicas for r in rendering.roles)
    elastic = [r for r in rendering.roles if r.elastic is not None]
    if elastic and len(roles) == 1 and previous is not None:
        was = previous.role(elastic[0].name)
        added = elastic[0].replicas - was.replicas if was is not None else 0
        if added > 0:
            groups = added
    return JointSet(joint=len(roles) > 1 or bool(elastic), roles=roles, groups=groups)


def explain_create(
    rendering: Rendering,
) -> tuple[tuple[RoleExplanation, ...], tuple[EntranceLoad, ...]]:
    """The roles and entrance totals of a create."""
    roles = tuple(create_role(r) for r in rendering.roles)
    return roles, entrance_loads(rendering, after=entrance_totals(rendering))
