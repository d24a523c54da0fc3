"""The entry point: flags, the namespace it reads Settings from, and refusing to start without a
certificate (the process is exercised end to end by tests/integration/test_webhook_*.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpustack_webhook import __main__ as entry
from gpustack_webhook import kube


def test_defaults() -> None:
    args = entry.parser().parse_args(["--cert-file=c", "--key-file=k"])
    assert args.port == 9443
    assert args.probe_port == 0
    assert args.max_body_bytes == 3 * 1024 * 1024
    assert args.review_timeout < 10  # inside the registrations' timeoutSeconds
    assert args.settings_max_age == 2.0
    assert args.shutdown_delay + args.shutdown_timeout < 30  # the Deployment's grace period


def test_a_certificate_source_is_required() -> None:
    with pytest.raises(SystemExit):
        entry.parse_args(["--port=1"])


def test_namespace_comes_from_the_flag_then_the_environment_then_the_service_account(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    account = tmp_path / "namespace"
    monkeypatch.setattr(kube, "SERVICE_ACCOUNT_NAMESPACE", account)
    monkeypatch.delenv(entry.NAMESPACE_ENV, raising=False)
    assert entry.resolve_namespace("") == "gpustack-system"
    account.write_text("ops\n")
    assert entry.resolve_namespace("") == "ops"
    monkeypatch.setenv(entry.NAMESPACE_ENV, "from-env")
    assert entry.resolve_namespace("") == "from-env"
    assert entry.resolve_namespace("from-flag") == "from-flag"


async def test_without_a_certificate_the_server_does_not_start(tmp_path: Path) -> None:
    args = entry.parser().parse_args(
        [f"--cert-file={tmp_path / 'tls.crt'}", f"--key-file={tmp_path / 'tls.key'}"]
    )
    assert await entry.serve(args) == 1
