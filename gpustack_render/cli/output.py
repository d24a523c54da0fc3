"""What the verbs write: objects as YAML, JSON or kubectl's ``-o name``, a batch's summary
lines, and standard output that reports a failed write instead of passing for a bug."""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

from gpustack_render.cli import yamlio


def emit(objects: list[dict[str, Any]], fmt: str, out: TextIO) -> None:
    """``objects`` as a YAML stream, a JSON ``List``, or one ``kind[.group]/name`` a line."""
    if fmt == "name":
        out.write("".join(object_name(o) + "\n" for o in objects))
    elif fmt == "json":
        out.write(yamlio.dump_json(yamlio.as_list(objects)))
    else:
        out.write(yamlio.dump_yaml(objects))


def emit_one(obj: dict[str, Any], fmt: str, out: TextIO) -> None:
    """One object as JSON or YAML (no document marker)."""
    out.write(yamlio.dump_json(obj) if fmt == "json" else yamlio.dump_yaml_one(obj))


def object_name(obj: dict[str, Any]) -> str:
    """``kind[.group]/name`` as kubectl's ``-o name`` prints it; an object named by
    ``generateName`` shows its prefix (the API server appends the rest)."""
    group = str(obj.get("apiVersion") or "").rpartition("/")[0]
    kind = str(obj.get("kind") or "").lower()
    meta = obj.get("metadata") or {}
    name = meta.get("name") or meta.get("generateName") or ""
    return f"{kind}{'.' + group if group else ''}/{name}"


@dataclass
class Outcome:
    """One deployment's result in a batch."""

    source: str
    name: str
    verdict: str
    code: int
    pods: int = 0
    warnings: int = 0
    objects: list[dict[str, Any]] = field(default_factory=list)

    def line(self) -> str:
        return (
            f"{self.source}\t{self.name}\t{self.verdict}\t{self.pods} Pods\t"
            f"{self.warnings} warnings"
        )


class OutputError(Exception):
    """Standard output could not be written: a full disk, a closed descriptor (no bug)."""


class Output(io.TextIOBase):
    """Standard output whose failed write says so, instead of passing for an internal error;
    a closed pipe (``| head``) stays a :class:`BrokenPipeError`."""

    def __init__(self, stream: TextIO | None) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._do(lambda stream: stream.write(text))
        return len(text)

    def flush(self) -> None:
        self._do(lambda stream: stream.flush())

    def _do(self, op: Callable[[TextIO], object]) -> None:
        if self._stream is None:  # started with descriptor 1 closed
            raise OutputError("standard output is closed")
        try:
            op(self._stream)
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise OutputError(exc.strerror or str(exc)) from exc
