"""The mutating accelerator default (``docs/contract/admission.md`` §3).

Nearly every default lives in the CRD schema; the one a schema cannot reach is a role's
accelerator count, which depends on the InstanceType the role names. The admission webhook
applies it (its JSON Patch comes from ``jsonpatch.make_patch``), and the renderer applies it too
(D18), because a stored deployment has been through it: rendering a raw file and rendering the
stored object then give the same Pods.

An elastic role (``roles[].elasticEp``, docs/contract/elastic-ep.md §2.1) defaults to its
tensor-parallel degree instead: each member of the profile is one TP group on TP whole cards.

Both functions are pure: the input is never modified, a new object is returned.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from gpustack_render.api.inputs import InstanceType
from gpustack_render.api.modeldeployment import ModelDeployment
from gpustack_render.core import errors
from gpustack_render.core.errors import ErrorList, FieldError
from gpustack_render.core.paths import ROLES
from gpustack_render.core.vocabulary import Engine
from gpustack_render.engines.parallelism import Parallelism, parse_parallelism
from gpustack_render.schema.lookups import LookupFailed, Lookups

#: The count set on a role of an acceleratable type that states none (a canonical Quantity, D18).
ACCELERATOR_DEFAULT: Final = "1"

ORIGIN: Final = "accelerator.default-type-unreadable"
#: An elastic role's default needs its tensor-parallel degree, which its ``extraArgs`` or ``env``
#: do not let the parser read.
TP_ORIGIN: Final = "accelerator.default-tp-unreadable"

#: The API engine names and the parser each reads its flags with.
_ENGINES: Final = {"vLLM": Engine.VLLM, "SGLang": Engine.SGLANG}


def elastic_parallelism(
    extra_args: Sequence[str] | None, env: Iterable[tuple[str, str | None]], *, engine: Engine
) -> Parallelism:
    """The degrees of an elastic role (docs/contract/elastic-ep.md §1, §2.2 S5): read from its
    ``extraArgs`` and ``env`` with the parser of docs/contract/admission.md §14. Never from
    ``command``: the profile refuses one (S11), the renderer owns the argv. TP absent reads 1."""
    return parse_parallelism(tuple(extra_args or ()), engine=engine, env=env, source="extraArgs")


def _elastic_default(spec: Mapping[str, Any], role: Mapping[str, Any], i: int) -> str | FieldError:
    """An elastic role's accelerator default: its TP as a canonical quantity, or the error that
    says why the TP cannot be read (an unknown engine name reads as vLLM's parser; the schema
    refuses one before this runs)."""
    engine_spec = spec.get("engine")
    name = engine_spec.get("name") if isinstance(engine_spec, Mapping) else None
    engine = _ENGINES.get(name, Engine.VLLM) if isinstance(name, str) else Engine.VLLM
    raw_args = role.get("extraArgs")
    args = [a for a in raw_args if isinstance(a, str)] if isinstance(raw_args, list) else []
    raw_env = role.get("env")
    env = [
        (e["name"], e.get("value") if isinstance(e.get("value"), str) else None)
        for e in (raw_env if isinstance(raw_env, list) else [])
        if isinstance(e, Mapping) and isinstance(e.get("name"), str)
    ]
    parsed = elastic_parallelism(args, env, engine=engine)
    if parsed.error is None:
        return str(parsed.degrees.tensor_parallel)
    err = parsed.error
    return errors.invalid(
        ROLES.index(i).child("extraArgs"),
        err.token,
        f"role {role.get('name', '')!r} carries elasticEp, so its accelerator count defaults "
        f"to its tensor-parallel degree (each member is one TP group on whole cards), and the "
        f"degrees cannot be read: {err.flag}: {err.problem}. Fix the value in "
        f"{ROLES.index(i).child('extraArgs')}",
        origin=TP_ORIGIN,
    )


def is_deleting(data: Mapping[str, Any]) -> bool:
    """True when the object carries ``metadata.deletionTimestamp``."""
    meta = data.get("metadata")
    return isinstance(meta, Mapping) and meta.get("deletionTimestamp") is not None


def default_accelerators(
    data: Mapping[str, Any], *, lookups: Lookups
) -> tuple[dict[str, Any], ErrorList]:
    """The deployment ``data`` (plain JSON, schema defaults applied) with the accelerator default.

    Per role in order: a stated ``resources.accelerator`` (an explicit ``0`` included) or an
    empty ``instanceType`` is left alone; otherwise the InstanceType is read — not found →
    ``NotFound`` at ``spec.roles[i].instanceType``; a failed read → ``InternalError`` there;
    not acceleratable → left unset; else ``resources.accelerator`` becomes ``"1"``, or on a role
    with ``elasticEp`` its tensor-parallel degree (TP unreadable → ``Invalid`` at
    ``spec.roles[i].extraArgs``). An object being deleted is returned unchanged. Never raises;
    odd shapes are left alone.

    The input is never modified: the result is a new top-level object whose changed parts are
    copied on write (unchanged subtrees are shared with the input).
    """
    out: dict[str, Any] = dict(data)
    errs = ErrorList()
    if is_deleting(out):
        return out, errs
    spec = out.get("spec")
    roles = spec.get("roles") if isinstance(spec, dict) else None
    if not isinstance(spec, dict) or not isinstance(roles, list):
        return out, errs
    new_roles: list[Any] | None = None
    for i, role in enumerate(roles):
        if not isinstance(role, dict):
            continue
        resources = role.get("resources")
        if isinstance(resources, dict) and resources.get("accelerator") is not None:
            continue
        if resources is not None and not isinstance(resources, dict):
            continue
        type_name = role.get("instanceType")
        if not isinstance(type_name, str) or not type_name:
            continue
        path = ROLES.index(i).child("instanceType")
        try:
            itype = lookups.get(InstanceType, "", type_name)
        except LookupFailed as exc:
            errs.append(
                errors.internal(
                    path,
                    f"cannot read InstanceType {type_name!r} to default the accelerator count: "
                    f"{exc.reason}; retry",
                    origin=ORIGIN,
                )
            )
            continue
        if itype is None:
            errs.append(
                errors.not_found(
                    path,
                    type_name,
                    f"InstanceType {type_name!r} does not exist; the accelerator count of role "
                    f"{role.get('name', '')!r} defaults from it. Name an existing InstanceType",
                    origin=ORIGIN,
                )
            )
            continue
        if not itype.spec.acceleratable:
            continue
        count = ACCELERATOR_DEFAULT
        if role.get("elasticEp") is not None:
            elastic = _elastic_default(spec, role, i)
            if isinstance(elastic, FieldError):
                errs.append(elastic)
                continue
            count = elastic
        new_resources = dict(resources) if isinstance(resources, dict) else {}
        new_resources["accelerator"] = count
        if new_roles is None:
            new_roles = list(roles)
        new_roles[i] = {**role, "resources": new_resources}
    if new_roles is not None:
        out["spec"] = {**spec, "roles": new_roles}
    return out, errs


def default_deployment(
    md: ModelDeployment, *, lookups: Lookups
) -> tuple[ModelDeployment, ErrorList]:
    """:func:`default_accelerators` on a decoded deployment; returns a new model.

    On errors the returned model still carries every default that could be applied.
    """
    data, errs = default_accelerators(md.to_dict(), lookups=lookups)
    if data == md.to_dict():
        return md, errs
    return ModelDeployment.model_validate(data), errs
