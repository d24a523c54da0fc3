"""Image references (``image.*``): the engine's and each role's image, as a Pod could carry it."""

from __future__ import annotations

from gpustack_render.admission.context import Context
from gpustack_render.core import errors
from gpustack_render.core.errors import ErrorList
from gpustack_render.core.paths import ENGINE, ROLES, FieldPath


def validate_images(ctx: Context) -> ErrorList:
    """``image.whitespace`` (project addition): an image reference with leading or trailing
    whitespace, which the API server refuses on every Pod that runs it (``roles[].image`` empty
    falls back)."""
    out = ErrorList()
    found: list[tuple[FieldPath, str | None]] = [(ENGINE.child("image"), ctx.md.spec.engine.image)]
    found.extend((ROLES.index(i).child("image"), r.image) for i, r in enumerate(ctx.md.spec.roles))
    for where, image in found:
        if image and image != image.strip():
            out.append(
                errors.invalid(
                    where,
                    image,
                    "an image reference must not have leading or trailing whitespace",
                    origin="image.whitespace",
                )
            )
    return out
