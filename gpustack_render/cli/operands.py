"""A verb's operands read into deployments: the files named on the command line (and ``-f``,
``-R``) sorted into bundles, each deployment with the bundle it is judged with, the stored
object of ``--old``, and the names the messages show. Unreadable input is a
:class:`~gpustack_render.cli.exits.UsageError`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Collection, Sequence
from typing import Any, TextIO

from gpustack_render.cli.documents import ARTIFACT_KIND, Bundle, read_bundle
from gpustack_render.cli.exits import EXIT_OK, EXIT_USAGE, UsageError
from gpustack_render.cli.sources import Group, collect, read_source
from gpustack_render.cli.yamlio import DocumentError


def read_files(
    paths: Sequence[str],
    stdin: TextIO,
    *,
    namespace: str = "",
    err: TextIO | None = None,
    judged: Collection[str] = (),
) -> Bundle:
    """Every object of ``paths`` (``-`` is ``stdin``), read together into one bundle; a
    warning on ``err`` (standard error when None) per document skipped. ``judged``: as
    :func:`~gpustack_render.cli.documents.read_bundle` takes it."""
    try:
        bundle = read_bundle(
            [read_source(p, stdin) for p in paths], namespace=namespace, judged=judged
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    return warn_skipped(bundle, err)


def warn_skipped(bundle: Bundle, err: TextIO | None) -> Bundle:
    """``bundle``, once ``Warning: <file>: <document>: skipped <kind> ...`` is written on
    ``err`` (standard error when None) for each document it left out."""
    stream = sys.stderr if err is None else err
    for message in bundle.skipped:
        stream.write(f"Warning: {message}\n")
    return bundle


def input_groups(args: argparse.Namespace, verb: str) -> list[Group]:
    """The operands (``PATH`` and ``-f``) as groups of files read together."""
    operands = [*args.files, *args.filename]
    if not operands:
        raise UsageError(f"{verb}: no input; name files or directories, or - for stdin")
    groups = collect(operands, recursive=getattr(args, "recursive", False), stdin=sys.stdin)
    if not groups:  # only directories, holding no file a walk reads
        raise UsageError(f"{verb}: no ModelDeployment in " + ", ".join(operands))
    return groups


def each_deployment(
    groups: list[Group],
    verb: str,
    err: TextIO,
    *,
    namespace: str = "",
    artifacts: bool = False,
) -> tuple[list[tuple[Group, Bundle, dict[str, Any]]], int]:
    """Every deployment with the bundle it is judged with; the worst code of the reading.

    With ``artifacts`` (``admit``), a group holding no deployment gives its ModelArtifacts
    instead, each judged on its own.
    """
    found: list[tuple[Group, Bundle, dict[str, Any]]] = []
    worst = EXIT_OK
    judged = (ARTIFACT_KIND,) if artifacts else ()
    wanted = "ModelDeployment or ModelArtifact" if artifacts else "ModelDeployment"
    for group in groups:
        try:
            if group.error:
                raise UsageError(group.error)
            bundle = read_group(group, namespace, err, judged=judged)
            requests = bundle.deployments or (bundle.artifacts if artifacts else [])
            if not requests and group.named:
                raise UsageError(f"{verb}: no {wanted} in {group.label}")
        except UsageError as exc:
            err.write(f"gpustack-render: {exc}\n")
            worst = EXIT_USAGE
            continue
        found.extend((group, bundle, doc) for doc in requests)
    if not found and worst == EXIT_OK:
        raise UsageError(f"{verb}: no {wanted} in " + ", ".join(g.label for g in groups))
    return found, worst


def read_group(
    group: Group, namespace: str, err: TextIO | None = None, *, judged: Collection[str] = ()
) -> Bundle:
    """The bundle of one group's files, already read from disk; a warning on ``err``
    (standard error when None) per document skipped. ``judged``: as
    :func:`~gpustack_render.cli.documents.read_bundle` takes it."""
    try:
        bundle = read_bundle(group.sources, namespace=namespace, judged=judged)
    except DocumentError as exc:
        raise UsageError(str(exc)) from exc
    return warn_skipped(bundle, err)


def old_object(
    path: str | None, kind: str, stdin: TextIO, err: TextIO | None = None
) -> dict[str, Any] | None:
    """The first ``kind`` (``ModelDeployment`` or ``Pod``) in ``--old``'s file, or None."""
    if not path:
        return None
    old_bundle = read_files([path], stdin, err=err)
    found = old_bundle.deployments if kind == "ModelDeployment" else old_bundle.pods
    if not found:
        raise UsageError(f"--old {path}: no {kind} in it")
    return found[0]


def display_name(doc: dict[str, Any]) -> str:
    """``namespace/name``; ``namespace/prefix*`` for a ``generateName``, ``namespace/(no name)``
    for neither."""
    meta = doc.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    prefix = meta.get("generateName")
    name = meta.get("name") or (f"{prefix}*" if prefix else "(no name)")
    return f"{meta.get('namespace') or 'default'}/{name}"


def who(doc: dict[str, Any], batch: Sequence[object]) -> str:
    """``<kind> <namespace>/<name>: `` (``ModelDeployment`` unless the document says
    otherwise) in a batch of several objects, where a line on stderr must say which one it is
    about; nothing for one object."""
    kind = doc.get("kind")
    kind = kind if isinstance(kind, str) and kind else "ModelDeployment"
    return f"{kind} {display_name(doc)}: " if len(batch) > 1 else ""
