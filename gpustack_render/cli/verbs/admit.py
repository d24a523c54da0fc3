"""``gpustack-render admit``: the ModelDeployment admission on each deployment, answered as an
AdmissionReview response or the object as admitted (``--print``); one request when the files
named together hold one deployment, a stream of answers for a batch.

Files holding no deployment are judged by the ModelArtifact admission instead, on each
ModelArtifact (docs/weights.md "Admission"); beside a deployment an artifact is one of the
objects the deployment is judged with."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from gpustack_render.cli.documents import ARTIFACT_KIND, Bundle
from gpustack_render.cli.exits import EXIT_OK, EXIT_REFUSED, UsageError
from gpustack_render.cli.operands import (
    display_name,
    each_deployment,
    input_groups,
    read_files,
    read_group,
    who,
)
from gpustack_render.cli.output import Outcome, emit, emit_one
from gpustack_render.cli.reviews import (
    admission_request,
    answer,
    artifact_verdict,
    deployment_verdict,
    patched,
    request_operation,
    warn,
)
from gpustack_render.core.errors import Verdict
from gpustack_render.schema.decoding import decode_deployment, decode_model

DEPLOYMENT_KIND = "ModelDeployment"


def admit_review(
    files: Sequence[str],
    *,
    old_file: str | None = None,
    operation: str | None = None,
    stdin: TextIO = sys.stdin,
    err: TextIO | None = None,
) -> tuple[Verdict, dict[str, Any] | None]:
    """Run the admission on ``files`` as the ``admit`` verb does (the ModelDeployment's, or the
    ModelArtifact's when the files hold no deployment); a document skipped is a warning on
    ``err`` (standard error when None).

    Returns the verdict and the schema-defaulted request object the patch applies to.
    """
    return admit_bundle(
        read_files(files, stdin, err=err, judged=JUDGED_KINDS),
        ", ".join(files),
        old_file=old_file,
        operation=operation,
        stdin=stdin,
        err=err,
    )


#: The input kinds ``admit`` judges as requests when the files hold no deployment.
JUDGED_KINDS = (ARTIFACT_KIND,)


def _stored(
    old_file: str | None, kind: str | None, stdin: TextIO, err: TextIO | None
) -> tuple[str, dict[str, Any] | None]:
    """The request's kind and ``--old``'s stored object of that kind. ``kind`` is the
    request's (``None``: no object, a DELETE, so the stored object decides)."""
    if not old_file:
        return kind or DEPLOYMENT_KIND, None
    old = read_files([old_file], stdin, err=err, judged=JUDGED_KINDS)
    if kind is None:
        kind = ARTIFACT_KIND if old.artifacts and not old.deployments else DEPLOYMENT_KIND
    found = old.deployments if kind == DEPLOYMENT_KIND else old.artifacts
    if not found:
        raise UsageError(f"--old {old_file}: no {kind} in it")
    return kind, found[0]


def admit_bundle(
    bundle: Bundle,
    label: str,
    *,
    old_file: str | None = None,
    operation: str | None = None,
    stdin: TextIO = sys.stdin,
    err: TextIO | None = None,
) -> tuple[Verdict, dict[str, Any] | None]:
    """The admission of the first deployment of ``bundle`` (read from ``label``), or of its
    first ModelArtifact when it holds no deployment."""
    requests = bundle.deployments or bundle.artifacts
    kind = None if not requests else requests[0].get("kind")
    kind, old = _stored(old_file, kind if isinstance(kind, str) else None, stdin, err)
    op = request_operation(operation, old)
    if not requests and op != "DELETE":
        raise UsageError(f"admit: no ModelDeployment or ModelArtifact in {label}")
    obj = requests[0] if requests else None
    request = admission_request(op, obj, old)
    defaulted = None
    if kind == ARTIFACT_KIND:
        verdict = artifact_verdict(request, bundle)
        if obj is not None:
            from gpustack_render.admission.artifact import artifact_data
            from gpustack_render.api.artifact import ModelArtifact

            art, _ = decode_model(ModelArtifact, obj)
            defaulted = artifact_data(art) if art is not None else obj
        return verdict, defaulted
    verdict = deployment_verdict(request, bundle)
    if obj is not None:
        md, _ = decode_deployment(obj)
        defaulted = md.to_dict() if md is not None else obj
    return verdict, defaulted


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """The ``admit`` verb: exit 0 when every deployment is allowed, else the worst code."""
    operands = [*args.files, *args.filename]
    if args.operation == "DELETE" and args.old and not operands and not args.summary:
        # A DELETE request carries no object: the stored one is the whole question.
        deleted, _ = admit_bundle(Bundle(), "", old_file=args.old, operation="DELETE", err=err)
        return answer(deleted, None, args, out, err)
    groups = input_groups(args, "admit")
    named = [g for g in groups if g.named]
    if len(groups) == 1 and named and not args.summary:
        if named[0].error:
            raise UsageError(named[0].error)
        bundle = read_group(named[0], args.namespace, err, judged=JUDGED_KINDS)
        requests = bundle.deployments or bundle.artifacts
        if len(requests) <= 1:  # one request: every named file read together
            verdict, obj = admit_bundle(
                bundle, named[0].label, old_file=args.old, operation=args.operation, err=err
            )
            return answer(verdict, obj, args, out, err)
        found, worst = [(named[0], bundle, doc) for doc in requests], EXIT_OK
    else:
        found, worst = each_deployment(
            groups, "admit", err, namespace=args.namespace, artifacts=True
        )
    if args.old and len(found) > 1:
        raise UsageError(f"admit: --old takes one object; found {len(found)}")
    outcomes: list[Outcome] = []
    answers: list[dict[str, Any]] = []
    for group, bundle, doc in found:
        verdict, obj = _admit_doc(doc, bundle, args, err)
        prefix = who(doc, found)
        outcome = Outcome(
            group.label,
            display_name(doc),
            "allowed" if verdict.allowed else "refused",
            EXIT_OK if verdict.allowed else EXIT_REFUSED,
            pods=_pods_of(obj) if verdict.allowed else 0,
            warnings=len(verdict.warnings),
        )
        outcomes.append(outcome)
        if args.summary:
            warn(verdict, err, prefix)
        else:
            answers.append(_answer_object(verdict, obj, args, err, prefix))
    worst = max([worst, *(o.code for o in outcomes)])
    if args.summary:
        out.write("".join(o.line() + "\n" for o in outcomes))
    else:
        emit([a for a in answers if a], args.output, out)
    return worst


def _admit_doc(
    doc: dict[str, Any], bundle: Bundle, args: argparse.Namespace, err: TextIO
) -> tuple[Verdict, dict[str, Any] | None]:
    if doc.get("kind") == ARTIFACT_KIND:
        single = Bundle(artifacts=[doc], settings=bundle.settings)
    else:
        single = Bundle(deployments=[doc], inputs=bundle.inputs, settings=bundle.settings)
    return admit_bundle(single, "", old_file=args.old, operation=args.operation, err=err)


def _pods_of(obj: dict[str, Any] | None) -> int:
    """Σ replicas × size of a (defaulted) deployment: the Pods it would run. Only for an
    allowed one: a refused object may hold anything where the counts belong."""
    if (obj or {}).get("kind") == ARTIFACT_KIND:
        return 0  # an artifact runs no Pod of its own
    roles = ((obj or {}).get("spec") or {}).get("roles") or []
    return sum(int(r.get("replicas") or 1) * int(r.get("size") or 1) for r in roles if r)


def _answer_object(
    verdict: Verdict,
    obj: dict[str, Any] | None,
    args: argparse.Namespace,
    err: TextIO,
    who: str = "",
) -> dict[str, Any]:
    """What :func:`~gpustack_render.cli.reviews.answer` prints for one request, as an object
    for a stream of several."""
    warn(verdict, err, who)
    if args.print_ != "object":
        return verdict.to_response()
    if not verdict.allowed:
        emit_one(verdict.to_response(), args.output, err)
        return {}
    return patched(obj or {}, verdict)
