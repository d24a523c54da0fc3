"""Host-access gates (``docs/contract/admission.md`` §8.2, D11).

With the Setting ``instance-privileged-allowed`` off, ``privileged: true`` is refused unless the
stored role of the same name was already privileged; with ``instance-host-path-volume-allowed``
off, a ``hostPath`` additional volume is refused unless the stored role of the same name had one
granting the same or broader access. Old grants are grandfathered so a Setting turned off later
cannot strand a running deployment.
"""

from __future__ import annotations

from typing import Final

from gpustack_render.admission.context import Context
from gpustack_render.api.modeldeployment import AdditionalVolume, RoleSpec
from gpustack_render.core import errors
from gpustack_render.core.errors import ErrorList
from gpustack_render.core.paths import ROLES

PRIVILEGED_SETTING: Final = "instance-privileged-allowed"
HOST_PATH_SETTING: Final = "instance-host-path-volume-allowed"


def _covers(old: AdditionalVolume, new: AdditionalVolume) -> bool:
    """True when the stored hostPath grant is the same as or broader than the new one: the same
    host path or an ancestor of it, and writable unless the new mount is read-only."""
    if old.host_path is None or new.host_path is None:
        return False
    old_path = old.host_path.path.rstrip("/") or "/"
    new_path = new.host_path.path.rstrip("/") or "/"
    inside = new_path == old_path or new_path.startswith(
        old_path if old_path.endswith("/") else old_path + "/"
    )
    return inside and (not old.read_only or bool(new.read_only))


def validate_host_access(ctx: Context, *, old_roles: dict[str, RoleSpec]) -> ErrorList:
    """§8.2 for every role; ``old_roles`` are the stored roles by name (empty on CREATE)."""
    out = ErrorList()
    settings = ctx.settings
    for i, role in enumerate(ctx.md.spec.roles):
        old = old_roles.get(role.name)
        path = ROLES.index(i)
        if role.privileged and not settings.privileged_allowed and not (old and old.privileged):
            out.append(
                errors.forbidden(
                    path.child("privileged"),
                    f"privileged containers are not allowed on this cluster: the Setting "
                    f"{PRIVILEGED_SETTING} is off",
                    origin="host-access.not-allowed",
                )
            )
        if settings.host_path_volume_allowed:
            continue
        stored = [v for v in (old.additional_volumes or []) if v.host_path] if old else []
        for j, vol in enumerate(role.additional_volumes or []):
            if vol.host_path is None or any(_covers(o, vol) for o in stored):
                continue
            out.append(
                errors.forbidden(
                    path.child("additionalVolumes").index(j).child("hostPath"),
                    f"hostPath volumes ({vol.host_path.path}) are not allowed on this cluster: "
                    f"the Setting {HOST_PATH_SETTING} is off",
                    origin="host-access.not-allowed",
                )
            )
    return out
