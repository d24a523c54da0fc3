"""The release-scope refusals (``docs/contract/admission.md`` §12; D8, D14): a field whose
feature this release does not deliver yet is refused with a message saying so."""

from __future__ import annotations

from gpustack_render.admission.context import Context
from gpustack_render.core import errors
from gpustack_render.core.errors import ErrorList
from gpustack_render.core.paths import MODEL, ROLES


def validate_release_scope(ctx: Context) -> ErrorList:
    """§12 (D8, D14): ``spec.model.artifactRef`` and ``roles[].elasticEp`` are not delivered."""
    out = ErrorList()
    if ctx.md.spec.model.artifact_ref is not None:
        out.append(
            errors.forbidden(
                MODEL.child("artifactRef"),
                "this release does not deliver ModelArtifact weights; remove the field and let "
                "the engine fetch the model, or mount the weights with additionalVolumes",
                origin="release.field-not-delivered",
            )
        )
    for i, role in enumerate(ctx.md.spec.roles):
        if role.elastic_ep is not None:
            out.append(
                errors.forbidden(
                    ROLES.index(i).child("elasticEp"),
                    "this release does not deliver the Elastic EP profile; remove the field",
                    origin="release.field-not-delivered",
                )
            )
    return out
