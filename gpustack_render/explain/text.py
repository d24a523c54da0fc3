"""The explanation as a person reads it in a terminal: a heading with the verdict, one table
row per role, then what moved, what it costs and what each entrance must hold.

The layout is for reading, not parsing: ``-o json`` is the stable form (docs/explain.md).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from gpustack_render.explain.columns import table
from gpustack_render.explain.model import (
    HELD_BY_CACHE,
    ROLLING,
    EntranceLoad,
    Explanation,
    RoleExplanation,
    ScaleQuestion,
)
from gpustack_render.explain.observed import observed_text
from gpustack_render.explain.queuefit import fit_text

#: Group names listed per role before the rest are counted.
_GROUPS_SHOWN: Final = 3
#: A changed value longer than this is cut (the JSON carries it whole).
_VALUE_WIDTH: Final = 60


def _moved(old: object, new: object) -> str:
    return f"{new}" if old is None or old == new else f"{old} -> {new}"


def _ordinals(values: Sequence[int]) -> str:
    return ", ".join(str(v) for v in values) if values else "-"


def _value(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text if len(text) <= _VALUE_WIDTH else text[: _VALUE_WIDTH - 3] + "..."


def _amounts(amounts: Mapping[str, str] | None) -> str:
    if not amounts:
        return "-"
    return " ".join(f"{k}={v}" for k, v in amounts.items())


def _role_row(role: RoleExplanation) -> list[str]:
    return [
        role.name,
        role.kind,
        role.action,
        _moved(role.old_replicas, role.replicas),
        _moved(role.old_size, role.size),
        _moved(role.old_entrance, role.entrance),
        _ordinals(role.added),
        _ordinals(role.removed),
        _ordinals(role.replaced),
    ]


def _role_lines(role: RoleExplanation) -> list[str]:
    out: list[str] = []
    groups = list(role.groups[:_GROUPS_SHOWN])
    more = len(role.groups) - len(groups)
    shown = ", ".join(groups) + (f", ... ({more} more)" if more > 0 else "")
    out.append(f"{role.name}: groups {shown or '-'}")
    out.append(f"  one replica requests {_amounts(role.replica_requests)}")
    held = any(c.id == HELD_BY_CACHE for c in role.costs)
    if held:
        because = ", although:" if role.changes else ""
        out.append(
            f"  {role.action} held: no replica is replaced while the store connection does not "
            f"resolve; survivors {_ordinals(role.untouched)} stay{because}"
        )
    elif role.action == "roll":
        out.append(
            f"  rolls: every replica replaced, one per pass, highest first "
            f"({_ordinals(role.replaced)}), because:"
        )
    elif role.action == "floor":
        out.append(
            "  replicas below the render-version floor are replaced, one per pass, highest "
            f"first ({_ordinals(role.replaced)} at most); those at the floor stay"
        )
    elif role.action == "scale":
        if role.added:
            out.append(f"  scale up: ordinals {_ordinals(role.added)} are created at once")
        if role.removed:
            out.append(
                f"  scale down: ordinals {_ordinals(role.removed)} leave, highest first, each "
                "with its own Workload (the quota it held is released)"
            )
        out.append(f"  survivors {_ordinals(role.untouched)} are untouched: not restarted")
    for change in role.changes:
        where = (
            change.path if change.source == "ModelDeployment" else f"{change.source}: {change.path}"
        )
        out.append(f"    {where}: {_value(change.old)} -> {_value(change.new)}")
    if role.action in ROLLING and not held:
        out.append(
            "  each old replica leaves before its replacement is created; a replacement is a "
            "fresh admission, and the next healthy replica leaves only once every replica holds "
            "an admitted Workload"
        )
    if role.action in ROLLING and role.added:
        out.append(f"  new ordinals {_ordinals(role.added)} are created with the new configuration")
    if role.action in ROLLING and role.removed:
        out.append(f"  ordinals {_ordinals(role.removed)} leave first, highest first")
    for cost in role.costs:
        out.append(f"  ! {cost.message} [{cost.id}]")
    return out


def _entrance_lines(loads: Sequence[EntranceLoad]) -> list[str]:
    if not loads:
        return []
    out = ["", "ENTRANCE (what the ClusterQueue of the same name must hold for this deployment)"]
    for load in loads:
        out.append(f"{load.entrance}: LocalQueue {load.local_queue}; roles {', '.join(load.roles)}")
        rows: list[list[str]] = []
        if load.before is not None:
            rows.append(["  before", _amounts(load.before)])
        rows.append(["  after" if load.before is not None else "  total", _amounts(load.after)])
        if load.peak is not None:
            rows.append(["  peak during the roll", _amounts(load.peak)])
        width = max(len(r[0]) for r in rows)
        out.extend(f"{label.ljust(width)}  {value}" for label, value in rows)
    return out


def _router_lines(answer: Explanation) -> list[str]:
    router = answer.router
    assert router is not None
    title = f"router {router.name}" + (" (removed)" if router.removed else "")
    if router.failure:
        return [f"{title}: not rendered: {router.failure}"]
    if not router.changes:
        lines = [f"{title}: its objects are unchanged"]
    else:
        lines = [f"{title}:"]
        lines.extend(f"  {c.kind} {c.name}: {c.change}" for c in router.changes)
    if answer.rolls():
        lines.append(
            "  the engine roles roll as the table above says, for the fields it names; the "
            "router's own objects restart no engine Pod"
        )
    else:
        lines.append("  no engine Pod restarts for the router")
    return lines


def _scaling_lines(questions: Sequence[ScaleQuestion]) -> list[str]:
    """``--replicas``: per asked count, the roles' counts and what each entrance would hold."""
    if not questions:
        return []
    out = ["", "SCALING (what the asked count needs from the queue)"]
    for q in questions:
        noun = "unit(s)" if q.group else "replica(s)"
        where = f"scaler {q.scaler}" if q.scaler else "roles[].replicas"
        if q.bounds is not None:
            where += f", bounds {q.bounds[0]}..{q.bounds[1]}"
        head = f"{q.target}={q.replicas} {noun} ({where})"
        if q.refused:
            out.append(f"{head}: refused: {q.refused}")
            continue
        moves = ", ".join(f"{r.name} {_moved(r.before, r.after)}" for r in q.roles)
        out.append(f"{head}: {moves}")
        for load in q.entrances:
            out.append(f"  {load.entrance}: now {_amounts(load.before)}")
            out.append(f"  {' ' * len(load.entrance)}  then {_amounts(load.after)}")
        out.extend(f"  {fit_text(fit)}" for fit in q.queues)
    return out


def explanation_text(answer: Explanation) -> str:
    """The whole explanation as terminal text, ending in a newline."""
    adm = answer.admission
    verdict = "allowed" if adm.allowed else f"refused ({adm.code} {adm.reason})"
    lines = [f"ModelDeployment {answer.namespace}/{answer.name}: {adm.operation} {verdict}"]
    lines.extend(f"warning: {w}" for w in adm.warnings)
    lines.extend(
        f"refused: {c.message} [{c.origin}]" if c.origin else f"refused: {c.message}"
        for c in adm.causes
    )
    if not adm.allowed and not adm.causes and adm.message:
        lines.append(f"refused: {adm.message}")
    lines.extend(f"cannot render the {p.side} object: {p.message}" for p in answer.problems)
    if answer.roles:
        lines.append("")
        header = [
            "ROLE",
            "KIND",
            "ACTION",
            "REPLICAS",
            "PODS/REPLICA",
            "ENTRANCE",
            "ADDED",
            "REMOVED",
            "REPLACED",
        ]
        lines.extend(table([header, *(_role_row(r) for r in answer.roles)]))
        for role in answer.roles:
            lines.append("")
            lines.extend(_role_lines(role))
    lines.extend(_entrance_lines(answer.entrances))
    lines.extend(_scaling_lines(answer.scaling))
    if answer.joint is not None and answer.roles:
        lines.append("")
        joint = answer.joint
        if joint.joint:
            lines.append(
                f"joint admission: the {joint.groups} groups of roles {', '.join(joint.roles)} are "
                "admitted as one set: none runs until every one has reserved quota"
            )
        else:
            lines.append("joint admission: none (one role: each group is admitted on its own)")
    if answer.render_version is not None:
        rv = answer.render_version
        floor = _moved(rv.old_floor, rv.floor)
        lines.append(f"render version: this renderer {rv.current}; floor {floor}")
    if answer.operation == "UPDATE" and answer.roles:
        lines.append(f"replaced: {answer.replaced()} replica(s) at most")
    if answer.router is not None:
        lines.append("")
        lines.extend(_router_lines(answer))
    if answer.notes:
        lines.append("")
        lines.extend(f"note: {n}" for n in answer.notes)
    if answer.observed is not None:
        lines.append("")
        lines.extend(observed_text(answer.observed))
    return "\n".join(lines) + "\n"
