"""A verb's operands read into deployments: the files named on the command line (and ``-f``,
``-R``) sorted into bundles, each deployment with the bundle it is judged with, the stored
object of ``--old``, and the names the messages show. Unreadable input is a
:class:`~gpustack_render.cli.exits.UsageError`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from gpustack_render.cli.documents import Bundle, read_bundle
from gpustack_render.cli.exits import EXIT_OK, EXIT_USAGE, UsageError
from gpustack_render.cli.sources import Group, collect, read_source
from gpustack_render.cli.yamlio import DocumentError


def read_files(
    paths: Sequence[str], stdin: TextIO, *, namespace: str = "", err: TextIO | None = None
) -> Bundle:
    """Every object of ``paths`` (``-`` is ``stdin``), read together into one bundle; a
    warning on ``err`` (standard error when None) per document skipped."""
    try:
        bundle = read_bundle([read_source(p, stdin) for p in paths], namespace=namespace)
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
    groups: list[Group], verb: str, err: TextIO, *, namespace: str = ""
) -> tuple[list[tuple[Group, Bundle, dict[str, Any]]], int]:
    """Every deployment with the bundle it is judged with; the worst code of the reading."""
    found: list[tuple[Group, Bundle, dict[str, Any]]] = []
    worst = EXIT_OK
    for group in groups:
        try:
            if group.error:
                raise UsageError(group.error)
            bundle = read_group(group, namespace, err)
            if not bundle.deployments and group.named:
                raise UsageError(f"{verb}: no ModelDeployment in {group.label}")
        except UsageError as exc:
            err.write(f"gpustack-render: {exc}\n")
            worst = EXIT_USAGE
            continue
        found.extend((group, bundle, doc) for doc in bundle.deployments)
    if not found and worst == EXIT_OK:
        raise UsageError(f"{verb}: no ModelDeployment in " + ", ".join(g.label for g in groups))
    return found, worst


def read_group(group: Group, namespace: str, err: TextIO | None = None) -> Bundle:
    """The bundle of one group's files, already read from disk; a warning on ``err``
    (standard error when None) per document skipped."""
    try:
        bundle = read_bundle(group.sources, namespace=namespace)
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
    """``ModelDeployment <namespace>/<name>: `` in a batch of several deployments, where a line
    on stderr must say which one it is about; nothing for one deployment."""
    return f"ModelDeployment {display_name(doc)}: " if len(batch) > 1 else ""
