"""``gpustack-render completion bash|zsh``: a shell completion script generated from the
command line's own parser, so it can never name a verb, flag or choice the parser does not have
(zsh loads the same script through ``bashcompinit``)."""

from __future__ import annotations

import argparse
import shlex
from typing import TextIO

from gpustack_render.cli.exits import EXIT_OK
from gpustack_render.cli.parser import build_parser


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """The ``completion`` verb."""
    out.write(script(build_parser(), shell=args.shell))
    return EXIT_OK


def _verbs(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _flags(parser: argparse.ArgumentParser) -> list[str]:
    return [s for a in parser._actions for s in a.option_strings]


def _choices(parser: argparse.ArgumentParser) -> list[tuple[str, list[str]]]:
    out = []
    for action in parser._actions:
        if action.option_strings and action.choices:
            out.append(("|".join(action.option_strings), [str(c) for c in action.choices]))
    return out


def script(parser: argparse.ArgumentParser, *, shell: str) -> str:
    """The completion script for ``shell`` (``bash`` or ``zsh``)."""
    prog = parser.prog
    func = "_" + prog.replace("-", "_")
    verbs = _verbs(parser)
    lines = []
    if shell == "zsh":
        lines += ["autoload -U +X bashcompinit && bashcompinit"]
    lines += [
        f'# {prog} completion, generated from its parser: eval "$({prog} completion {shell})"',
        f"{func}() {{",
        '  local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}"',
        '  local verb="${COMP_WORDS[1]}" opts=""',
        "  if [[ $COMP_CWORD -eq 1 ]]; then",
        "    COMPREPLY=($(compgen -W "
        + shlex.quote(" ".join([*verbs, *_flags(parser)]))
        + ' -- "$cur"))',
        "    return",
        "  fi",
        '  case "$verb" in',
    ]
    for verb, sub in verbs.items():
        lines.append(f"    {verb})")
        lines.append(f"      opts={shlex.quote(' '.join(_flags(sub)))}")
        choices = _choices(sub)
        positional = [a for a in sub._actions if not a.option_strings and a.choices]
        if choices:
            lines.append('      case "$prev" in')
            for flags, values in choices:
                lines.append(
                    f"        {flags}) COMPREPLY=($(compgen -W {shlex.quote(' '.join(values))}"
                    ' -- "$cur")); return ;;'
                )
            lines.append("      esac")
        for action in positional:
            words = " ".join(str(c) for c in action.choices or ())
            lines.append(
                f'      [[ "$cur" != -* ]] && COMPREPLY=($(compgen -W {shlex.quote(words)}'
                ' -- "$cur")) && return'
            )
        lines.append("      ;;")
    lines += [
        "  esac",
        '  if [[ "$cur" == -* ]]; then',
        '    COMPREPLY=($(compgen -W "$opts" -- "$cur"))',
        "  else",
        '    COMPREPLY=($(compgen -f -- "$cur"))',
        "  fi",
        "}",
        f"complete -o filenames -F {func} {prog}",
    ]
    return "\n".join(lines) + "\n"
