"""A role's additional volumes (``volumes.*``; ``docs/contract/admission.md`` §5 R7; D22): one
source each, unique mount paths, no ``..``, a source a Pod volume can carry, and nothing at a path
the operator mounts on the role; the warnings for a volume inside such a path (or a read-only
hostPath above it)."""

from __future__ import annotations

import posixpath
from typing import Final

from gpustack_render.admission.context import Context
from gpustack_render.api.modeldeployment import AdditionalVolume, RoleSpec
from gpustack_render.core import errors
from gpustack_render.core.errors import ErrorList
from gpustack_render.core.paths import ROLES, FieldPath
from gpustack_render.core.vocabulary import Engine, EngineFamily
from gpustack_render.engines import mountpaths
from gpustack_render.engines.owned import (
    ASCEND_DRIVER_PATH,
    CLIENT_CONFIG_MOUNT_PATH,
)


def operator_mount_paths(ctx: Context, i: int, role: RoleSpec, errs: ErrorList) -> dict[str, str]:
    """Paths the renderer mounts on this role's ``main`` container (docs/contract/render.md §14),
    with why."""
    out: dict[str, str] = {}
    if not role.managed:
        return out
    vllm = ctx.base_engine.family is EngineFamily.VLLM
    if vllm and ctx.has_cache:
        out[CLIENT_CONFIG_MOUNT_PATH] = "the KV-cache client configuration"
    if (
        vllm
        and ctx.direct_leg(i, errs, origin="volumes.operator-mount-path", store_client=False)
        is not None
        and ctx.inject_engine(i, errs, origin="volumes.operator-mount-path") == Engine.VLLM_ASCEND
    ):
        out[ASCEND_DRIVER_PATH] = "the Ascend driver of the direct transfer leg"
    return out


#: The hostPath types a Pod volume accepts ("" = no check), as the API server lists them.
HOST_PATH_TYPES: Final = (
    "",
    "BlockDevice",
    "CharDevice",
    "Directory",
    "DirectoryOrCreate",
    "File",
    "FileOrCreate",
    "Socket",
)


def _source_problems(vol: AdditionalVolume, vpath: FieldPath) -> ErrorList:
    """``volumes.source-unusable``: a source the rendered Pod volume could not carry (the API server
    would refuse every Pod of the role): a ConfigMap or Secret without a name, a hostPath without a
    path, with a ``..`` element or of a type Pods do not know."""
    out = ErrorList()
    origin = "volumes.source-unusable"
    for key, ref in (("configMap", vol.config_map), ("secret", vol.secret)):
        if ref is not None and not ref.name:
            out.append(
                errors.required(
                    vpath.child(key, "name"),
                    f"the volume mounted at {vol.mount_path} names no {key}: name the {key} "
                    f"in this namespace",
                    origin=origin,
                )
            )
    host = vol.host_path
    if host is None:
        return out
    hpath = vpath.child("hostPath")
    if not host.path:
        out.append(
            errors.required(
                hpath.child("path"),
                f"the volume mounted at {vol.mount_path} names no node path",
                origin=origin,
            )
        )
    elif ".." in host.path.split("/"):
        out.append(
            errors.invalid(
                hpath.child("path"),
                host.path,
                "must not contain '..' as a path element; name the node path itself",
                origin=origin,
            )
        )
    if host.type is not None and host.type not in HOST_PATH_TYPES:
        out.append(
            errors.not_supported(hpath.child("type"), host.type, HOST_PATH_TYPES, origin=origin)
        )
    return out


def validate_volumes(ctx: Context, i: int, role: RoleSpec, path: FieldPath) -> ErrorList:
    """``volumes.*``: one source per entry, unique mount paths, no ``..`` in ``subPath``, no mount
    at a path the operator mounts (D22: at it, not above it, where kubelet mounts the operator's
    path on top, nor inside it, which :func:`volume_warnings` reports; ``/dev/shm`` and the
    compile cache take precedence), a source a Pod volume can carry."""
    out = ErrorList()
    volumes = role.additional_volumes or []
    if not volumes:
        return out
    operator_paths = operator_mount_paths(ctx, i, role, out)
    seen: dict[str, int] = {}
    for j, vol in enumerate(volumes):
        vpath = path.child("additionalVolumes").index(j)
        sources = [
            name
            for name, present in (
                ("configMap", vol.config_map is not None),
                ("secret", vol.secret is not None),
                ("hostPath", vol.host_path is not None),
            )
            if present
        ]
        if not sources:
            out.append(
                errors.required(
                    vpath,
                    f"the volume mounted at {vol.mount_path} names no source: set exactly one "
                    f"of configMap, secret or hostPath",
                    origin="volumes.no-source",
                )
            )
        elif len(sources) > 1:
            out.append(
                errors.forbidden(
                    vpath,
                    f"the volume mounted at {vol.mount_path} names {len(sources)} sources "
                    f"({', '.join(sources)}); set exactly one of configMap, secret or hostPath",
                    origin="volumes.several-sources",
                )
            )
        out.extend(_source_problems(vol, vpath))
        if vol.mount_path in seen:
            k = seen[vol.mount_path]
            out.append(
                errors.duplicate(
                    vpath.child("mountPath"),
                    vol.mount_path,
                    f"already mounted by {path.child('additionalVolumes').index(k)}",
                    origin="volumes.duplicate-mount-path",
                )
            )
        else:
            seen[vol.mount_path] = j
        if vol.sub_path is not None and ".." in vol.sub_path.split("/"):
            out.append(
                errors.invalid(
                    vpath.child("subPath"),
                    vol.sub_path,
                    "must not contain '..' as a path element",
                    origin="volumes.path-traversal",
                )
            )
        owned = mountpaths.normalize(vol.mount_path)
        if owned in operator_paths:
            out.append(
                errors.invalid(
                    vpath.child("mountPath"),
                    vol.mount_path,
                    f"the operator mounts {operator_paths[owned]} at {owned} on this role; "
                    f"a container cannot carry two mounts at one path. Mount the volume "
                    f"elsewhere (a parent such as {posixpath.dirname(owned)} is allowed)",
                    origin="volumes.operator-mount-path",
                )
            )
    return out


def volume_warnings(ctx: Context) -> list[str]:
    """What a managed role's volume beside a path the operator mounts does, as warnings (D22
    amended: only a mount *at* that path is refused).

    - *Inside* it (a ``subPath`` file over the KV-cache client file, say): admitted, as the seed
      documents the hazard, but it replaces what the operator put there without a word.
    - *Above* it, on a read-only ``hostPath``: the container runtime must create the operator's
      mount point inside the user's volume, which fails on a read-only one unless the node
      directory already holds it (a ConfigMap or Secret is fine: kubelet creates nested mount
      points in those itself, ``pkg/volume/util/nested_volumes.go``; a writable ``hostPath``
      gets the directory created on the node).
    """
    out: list[str] = []
    for i, role in enumerate(ctx.md.spec.roles):
        if not role.additional_volumes:
            continue
        owned = operator_mount_paths(ctx, i, role, ErrorList())
        for j, vol in enumerate(role.additional_volumes):
            where = ROLES.index(i).child("additionalVolumes").index(j).child("mountPath")
            path = mountpaths.normalize(vol.mount_path)
            inside = next((p for p in owned if mountpaths.inside(path, p)), None)
            if inside is not None:
                out.append(
                    f"{where}: {vol.mount_path} lies inside {inside}, where the operator mounts "
                    f"{owned[inside]}; your volume replaces what is there. Mount it elsewhere "
                    f"unless that is what you want"
                )
            above = next((p for p in owned if mountpaths.inside(p, path)), None)
            if above is not None and vol.host_path is not None and vol.read_only:
                out.append(
                    f"{where}: the operator mounts {owned[above]} at {above}, inside this "
                    f"read-only hostPath volume; the container runtime cannot create that mount "
                    f"point in a read-only volume, so the container will not start unless "
                    f"{vol.host_path.path}{above[len(path) :]} exists on every node. Mount it "
                    f"writable, or elsewhere"
                )
    return out
