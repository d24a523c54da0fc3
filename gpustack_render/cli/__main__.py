"""The ``gpustack-render`` console script and ``python -m gpustack_render.cli``: parse, run the
verb, turn what escapes it into an exit code and one line on stderr.

Each verb is a module of :mod:`gpustack_render.cli.verbs`, imported here only when it is the one
called: a verb's start-up carries only the layers it needs (``crds`` no admission, ``render``
no injection). Exit codes: :mod:`gpustack_render.cli.exits`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from importlib import import_module
from typing import TextIO, cast

from gpustack_render.cli.exits import EXIT_OK, EXIT_USAGE, UsageError
from gpustack_render.cli.output import Output, OutputError
from gpustack_render.cli.parser import build_parser

#: A verb: the parsed arguments, standard output and standard error in, the exit code out.
Command = Callable[[argparse.Namespace, TextIO, TextIO], int]


def command(verb: str) -> Command:
    """The ``run`` function of ``verb``'s module, imported now."""
    return cast(Command, import_module(f"gpustack_render.cli.verbs.{verb}").run)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit code."""
    out = Output(sys.stdout)
    try:
        args = build_parser().parse_args(argv)  # --version writes through Output too
        code = command(args.verb)(args, cast(TextIO, out), sys.stderr)
        out.flush()  # here, not at exit, so a failed write is reported
        return code
    except UsageError as exc:
        sys.stderr.write(f"gpustack-render: {exc}\n")
        return EXIT_USAGE
    except OutputError as exc:
        sys.stderr.write(f"gpustack-render: cannot write the output: {exc}\n")
        return EXIT_USAGE
    except BrokenPipeError:
        return EXIT_OK
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        sys.stderr.write(
            f"gpustack-render: internal error ({type(exc).__name__}: {_first_line(exc)}); "
            "this is a bug, please report it with the input\n"
        )
        return EXIT_USAGE


def _first_line(exc: BaseException) -> str:
    lines = str(exc).splitlines()
    return lines[0] if lines else ""


if __name__ == "__main__":
    raise SystemExit(main())
