"""Finding the input files of a call, as kubectl's ``-f`` and ``-R`` do.

The operands (plain paths and ``-f`` values, in the order given) become groups of files read
together: every file named directly (and ``-`` for stdin) is one group, read together as before
(a deployment in one file, the objects it names in another); each file found in a directory
(``.yaml``, ``.yml``, ``.json``; subdirectories too with ``-R``) is a group of its own, so each
deployment there is judged with the objects beside it in its file. Groups come in operand order,
a directory's files in path order: the output is the same from one run to the next.
"""

from __future__ import annotations

import codecs
import io
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TextIO

from gpustack_render.cli.yamlio import MAX_BYTES

#: The file names a directory walk reads (kubectl's list).
EXTENSIONS = (".yaml", ".yml", ".json")


@dataclass
class Group:
    """Files read together, or why one of them could not be read."""

    paths: list[str] = field(default_factory=list)
    sources: list[tuple[str, str]] = field(default_factory=list)
    error: str = ""
    #: True for the group of files named directly (a missing deployment there is an error).
    named: bool = False

    @property
    def label(self) -> str:
        return ", ".join(self.paths)


def read_source(path: str, stdin: TextIO, *, max_bytes: int = MAX_BYTES) -> tuple[str, str]:
    """(name, text) of one file; raises :class:`OSError` or :class:`ValueError` with a one-line
    message naming it.

    UTF-8, or UTF-16 after its byte order mark, as kubectl reads a file (PowerShell's ``>``
    writes UTF-16). At most one character past ``max_bytes`` is read (a file of at most that
    many bytes holds no more characters), so the reader refuses a larger file without holding
    it whole (a mistaken ``/dev/zero``, or a multi-gigabyte dump in a directory).
    """
    name = "<stdin>" if path == "-" else path
    encoding = "utf-8"
    try:
        if path == "-":
            if stdin is None:  # started with descriptor 0 closed (<&-)
                raise ValueError("<stdin>: cannot read: standard input is closed")
            raw = getattr(stdin, "buffer", None)
            if isinstance(raw, io.BufferedReader) and raw.peek(2)[:2] in _UTF16_BOMS:
                encoding = "utf-16"
                wrapper = io.TextIOWrapper(raw, encoding=encoding)
                try:
                    return name, wrapper.read(max_bytes + 1)
                finally:
                    wrapper.detach()  # standard input stays open
            return name, stdin.read(max_bytes + 1)
        with open(path, "rb") as fh:  # opened once: a pipe (<(...)) cannot be read twice
            if fh.peek(2)[:2] in _UTF16_BOMS:
                encoding = "utf-16"
            with io.TextIOWrapper(fh, encoding=encoding) as text:
                return name, text.read(max_bytes + 1)
    except OSError as exc:
        raise ValueError(f"{name}: cannot read: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise ValueError(f"{name}: not {encoding.upper()} text: {exc.reason}") from exc


#: The byte order marks of UTF-16 (little and big endian).
_UTF16_BOMS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)


def _walk(directory: str, *, recursive: bool) -> tuple[list[str], list[str]]:
    """The files of ``directory`` a walk reads, and one message per directory it could not
    list (``os.walk`` skips those silently; kubectl reports them)."""
    found: list[str] = []
    failed: list[str] = []

    def unreadable(exc: OSError) -> None:
        failed.append(f"{exc.filename or directory}: cannot read: {exc.strerror or exc}")

    for root, dirs, files in os.walk(directory, onerror=unreadable):
        dirs.sort()
        if not recursive:
            dirs.clear()
        found.extend(os.path.join(root, f) for f in sorted(files) if f.endswith(EXTENSIONS))
    return (sorted(found) if not recursive else found), failed


def collect(operands: Sequence[str], *, recursive: bool, stdin: TextIO) -> list[Group]:
    """The groups of ``operands``; an unreadable file is a group carrying its error."""
    groups: list[Group] = []
    named = Group(named=True)
    for operand in operands:
        if operand != "-" and os.path.isdir(operand):
            paths, failed = _walk(operand, recursive=recursive)
            groups.extend(Group(paths=[operand], error=message) for message in failed)
            for path in paths:
                groups.append(_read_group([path], stdin))
            continue
        if not named.paths:
            groups.append(named)
        named.paths.append(operand)
    if named.paths:
        filled = _read_group(named.paths, stdin)
        named.sources, named.error = filled.sources, filled.error
    return groups


def _read_group(paths: list[str], stdin: TextIO) -> Group:
    group = Group(paths=list(paths))
    try:
        group.sources = [read_source(p, stdin) for p in paths]
    except ValueError as exc:
        group.error = str(exc)
    return group
