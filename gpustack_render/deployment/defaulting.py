"""The mutating accelerator default (``docs/contract/admission.md`` §3).

Nearly every default lives in the CRD schema; the one a schema cannot reach is a role's
accelerator count, which depends on the InstanceType the role names. The admission webhook
applies it (its JSON Patch comes from ``jsonpatch.make_patch``), and the renderer applies it too
(D18), because a stored deployment has been through it: rendering a raw file and rendering the
stored object then give the same Pods.

Both functions are pure: the input is never modified, a new object is returned.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from gpustack_render.api.inputs import InstanceType
from gpustack_render.api.modeldeployment import ModelDeployment
from gpustack_render.core import errors
from gpustack_render.core.errors import ErrorList
from gpustack_render.core.paths import ROLES
from gpustack_render.schema.lookups import LookupFailed, Lookups

#: The count set on a role of an acceleratable type that states none (a canonical Quantity, D18).
ACCELERATOR_DEFAULT: Final = "1"

ORIGIN: Final = "accelerator.default-type-unreadable"


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
    not acceleratable → left unset; else ``resources.accelerator`` becomes ``"1"``. An object
    being deleted is returned unchanged. Never raises; odd shapes are left alone.

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
        new_resources = dict(resources) if isinstance(resources, dict) else {}
        new_resources["accelerator"] = ACCELERATOR_DEFAULT
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
