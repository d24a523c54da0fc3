"""``gpustack-render render``: every child object of each ModelDeployment, judged first as
admission judges it (``--validate``), or one summary line per deployment (``--summary``).

Pods among the input files are read for one thing: an Elastic EP role's live master (ordinal
0 of the role), whose boot width the rendered master keeps, as the controller's would."""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

from gpustack_kube.gcpause import paused_gc
from gpustack_render.cli.documents import Bundle
from gpustack_render.cli.exits import EXIT_OK, EXIT_REFUSED, UsageError
from gpustack_render.cli.operands import (
    display_name,
    each_deployment,
    input_groups,
    old_object,
    who,
)
from gpustack_render.cli.output import Outcome, emit
from gpustack_render.cli.reviews import admission_request, deployment_verdict, warn
from gpustack_render.core.errors import RenderError, Verdict
from gpustack_render.rendering.elastic import live_masters
from gpustack_render.rendering.renderer import render
from gpustack_render.schema.decoding import decode_deployment


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """The ``render`` verb: exit 0 when every deployment rendered, else the worst code."""
    found, worst = each_deployment(
        input_groups(args, "render"), "render", err, namespace=args.namespace
    )
    old = (
        old_object(args.old, "ModelDeployment", sys.stdin, err)
        if args.validate != "ignore"
        else None
    )
    if old is not None and len(found) > 1:
        raise UsageError(f"render: --old takes one ModelDeployment; found {len(found)}")
    outcomes = [
        _render_one(doc, bundle, group.label, args=args, old=old, err=err, who=who(doc, found))
        for group, bundle, doc in found
    ]
    worst = max([worst, *(o.code for o in outcomes)])
    if args.summary:
        out.write("".join(o.line() + "\n" for o in outcomes))
    else:
        emit([obj for o in outcomes for obj in o.objects], args.output, out)
    return worst


def _render_one(
    doc: dict[str, Any],
    bundle: Bundle,
    source: str,
    *,
    args: argparse.Namespace,
    old: dict[str, Any] | None,
    err: TextIO,
    who: str = "",
) -> Outcome:
    """One deployment's render; every stderr line it writes carries ``who`` after its tag."""
    outcome = Outcome(source, display_name(doc), "refused", EXIT_REFUSED)
    if args.validate != "ignore":
        request = admission_request("UPDATE" if old is not None else "CREATE", doc, old)
        verdict = deployment_verdict(request, bundle)
        outcome.warnings = len(verdict.warnings)
        if not _report_verdict(verdict, strict=args.validate == "strict", err=err, who=who):
            return outcome
    md, errs = decode_deployment(doc)
    if md is None:
        for e in errs:
            err.write(f"render: {who}{e.message()}\n")
        return outcome
    ns = md.metadata.namespace or "default"
    try:
        with paused_gc():
            result = render(
                md,
                lookups=bundle.lookups(default_namespace=ns),
                settings=bundle.settings,
                # An Elastic EP master among the input Pods keeps its boot width, as the
                # controller's live master does (docs/elastic-ep.md, "What is rendered").
                elastic_masters=live_masters(md, bundle.pods, namespace=ns),
            )
    except RenderError as exc:
        err.write(f"render: {who}{exc}\n")
        outcome.verdict = "error"
        return outcome
    if result.router is not None and result.router.failure is not None:
        # The engine objects are rendered; the router's are not, and the deployment's status
        # would say so (RouterReady RenderFailed).
        outcome.warnings += 1
        err.write(f"Warning: {who}the router is not rendered: {result.router.failure.message}\n")
    outcome.objects = result.objects()
    outcome.pods = sum(1 for o in outcome.objects if o.get("kind") == "Pod")
    outcome.verdict, outcome.code = "rendered", EXIT_OK
    return outcome


def _report_verdict(verdict: Verdict, *, strict: bool, err: TextIO, who: str = "") -> bool:
    """Print the verdict's warnings and causes on ``err``; whether rendering goes on.

    Under ``strict`` a refusal prints one ``render:`` line per cause (the API server's message
    when there are none) and stops; under ``warn`` the same lines are ``Warning:`` lines.
    """
    warn(verdict, err, who)
    if verdict.allowed:
        return True
    causes = [e.message() for e in verdict.errors] or [verdict.status_message()]
    prefix = "render: refused" if strict else "Warning: admission would refuse"
    for cause in causes:
        err.write(f"{prefix}: {who}{cause}\n")
    return not strict
