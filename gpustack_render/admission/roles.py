"""The rules of one role in order (``validate_role``), and the role-count bound
(``roles.too-many``; ``docs/contract/admission.md`` §5 R10)."""

from __future__ import annotations

from gpustack_render.admission.arguments import (
    role_parallelism,
    validate_degrees,
    validate_owned_args,
    validate_owned_env,
)
from gpustack_render.admission.context import Context
from gpustack_render.admission.ports import validate_declared_ports
from gpustack_render.admission.resources import validate_resources, validate_shm_size
from gpustack_render.admission.volumes import validate_volumes
from gpustack_render.api.modeldeployment import MAX_ROLES, RoleSpec
from gpustack_render.core import errors
from gpustack_render.core.errors import ErrorList
from gpustack_render.core.paths import ROLES


def validate_role(ctx: Context, i: int, role: RoleSpec) -> ErrorList:
    """The rules of one role, in order (the shared-memory size beside the resource counts)."""
    path = ROLES.index(i)
    out = ErrorList()
    out.extend(validate_owned_args(ctx, role, path))
    out.extend(validate_degrees(ctx, role, path, role_parallelism(ctx, role)))
    out.extend(validate_owned_env(ctx, role, path))
    out.extend(validate_resources(role, path))
    out.extend(validate_shm_size(role, path))
    out.extend(validate_volumes(ctx, i, role, path))
    out.extend(validate_declared_ports(ctx, i, role, path))
    return out


def validate_role_count(ctx: Context) -> ErrorList:
    """``roles.too-many``: at most 10 roles."""
    out = ErrorList()
    count = len(ctx.md.spec.roles)
    if count > MAX_ROLES:
        out.append(
            errors.invalid(
                ROLES,
                count,
                f"at most {MAX_ROLES} roles: this operator's own role-count limit, not an "
                f"upstream number, because every role renders its own replicas, Services and "
                f"queue references",
                origin="roles.too-many",
            )
        )
    return out
