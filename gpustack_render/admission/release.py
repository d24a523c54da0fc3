"""The release-scope refusals (``docs/contract/admission.md`` §12; D8, D14, D28, D29): a field
whose feature this release does not deliver yet is refused with a message saying so.

Every field of the API is delivered in this release: ``spec.model.artifactRef`` since D28 (its
rules are in ``admission/weights.py``) and ``roles[].elasticEp`` since D29 (its rules are in
``admission/elastic.py``). The rule stays the place a field that is not delivered would be
refused, and refuses nothing now (its id ``release.field-not-delivered`` is no longer produced)."""

from __future__ import annotations

from gpustack_render.admission.context import Context
from gpustack_render.core.errors import ErrorList


def validate_release_scope(ctx: Context) -> ErrorList:
    """§12 (D8, D14): nothing is refused for the release's scope in this release."""
    return ErrorList()
