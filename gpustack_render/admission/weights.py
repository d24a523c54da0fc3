"""The ModelDeployment rules while ``spec.model.artifactRef`` is set (``weights.*``;
docs/weights.md "Admission", D28).

The artifact decides which weights the engine loads and where it keeps them, so a role may not
say so a second time: a managed role's ``extraArgs`` may not carry the flags that name the model,
its revision or the download directory; its ``env`` may not set the hub clients' variables; and
no role may mount a volume over or around the two paths the delivery mounts. The rules read the
deployment alone: the artifact itself is never read, so one that does not exist yet (or has not
resolved) is admitted and the controller waits for it.

Flag spelling follows :mod:`gpustack_render.engines.flags` (docs/contract/admission.md §13); the
owned names are declared in :mod:`gpustack_render.engines.owned`. The served-name rule
(``served-name.mismatch``, docs/contract/admission.md §8.1) applies with or without an artifact
and lives in :mod:`gpustack_render.admission.arguments`.
"""

from __future__ import annotations

from typing import Final

from gpustack_render.admission.context import Context
from gpustack_render.api.modeldeployment import RoleSpec
from gpustack_render.core import errors
from gpustack_render.core.errors import ErrorList
from gpustack_render.core.paths import MODEL, FieldPath
from gpustack_render.engines import mountpaths
from gpustack_render.engines.flags import owned_hits, spelled
from gpustack_render.engines.owned import ARTIFACT_ENV_ROLES, artifact_args, artifact_env
from gpustack_render.weights.delivery import CACHE_PATH, MODEL_PATH

#: The paths the delivery mounts on an engine Pod, with what is there, in the order a message
#: names the first one a volume overlaps.
RESERVED_PATHS: Final = {
    MODEL_PATH: "the artifact's weights",
    CACHE_PATH: "the hub client's download cache",
}
#: Where the reference is written, as messages name it.
ARTIFACT_REF: Final = MODEL.child("artifactRef")


def validate_role_weights(ctx: Context, role: RoleSpec, path: FieldPath) -> ErrorList:
    """Every ``weights.*`` rule on one role, when the deployment names an artifact."""
    out = ErrorList()
    if ctx.md.spec.model.artifact_ref is None:
        return out
    if role.managed:
        out.extend(validate_artifact_flags(ctx, role, path))
        out.extend(validate_artifact_env(ctx, role, path))
    out.extend(validate_reserved_mounts(role, path))
    return out


def validate_artifact_flags(ctx: Context, role: RoleSpec, path: FieldPath) -> ErrorList:
    """``weights.owned-flag``: an ``extraArgs`` token the engine reads as a flag the artifact
    sets (any spelling the engine accepts: ``--flag value``, ``--flag=value``, an abbreviation,
    vLLM's underscores)."""
    out = ErrorList()
    engine = ctx.base_engine
    keys = artifact_args(engine)
    for j, token, key in owned_hits(role.extra_args or (), keys, engine):
        out.append(
            errors.invalid(
                path.child("extraArgs").index(j),
                token,
                f"{spelled(token, key)} is set by the operator on engine {engine} while "
                f"{ARTIFACT_REF} names a ModelArtifact: the artifact decides which weights, at "
                f"which revision, the engine loads and where it keeps them. Leave the flag out, "
                f"or set {path.child('command')} to own the whole command line",
                origin="weights.owned-flag",
            )
        )
    return out


def validate_artifact_env(ctx: Context, role: RoleSpec, path: FieldPath) -> ErrorList:
    """``weights.owned-env``: an ``env`` entry named as a hub client variable the artifact
    delivery sets, whichever hub the artifact names (the artifact is not read)."""
    out = ErrorList()
    engine = ctx.base_engine
    owned = artifact_env(engine)
    for j, entry in enumerate(role.env or ()):
        if entry.name not in owned:
            continue
        out.append(
            errors.invalid(
                path.child("env").index(j),
                entry.name,
                f"{entry.name} is {ARTIFACT_ENV_ROLES[entry.name]}: the operator sets it on "
                f"engine {engine} while {ARTIFACT_REF} names a ModelArtifact, whatever the "
                f"artifact's source, and a second value would not be merged with it. Leave it "
                f"out, or set {path.child('command')} to own the command line and its "
                f"environment",
                origin="weights.owned-env",
            )
        )
    return out


def reserved_overlap(mount_path: str) -> str | None:
    """The first reserved path a mount at ``mount_path`` is at, inside or around (compared
    path element by path element, as the kubelet mounts them), or ``None``."""
    where = mountpaths.rooted(mount_path)
    return next((p for p in RESERVED_PATHS if mountpaths.overlap(where, p)), None)


def validate_reserved_mounts(role: RoleSpec, path: FieldPath) -> ErrorList:
    """``weights.reserved-mount-path``: an additional volume (on any role, take-over roles
    included) mounted at, inside or above a path the delivery mounts."""
    out = ErrorList()
    for j, vol in enumerate(role.additional_volumes or ()):
        reserved = reserved_overlap(vol.mount_path)
        if reserved is None:
            continue
        out.append(
            errors.invalid(
                path.child("additionalVolumes").index(j).child("mountPath"),
                vol.mount_path,
                f"the volume overlaps {reserved}, where the operator mounts "
                f"{RESERVED_PATHS[reserved]} while {ARTIFACT_REF} names a ModelArtifact: a "
                f"mount at that path, inside it or above it would hide what is mounted there, "
                f"or be hidden by it. Mount the volume elsewhere",
                origin="weights.reserved-mount-path",
            )
        )
    return out
