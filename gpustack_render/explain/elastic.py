"""Explaining an Elastic EP role (docs/elastic-ep.md, "What is rendered"; D29).

An elastic role's members never roll (docs/contract/elastic-ep.md §3.8): a width increase creates
the new ordinals as Ray workers, and the engine grows to the new width through its own resize
endpoint, the master keeping the boot width it was created with. Any other edit that moves the
members' pod-spec-hash reaches only members created afterwards. The width may grow, never
shrink. So for an elastic role an update is ``scale`` (members added) or ``unchanged``, never
``roll``, and its costs say what the added members need from the queue.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from gpustack_render.explain.create import replica_amounts
from gpustack_render.explain.model import Change, Cost
from gpustack_render.explain.resourcetotals import add, formatted
from gpustack_render.rendering.renderer import RoleRendering

MEMBERS_ADDED: Final = "explain.elastic-members-added"
NO_ROLL: Final = "explain.elastic-no-roll"


def _amounts(amounts: dict[str, str]) -> str:
    return " ".join(f"{k}={v}" for k, v in amounts.items()) or "nothing"


def _ordinals(values: Sequence[int]) -> str:
    return ", ".join(str(v) for v in values)


_UNIT_RESOURCES: Final = ("cpu", "memory", "ephemeral-storage")


def _split(amounts: dict[str, str]) -> tuple[str, str]:
    """(the whole cards, as ``<n> <key>``; the rest, as ``name=value``) of one member."""
    cards = ", ".join(f"{v} {k}" for k, v in amounts.items() if k not in _UNIT_RESOURCES)
    rest = " ".join(f"{k}={v}" for k, v in amounts.items() if k in _UNIT_RESOURCES)
    return cards, rest


def update_costs(
    old: RoleRendering,
    new: RoleRendering,
    *,
    added: Sequence[int],
    changes: Sequence[Change],
    floor_raised: bool,
) -> list[Cost]:
    """The costs of an edit to an elastic role: the members a width increase adds and what
    they need, and that nothing running restarts."""
    out: list[Cost] = []
    was = old.elastic.width if old.elastic is not None else old.replicas
    now = new.elastic.width if new.elastic is not None else new.replicas
    if added:
        member = replica_amounts(new)
        total = formatted(add({}, member, times=len(added)))
        cards, rest = _split(formatted(member))
        each = f"{cards} (its TP), with {rest}," if cards else f"{rest}"
        out.append(
            Cost(
                MEMBERS_ADDED,
                f"width {was} -> {now}: members {_ordinals(added)} are created as Ray workers "
                "and admitted together as one unit; no member restarts: the master keeps the "
                "boot width it was created with, and once the new members have joined Ray the "
                f"controller resizes the engine to {now} through its resize endpoint. Each new "
                f"member asks for {each} on entrance {new.queue}; "
                f"together {_amounts(total)} more. The width may grow, never shrink",
            )
        )
    elif now < was:
        out.append(
            Cost(
                MEMBERS_ADDED,
                f"width {was} -> {now}: the width may grow, never shrink (scale-down is not "
                f"supported yet); keep it at {was} or raise it",
            )
        )
    if changes or floor_raised:
        moved = (
            f"{len(changes)} input(s) of the pod-spec-hash moved"
            if changes
            else "the render-version floor rose"
        )
        out.append(
            Cost(
                NO_ROLL,
                f"{moved}, but Elastic EP members never roll: every running member keeps its "
                "configuration, and only members created later (a width increase, a member "
                "that is replaced after it failed) are created with the new one",
            )
        )
    return out
