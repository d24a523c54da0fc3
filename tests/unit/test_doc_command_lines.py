"""Every ``gpustack-render`` command line of README.md and docs/*.md runs as printed (issue 37).

The lines are collected from the pages' code blocks: plain lines, ``$ gpustack-render ...``
transcripts, and lines that run the command inside a shell construct (``eval "$(gpustack-render
completion bash)"``). A synopsis (``[optional parts]``, ``a|b`` alternatives, placeholder words
such as ``NEW.yaml``) runs twice: its plain form, and its form with every optional part, the
first alternative chosen; each placeholder is given the value :data:`PLACEHOLDERS` names.

Each line runs through the real entry point (:func:`gpustack_render.cli.__main__.main`; a shell
line through bash, the console script on its ``PATH``) in a directory holding every file a line
names, built from ``examples/`` and the golden cases by :data:`FILES`. A documented file name
:data:`FILES` does not know fails the test, so a new line cannot go untested.

- A line that reads files exits 0 or 1 (never 2: usage or unreadable input). A transcript's
  printed output and exit code (``$ echo $?``) are the command's.
- A live line (``md/NAME``) cannot reach a cluster here: it must get past its arguments and
  stop at the cluster, exit 2 with the connection's message (the kubeconfig in ``$HOME`` names a
  port that refuses). tests/integration/test_explain_live.py runs the README's live lines as
  printed on the simulated cluster.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gpustack_render.cli import __main__ as cli
from gpustack_render.cli import yamlio
from gpustack_render.cli.parser import build_parser

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
EXAMPLES = ROOT / "examples"
GOLDEN = ROOT / "golden"
PROGRAM = "gpustack-render"


# ---- the lines ------------------------------------------------------------------------------


@dataclass(frozen=True)
class DocLine:
    """One command line as a page prints it."""

    #: ``README.md:40``.
    where: str
    #: The line, its prompt (``$ ``) and continuations joined.
    text: str
    #: A transcript's printed output (the lines up to the next ``$ ``), else None.
    output: str | None = None
    #: The exit code a transcript prints with ``$ echo $?``, else None.
    exit: int | None = None


def _is_command(body: str) -> bool:
    return body == PROGRAM or body.startswith(PROGRAM + " ") or f"$({PROGRAM} " in body


def doc_lines() -> list[DocLine]:
    """Every command line of :data:`DOCS`' code blocks, in page order."""
    found: list[DocLine] = []
    for page in DOCS:
        lines = page.read_text().splitlines()
        in_block = False
        i = 0
        while i < len(lines):
            line = lines[i]
            i += 1
            if line.lstrip().startswith("```"):
                in_block = not in_block
                continue
            stripped = line.strip()
            transcript = stripped.startswith("$ ")
            body = stripped.removeprefix("$ ")
            if not in_block or not _is_command(body):
                continue
            where = f"{page.relative_to(ROOT)}:{i}"
            # A line ending in '\', or a synopsis going on as indented '[...]' lines.
            while i < len(lines) and (
                body.endswith("\\") or re.match(r"\s+\[", lines[i]) is not None
            ):
                body = body.removesuffix("\\").rstrip() + " " + lines[i].strip()
                i += 1
            output, code = None, None
            if transcript:
                printed = []
                while i < len(lines) and not lines[i].startswith(("$ ", "```")):
                    printed.append(lines[i])
                    i += 1
                output = "".join(p + "\n" for p in printed)
                if i + 1 < len(lines) and lines[i] == "$ echo $?":
                    code = int(lines[i + 1])
            found.append(DocLine(where, body, output, code))
    return found


# ---- synopses and placeholders --------------------------------------------------------------

_COMMENT = re.compile(r"\s+#\s.*$")
_OPTIONAL = re.compile(r"\[([^\[\]]*)\]")
#: ``yaml|json|name``: a word of alternatives (a shell pipe stands between spaces).
_ALTERNATIVES = re.compile(r"(?<![\w.|-])([\w.-]+)(?:\|[\w.-]+)+")
#: A placeholder word: capitals (``NEW.yaml``, ``INPUTS…``, ``ROLE=N``, ``md/NAME``, ``N``).
_PLACEHOLDER = re.compile(r"(?:[\w.-]+/)?[A-Z][A-Z_]*(?:=[A-Z]+)?(?:\.yaml|…)?")

#: (the option before it, or "" for an operand; the placeholder) → the value it runs with.
PLACEHOLDERS: dict[tuple[str, str], str] = {
    ("", "NEW.yaml"): "new.yaml",
    ("", "INPUTS…"): "inputs.yaml",
    ("", "EDITED.yaml"): "edited.yaml",
    ("", "md/NAME"): "md/qwen-chat",
    ("--old", "STORED.yaml"): "stored.yaml",
    ("--observed", "EXPORT.yaml"): "observed.yaml",
    ("--replicas", "ROLE=N"): "server=3",
    ("--max-replaced", "N"): "1",
    ("-n", "NAMESPACE"): "team-a",
    ("-f", "PATH"): "manifests/",
    ("--kubeconfig", "PATH"): "~/.kube/prod",
    ("--context", "NAME"): "prod-eu",
}


def forms(text: str) -> list[str]:
    """The command lines a printed line stands for: itself, or a synopsis's plain form and its
    form with every optional part (the first of each set of alternatives)."""
    text = _COMMENT.sub("", text).strip()
    if not _OPTIONAL.search(text) and not _ALTERNATIVES.search(text):
        return [text]
    out = []
    for form in (_OPTIONAL.sub("", text), _OPTIONAL.sub(r"\1", text)):
        form = " ".join(_ALTERNATIVES.sub(r"\1", form).split())
        if form not in out:
            out.append(form)
    return out


def _verb_parsers() -> dict[str, argparse.ArgumentParser]:
    (verbs,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(verbs.choices)


def _choices(verb: str, option: str) -> tuple[str, ...]:
    parser = _verb_parsers().get(verb)
    for action in parser._actions if parser else ():
        if option in action.option_strings:
            return tuple(str(c) for c in action.choices or ())
    return ()


def argv_of(form: str) -> list[str]:
    """The arguments of one plain command line, each placeholder given its value."""
    words = shlex.split(form)
    assert words[0] == PROGRAM, form
    argv: list[str] = []
    for word in words[1:]:
        before = argv[-1] if argv and argv[-1].startswith("-") else ""
        verb = argv[0] if argv else ""
        if _PLACEHOLDER.fullmatch(word) and word not in _choices(verb, before):
            value = PLACEHOLDERS.get((before, word)) or PLACEHOLDERS.get(("", word))
            assert value is not None, (
                f"{form!r}: the placeholder {word!r} (after {before or 'no option'!r}) has no "
                "value: add it to PLACEHOLDERS"
            )
            word = value
        argv.append(word)
    return argv


def _live(argv: list[str]) -> bool:
    return len(argv) > 1 and argv[0] == "explain" and argv[1].startswith(("md/", "modeldeploy"))


def named_files(argv: list[str]) -> list[str]:
    """Every file a command line names: operands, ``-f``, ``--old``, ``--observed``,
    ``--kubeconfig`` (a live target and ``-`` are not files)."""
    if not argv or argv[0].startswith("-"):  # --version, --help: no verb, no file
        return []
    args = build_parser().parse_args(argv)
    named = [*getattr(args, "files", ()), *getattr(args, "filename", ())]
    named += [getattr(args, flag, None) or "" for flag in ("old", "observed", "kubeconfig")]
    return [f for f in named if f and f != "-" and not (_live(argv) and f == argv[1])]


# ---- the files they name --------------------------------------------------------------------


def _docs(path: Path) -> list[dict[str, Any]]:
    return yamlio.load_documents(path.read_text(), source=str(path))


def _old_of(case: str) -> dict[str, Any]:
    spec = _docs(GOLDEN / case / "case.yaml")[0]
    old: dict[str, Any] = spec["old"]
    return old


def _qwen_chat() -> dict[str, Any]:
    """examples/qwen-chat.yaml's ModelDeployment."""
    return _docs(EXAMPLES / "qwen-chat.yaml")[0]


def _edited() -> dict[str, Any]:
    """The example with a new engine image: an edit that rolls both replicas."""
    doc = _qwen_chat()
    doc["spec"]["engine"]["image"] = "vllm/vllm-openai:v0.26.0"
    return doc


def _stored() -> dict[str, Any]:
    """The example as ``kubectl get md qwen-chat -o yaml`` prints it (what the server adds)."""
    doc = _qwen_chat()
    doc["metadata"].update(
        uid="9d1c2b7a-3e4f-4a5b-9c6d-7e8f90a1b2c3", generation=1, resourceVersion="48000"
    )
    return doc


def _pod() -> dict[str, Any]:
    """golden/inject-command-only's Pod, opted in to the example's KV-cache Binding."""
    pod = _docs(GOLDEN / "inject-command-only" / "input.yaml")[0]
    pod["metadata"]["annotations"]["kvcache.gpustack.ai/binding"] = "team-a-dram"
    return pod


def _objects(*docs: dict[str, Any]) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        path.write_text(yamlio.dump_yaml(list(docs)))

    return write


def _copy(source: Path) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        if source.is_dir():
            shutil.copytree(source, path)
        else:
            shutil.copyfile(source, path)

    return write


def _kubeconfig(path: Path) -> None:
    """A kubeconfig whose context ``prod-eu`` (the current one) names a server on a loopback
    port bound by nobody listening: every connection is refused at once."""
    path.write_text(
        yamlio.dump_yaml_one(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "prod", "cluster": {"server": os.environ[_SERVER]}}],
                "users": [{"name": "alice", "user": {"token": "not-a-token"}}],
                "contexts": [{"name": "prod-eu", "context": {"cluster": "prod", "user": "alice"}}],
                "current-context": "prod-eu",
            }
        )
    )


def _golden_update(
    prefix: str, case: str, what: str
) -> dict[str, tuple[str, Callable[[Path], None]]]:
    """``<prefix>-new.yaml`` and ``<prefix>-stored.yaml``: a golden explain case's input (the
    edited deployment, objects included) and its stored object."""
    return {
        f"{prefix}-new.yaml": (
            f"golden/{case}/input.yaml: {what}, objects included",
            _copy(GOLDEN / case / "input.yaml"),
        ),
        f"{prefix}-stored.yaml": (f"golden/{case}'s stored object", _objects(_old_of(case))),
    }


_SERVER = "GPUSTACK_DOC_LINES_SERVER"

#: Every file name a documented line names → (what it holds, how it is written).
FILES: dict[str, tuple[str, Callable[[Path], None]]] = {
    "deployment.yaml": (
        "examples/qwen-chat.yaml's ModelDeployment alone",
        _objects(_qwen_chat()),
    ),
    "inputs.yaml": (
        "the objects examples/qwen-chat.yaml's deployment names (InstanceType, Binding, pool, "
        "backend)",
        _objects(*_docs(EXAMPLES / "qwen-chat.yaml")[1:]),
    ),
    "stored.yaml": (
        "the example's ModelDeployment as the API server stores it",
        _objects(_stored()),
    ),
    "edited.yaml": ("the example's ModelDeployment with a new engine image", _objects(_edited())),
    "new.yaml": ("the same edit as edited.yaml", _objects(_edited())),
    "observed.yaml": (
        "golden/explain-observed-stuck-queued/observed.yaml: a kubectl export of the example's "
        "Pods, Workloads and queues, a rollout stuck in Kueue",
        _copy(GOLDEN / "explain-observed-stuck-queued" / "observed.yaml"),
    ),
    "pod.yaml": ("golden/inject-command-only's Pod, on the example's Binding", _objects(_pod())),
    "stored-pod.yaml": ("the same Pod, as stored (an UPDATE of it)", _objects(_pod())),
    "manifests/": ("a copy of examples/ (subdirectories too)", _copy(EXAMPLES)),
    "examples/qwen-chat.yaml": ("the bundled example", _copy(EXAMPLES / "qwen-chat.yaml")),
    "qwen-chat.yaml": (
        "golden/explain-observed-stuck-queued/input.yaml: the example, objects included",
        _copy(GOLDEN / "explain-observed-stuck-queued" / "input.yaml"),
    ),
    **_golden_update("roll", "explain-gate-fail-on-roll", "an image edit"),
    **_golden_update("scale", "explain-update-scale-down", "four replicas down to two"),
    "~/.kube/prod": ("a kubeconfig of context prod-eu whose server refuses", _kubeconfig),
}


@pytest.fixture(scope="module")
def refusing_server() -> Iterator[str]:
    """``https://127.0.0.1:<port>`` of a port bound and never listened on: refused at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"https://127.0.0.1:{sock.getsockname()[1]}"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory, refusing_server: str) -> Path:
    """A directory holding every file of :data:`FILES`; its ``home/`` is ``$HOME``, with a
    ``.kube/config`` (the default kubeconfig) naming the refusing server too."""
    root = tmp_path_factory.mktemp("doc-lines")
    home = root / "home"
    (home / ".kube").mkdir(parents=True)
    os.environ[_SERVER] = refusing_server
    try:
        for name, (_, write) in FILES.items():
            path = home / name.removeprefix("~/") if name.startswith("~/") else root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            write(path.with_name(path.name) if not name.endswith("/") else root / name[:-1])
        _kubeconfig(home / ".kube" / "config")
    finally:
        del os.environ[_SERVER]
    return root


@pytest.fixture
def in_workdir(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(workdir)
    monkeypatch.setenv("HOME", str(workdir / "home"))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    return workdir


# ---- running them ---------------------------------------------------------------------------

#: Shell syntax: such a line runs in bash, the console script on its PATH.
_SHELL = re.compile(r"\$\(|[|<>;&`]")


def _cases() -> list[Any]:
    out = []
    for line in doc_lines():
        for form in forms(line.text):
            shown = form if form == _COMMENT.sub("", line.text).strip() else f"{form} (synopsis)"
            out.append(pytest.param(line, form, id=f"{line.where} {shown}"))
    return out


def _main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        code = cli.main(argv)
    except SystemExit as exc:  # --version, and argparse's usage errors
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize(("line", "form"), _cases())
def test_the_documented_command_line_runs_as_printed(
    line: DocLine,
    form: str,
    in_workdir: Path,
    refusing_server: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    if _SHELL.search(form):
        _run_in_bash(line, form, in_workdir)
        return
    # As the shell hands them over: words split, quotes removed, '~/' expanded.
    argv = [os.path.expanduser(w) if w.startswith("~/") else w for w in argv_of(form)]
    unknown = [f for f in named_files(argv_of(form)) if f not in FILES]
    assert not unknown, (
        f"{line.where}: {form!r} names {unknown}, a file FILES does not know: add it, with what "
        "it holds"
    )
    code, out, err = _main(argv, capsys)
    assert "usage:" not in err and "unrecognized arguments" not in err, err
    if _live(argv):
        # Past its arguments (and past reading the edited file), stopped at the cluster.
        assert (code, out) == (2, ""), err
        assert err.startswith(
            f"{PROGRAM}: explain: cannot reach the API server {refusing_server} (context prod-eu): "
        ), err
        return
    assert code in (0, 1), f"{line.where}: exit {code}: {err}"
    if line.output is not None and form == line.text:
        assert out == line.output, f"{line.where}: the transcript's output is not the command's"
    if line.exit is not None:
        assert code == line.exit, f"{line.where}: the transcript says exit {line.exit}"


def _run_in_bash(line: DocLine, form: str, workdir: Path) -> None:
    """A line using the shell: run by bash with the console script on its PATH (a shim running
    this interpreter's ``gpustack_render.cli``)."""
    if shutil.which("bash") is None:
        pytest.skip("no bash")
    shims = workdir / "bin"
    shims.mkdir(exist_ok=True)
    shim = shims / PROGRAM
    shim.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m gpustack_render.cli "$@"\n')
    shim.chmod(0o755)
    script = form
    if "completion" in form:  # the script it evaluates must define the completion
        script += f"\ncomplete -p {PROGRAM}"
    done = subprocess.run(
        ["bash", "-c", script],
        capture_output=True,
        text=True,
        check=False,
        cwd=workdir,
        env={**os.environ, "PATH": f"{shims}{os.pathsep}{os.environ.get('PATH', '')}"},
        timeout=120,
    )
    assert done.returncode in (0, 1) and "usage:" not in done.stderr, (
        f"{line.where}: exit {done.returncode}: {done.stderr}"
    )
    if "completion" in form:
        assert f"_gpustack_render {PROGRAM}" in done.stdout, done.stdout


# ---- the collector and the tables -----------------------------------------------------------


def test_the_lines_are_found_where_the_pages_print_them() -> None:
    """The collector finds the pages' lines (it cannot pass by finding none)."""
    texts = {line.text for line in doc_lines()}
    for expected in (
        "gpustack-render explain md/qwen-chat -n team-a [edited.yaml]              "
        "# the same, read from a cluster",
        "gpustack-render explain md/qwen-chat -n team-a edited.yaml",
        'eval "$(gpustack-render completion bash)"                                 # or zsh',
        "gpustack-render render -R -f manifests/ --summary        # one line per deployment",
        "gpustack-render explain roll-new.yaml --old roll-stored.yaml --fail-on roll",
        "gpustack-render --version",
    ):
        assert expected in texts, expected
    assert len(doc_lines()) >= 20
    synopsis = next(t for t in texts if t.startswith("gpustack-render explain NEW.yaml"))
    assert synopsis.endswith("[-n NAMESPACE]"), "the continuation lines are joined"
    transcripts = [line for line in doc_lines() if line.output is not None]
    assert len(transcripts) >= 3 and all(line.exit is not None for line in transcripts)


def test_a_synopsis_runs_plain_and_with_every_optional_part() -> None:
    assert forms("gpustack-render render a.yaml [-o yaml|json|name]   # note") == [
        "gpustack-render render a.yaml",
        "gpustack-render render a.yaml -o yaml",
    ]
    assert forms('eval "$(gpustack-render completion bash)"  # or zsh') == [
        'eval "$(gpustack-render completion bash)"'
    ]
    assert argv_of("gpustack-render admit NEW.yaml --operation CREATE --old STORED.yaml") == [
        "admit",
        "new.yaml",
        "--operation",
        "CREATE",
        "--old",
        "stored.yaml",
    ]


def test_an_unknown_placeholder_or_file_name_fails() -> None:
    """A new line naming a file (or placeholder) the tables do not know cannot pass untested."""
    with pytest.raises(AssertionError, match="add it to PLACEHOLDERS"):
        argv_of("gpustack-render render MANIFEST.yaml")
    unknown = [f for f in named_files(argv_of("gpustack-render render app.yaml")) if f not in FILES]
    assert unknown == ["app.yaml"]


def test_every_file_of_the_table_is_named_by_a_page() -> None:
    """The table keeps no name the pages stopped printing."""
    named = {
        f
        for line in doc_lines()
        for form in forms(line.text)
        if not _SHELL.search(form)
        for f in named_files(argv_of(form))
    }
    assert set(FILES) == named
