"""Topology levels (``topology.*``; ``docs/contract/admission.md`` §5 R16): a qualified label key,
never the implicit hostname level."""

from __future__ import annotations

from typing import Final

from gpustack_render.admission.context import Context
from gpustack_render.admission.names import qualified_name_problems
from gpustack_render.core import errors
from gpustack_render.core.errors import ErrorList
from gpustack_render.core.paths import ROLES

#: The implicit lowest topology level; naming it explicitly is refused
#: (``topology.hostname-level``).
HOSTNAME_LEVEL: Final = "kubernetes.io/hostname"


def validate_topology(ctx: Context) -> ErrorList:
    """``topology.invalid-level-key`` (not a qualified label key) and
    ``topology.hostname-level`` (the implicit hostname level)."""
    out = ErrorList()
    for i, role in enumerate(ctx.md.spec.roles):
        level = role.topology.required_level if role.topology else None
        if not level:
            continue
        path = ROLES.index(i).child("topology", "requiredLevel")
        if level == HOSTNAME_LEVEL:
            out.append(
                errors.forbidden(
                    path,
                    f"{HOSTNAME_LEVEL} is the implicit lowest level; omit the field to leave "
                    f"placement unconstrained",
                    origin="topology.hostname-level",
                )
            )
            continue
        problems = qualified_name_problems(level)
        if problems:
            out.append(
                errors.invalid(
                    path,
                    level,
                    f"{path} must be a label key naming a topology level: {'; '.join(problems)}",
                    origin="topology.invalid-level-key",
                )
            )
    return out
