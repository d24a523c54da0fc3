"""The release-scope refusals (``docs/contract/admission.md`` §12; D8, D14, D28): a field whose
feature this release does not deliver yet is refused with a message saying so.

``spec.model.artifactRef`` is delivered since D28 (its rules are in ``admission/weights.py``);
``roles[].elasticEp`` is still refused here."""

from __future__ import annotations

from gpustack_render.admission.context import Context
from gpustack_render.core import errors
from gpustack_render.core.errors import ErrorList
from gpustack_render.core.paths import ROLES


def validate_release_scope(ctx: Context) -> ErrorList:
    """§12 (D8, D14): ``roles[].elasticEp`` is not delivered."""
    out = ErrorList()
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
