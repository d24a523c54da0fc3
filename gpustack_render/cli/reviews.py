"""The admission request a verb builds from its files, and the answer it prints: shared by
``render --validate``, ``admit`` and ``inject``.

The ModelDeployment and ModelArtifact admissions are imported only by :func:`deployment_verdict`
and :func:`artifact_verdict`: ``inject`` needs none of them.
"""

from __future__ import annotations

import argparse
from typing import Any, TextIO, cast

from gpustack_render.cli.documents import Bundle
from gpustack_render.cli.exits import EXIT_OK, EXIT_REFUSED, UsageError
from gpustack_render.cli.output import emit_one
from gpustack_render.core import errors
from gpustack_render.core.errors import ErrorList, FieldError, Verdict
from gpustack_render.core.review import AdmissionRequest, Operation


def request_operation(given: str | None, old: dict[str, Any] | None) -> str:
    """``--operation``, or its default: UPDATE with ``--old``, else CREATE."""
    op: str = given or ("UPDATE" if old is not None else "CREATE")
    if op in ("UPDATE", "DELETE") and old is None:
        raise UsageError(f"--operation {op} needs --old FILE with the stored object")
    return op


def admission_request(
    op: str, obj: dict[str, Any] | None, old: dict[str, Any] | None
) -> AdmissionRequest:
    """The request the API server would send; an object without a namespace is in ``default``."""
    meta = (obj or old or {}).get("metadata")
    if not isinstance(meta, dict):
        meta = {}  # the schema refuses it, with the field named
    return AdmissionRequest(
        operation=cast(Operation, op),
        object=obj,
        old_object=old,
        namespace=str(meta.get("namespace") or "default"),
        name=str(meta.get("name") or ""),
    )


def deployment_verdict(request: AdmissionRequest, bundle: Bundle) -> Verdict:
    """The ModelDeployment admission of ``request``, with ``bundle``'s objects and Settings."""
    from gpustack_render.admission import GROUP_KIND, review_deployment

    unnamed = _unnamed(request)
    if unnamed is not None:
        return Verdict.from_errors(ErrorList([unnamed]), group_kind=GROUP_KIND, name="")
    return review_deployment(
        request,
        lookups=bundle.lookups(default_namespace=request.namespace),
        settings=bundle.settings,
    )


def artifact_verdict(request: AdmissionRequest, bundle: Bundle) -> Verdict:
    """The ModelArtifact admission of ``request`` (object-only: ``bundle`` supplies only the
    Settings, which no artifact rule reads)."""
    from gpustack_render.admission import review_artifact

    return review_artifact(
        request,
        lookups=bundle.lookups(default_namespace=request.namespace),
        settings=bundle.settings,
    )


def _unnamed(request: AdmissionRequest) -> FieldError | None:
    """The cause refusing a create named only by ``generateName``, or None.

    The API server generates the name as it stores the object, and every Service and Pod name
    derives from it: offline there is no name to render or to judge those names by. (A create
    naming neither is refused by ``review_deployment``, as the API server refuses it.)
    """
    meta = (request.object or {}).get("metadata")
    if request.operation != "CREATE" or request.name or not isinstance(meta, dict):
        return None
    if not meta.get("generateName"):
        return None
    return errors.required(
        "metadata.name",
        "the API server generates the name from generateName only as it stores the object, "
        "and every Service and Pod name derives from it; name the deployment to render or "
        "judge it here",
        origin="metadata.name-generated",
    )


def warn(verdict: Verdict, err: TextIO, who: str = "") -> None:
    """``Warning: <who><warning>`` per warning, as kubectl prints the API server's."""
    for warning in verdict.warnings:
        err.write(f"Warning: {who}{warning}\n")


def answer(
    verdict: Verdict,
    request_obj: dict[str, Any] | None,
    args: argparse.Namespace,
    out: TextIO,
    err: TextIO,
) -> int:
    """Print one request's answer as ``--print`` asks (the response, or the object as
    admitted); the exit code."""
    warn(verdict, err)
    if args.print_ == "object":
        if not verdict.allowed:
            emit_one(verdict.to_response(), args.output, err)
            return EXIT_REFUSED
        emit_one(patched(request_obj or {}, verdict), args.output, out)
        return EXIT_OK
    emit_one(verdict.to_response(), args.output, out)
    return EXIT_OK if verdict.allowed else EXIT_REFUSED


def patched(obj: dict[str, Any], verdict: Verdict) -> dict[str, Any]:
    """``obj`` with the verdict's JSON Patch applied."""
    if not verdict.patch:
        return obj
    import jsonpatch  # only --print object needs it

    result: dict[str, Any] = jsonpatch.apply_patch(obj, verdict.patch)
    return result
