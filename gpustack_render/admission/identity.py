"""Identity and frozen fields on UPDATE (``docs/contract/admission.md`` §11, D3).

A frozen field identifies the deployment: a different value describes a different deployment,
which is created rather than edited. Roles are matched by name, not position; a rename is a
removal plus an addition. Everything else (``size``, ``instanceType``, ``resources``,
``command``, the Pod fields, ``replicas``, ``engine.image``, ``kvTransfer``, adding or removing
the router block, router fields other than ``name``) is editable.
"""

from __future__ import annotations

import json
from typing import Any, Final

from gpustack_render.api.modeldeployment import ModelDeployment
from gpustack_render.core import errors
from gpustack_render.core.errors import ErrorList, FieldError
from gpustack_render.core.paths import ENGINE, KV_CACHE, MODEL, ROLES, ROUTER, FieldPath
from gpustack_render.deployment.roles import effective_kind

ORIGIN: Final = "identity.field-changed"


def _frozen(path: FieldPath, value: Any, what: str) -> FieldError:
    return errors.invalid(
        path,
        value,
        f"{path} is an identity field ({what}): a different value describes a different "
        f"deployment, which is created rather than edited",
        origin=ORIGIN,
    )


def _dump(value: Any) -> Any:
    if value is None:
        return None
    dumped = value.model_dump(mode="json", by_alias=True, exclude_none=True)
    return json.dumps(dumped, sort_keys=True, separators=(",", ":"))


def validate_identity(new: ModelDeployment, old: ModelDeployment) -> ErrorList:
    """Every frozen-field change between the stored ``old`` and the submitted ``new``."""
    out = ErrorList()
    ns, os_ = new.spec, old.spec
    if _dump(ns.model) != _dump(os_.model):
        out.append(_frozen(MODEL, _dump(ns.model), "the served model"))
    if ns.engine.name != os_.engine.name:
        out.append(_frozen(ENGINE.child("name"), ns.engine.name, "the engine"))
    if _dump(ns.kv_cache) != _dump(os_.kv_cache):
        out.append(_frozen(KV_CACHE, _dump(ns.kv_cache), "the KV-cache pool binding"))
    if ns.router is not None and os_.router is not None and ns.router.name != os_.router.name:
        out.append(
            _frozen(
                ROUTER.child("name"),
                ns.router.name,
                "the router in place; the router block itself may be removed or added",
            )
        )
    old_roles = {r.name: r for r in os_.roles}
    new_names = {r.name for r in ns.roles}
    for i, role in enumerate(ns.roles):
        stored = old_roles.get(role.name)
        if stored is None:
            out.append(
                _frozen(
                    ROLES.index(i).child("name"),
                    role.name,
                    "the set of roles: a role cannot be added or renamed",
                )
            )
        elif effective_kind(role) != effective_kind(stored):
            out.append(
                _frozen(
                    ROLES.index(i).child("kind"),
                    role.kind,
                    f"the role's kind, stored as {(stored.kind or 'Server').lower()}",
                )
            )
    for stored in os_.roles:
        if stored.name not in new_names:
            out.append(
                _frozen(ROLES, stored.name, "the set of roles: a role cannot be removed or renamed")
            )
    return out
