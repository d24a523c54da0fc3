"""``render --validate``: the command line judges a deployment as admission does before it
renders it, so CI cannot show green for what the cluster refuses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpustack_render.cli import __main__ as cli
from gpustack_render.cli import yamlio
from gpustack_render.cli.parser import VALIDATE_MODES

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "qwen-chat.yaml"


def _docs() -> list[dict[str, Any]]:
    return yamlio.load_documents(EXAMPLE.read_text(), source=str(EXAMPLE))


def _owned_arg(md: dict[str, Any]) -> None:
    md["spec"]["roles"][0]["extraArgs"] = ["--kv-transfer-config", "{}"]


def _too_many_cards(md: dict[str, Any]) -> None:
    md["spec"]["roles"][0]["resources"]["accelerator"] = 64


def _degree_wider_than_cards(md: dict[str, Any]) -> None:
    md["spec"]["roles"][0]["extraArgs"] = ["--tensor-parallel-size", "8"]


def _artifact_owned_flag(md: dict[str, Any]) -> None:
    md["spec"]["model"]["artifactRef"] = {"name": "qwen-weights"}
    md["spec"]["roles"][0]["extraArgs"] = ["--revision", "main"]


def _long_service_name(md: dict[str, Any]) -> None:
    md["metadata"]["name"] = "q" * 60


TRAPS = [
    pytest.param(_owned_arg, id="owned-extra-arg"),
    pytest.param(_too_many_cards, id="64-cards-on-16-card-type"),
    pytest.param(_degree_wider_than_cards, id="degree-wider-than-cards"),
    pytest.param(_artifact_owned_flag, id="artifact-owned-flag"),
    pytest.param(_long_service_name, id="service-name-too-long"),
]


def _write(tmp_path: Path, change: Any) -> str:
    docs = _docs()
    change(docs[0])
    f = tmp_path / "in.yaml"
    f.write_text(yamlio.dump_yaml(docs))
    return str(f)


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli.main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("change", TRAPS)
def test_strict_by_default_refuses_what_admit_refuses(
    change: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, change)
    admit_code, _, _ = run(["admit", path], capsys)
    assert admit_code == 1, "the trap must be one admission refuses"
    code, out, err = run(["render", path], capsys)
    assert code == 1
    assert out == "", "a refusal prints no manifests"
    assert err.startswith("render: refused: spec.") or err.startswith("render: refused: metadata.")
    assert "Traceback" not in err


@pytest.mark.parametrize("change", TRAPS)
def test_warn_prints_causes_as_warnings_and_renders(
    change: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, change)
    ignored = run(["render", "--validate=ignore", path], capsys)
    code, out, err = run(["render", "--validate=warn", path], capsys)
    assert (code, out) == ignored[:2], "warn renders exactly what ignore renders"
    assert err.startswith("Warning: admission would refuse: ")


def test_ignore_is_the_old_behaviour(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, _owned_arg)
    code, out, err = run(["render", "--validate=ignore", path], capsys)
    assert code == 0 and out.startswith("---\n") and "Warning" not in err


def test_an_admitted_deployment_renders_the_same_under_every_mode(
    capsys: pytest.CaptureFixture[str],
) -> None:
    outs = {m: run(["render", f"--validate={m}", str(EXAMPLE)], capsys) for m in VALIDATE_MODES}
    assert len(set(outs.values())) == 1
    assert outs["strict"][0] == 0


def test_old_makes_it_an_update(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--old`` judges an UPDATE of the stored object: it is read (a missing one is exit 2) and
    an unchanged object is admitted."""
    code, _, err = run(["render", "--old", str(tmp_path / "nope.yaml"), str(EXAMPLE)], capsys)
    assert code == 2 and "nope.yaml" in err
    code, out, _ = run(["render", "--old", str(EXAMPLE), str(EXAMPLE)], capsys)
    assert code == 0 and out


def test_kubectl_boolean_spellings_are_strict_and_ignore(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, _owned_arg)
    for spelling, mode in (("true", "strict"), ("True", "strict"), ("false", "ignore")):
        answer = run(["render", f"--validate={spelling}", path], capsys)
        assert answer == run(["render", f"--validate={mode}", path], capsys)
    assert run(["render", "--validate=false", path], capsys)[0] == 0
    with pytest.raises(SystemExit) as exc:
        cli.main(["render", "--validate=no", str(EXAMPLE)])
    assert exc.value.code == 2 and "invalid choice: 'no'" in capsys.readouterr().err
