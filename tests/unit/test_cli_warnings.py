"""Warnings as the API server returns them: in the AdmissionReview (``response.warnings``), and
on stderr as kubectl prints them (``Warning: …``), from ``admit`` and ``render`` alike. The
golden cases ``admit-warning-*`` pin each warning's text."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpustack_render.admission import validate_deployment
from gpustack_render.cli import __main__ as cli
from gpustack_render.cli import yamlio
from gpustack_render.cli.documents import read_bundle
from gpustack_render.cli.verbs.admit import admit_review
from gpustack_render.core.review import AdmissionRequest
from gpustack_render.core.settings import Settings

GOLDEN = Path(__file__).resolve().parents[2] / "golden"
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "qwen-chat.yaml"
NOT_READY = GOLDEN / "admit-warning-cache-binding-not-ready" / "input.yaml"


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli.main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_admit_prints_the_warning_in_the_response_and_on_stderr(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run(["admit", str(NOT_READY)], capsys)
    assert code == 0
    (response,) = yamlio.load_documents(out)
    (warning,) = response["warnings"]
    assert "KVCachePoolBinding team-a/team-a-dram is not Ready" in warning
    assert err == f"Warning: {warning}\n"


def test_render_warns_that_the_cache_is_dropped_and_still_renders(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run(["render", str(NOT_READY)], capsys)
    assert code == 0 and out.startswith("---\n")
    assert "--kv-transfer-config" not in out
    assert err.startswith("Warning: spec.kvCache.poolRef: no KV cache: ")
    assert "the Pods render without a pool until it is Ready" in err


def test_a_connected_cache_warns_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["render", str(EXAMPLE)], capsys)
    assert code == 0 and "--kv-transfer-config" in out and err == ""
    code, out, err = run(["admit", str(EXAMPLE)], capsys)
    assert code == 0 and err == "" and yamlio.load_documents(out)[0]["warnings"] == []


def test_the_validating_webhook_returns_the_warnings_on_the_wire() -> None:
    docs = yamlio.load_documents(NOT_READY.read_text())
    bundle_inputs = read_bundle([("in.yaml", NOT_READY.read_text())])
    request = AdmissionRequest(
        operation="CREATE", object=docs[0], namespace="team-a", name="qwen-chat"
    )
    verdict = validate_deployment(
        request, lookups=bundle_inputs.lookups(default_namespace="team-a"), settings=Settings()
    )
    wire = verdict.to_response("uid-1", patch_encoding="base64")
    assert wire["allowed"] is True
    assert len(wire["warnings"]) == 1 and "not Ready" in wire["warnings"][0]


@pytest.mark.parametrize(
    "case",
    sorted(p.name for p in GOLDEN.glob("admit-warning-*")),
)
def test_every_warning_case_warns_once_and_allows(case: str) -> None:
    verdict, _ = admit_review([str(GOLDEN / case / "input.yaml")])
    assert verdict.allowed and len(verdict.warnings) == 1
