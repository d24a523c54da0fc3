"""The entry point: flags, the namespace it reads Settings from, and refusing to start without a
certificate (the process is exercised end to end by tests/integration/test_webhook_*.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpustack_kube import config
from gpustack_webhook import __main__ as entry


def test_defaults() -> None:
    args = entry.parser().parse_args(["--cert-file=c", "--key-file=k"])
    assert args.port == 9443
    assert args.probe_port == 0
    assert args.max_body_bytes == 3 * 1024 * 1024
    assert args.review_timeout < 10  # inside the registrations' timeoutSeconds
    assert args.settings_max_age == 2.0
    assert args.shutdown_delay + args.shutdown_timeout < 30  # the Deployment's grace period


@pytest.mark.parametrize(
    "flag",
    [
        "--port=70000",
        "--port=-1",
        "--probe-port=65536",
        "--max-body-bytes=0",
        "--max-body-bytes=1.5",
        "--max-connections=0",
        "--review-timeout=nan",
        "--header-timeout=inf",
        "--body-timeout=-1",
        "--idle-timeout=0",
        "--request-timeout=abc",
        "--cert-reload-interval=0",
        "--settings-max-age=-2",
        "--shutdown-delay=nan",
        "--shutdown-timeout=-1",
    ],
)
def test_a_number_the_server_cannot_run_with_is_a_usage_error_naming_the_flag(
    flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A zero reload interval polled the API server without pause, a negative body timeout
    answered every review 408, a zero connection cap refused every connection, a port past
    65535 failed at bind: each is refused at start, with the flag named."""
    with pytest.raises(SystemExit) as exit_info:
        entry.parser().parse_args(["--cert-file=c", "--key-file=k", flag])
    assert exit_info.value.code == entry.EXIT_USAGE
    assert f"argument {flag.split('=')[0]}:" in capsys.readouterr().err


def test_zero_is_kept_where_it_means_something() -> None:
    args = entry.parser().parse_args(
        ["--cert-file=c", "--key-file=k", "--port=0", "--settings-max-age=0", "--shutdown-delay=0"]
    )
    assert (args.port, args.settings_max_age, args.shutdown_delay) == (0, 0.0, 0.0)


def test_a_certificate_source_is_required() -> None:
    with pytest.raises(SystemExit):
        entry.parse_args(["--port=1"])


def test_namespace_comes_from_the_flag_then_the_environment_then_the_service_account(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    account = tmp_path / "namespace"
    monkeypatch.setattr(config, "SERVICE_ACCOUNT_NAMESPACE", account)
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
