"""``gpustack-render explain``: read the new deployment, its inputs, the stored object and the
observed state; call :func:`gpustack_render.explain.report.explain_deployment`; print text, YAML
or JSON; apply the CI gates (docs/explain.md).

Exit codes as ``admit``: 0 allowed, 1 refused (or the new object cannot be rendered), 2 bad
usage or unreadable input; a tripped gate (``--max-replaced``, ``--fail-on``) is 1 too.

Live mode (``explain md/NAME -n NS [EDITED.yaml]``) reads the stored object, its inputs and the
observed List from a cluster through ``gpustack_render.cli.live`` (GET and LIST only), then
goes the offline way.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from gpustack_render.api.inputs import InputObject
from gpustack_render.cli import yamlio
from gpustack_render.cli.documents import Bundle
from gpustack_render.cli.exits import EXIT_OK, EXIT_REFUSED, UsageError
from gpustack_render.cli.operands import display_name, each_deployment, input_groups, read_files
from gpustack_render.cli.sources import read_source
from gpustack_render.cli.yamlio import DocumentError, load_documents
from gpustack_render.core import naming
from gpustack_render.core.settings import Settings
from gpustack_render.explain.model import ROLLING, Explanation
from gpustack_render.explain.report import explanation_json
from gpustack_render.explain.text import explanation_text
from gpustack_render.schema.lookups import StaticLookups


def live_target(operand: str) -> str | None:
    """The deployment name when ``operand`` is the live form ``md/NAME`` (and no file of that
    name exists); see :func:`gpustack_render.cli.live.live_target`."""
    from gpustack_render.cli.live import live_target as target

    return target(operand)


@dataclass
class _Result:
    source: str
    name: str
    answer: Explanation
    code: int


def _old(
    path: str | None, stdin: TextIO, err: TextIO
) -> tuple[dict[str, Any] | None, Bundle | None]:
    if not path:
        return None, None
    bundle = read_files([path], stdin, err=err)
    if not bundle.deployments:
        raise UsageError(f"--old {path}: no ModelDeployment in it")
    return bundle.deployments[0], bundle


def _observed(path: str | None, stdin: TextIO) -> list[dict[str, Any]] | None:
    if not path:
        return None
    try:
        source, text = read_source(path, stdin, max_bytes=yamlio.EXPORT_MAX_BYTES)
        # Lists stay whole: the observed-state reader names and skips a damaged item.
        return load_documents(
            text,
            source=source,
            expand_lists=False,
            max_bytes=yamlio.EXPORT_MAX_BYTES,
            max_nodes=yamlio.EXPORT_MAX_NODES,
        )
    except (ValueError, DocumentError) as exc:
        raise UsageError(f"--observed {exc}") from exc


def _explain_one(
    doc: dict[str, Any],
    inputs: Sequence[InputObject],
    settings: Settings,
    *,
    old: dict[str, Any] | None,
    old_inputs: Sequence[InputObject],
    observed: list[dict[str, Any]] | None,
    replicas: Sequence[tuple[str, int]] = (),
    old_settings: Settings | None = None,
) -> Explanation:
    from gpustack_render.explain.report import explain_deployment

    meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
    namespace = str((meta or {}).get("namespace") or naming.DEFAULT_NAMESPACE)
    lookups = StaticLookups.of(inputs, default_namespace=namespace)
    old_lookups = (
        StaticLookups.of([*inputs, *old_inputs], default_namespace=namespace)
        if old_inputs
        else lookups
    )
    state = None
    if observed is not None:
        from gpustack_render.explain.observed import split_observed

        state = split_observed(observed)
    return explain_deployment(
        doc,
        lookups=lookups,
        settings=settings,
        old=old,
        old_lookups=old_lookups,
        old_settings=old_settings,
        observed=state,
        replicas=replicas,
    )


def _code(answer: Explanation) -> int:
    if not answer.admission.allowed:
        return EXIT_REFUSED
    if any(p.side == "new" for p in answer.problems):
        return EXIT_REFUSED
    return EXIT_OK


def gate_failures(
    answer: Explanation, *, max_replaced: int | None, fail_on: Sequence[str]
) -> list[str]:
    """The CI gates that trip for ``answer``, as messages."""
    failed: list[str] = []
    replaced = answer.replaced()
    if max_replaced is not None and replaced > max_replaced:
        failed.append(f"--max-replaced {max_replaced}: the edit replaces {replaced} replicas")
    if "refused" in fail_on and not answer.admission.allowed:
        failed.append("--fail-on refused: admission refuses it")
    if "roll" in fail_on and answer.rolls():
        rolling = [r.name for r in answer.roles if r.action in ROLLING]
        if rolling:
            failed.append(f"--fail-on roll: role(s) {', '.join(rolling)} roll")
        elif answer.uncompared:
            failed.append(
                "--fail-on roll: the stored object cannot be rendered, so any replica may roll"
            )
        else:
            failed.append("--fail-on roll: the observed replicas roll")
    return failed


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """The ``explain`` verb (see the module docstring)."""
    operands = list(args.files)
    live_name = live_target(operands[0]) if operands else None
    if live_name is None and (args.kubeconfig or args.context):
        raise UsageError("explain: --kubeconfig and --context need the live form md/NAME")
    old_doc, old_bundle = _old(args.old, sys.stdin, err)
    observed = _observed(args.observed, sys.stdin)
    if live_name is not None:
        if args.old or args.observed:
            raise UsageError("explain: live mode reads the stored object and the observed state")
        return _live(operands, args, out, err)
    found, worst = each_deployment(
        input_groups(args, "explain"), "explain", err, namespace=args.namespace
    )
    if old_doc is not None and len(found) > 1:
        raise UsageError(f"explain: --old takes one ModelDeployment; found {len(found)}")
    results = [
        _result(
            group.label,
            doc,
            bundle,
            # With --observed and no --old the file is the stored object itself, explained
            # against itself ("why is it stuck"), as live mode does without an edited file.
            old=old_doc if old_doc is not None or observed is None else doc,
            old_inputs=old_bundle.inputs if old_bundle is not None else [],
            old_settings=(
                old_bundle.settings if old_bundle is not None and old_bundle.has_settings else None
            ),
            observed=observed,
            replicas=tuple(args.replicas),
        )
        for group, bundle, doc in found
    ]
    return max([worst, _emit(results, args, out, err)])


def _result(
    source: str,
    doc: dict[str, Any],
    bundle: Bundle,
    *,
    old: dict[str, Any] | None,
    old_inputs: Sequence[InputObject],
    observed: list[dict[str, Any]] | None,
    replicas: Sequence[tuple[str, int]] = (),
    old_settings: Settings | None = None,
) -> _Result:
    answer = _explain_one(
        doc,
        bundle.inputs,
        bundle.settings,
        old=old,
        old_inputs=old_inputs,
        old_settings=old_settings,
        observed=observed,
        replicas=replicas,
    )
    return _Result(source, display_name(doc), answer, _code(answer))


def _live(operands: Sequence[str], args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Live mode: the stored object explained against itself (why is it stuck), or the edited
    file as an update of it (what will this edit do), with what runs beside it. Reading is
    ``gpustack_render.cli.live``'s (GET and LIST only); from here on it is the offline path."""
    from gpustack_render.cli import live
    from gpustack_render.cli.documents import read_bundle

    if len(operands) > 2:
        raise UsageError("explain: live mode takes md/NAME and at most one edited file")
    try:
        docs = live.explain_live_documents(
            operands[0],
            namespace=args.namespace or None,
            kubeconfig=args.kubeconfig,
            context=args.context,
            edited_path=operands[1] if len(operands) > 1 else None,
            stdin=sys.stdin,
            system_namespace=args.system_namespace,
        )
    except live.LiveError as exc:
        raise UsageError(f"explain: {exc}") from None
    for warning in docs.warnings:
        err.write(f"Warning: {warning}\n")
    try:
        inputs = read_bundle(docs.input_sources()) if docs.inputs else Bundle()
    except ValueError as exc:
        raise UsageError(f"explain: {exc}") from exc
    stored = docs.old if docs.old is not None else docs.new
    result = _result(
        f"md/{display_name(stored)}",
        docs.new,
        Bundle(deployments=[docs.new], inputs=inputs.inputs, settings=docs.settings),
        old=stored,
        old_inputs=[],
        observed=docs.observed,
        replicas=tuple(args.replicas),
    )
    return _emit([result], args, out, err)


def _emit(results: list[_Result], args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    gates_given = args.max_replaced is not None or bool(args.fail_on)
    worst = EXIT_OK
    documents: list[dict[str, Any]] = []
    texts: list[str] = []
    lines: list[str] = []
    for result in results:
        failed = gate_failures(result.answer, max_replaced=args.max_replaced, fail_on=args.fail_on)
        code = max(result.code, EXIT_REFUSED if failed else EXIT_OK)
        worst = max(worst, code)
        for message in failed:
            err.write(f"explain: {result.name}: gate: {message}\n")
        if args.summary:
            lines.append(_summary_line(result))
            continue
        if args.output == "text":
            texts.append(
                explanation_text(result.answer) + _gate_text(args, failed, given=gates_given)
            )
            continue
        document = explanation_json(result.answer)
        if gates_given:
            document["gates"] = {
                "maxReplaced": args.max_replaced,
                "failOn": list(dict.fromkeys(args.fail_on)),
                "failed": failed,
            }
        documents.append(document)
    if args.summary:
        out.write("".join(line + "\n" for line in lines))
    elif args.output == "text":
        out.write("\n".join(texts))
    elif documents:
        out.write(dump(documents, fmt=args.output))
    return worst


def dump(documents: list[dict[str, Any]], *, fmt: str) -> str:
    """JSON (one object, or an ``ExplanationList`` of several) or YAML (a stream). Unlike the
    Kubernetes writers these keep ``null``: a changed value that was absent is ``old: null``."""
    if fmt == "json":
        payload: Any = (
            documents[0] if len(documents) == 1 else {"kind": "ExplanationList", "items": documents}
        )
        return json.dumps(payload, indent=2, ensure_ascii=False) + "\n"
    import yaml

    text: str = yaml.safe_dump_all(
        documents,
        explicit_start=len(documents) > 1,
        sort_keys=False,
        allow_unicode=True,
        width=4096,
    )
    return text


def _gate_text(args: argparse.Namespace, failed: Sequence[str], *, given: bool) -> str:
    if not given:
        return ""
    if failed:
        return "".join(f"gate failed: {message}\n" for message in failed)
    named = []
    if args.max_replaced is not None:
        named.append(f"--max-replaced {args.max_replaced}")
    if args.fail_on:
        named.append(f"--fail-on {','.join(dict.fromkeys(args.fail_on))}")
    return f"gates passed: {'; '.join(named)}\n"


def _summary_line(result: _Result) -> str:
    answer = result.answer
    verdict = "allowed" if answer.admission.allowed else "refused"
    actions = ", ".join(f"{r.name} {r.action}" for r in answer.roles) or "-"
    return (
        f"{result.source}\t{result.name}\t{answer.operation} {verdict}\t{actions}\t"
        f"{answer.replaced()} replaced\t{len(answer.admission.warnings)} warnings"
    )
