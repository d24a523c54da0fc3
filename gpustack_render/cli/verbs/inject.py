"""``gpustack-render inject``: the Pod KV-cache webhook on the first Pod of the files, answered
as an AdmissionReview response or the Pod as admitted (``--print``)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from gpustack_render.cli.exits import UsageError
from gpustack_render.cli.operands import old_object, read_files
from gpustack_render.cli.reviews import admission_request, answer, request_operation
from gpustack_render.core.errors import Verdict
from gpustack_render.injection import review_pod


def inject_review(
    files: Sequence[str],
    *,
    old_file: str | None = None,
    operation: str | None = None,
    stdin: TextIO = sys.stdin,
    namespace: str = "",
    err: TextIO | None = None,
) -> tuple[Verdict, dict[str, Any]]:
    """Run the Pod KV-cache webhook on ``files`` as the ``inject`` verb does; a document
    skipped is a warning on ``err`` (standard error when None)."""
    bundle = read_files(files, stdin, namespace=namespace, err=err)
    if not bundle.pods:
        raise UsageError("inject: no Pod in " + ", ".join(files))
    old = old_object(old_file, "Pod", stdin, err)
    op = request_operation(operation, old)
    if op not in ("CREATE", "UPDATE"):
        raise UsageError(f"inject: --operation {op} is not a Pod webhook operation")
    pod = bundle.pods[0]
    request = admission_request(op, pod, old)
    verdict: Verdict = review_pod(
        request,
        lookups=bundle.lookups(default_namespace=request.namespace),
        settings=bundle.settings,
    )
    return verdict, pod


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """The ``inject`` verb: exit 0 when the Pod is admitted, 1 when it is refused."""
    verdict, pod = inject_review(
        [*args.files, *args.filename],
        old_file=args.old,
        operation=args.operation,
        namespace=args.namespace,
        err=err,
    )
    return answer(verdict, pod, args, out, err)
