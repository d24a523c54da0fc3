"""Role kinds (``kinds.*``; ``docs/contract/admission.md`` §5 R15): a server alone, each other
kind once, only kinds the engine renders."""

from __future__ import annotations

from gpustack_render.admission.context import Context
from gpustack_render.core import errors
from gpustack_render.core.errors import ErrorList
from gpustack_render.core.paths import ROLES
from gpustack_render.core.vocabulary import RoleKind


def validate_kinds(ctx: Context) -> ErrorList:
    """``kinds.*``: kind combinations and kinds no engine renders."""
    out = ErrorList()
    kinds = ctx.kinds()
    if RoleKind.SERVER in kinds and any(k != RoleKind.SERVER for k in kinds):
        for i in range(len(kinds)):
            out.append(
                errors.invalid(
                    ROLES.index(i).child("kind"),
                    ctx.md.spec.roles[i].kind,
                    f"kinds {', '.join(sorted(set(kinds)))} in one deployment: a server serves "
                    f"whole requests by itself, so a server beside another kind describes no "
                    f"arrangement",
                    origin="kinds.server-mixed",
                )
            )
    first: dict[str, int] = {}
    for i, kind in enumerate(kinds):
        if kind == RoleKind.SERVER:
            continue
        if kind in first:
            out.append(
                errors.invalid(
                    ROLES.index(i).child("kind"),
                    ctx.md.spec.roles[i].kind,
                    f"kind {kind} is already declared by role "
                    f"{ctx.md.spec.roles[first[kind]].name!r}; only server may repeat",
                    origin="kinds.repeated",
                )
            )
        else:
            first[kind] = i
    for i, kind in enumerate(kinds):
        if kind == RoleKind.ENCODE:
            out.append(
                errors.invalid(
                    ROLES.index(i).child("kind"),
                    ctx.md.spec.roles[i].kind,
                    f"engine {ctx.base_engine} has no rendering for kind {kind} (on neither "
                    f"accelerator backend)",
                    origin="kinds.not-rendered-by-engine",
                )
            )
    return out
