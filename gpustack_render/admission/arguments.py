"""Rules on a role's command line and environment: owned keys (``args.owned-flag``,
``env.owned-name``), parallel degrees (``degrees.unreadable``, ``degrees.cards-mismatch``), the
served model name (§8.1) and ``--kv-cache-dtype`` while a pool is set (§10.3).

Spelling follows :mod:`gpustack_render.engines.flags`; the owned sets follow
:mod:`gpustack_render.engines.owned`.
"""

from __future__ import annotations

from gpustack_render.admission.context import Context, whole_cards
from gpustack_render.api.modeldeployment import RoleSpec
from gpustack_render.core import errors
from gpustack_render.core.errors import ErrorList
from gpustack_render.core.paths import FieldPath
from gpustack_render.core.vocabulary import EngineFamily
from gpustack_render.deployment import roles
from gpustack_render.engines.flags import find_flag, owned_hits, resolves_to, spelled, values_at
from gpustack_render.engines.owned import (
    KV_CACHE_DTYPE_FLAG,
    SERVED_MODEL_NAME_FLAG,
    owned_args,
    owned_env,
)
from gpustack_render.engines.parallelism import INT64_MAX, Parallelism


def role_parallelism(ctx: Context, role: RoleSpec) -> Parallelism:
    """The parser's reading of ``role`` (§14)."""
    return roles.role_parallelism(role, engine=ctx.base_engine)


def validate_owned_args(ctx: Context, role: RoleSpec, path: FieldPath) -> ErrorList:
    """``args.owned-flag``: an ``extraArgs`` token of a managed role that the engine reads as an
    owned flag."""
    out = ErrorList()
    if not role.managed:
        return out  # extraArgs beside a command are inert and refused nothing (per seed)
    engine = ctx.base_engine
    keys = owned_args(engine)
    for j, token, key in owned_hits(role.extra_args or (), keys, engine):
        out.append(
            errors.invalid(
                path.child("extraArgs").index(j),
                token,
                f"{spelled(token, key)} is owned by the operator on engine {engine}: it renders "
                f"{key} itself, and two values for one connector argument cannot be told apart. "
                f"To own the whole command line instead, set {path.child('command')}",
                origin="args.owned-flag",
            )
        )
    return out


def validate_degrees(
    ctx: Context, role: RoleSpec, path: FieldPath, parsed: Parallelism
) -> ErrorList:
    """``degrees.unreadable`` (degrees cannot be read) and ``degrees.cards-mismatch`` (declared
    width over the card count)."""
    out = ErrorList()
    if parsed.error is not None:
        err = parsed.error
        out.append(
            errors.invalid(
                path,
                role.name,
                f"the parallel degrees of role {role.name!r} cannot be read: {err.flag}: "
                f"{err.problem} (as written: {err.token!r}). Fix the value, or set "
                f"{path.child('command')} to own the whole command line",
                origin="degrees.unreadable",
            )
        )
        return out
    cards = whole_cards(role)
    if cards is None or cards <= 0 or parsed.wiring:
        return out
    width = parsed.width()
    if width <= cards:
        return out
    behind = [f"{flag}={value}" for flag, value in parsed.width_factors() if value > 1]
    overflow = width > INT64_MAX
    stated = "a width that exceeds the card count" if overflow else f"a width of {width}"
    out.append(
        errors.invalid(
            path.child("resources", "accelerator"),
            cards,
            f"role {role.name!r} requests {cards} accelerator(s) per Pod, but its declared "
            f"degrees ({', '.join(behind)}) need {stated} on every member. The width is per "
            f"member, so a larger size does not rescue it: request at least that many "
            f"accelerators or lower the degrees",
            origin="degrees.cards-mismatch",
        )
    )
    return out


def _is_env_name(name: str) -> bool:
    """What a Pod's ``env[].name`` may be: printable ASCII other than ``=``."""
    return all(" " <= c <= "~" and c != "=" for c in name)


def validate_owned_env(ctx: Context, role: RoleSpec, path: FieldPath) -> ErrorList:
    """``env.owned-name``: an ``env`` name owned for the engine (take-over roles included);
    ``env.name-invalid``: a name no Pod can carry (the API server would refuse every Pod of the
    role)."""
    out = ErrorList()
    engine = ctx.base_engine
    owned = owned_env(engine)
    for j, entry in enumerate(role.env or ()):
        if not _is_env_name(entry.name):
            out.append(
                errors.invalid(
                    path.child("env").index(j).child("name"),
                    entry.name,
                    "an environment variable name must consist only of printable ASCII "
                    "characters other than '='",
                    origin="env.name-invalid",
                )
            )
            continue
        if entry.name not in owned:
            continue
        out.append(
            errors.invalid(
                path.child("env").index(j),
                entry.name,
                f"{entry.name} is owned by the operator on engine {engine} and would not be "
                f"merged with the value it renders. To own the whole command line and its "
                f"environment instead, set {path.child('command')}",
                origin="env.owned-name",
            )
        )
    return out


def served_names(ctx: Context, role: RoleSpec) -> list[list[str]]:
    """The values of every ``--served-model-name`` occurrence in a role's ``extraArgs``."""
    args = list(role.extra_args or ())
    many = ctx.base_engine.family is EngineFamily.VLLM
    return [
        values_at(args, hit.position, many=many)
        for hit in find_flag(args, SERVED_MODEL_NAME_FLAG, ctx.base_engine)
    ]


def validate_served_name(
    ctx: Context, role: RoleSpec, path: FieldPath, *, old: RoleSpec | None, old_ctx: Context | None
) -> ErrorList:
    """§8.1: ``--served-model-name`` in a managed role's ``extraArgs`` must carry exactly the
    model name; grandfathered on UPDATE when the names, the model name and the command length
    are unchanged."""
    out = ErrorList()
    if not role.managed:
        return out
    given = served_names(ctx, role)
    model = ctx.md.spec.model.name
    if not given or all(values == [model] for values in given):
        return out
    if (
        old is not None
        and old_ctx is not None
        and served_names(old_ctx, old) == given
        and old_ctx.md.spec.model.name == model
        and len(old.command or ()) == len(role.command or ())
    ):
        return out
    flat = [name for values in given for name in values]
    out.append(
        errors.invalid(
            path.child("extraArgs"),
            ", ".join(flat),
            f"{SERVED_MODEL_NAME_FLAG} must carry exactly one value, {model!r} "
            f"(spec.model.name): routers, tokenizer calls and metrics match on it. Leave the "
            f"flag out and the operator renders it",
            origin="served-name.mismatch",
        )
    )
    return out


def validate_kv_cache_dtype(ctx: Context, role: RoleSpec, path: FieldPath) -> ErrorList:
    """§10.3: ``--kv-cache-dtype`` in a managed role's ``extraArgs`` while ``spec.kvCache``
    names a pool (Setting on, object not being deleted); never grandfathered."""
    out = ErrorList()
    if (
        not ctx.settings.kv_cache_dtype_owned
        or not ctx.has_cache
        or ctx.deleting
        or not role.managed
    ):
        return out
    engine = ctx.base_engine
    keys = (*owned_args(engine), KV_CACHE_DTYPE_FLAG)
    for j, token in enumerate(role.extra_args or ()):
        if resolves_to(token, keys, engine) != KV_CACHE_DTYPE_FLAG:
            continue
        out.append(
            errors.invalid(
                path.child("extraArgs").index(j),
                token,
                f"{spelled(token, KV_CACHE_DTYPE_FLAG)} is set by the operator from the "
                f"KVCachePoolBinding's dtype while spec.kvCache names a pool. Name a Binding "
                f"declaring the dtype you want, or set {path.child('command')} to own the "
                f"command line",
                origin="kv-cache.dtype-flag-owned",
            )
        )
    return out
