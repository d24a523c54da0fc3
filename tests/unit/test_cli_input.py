"""The command line reads YAML as kubectl does, and answers hostile or broken input with one
line and exit 2: never a traceback, never exit 1 (which reads as a refusal)."""

from __future__ import annotations

import codecs
import io
import subprocess
import sys
from pathlib import Path

import pytest

from gpustack_render.cli import __main__ as cli
from gpustack_render.cli import yamlio
from gpustack_render.cli.sources import read_source
from gpustack_render.cli.yamlio import DocumentError, load_documents

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "qwen-chat.yaml"


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli.main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize(
    ("plain", "value"),
    [
        *[pytest.param(w, True, id=w) for w in ("yes", "Yes", "YES", "on", "ON", "y", "Y", "true")],
        *[pytest.param(w, False, id=w) for w in ("no", "No", "off", "Off", "n", "N", "false")],
        pytest.param("0755", 493, id="octal"),
        pytest.param("0x1F", 31, id="hex"),
        pytest.param("1_000", 1000, id="underscores"),
        pytest.param("1e3", 1000.0, id="exponent"),
        pytest.param("2024-01-01", "2024-01-01", id="date-stays-a-string"),
        pytest.param("1:20", "1:20", id="no-sexagesimal"),
        pytest.param("'yes'", "yes", id="quoted-yes-is-a-string"),
        pytest.param("~", None, id="null"),
    ],
)
def test_scalars_are_read_as_kubectl_reads_them(plain: str, value: object) -> None:
    assert load_documents(f"v: {plain}\n") == [{"v": value}]


def test_keys_are_spelled_as_the_json_the_api_server_receives() -> None:
    assert load_documents("on: 1\n1: 2\n") == [{"true": 1, "1": 2}]


def test_merge_keys_are_read_and_may_be_overridden() -> None:
    text = "a: &a {x: 1, z: 1}\nb:\n  <<: *a\n  x: 2\n"
    assert load_documents(text) == [{"a": {"x": 1, "z": 1}, "b": {"x": 2, "z": 1}}]


def test_the_writer_quotes_what_the_reader_would_not_read_back_as_a_string() -> None:
    words = ["yes", "no", "on", "off", "y", "n", "true", "null", "~", "0755", ""]
    assert load_documents(yamlio.dump_yaml([{"v": words}])) == [{"v": words}]


def _env_yes() -> str:
    text = EXAMPLE.read_text()
    return text.replace(
        "      accelerator: 2\n",
        "      accelerator: 2\n    env:\n    - name: X\n      value: yes\n",
        1,
    )


@pytest.mark.parametrize("verb", ["render", "admit"])
def test_env_value_yes_is_refused_at_its_field_like_the_api_server(
    verb: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "in.yaml"
    f.write_text(_env_yes())
    code, out, err = run([verb, str(f)], capsys)
    assert code == 1
    assert "spec.roles[0].env[0].value" in (err if verb == "render" else out)
    f.write_text(_env_yes().replace("value: yes", "value: 'yes'"))
    assert run([verb, str(f)], capsys)[0] == 0


def _bomb(levels: int) -> str:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    for i in range(1, levels + 1):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


BAD_INPUT = [
    pytest.param(_bomb(9), "once aliases are expanded", id="alias-bomb"),
    pytest.param("a: &x [*x]\n", "refers to itself", id="recursive-alias"),
    pytest.param("a:\n" + "- " * 5000 + "x\n", "deeper", id="block-nesting-5000"),
    pytest.param("a: " + "[" * 5000 + "]" * 5000 + "\n", "deeper", id="flow-nesting-5000"),
    pytest.param('{"a": ' * 5000 + "1" + "}" * 5000, "deeper", id="json-nesting-5000"),
    pytest.param("[" * 100_000 + "]" * 100_000, "deeper", id="json-nesting-100000"),
    pytest.param('{"a": ' + "9" * 5000 + "}", "not valid JSON", id="json-number-5000-digits"),
    pytest.param("a: '" + "x" * yamlio.MAX_BYTES + "'\n", "bytes", id="too-large"),
    pytest.param("a: 1\n---\n" * (yamlio.MAX_DOCUMENTS + 1), "documents", id="too-many-documents"),
    pytest.param("a: 1\na: 2\n", "duplicate key 'a'", id="duplicate-key"),
    pytest.param("a:\n\tb: 1\n", "cannot start any token", id="tab-indent"),
    pytest.param("a: !!binary aGVsbG8=\n", "no JSON form", id="binary-tag"),
    pytest.param("a: *nope\n", "undefined alias", id="undefined-alias"),
    pytest.param(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: [gpustack-settings]\n",
        "document 1: ConfigMap cannot be read: metadata: Invalid value",
        id="configmap-metadata-a-list",
    ),
    pytest.param(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: gpustack-settings}\ndata: x\n",
        "document 1: ConfigMap cannot be read: data: Invalid value",
        id="configmap-data-a-string",
    ),
    pytest.param(
        "apiVersion: worker.gpustack.ai/v1\nkind: ModelDeployment\nmetadata: []\n",
        None,
        id="metadata-a-list",
    ),
]


@pytest.mark.parametrize("verb", ["render", "admit", "inject"])
@pytest.mark.parametrize(("text", "fragment"), BAD_INPUT)
def test_bad_input_is_one_line_never_a_traceback(
    verb: str,
    text: str,
    fragment: str | None,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    f = tmp_path / "in.yaml"
    f.write_text(text)
    code, _, err = run([verb, str(f)], capsys)
    assert "Traceback" not in err
    if fragment is None:
        assert code in (1, 2)
        return
    assert code == 2
    assert err.count("\n") == 1 and err.endswith("\n") and "in.yaml" in err
    assert fragment in err


def test_alias_bomb_is_refused_quickly() -> None:
    with pytest.raises(DocumentError, match="aliases"):
        load_documents(_bomb(30))


def test_invalid_utf8_on_stdin_and_a_bomb_through_the_console_script() -> None:
    for data in (b"a: \xff\n", _bomb(9).encode()):
        proc = subprocess.run(
            [sys.executable, "-m", "gpustack_render.cli", "render", "-"],
            input=data,
            capture_output=True,
            check=False,
            timeout=60,
        )
        assert proc.returncode == 2, proc.stderr
        assert b"Traceback" not in proc.stderr and proc.stderr.count(b"\n") == 1


class _Endless:
    """A standard input that never ends (``render - < /dev/zero``): reading it whole never
    returns, so the test fails if the reader asks for everything."""

    def __init__(self) -> None:
        self.asked: list[int] = []

    def read(self, size: int = -1) -> str:
        assert size >= 0, "read the whole of an endless input"
        self.asked.append(size)
        return "#" * size


def test_an_endless_or_huge_input_is_refused_after_reading_past_the_limit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    endless = _Endless()
    monkeypatch.setattr(sys, "stdin", endless)
    code, _, err = run(["render", "-"], capsys)
    assert code == 2 and err == (
        f"gpustack-render: <stdin>: larger than the limit of {yamlio.MAX_BYTES} bytes\n"
    )
    assert endless.asked == [yamlio.MAX_BYTES + 1]
    big = tmp_path / "big.yaml"
    big.write_text("#" * 100)
    assert read_source(str(big), io.StringIO(), max_bytes=10) == (str(big), "#" * 11)


@pytest.mark.parametrize(
    ("text", "where"),
    [
        pytest.param("---\n# a comment\n---\n" + "{SERVICE}", "document 2", id="after-an-empty"),
        pytest.param(
            "kind: List\napiVersion: v1\nitems:\n- {POD}\n- {POD}\n---\n" + "{SERVICE}",
            "document 2",
            id="after-a-list",
        ),
        pytest.param(
            "kind: List\napiVersion: v1\nitems:\n- {POD}\n- {SVC}\n", "document 1 item 2", id="item"
        ),
    ],
)
def test_the_document_named_is_the_one_in_the_text(
    text: str, where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pod = "{apiVersion: v1, kind: Pod, metadata: {name: p}}"
    service = "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n"
    f = tmp_path / "in.yaml"
    f.write_text(
        text.replace("{SERVICE}", service)
        .replace("{POD}", pod)
        .replace("{SVC}", pod.replace("Pod", "Service"))
    )
    code, _, err = run(["render", str(f)], capsys)
    assert code == 2 and f"in.yaml: {where}: skipped Service " in err


class _BadStdin(io.StringIO):
    def read(self, size: int | None = -1) -> str:
        raise OSError(5, "Input/output error")


@pytest.mark.parametrize("stdin", [None, _BadStdin()], ids=["closed", "io-error"])
@pytest.mark.parametrize(
    "argv",
    [["render", "-"], ["admit", str(EXAMPLE), "--old", "-"], ["inject", "-"]],
    ids=["render", "admit-old", "inject"],
)
def test_a_standard_input_that_cannot_be_read_is_one_line(
    stdin: object,
    argv: list[str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sys, "stdin", stdin)
    code, _, err = run(argv, capsys)
    assert code == 2 and err.startswith("gpustack-render: ") and err.count("\n") == 1
    assert "<stdin>: cannot read: " in err and "internal error" not in err


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be"])
def test_utf16_with_a_byte_order_mark_is_read_as_kubectl_reads_it(
    encoding: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # What PowerShell's `kubectl get ... -o yaml > file` writes; kubectl decodes it.
    text = EXAMPLE.read_text()
    bom = {"utf-16-le": "\ufeff", "utf-16-be": "\ufeff"}.get(encoding, "")
    f = tmp_path / "in.yaml"
    f.write_bytes((bom + text.replace("\n", "\r\n")).encode(encoding))
    assert run(["render", str(f)], capsys) == run(["render", str(EXAMPLE)], capsys)
    proc = subprocess.run(
        [sys.executable, "-m", "gpustack_render.cli", "render", "-o", "name", "-"],
        input=f.read_bytes(),
        capture_output=True,
        check=False,
        timeout=60,
    )
    assert proc.returncode == 0 and proc.stdout.startswith(b"localqueue."), proc.stderr
    f.write_bytes(codecs.BOM_UTF16_LE + b"\x00\xd8")  # a lone surrogate half
    code, _, err = run(["render", str(f)], capsys)
    assert code == 2 and "in.yaml: not UTF-16 text" in err
