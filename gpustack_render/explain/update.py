"""Explaining an update: per role unchanged, scale, roll, or a roll of the replicas below a
raised render-version floor; the fields that moved each rolled role's pod-spec-hash; and the
costs the edit carries.

The rules are the rollout's (docs/contract/controller.md §5–§8):

- changing ``replicas`` adds or removes whole groups, highest ordinal first on the way down,
  and never touches a survivor;
- anything else that moves a role's pod-spec-hash (its own fields, a deployment field, or a
  bound object: the InstanceType, the KV-cache Binding and pool) replaces every surviving
  replica, one per role per pass, highest ordinal first: one rollout however many fields moved;
- raising the render-version floor (``min-render-version``) replaces the replicas rendered
  below it, and only those;
- an edit to one role never rewrites a sibling's groups, except on the vLLM-Ascend path, where
  the transfer document both halves of the pair carry renders both roles' degrees;
- an Elastic EP role's members never roll (``elastic.py``): a width increase adds members, any
  other edit reaches only members created afterwards;
- while a store connection that resolved before (``status.kvCache`` set) resolves no more, the
  controller deletes no outdated replica (``RolloutHeldByCache``): a role that would roll
  replaces nothing yet (docs/contract/controller.md §6 step 3).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from gpustack_render.core.paths import ROLES
from gpustack_render.explain import elastic
from gpustack_render.explain.changes import PEER_LEG_LABEL, RESOLVED, hash_changes
from gpustack_render.explain.create import (
    create_role,
    entrance_loads,
    entrance_totals,
    replica_amounts,
)
from gpustack_render.explain.model import (
    HELD_BY_CACHE,
    ROLLING,
    Action,
    Change,
    Cost,
    EntranceLoad,
    RoleExplanation,
)
from gpustack_render.explain.resourcetotals import Amounts, add, peak
from gpustack_render.rendering.renderer import Rendering, RoleRendering


def _highest_first(values: range) -> tuple[int, ...]:
    return tuple(reversed(values))


def update_role(
    old: RoleRendering,
    new: RoleRendering,
    *,
    index: int,
    old_rendering: Rendering,
    new_rendering: Rendering,
    held: bool = False,
) -> RoleExplanation:
    """One role of an update (``index`` is its position in the new spec). ``held``: the
    controller holds every outdated replica (the store connection no longer resolves), so a
    role that would roll replaces nothing yet."""
    changes = hash_changes(
        old, new, index=index, old_rendering=old_rendering, new_rendering=new_rendering
    )
    survivors = range(min(old.replicas, new.replicas))
    added = tuple(range(old.replicas, new.replicas))
    removed = _highest_first(range(new.replicas, old.replicas))
    floor_raised = new_rendering.floor > old_rendering.floor
    action: Action
    replaced: tuple[int, ...] = ()
    untouched: tuple[int, ...] = ()
    if new.elastic is not None:
        # Elastic EP members never roll (explain/elastic.py): a width edit adds members, and
        # any other edit reaches only the members created afterwards.
        return replace(
            create_role(new),
            action="scale" if added or removed else "unchanged",
            old_replicas=old.replicas,
            old_size=old.size,
            old_instance_type=old.instance_type,
            old_entrance=old.queue,
            added=added,
            removed=removed,
            untouched=tuple(survivors),
            changes=changes,
            costs=tuple(
                elastic.update_costs(
                    old, new, added=added, changes=changes, floor_raised=floor_raised
                )
            ),
        )
    if changes:
        action, replaced = "roll", _highest_first(survivors)
    elif floor_raised and survivors:
        action, replaced = "floor", _highest_first(survivors)
    else:
        action = "scale" if added or removed else "unchanged"
        untouched = tuple(survivors)
    held = held and action in ROLLING
    if held:
        replaced, untouched = (), tuple(survivors)
    costs = _role_costs(
        old, new, action=action, changes=changes, replaced=replaced, rendering=new_rendering
    )
    if held:
        costs.append(_held_cost(new_rendering))
    return replace(
        create_role(new),
        action=action,
        old_replicas=old.replicas,
        old_size=old.size,
        old_instance_type=old.instance_type,
        old_entrance=old.queue,
        added=added,
        removed=removed,
        untouched=untouched,
        replaced=replaced,
        changes=changes,
        costs=tuple(costs),
    )


def _held_cost(rendering: Rendering) -> Cost:
    cache = rendering.cache
    why = f": {cache.reason}" if cache is not None and cache.reason else ""
    return Cost(
        HELD_BY_CACHE,
        "held: the KV-cache store connection resolved before (status.kvCache is set) and does "
        f"not resolve now{why}; the controller deletes no outdated replica of this role until "
        "it does (RolloutHeldByCache), and a replica it creates meanwhile has no store client. "
        "Once the connection resolves, the replicas roll only if their pod-spec-hash still "
        "differs",
    )


def _role_costs(
    old: RoleRendering,
    new: RoleRendering,
    *,
    action: Action,
    changes: Sequence[Change],
    replaced: Sequence[int],
    rendering: Rendering,
) -> list[Cost]:
    out: list[Cost] = []
    if action not in ROLLING:
        return out
    if len(changes) > 1:
        out.append(
            Cost(
                "explain.one-rollout",
                f"{len(changes)} inputs of the pod-spec-hash moved: still one rollout, not "
                f"{len(changes)}; the role turns over one replica at a time, each replacement's "
                "fresh admission gating the next deletion",
            )
        )
    if replaced and new.replicas == 1:
        out.append(
            Cost(
                "explain.one-replica-gap",
                f"role {new.name} has one replica: it leaves before its replacement is admitted, "
                "so the role serves nothing until the replacement is ready",
            )
        )
    if replaced and old.queue != new.queue:
        out.append(
            Cost(
                "explain.entrance-moved",
                f"replacements queue on entrance {new.queue} (LocalQueue "
                f"{rendering.namespace}/{new.queue}), not {old.queue}: each is a fresh admission "
                f"there, and the quota on {old.queue} is released as each old replica leaves",
            )
        )
    if replaced and old.size != new.size:
        out.append(
            Cost(
                "explain.size-regroups",
                f"each replacement group declares a total of {_pods(new.size)}; an old group "
                f"keeps its {_pods(old.size)} until it leaves (a running group is never "
                "reshaped)",
            )
        )
    if any(c.source == RESOLVED and c.path.startswith(PEER_LEG_LABEL) for c in changes):
        out.append(
            Cost(
                "explain.pair-rolls",
                "the vLLM-Ascend pair rolls together: the transfer document both halves carry "
                "renders both roles' degrees, so a degree edit on either replaces both; until "
                "both halves converge the pair can fail to complete a transfer",
            )
        )
    return out


def _pods(n: int) -> str:
    return f"{n} Pod" if n == 1 else f"{n} Pods"


def sibling_costs(roles: Sequence[RoleExplanation]) -> tuple[RoleExplanation, ...]:
    """Roles an edit does not reach get the note that their groups stay as they are, when a
    sibling rolls."""
    rolling = [r.name for r in roles if r.action in ROLLING]
    if not rolling:
        return tuple(roles)
    out: list[RoleExplanation] = []
    for role in roles:
        if role.action in ("unchanged", "scale"):
            cost = Cost(
                "explain.sibling-untouched",
                f"the edit does not reach role {role.name}: its Workloads, admission, member "
                f"names and DNS stay as they are while {', '.join(rolling)} "
                + ("rolls" if len(rolling) == 1 else "roll"),
            )
            role = replace(role, costs=(*role.costs, cost))
        out.append(role)
    return tuple(out)


def explain_update(
    old: Rendering, new: Rendering, *, held: bool = False
) -> tuple[tuple[RoleExplanation, ...], tuple[EntranceLoad, ...]]:
    """The roles and the entrance loads (before, after, peak during the roll) of an update.
    ``held``: the controller holds outdated replicas for the cache (``reconcile.rolloutinputs.
    cache_hold`` of the stored object and ``new``'s cache resolution)."""
    roles: list[RoleExplanation] = []
    for index, role in enumerate(new.roles):
        previous = old.role(role.name)
        if previous is None:  # admission refuses a role added; explained as a create anyway
            roles.append(create_role(role))
            continue
        roles.append(
            update_role(
                previous, role, index=index, old_rendering=old, new_rendering=new, held=held
            )
        )
    explained = sibling_costs(roles)
    before = entrance_totals(old)
    after = entrance_totals(new)
    by_entrance: dict[str, list[str]] = {}
    for rendering in (old, new):
        for r in rendering.roles:
            names = by_entrance.setdefault(r.queue, [])
            if r.name not in names:
                names.append(r.name)
    rolling = any(r.action in ROLLING for r in explained)
    return explained, entrance_loads(
        new,
        after=after,
        before=before,
        peak=_peaks(old, new, explained) if rolling else None,
        roles_by_entrance=by_entrance,
    )


def _peaks(old: Rendering, new: Rendering, roles: Sequence[RoleExplanation]) -> dict[str, Amounts]:
    """Per entrance, the most the deployment holds at any step of the roll: at step ``s`` each
    role has replaced ``min(s, its replaced count)`` replicas (one per role per pass), a
    scale-down has shed its ordinals and a scale-up has created its own."""
    steps = max((len(r.replaced) for r in roles), default=0)
    states: list[Mapping[str, Amounts]] = []
    for step in range(steps + 1):
        state: dict[str, Amounts] = {}
        for explained in roles:
            now = new.role(explained.name)
            was = old.role(explained.name)
            if now is None:
                continue
            done = min(step, len(explained.replaced))
            survivors = len(explained.untouched) + len(explained.replaced)
            new_amount = replica_amounts(now)
            if was is not None:
                state[was.queue] = add(
                    state.get(was.queue, {}), replica_amounts(was), times=survivors - done
                )
            state[now.queue] = add(
                state.get(now.queue, {}), new_amount, times=done + len(explained.added)
            )
        states.append(state)
    names = {name for state in states for name in state}
    return {name: peak(*(s.get(name, {}) for s in states)) for name in names}


def dropped_fields(
    old: Mapping[str, Any],
    new: Mapping[str, Any],
    *,
    old_rendering: Rendering,
    new_rendering: Rendering,
) -> list[str]:
    """Notes for role fields the stored object carries and the new object omits: a merge patch
    replaces the roles list wholesale, so an omitted field falls back to its default. A field
    whose default is the value it had (``kind: Server``, ``size: 1`` as the API server stores
    them) changes nothing and gets no note."""
    notes: list[str] = []
    old_roles = _roles_by_name(old)
    for index, role in enumerate(_roles(new)):
        name = str(role.get("name"))
        before = old_roles.get(name)
        if before is None:
            continue
        was, now = old_rendering.role(name), new_rendering.role(name)
        for key in before:
            if key not in role and not _same_after_defaults(key, was, now):
                notes.append(
                    f"{ROLES.index(index).child(key)} is not in the new object: it falls back "
                    f"to its default (it was {_short(before[key])}); a merge patch replaces the "
                    "roles list wholesale, so restate the role in full or use a JSON patch"
                )
    return notes


def _same_after_defaults(key: str, old: RoleRendering | None, new: RoleRendering | None) -> bool:
    """Whether role field ``key`` reads the same in both renderings once defaulted (the
    pod-spec-hash input holds the defaulted role; ``replicas`` is read on its own)."""
    if old is None or new is None:
        return False
    if key == "replicas":
        return old.replicas == new.replicas
    was, now = old.hash_input.get("role"), new.hash_input.get("role")
    if not isinstance(was, Mapping) or not isinstance(now, Mapping) or key not in was:
        return False
    return bool(was[key] == now.get(key))


def _roles(doc: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    spec = doc.get("spec")
    roles = spec.get("roles") if isinstance(spec, Mapping) else None
    return [r for r in roles if isinstance(r, Mapping)] if isinstance(roles, list) else []


def _roles_by_name(doc: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {str(r.get("name")): r for r in _roles(doc)}


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return text if len(text) <= 60 else text[:57] + "..."
