"""Launch recognition: does an appended argument reach the declared engine?
(docs/contract/injection-notes.md §7)

Injection appends its flags to the container's ``args``. That only configures the engine when
the command line visibly runs the engine with those arguments, so the launch is read token by
token: transparent launcher prefixes (``env``, ``tini``, ``dumb-init``, ``busybox``,
``toybox``, ``timeout``) are stripped, shells and scripts are judged, and the program left is
recognised as an engine entry point or not. Anything admission cannot see through is refused
unless the author declares that the launch forwards appended arguments.

Decisions beyond the reference (each pinned by tests):

- a launcher's options end at its first non-option token (the launchers parse with a leading
  ``+`` in their option string), so ``timeout 10 -x`` runs ``-x``;
- a long launcher option may be abbreviated to any unique prefix of that launcher's long
  options, as ``getopt_long`` reads it (``env --split`` is ``--split-string``);
- ``python3`` may carry interpreter options before ``-m`` (``python3 -u -m
  sglang.launch_server``), and ``-m`` may be bundled or attached (``-um mod``, ``-mmod``);
- ``env`` is transparent only for the arguments: its assignments, ``-u`` and ``-i`` change the
  environment at exec time, after admission wrote it, so one that sets or unsets a KV-cache
  variable (:data:`OWNED_ENV`), or clears the environment, is refused
  (``launch.env-owned-variable``) whatever the forwarding declaration says (it declares
  arguments, not the environment).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from gpustack_render.core.vocabulary import Engine, EngineFamily
from gpustack_render.engines import owned
from gpustack_render.injection import refusal as r
from gpustack_render.injection.contract import ANNOTATION_LAUNCH_ARGS_FORWARDED, FORWARDED_TRUE
from gpustack_render.injection.refusal import Refusal

#: The vLLM family's entry point (any directory).
PROGRAM_VLLM: Final = "vllm"
#: SGLang's entry point: this interpreter with ``-m`` and the module below.
PROGRAM_PYTHON3: Final = "python3"
#: The module SGLang's server runs as.
MODULE_SGLANG: Final = "sglang.launch_server"
#: Shells whose ``c`` option and command file are judged.
SHELLS: Final[frozenset[str]] = frozenset({"sh", "bash", "dash", "ash", "zsh", "ksh"})
#: The script suffix admission cannot see through.
SCRIPT_SUFFIX: Final = ".sh"
#: Shell long options that take the next token.
SHELL_VALUE_OPTIONS: Final[frozenset[str]] = frozenset({"--rcfile", "--init-file"})

_ASSIGNMENT = re.compile(r"^[^=-][^=]*=")

#: Variables injection writes or refuses on either engine: an ``env`` launcher may not set or
#: unset one (the same list for both engines, so the rule reads the same everywhere).
OWNED_ENV: Final[frozenset[str]] = frozenset({*owned.VLLM_OWNED_ENV, *owned.SGLANG_OWNED_ENV})
#: What :func:`strip_launchers` reports for an ``env`` that clears the whole environment.
CLEARS_ENVIRONMENT: Final = "-i"


@dataclass(frozen=True)
class Launcher:
    """How one transparent launcher reads its own options and operands."""

    #: Short option letters that take the next token (or attached text).
    value_short: frozenset[str] = frozenset()
    #: Short option letters whose value is a whole command line (opaque).
    opaque_short: frozenset[str] = frozenset()
    #: Long options that take a value.
    value_long: frozenset[str] = frozenset()
    #: Long options whose value is a whole command line (opaque).
    opaque_long: frozenset[str] = frozenset()
    #: Every long option the launcher knows (for unique-prefix abbreviations).
    long_options: tuple[str, ...] = field(default=())
    #: Positional operands the launcher consumes before the program (``timeout``: DURATION).
    operands: int = 0

    def long_option(self, name: str) -> str:
        """The long option ``name`` abbreviates, or ``name`` itself when none or ambiguous."""
        if name in self.long_options:
            return name
        matches = [o for o in self.long_options if o.startswith(name)]
        return matches[0] if len(matches) == 1 else name


#: The transparent launchers, by program basename (docs/contract/injection-notes.md §7 step 4).
LAUNCHERS: Final[dict[str, Launcher]] = {
    "env": Launcher(
        value_short=frozenset("uCa"),
        opaque_short=frozenset("S"),
        value_long=frozenset({"--unset", "--chdir", "--argv0"}),
        opaque_long=frozenset({"--split-string"}),
        long_options=(
            "--argv0",
            "--block-signal",
            "--chdir",
            "--debug",
            "--default-signal",
            "--help",
            "--ignore-environment",
            "--ignore-signal",
            "--list-signal-handling",
            "--null",
            "--split-string",
            "--unset",
            "--version",
        ),
    ),
    "tini": Launcher(value_short=frozenset("pe")),
    "dumb-init": Launcher(
        value_short=frozenset("r"),
        value_long=frozenset({"--rewrite"}),
        long_options=("--help", "--rewrite", "--single-child", "--verbose", "--version"),
    ),
    "busybox": Launcher(),
    "toybox": Launcher(),
    "timeout": Launcher(
        value_short=frozenset("sk"),
        value_long=frozenset({"--signal", "--kill-after"}),
        long_options=(
            "--foreground",
            "--help",
            "--kill-after",
            "--preserve-status",
            "--signal",
            "--verbose",
            "--version",
        ),
        operands=1,
    ),
}


@dataclass(frozen=True, slots=True)
class Launch:
    """An admitted launch, as the injection record reports it."""

    #: The program left after launcher prefixes (``""`` when there was none to read).
    program: str
    #: Whether the author's declaration admitted a launch not identified as the engine.
    forwarded: bool


class _Strip(enum.Enum):
    OK = "ok"
    HIDDEN = "hidden"
    NOTHING = "nothing"


def basename(token: str) -> str:
    """The last path component of a program token."""
    return token.rsplit("/", 1)[-1]


#: How deep :func:`_split_string_effects` follows an ``env -S`` inside an ``env -S`` string.
_SPLIT_DEPTH: Final = 8
#: One word of an ``env -S`` string: unquoted text, '…' and "…" (an unclosed quote runs to the
#: end) and backslash escapes, joined until a blank. Regular expressions keep a long string
#: linear.
_WORD: Final = re.compile(r"""(?:[^\s'"\\]+|'[^']*'?|"(?:[^"\\]|\\.)*"?|\\.?)+""", re.S)
#: The quoted and escaped parts of one word, and the escapes inside "…".
_UNQUOTE: Final = re.compile(r"""'([^']*)'?|"((?:[^"\\]|\\.)*)"?|\\(.?)""", re.S)
_ESCAPE: Final = re.compile(r"\\(.)", re.S)


def _split_string_effects(text: str, rest: Sequence[str], touched: list[str], depth: int) -> None:
    """What an ``env -S TEXT`` does to the environment, appended to ``touched``.

    ``env`` splits TEXT into arguments and reads them as its own (assignments, ``-u``, ``-i``
    and the program), followed by ``rest``; the command line stays hidden
    (``launch.hidden-command-line``), but its environment effects are judged as on a plain
    ``env`` (``launch.env-owned-variable``), which no declaration admits. The split follows
    shell quoting; an unbalanced quote falls back to blanks.
    """
    if depth >= _SPLIT_DEPTH:
        return
    words = [_UNQUOTE.sub(_unquoted, word) for word in _WORD.findall(text)]
    strip_launchers(["env", *words, *rest], touched=touched, depth=depth + 1)


def _unquoted(match: re.Match[str]) -> str:
    single, double, escaped = match.group(1, 2, 3)
    if single is not None:
        return single
    if double is not None:
        return _ESCAPE.sub(r"\1", double)
    return escaped or ""


def _segment(  # noqa: C901 (one left-to-right scan of a launch segment, a branch per launcher form)
    spec: Launcher,
    argv: Sequence[str],
    touched: list[str] | None = None,
    depth: int = 0,
    start: int = 0,
) -> tuple[_Strip, int]:
    """Read the segment of the launcher at ``argv[start]``; returns the outcome and the
    program's index in ``argv`` (indices, not slices, keep a long chain linear). ``env``'s
    effects on the environment are appended to ``touched``: each assigned or unset name, and
    :data:`CLEARS_ENVIRONMENT` for ``-i``/``--ignore-environment``/``-``, those inside an
    ``-S`` string included."""
    env = spec is LAUNCHERS["env"]
    seen: list[str] = touched if touched is not None and env else []

    def hidden(text: str, rest: Sequence[str]) -> tuple[_Strip, int]:
        if env and touched is not None:
            _split_string_effects(text, rest, seen, depth)
        return _Strip.HIDDEN, 0

    n = len(argv)
    i = start + 1
    operands = spec.operands
    options = True
    while i < n:
        token = argv[i]
        if options and token == "--":
            options = False
            i += 1
            continue
        if options and token == "-":
            seen.append(CLEARS_ENVIRONMENT)
            i += 1
            continue
        if options and token.startswith("--"):
            raw, eq, value = token.partition("=")
            name = spec.long_option(raw)
            if name == "--ignore-environment":
                seen.append(CLEARS_ENVIRONMENT)
            if name == "--unset":
                seen.append(value if eq else (argv[i + 1] if i + 1 < n else ""))
            if name in spec.opaque_long:
                if eq:
                    if value:
                        return hidden(value, argv[i + 1 :])
                    i += 1
                    continue
                if i + 1 >= n:
                    return _Strip.NOTHING, 0
                if argv[i + 1] == "":
                    i += 2
                    continue
                return hidden(argv[i + 1], argv[i + 2 :])
            if name in spec.value_long and not eq:
                if i + 1 >= n:
                    return _Strip.NOTHING, 0
                i += 2
                continue
            i += 1
            continue
        if options and token.startswith("-"):
            step = 1
            letters = token[1:]
            for k, letter in enumerate(letters):
                if letter == "i":
                    seen.append(CLEARS_ENVIRONMENT)
                if letter != "u" and letter not in spec.opaque_short | spec.value_short:
                    continue  # a flag letter: no slice, so a long bundle stays linear
                rest = letters[k + 1 :]
                if letter == "u":
                    seen.append(rest or (argv[i + 1] if i + 1 < n else ""))
                if letter in spec.opaque_short:
                    if rest:
                        return hidden(rest, argv[i + 1 :])
                    if i + 1 >= n:
                        return _Strip.NOTHING, 0
                    if argv[i + 1] != "":
                        return hidden(argv[i + 1], argv[i + 2 :])
                    step = 2
                    break
                if letter in spec.value_short:
                    if not rest:
                        if i + 1 >= n:
                            return _Strip.NOTHING, 0
                        step = 2
                    break
            i += step
            continue
        if _ASSIGNMENT.match(token):
            seen.append(token.partition("=")[0])
            options = False
            i += 1
            continue
        if operands > 0:
            operands -= 1
            options = False
            i += 1
            continue
        return _Strip.OK, i
    return _Strip.NOTHING, 0


def strip_launchers(
    argv: Sequence[str], *, touched: list[str] | None = None, depth: int = 0
) -> tuple[str, list[str], str]:
    """Remove transparent launcher prefixes.

    Returns the outcome (``"ok"``, ``"hidden"``: a command line inside one token, or
    ``"nothing"``: a launcher with no program after it), the argv left, and the last launcher
    read (``""`` when none). What each ``env`` does to the environment is appended to
    ``touched`` (see :func:`_segment`).
    """
    launcher = ""
    start = 0
    while start < len(argv) and basename(argv[start]) in LAUNCHERS:
        launcher = basename(argv[start])
        outcome, start = _segment(LAUNCHERS[launcher], argv, touched, depth, start)
        if outcome is not _Strip.OK:
            return outcome.value, [], launcher
    return _Strip.OK.value, list(argv[start:]), launcher


def python_module(argv: Sequence[str]) -> str | None:
    """The module a ``python3`` command line runs with ``-m``, or ``None``."""
    j = 1
    while j < len(argv):
        token = argv[j]
        if not token.startswith("-") or token in ("-", "--") or token.startswith("--"):
            return None
        letters = token[1:]
        step = 1
        for k, letter in enumerate(letters):
            if letter not in "mcWX":
                continue  # a flag letter: no slice, so a long bundle stays linear
            rest = letters[k + 1 :]
            if letter == "m":
                if rest:
                    return rest
                return argv[j + 1] if j + 1 < len(argv) else None
            if letter == "c":
                return None
            if letter in "WX":
                step = 1 if rest else 2
                break
        j += step
    return None


def recognised_engine(argv: Sequence[str]) -> EngineFamily | None:
    """The family whose entry point ``argv`` runs, or ``None`` for any other program."""
    program = basename(argv[0])
    if program == PROGRAM_VLLM:
        return EngineFamily.VLLM
    if program == PROGRAM_PYTHON3 and python_module(argv) == MODULE_SGLANG:
        return EngineFamily.SGLANG
    return None


def _shell_script(argv: Sequence[str]) -> tuple[str, str]:
    """Scan a shell's options: (``"c"``, option) for a ``c`` option, (``"file"``, name) for
    its command file, (``""``, ``""``) when it has neither."""
    j = 1
    while j < len(argv):
        token = argv[j]
        if token == "--":
            return ("file", argv[j + 1]) if j + 1 < len(argv) else ("", "")
        if token.startswith("-") and not token.startswith("--") and "c" in token[1:]:
            return "c", token
        if len(token) < 2 or token[0] not in "-+":
            return "file", token
        j += 2 if token in SHELL_VALUE_OPTIONS or token.endswith(("o", "O")) else 1
    return "", ""


def check_launch(
    container: str,
    command: Sequence[str],
    args: Sequence[str],
    *,
    engine: Engine,
    forwarded: str | None,
) -> Launch | Refusal:
    """Steps 1–7 of §7 for the target container (the ``launch.*`` refusals).

    ``engine`` is the selected runtime (``vllm`` | ``vllm-ascend`` | ``sglang``); ``forwarded``
    the raw ``launch-args-forwarded`` annotation, ``None`` when absent.
    """
    if not command and not args:
        return Refusal(
            r.NO_LAUNCH,
            f"container {container} declares neither command nor args: the image "
            "ENTRYPOINT/CMD would run, and args alone would discard CMD; put the engine "
            "executable in command and the launch arguments in args (this overrides the "
            "ENTRYPOINT too)",
        )
    if forwarded is not None and forwarded != FORWARDED_TRUE:
        return Refusal(
            r.FORWARDING_VALUE,
            f'annotation {ANNOTATION_LAUNCH_ARGS_FORWARDED} has value {forwarded!r}: it must be "'
            f'{FORWARDED_TRUE}" when declared',
        )
    declared = forwarded == FORWARDED_TRUE
    if not command:
        if declared:
            return Launch("", True)
        return Refusal(
            r.ARGS_WITHOUT_COMMAND,
            f"container {container} declares args but no command: the image ENTRYPOINT is "
            "invisible to admission, so nothing shows appended arguments reach the engine; set "
            f'command, or declare {ANNOTATION_LAUNCH_ARGS_FORWARDED}="true" only if the '
            "ENTRYPOINT forwards them",
        )
    touched: list[str] = []
    outcome, argv, launcher = strip_launchers([*command, *args], touched=touched)
    refusal = _launcher_env(container, touched)
    if refusal is not None:
        return refusal
    if outcome == _Strip.HIDDEN.value:
        if declared:
            return Launch("", True)
        return Refusal(
            r.HIDDEN_COMMAND_LINE,
            f"container {container} hides its command line inside one argument (env -S / "
            "--split-string): admission cannot tell what runs; launch the engine directly, add "
            f'the flag inside that argument, or declare {ANNOTATION_LAUNCH_ARGS_FORWARDED}="true"',
        )
    if argv:
        refusal = _shell_or_script(container, argv, declared=declared)
        if refusal is not None:
            return refusal
    if not argv:
        return Refusal(
            r.NOTHING_TO_RUN,
            f"container {container} runs launcher {launcher} with nothing after it: the "
            "appended flag would be executed as the program; put the engine executable and its "
            "arguments after the launcher",
        )
    program = basename(argv[0])
    found = recognised_engine(argv)
    if found is not None:
        if found is not engine.family:
            return Refusal(
                r.OTHER_ENGINE,
                f"container {container} launches {program}, the entry point of {found}, but "
                f"the Pod's annotations select the {engine} runtime; fix the engine/manufacturer "
                "annotation or launch that engine",
            )
        return Launch(program, False)
    if declared:
        return Launch(program, True)
    return Refusal(
        r.UNRECOGNISED,
        f"container {container} launches {program}, which is not an engine entry point "
        f"(vllm, or python3 -m {MODULE_SGLANG}); launch the engine directly, or declare "
        f'{ANNOTATION_LAUNCH_ARGS_FORWARDED}="true" only if that launcher forwards appended '
        "arguments",
    )


def _launcher_env(container: str, touched: Sequence[str]) -> Refusal | None:
    """``launch.env-owned-variable``: an ``env`` launcher that sets, unsets or clears a KV-cache
    variable."""
    if CLEARS_ENVIRONMENT in touched:
        what = "clears the environment (-i)"
    else:
        names = sorted({t for t in touched if t in OWNED_ENV})
        if not names:
            return None
        what = f"sets or unsets {', '.join(names)}"
    return Refusal(
        r.LAUNCHER_ENV,
        f"container {container} runs env, which {what} when the engine starts, after the "
        "webhook wrote the KV-cache variables: the engine would not run with the configuration "
        "the Pod records; remove that from the env command line (set other variables in the "
        "container's env), or drop the inject label",
    )


def _shell_or_script(container: str, argv: Sequence[str], *, declared: bool) -> Refusal | None:
    program = basename(argv[0])
    if program not in SHELLS:
        if program.endswith(SCRIPT_SUFFIX) and not declared:
            return _script_refusal(container, program)
        return None
    kind, value = _shell_script(argv)
    if kind == "c":
        return Refusal(
            r.SHELL_C,
            f"container {container} runs shell {program} with option {value}: an appended flag "
            "becomes the shell's $0 (the rest its positional parameters) and never reaches the "
            "engine; launch the engine directly or add the flag to the script",
        )
    if kind == "file" and basename(value).endswith(SCRIPT_SUFFIX) and not declared:
        return _script_refusal(container, basename(value))
    return None


def _script_refusal(container: str, script: str) -> Refusal:
    return Refusal(
        r.SCRIPT,
        f"container {container} runs script {script}: admission cannot read whether it "
        'forwards "$@" to the engine; launch the engine directly, edit the script, or declare '
        f'{ANNOTATION_LAUNCH_ARGS_FORWARDED}="true"',
    )
