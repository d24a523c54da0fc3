"""``gpustack-render admit``: the ModelDeployment admission on each deployment, answered as an
AdmissionReview response or the object as admitted (``--print``); one request when the files
named together hold one deployment, a stream of answers for a batch."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from gpustack_render.cli.documents import Bundle
from gpustack_render.cli.exits import EXIT_OK, EXIT_REFUSED, UsageError
from gpustack_render.cli.operands import (
    display_name,
    each_deployment,
    input_groups,
    old_object,
    read_files,
    read_group,
    who,
)
from gpustack_render.cli.output import Outcome, emit, emit_one
from gpustack_render.cli.reviews import (
    admission_request,
    answer,
    deployment_verdict,
    patched,
    request_operation,
    warn,
)
from gpustack_render.core.errors import Verdict
from gpustack_render.schema.decoding import decode_deployment


def admit_review(
    files: Sequence[str],
    *,
    old_file: str | None = None,
    operation: str | None = None,
    stdin: TextIO = sys.stdin,
    err: TextIO | None = None,
) -> tuple[Verdict, dict[str, Any] | None]:
    """Run the ModelDeployment admission on ``files`` as the ``admit`` verb does; a document
    skipped is a warning on ``err`` (standard error when None).

    Returns the verdict and the schema-defaulted request object the patch applies to.
    """
    return admit_bundle(
        read_files(files, stdin, err=err),
        ", ".join(files),
        old_file=old_file,
        operation=operation,
        stdin=stdin,
        err=err,
    )


def admit_bundle(
    bundle: Bundle,
    label: str,
    *,
    old_file: str | None = None,
    operation: str | None = None,
    stdin: TextIO = sys.stdin,
    err: TextIO | None = None,
) -> tuple[Verdict, dict[str, Any] | None]:
    """The admission of the first deployment of ``bundle`` (read from ``label``)."""
    old = old_object(old_file, "ModelDeployment", stdin, err)
    op = request_operation(operation, old)
    if not bundle.deployments and op != "DELETE":
        raise UsageError(f"admit: no ModelDeployment in {label}")
    obj = bundle.deployments[0] if bundle.deployments else None
    verdict = deployment_verdict(admission_request(op, obj, old), bundle)
    defaulted = None
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
        bundle = read_group(named[0], args.namespace, err)
        if len(bundle.deployments) <= 1:  # one request: every named file read together
            verdict, obj = admit_bundle(
                bundle, named[0].label, old_file=args.old, operation=args.operation, err=err
            )
            return answer(verdict, obj, args, out, err)
        found, worst = [(named[0], bundle, doc) for doc in bundle.deployments], EXIT_OK
    else:
        found, worst = each_deployment(groups, "admit", err, namespace=args.namespace)
    if args.old and len(found) > 1:
        raise UsageError(f"admit: --old takes one ModelDeployment; found {len(found)}")
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
    single = Bundle(deployments=[doc], inputs=bundle.inputs, settings=bundle.settings)
    return admit_bundle(single, "", old_file=args.old, operation=args.operation, err=err)


def _pods_of(obj: dict[str, Any] | None) -> int:
    """Σ replicas × size of a (defaulted) deployment: the Pods it would run. Only for an
    allowed one: a refused object may hold anything where the counts belong."""
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
