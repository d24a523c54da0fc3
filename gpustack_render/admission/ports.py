"""Port rules: reserved listener ports declared (``ports.reserved-port-declared``), ``--port``
against the first declared port (§6.1) and ``--port`` inside the reserved set on a role without
``ports`` (§6.2).

The reserved set of a role is :meth:`Context.reserved_ports` (docs/contract/admission.md §15).
"""

from __future__ import annotations

from gpustack_render.admission.context import Context
from gpustack_render.api.modeldeployment import RoleSpec
from gpustack_render.core import errors
from gpustack_render.core.errors import ErrorList
from gpustack_render.core.paths import ROUTER, FieldPath
from gpustack_render.deployment.roles import role_argv
from gpustack_render.engines.flags import find_flag
from gpustack_render.engines.owned import PORT_FLAG
from gpustack_render.engines.parallelism import parse_int


def _reserved_text(reserved: dict[int, str]) -> str:
    return ", ".join(f"{port} ({what})" for port, what in sorted(reserved.items()))


def own_port(ctx: Context, role: RoleSpec) -> tuple[str | None, str]:
    """The role's own ``--port`` value (the last occurrence) and the field it came from."""
    argv, where = role_argv(role)
    hits = find_flag(argv, PORT_FLAG, ctx.base_engine)
    return (hits[-1].value if hits else None), where


def validate_declared_ports(ctx: Context, i: int, role: RoleSpec, path: FieldPath) -> ErrorList:
    """``ports.reserved-port-declared``: a declared port inside the role's reserved set."""
    out = ErrorList()
    if not role.ports:
        return out
    reserved = ctx.reserved_ports(i, out, origin="ports.reserved-port-declared")
    if not reserved:
        return out
    engine = ctx.engine_label(i, out, origin="ports.reserved-port-declared")
    for port in role.ports:
        if port.port not in reserved:
            continue
        where = ROUTER if ctx.router else path.child("ports")
        out.append(
            errors.invalid(
                where,
                port.port,
                f"role {role.name!r} declares port {port.port}, which the operator reserves "
                f"for {reserved[port.port]} on engine {engine}{ctx.router_label()}; reserved "
                f"on this role: {_reserved_text(reserved)}. Declare another port",
                origin="ports.reserved-port-declared",
            )
        )
    return out


def validate_port_flag(
    ctx: Context, i: int, role: RoleSpec, path: FieldPath, *, old: RoleSpec | None
) -> ErrorList:
    """§6.1: the role's own ``--port`` differs from its first declared port.

    Skipped for roles without ``ports`` and for direct decoders (their proxy owns the declared
    port); grandfathered on UPDATE when the role's ports and arguments are unchanged.
    """
    out = ErrorList()
    if not role.ports:
        return out
    value, where = own_port(ctx, role)
    if value is None:
        return out
    declared = role.ports[0].port
    if parse_int(value) == declared:
        return out
    if ctx.is_direct_decoder(i, out, origin="port-flag.differs-from-declared") is not False:
        return out
    if (
        old is not None
        and old.ports == role.ports
        and old.command == role.command
        and old.extra_args == role.extra_args
    ):
        return out
    out.append(
        errors.invalid(
            path.child(where),
            f"{PORT_FLAG}={value}",
            f"role {role.name!r} passes {PORT_FLAG} {value} in {path.child(where)}, but its "
            f"first declared port ({path.child('ports').index(0).child('port')}) is {declared}; "
            f"the Service and probes follow the declared port. Drop {PORT_FLAG} or make the two "
            f"equal",
            origin="port-flag.differs-from-declared",
        )
    )
    return out


def reserved_port_collision(
    ctx: Context, i: int, role: RoleSpec, errs: ErrorList
) -> tuple[int, dict[int, str]] | None:
    """A managed role without ``ports`` whose own ``--port`` is in its reserved set."""
    if role.ports or not role.managed:
        return None
    value, _ = own_port(ctx, role)
    port = parse_int(value) if value is not None else None
    if port is None:
        return None
    reserved = ctx.reserved_ports(i, errs, origin="port-flag.reserved")
    if port not in reserved:
        return None
    return port, reserved


def validate_reserved_port_flag(
    ctx: Context,
    i: int,
    role: RoleSpec,
    path: FieldPath,
    *,
    old_ctx: Context | None,
) -> ErrorList:
    """§6.2: ``--port`` inside the reserved set on a role with no ``ports``.

    A stored collision (the same role and port colliding in the old object) is left alone until
    an edit changes it; an edit that creates one (such as adding a router) is refused.
    """
    out = ErrorList()
    hit = reserved_port_collision(ctx, i, role, out)
    if hit is None:
        return out
    port, reserved = hit
    if old_ctx is not None:
        for k, old_role in enumerate(old_ctx.md.spec.roles):
            if old_role.name != role.name:
                continue
            scratch = ErrorList()
            stored = reserved_port_collision(old_ctx, k, old_role, scratch)
            if stored is not None and stored[0] == port:
                return out
    engine = ctx.engine_label(i, out, origin="port-flag.reserved")
    where = ROUTER if ctx.router else path.child("extraArgs")
    out.append(
        errors.invalid(
            where,
            f"{PORT_FLAG}={port}",
            f"role {role.name!r} passes {PORT_FLAG} {port} in {path.child('extraArgs')}, which "
            f"the operator reserves for {reserved[port]} on engine {engine}"
            f"{ctx.router_label()}; reserved on this role: {_reserved_text(reserved)}. Pass "
            f"another port",
            origin="port-flag.reserved",
        )
    )
    return out
