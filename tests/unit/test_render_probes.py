"""Probes (docs/contract/render.md §12, D7, D13, D22) and the preStop drain hook (§13), run for
real."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from gpustack_render.core.vocabulary import Engine, EngineFamily
from gpustack_render.rendering.drain import drain_script, prestop_hook
from gpustack_render.rendering.probes import (
    demands_client_certificates,
    is_loopback,
    probes,
    serves_tls,
    startup_failure_threshold,
)


@pytest.mark.parametrize(
    ("seconds", "threshold"),
    [(1800, 180), (10, 1), (11, 2), (3605, 361), (86400, 8640)],
)
def test_startup_budget(seconds: int, threshold: int) -> None:
    assert startup_failure_threshold(seconds) == threshold


def test_probe_shapes() -> None:
    out = probes(port=9000, https=True, startup_timeout_seconds=1800)
    assert list(out) == ["startupProbe", "readinessProbe", "livenessProbe"]
    assert out["startupProbe"] == {
        "httpGet": {"path": "/health", "port": 9000, "scheme": "HTTPS"},
        "periodSeconds": 10,
        "timeoutSeconds": 5,
        "failureThreshold": 180,
    }
    assert out["readinessProbe"]["timeoutSeconds"] == 3
    assert out["readinessProbe"]["failureThreshold"] == 3
    assert out["livenessProbe"]["failureThreshold"] == 6


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("localhost", True),
        ("::1", True),
        ("[::1]", True),
        ("0.0.0.0", False),
        ("10.0.0.5", False),
        ("::", False),
        ("my-host", False),
    ],
)
def test_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


@pytest.mark.parametrize(
    ("argv", "tls", "demanded"),
    [
        pytest.param([], False, False, id="plain"),
        pytest.param(["--ssl-certfile", "/c"], True, False, id="certfile-alone"),
        pytest.param(["--ssl-keyfile=/k"], True, False, id="keyfile-alone"),
        pytest.param(["--ssl-ca-certs", "/ca"], False, False, id="other-ssl-flag-keeps-http"),
        pytest.param(["--ssl-certfile", "/c", "--ssl-cert-reqs", "1"], True, False, id="reqs-1"),
        pytest.param(["--ssl-certfile", "/c", "--ssl-cert-reqs", " 0 "], True, False, id="reqs-0"),
        pytest.param(["--ssl-certfile", "/c", "--ssl-cert-reqs", "2"], True, True, id="reqs-2"),
        pytest.param(["--ssl-certfile", "/c", "--ssl-cert-reqs=x"], True, True, id="reqs-bad"),
        pytest.param(["--ssl-certfile", "/c", "--ssl-cert-reqs"], True, True, id="reqs-no-value"),
        pytest.param(
            ["--ssl-certfile", "/c", "--ssl-cert-reqs", "2", "--ssl-cert-reqs", "0"],
            True,
            False,
            id="last-wins",
        ),
        pytest.param(["--ssl-cert-reqs", "2"], False, False, id="reqs-without-tls"),
    ],
)
def test_tls(argv: list[str], tls: bool, demanded: bool) -> None:
    assert serves_tls(argv, Engine.VLLM) is tls
    assert demands_client_certificates(argv, Engine.VLLM) is demanded


# --- the drain hook, run against a local /metrics -------------------------------------------------


class _Metrics(BaseHTTPRequestHandler):
    body = b""
    status = 200

    def do_GET(self) -> None:
        self.send_response(self.status)
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: object) -> None:
        return


@pytest.fixture
def metrics_server() -> Iterator[tuple[HTTPServer, type[_Metrics]]]:
    handler = type("Handler", (_Metrics,), {})
    server = HTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server, handler
    server.shutdown()


def _run(script: str, timeout: float) -> tuple[int, float]:
    start = time.monotonic()
    fast = script.replace("min(5,", "min(0,")  # skip the 5 s settle in tests
    done = subprocess.run([sys.executable, "-c", fast], timeout=timeout, check=False)
    return done.returncode, time.monotonic() - start


def test_drain_returns_on_the_second_idle_read(
    metrics_server: tuple[HTTPServer, type[_Metrics]],
) -> None:
    server, handler = metrics_server
    handler.body = (
        b'# HELP x\nvllm:num_requests_running{model_name="m"} 0.0\n'
        b'vllm:num_requests_waiting{model_name="m"} 0.0\n'
    )
    port = server.server_address[1]
    code, elapsed = _run(
        drain_script(engine_family=EngineFamily.VLLM, port=port, https=False, grace_seconds=30), 20
    )
    assert code == 0
    assert 0.9 <= elapsed < 5


def test_drain_waits_while_busy_until_the_deadline(
    metrics_server: tuple[HTTPServer, type[_Metrics]],
) -> None:
    server, handler = metrics_server
    handler.body = b"sglang:num_running_reqs 3\nsglang:num_queue_reqs 0\n"
    port = server.server_address[1]
    script = drain_script(
        engine_family=EngineFamily.SGLANG, port=port, https=False, grace_seconds=8
    )
    code, elapsed = _run(script, 20)
    assert code == 0
    assert 2.5 <= elapsed < 6  # grace 8 − 5 = 3 s budget


def test_drain_exits_on_refused_connection() -> None:
    code, elapsed = _run(
        drain_script(engine_family=EngineFamily.VLLM, port=1, https=False, grace_seconds=30), 20
    )
    assert code == 0 and elapsed < 5


def test_drain_exits_on_http_error(metrics_server: tuple[HTTPServer, type[_Metrics]]) -> None:
    server, handler = metrics_server
    handler.status = 500
    port = server.server_address[1]
    code, elapsed = _run(
        drain_script(engine_family=EngineFamily.VLLM, port=port, https=False, grace_seconds=30), 20
    )
    assert code == 0 and elapsed < 5


def test_prestop_hook_shape() -> None:
    hook = prestop_hook(engine_family=EngineFamily.VLLM, port=8000, https=True, grace_seconds=30)
    command = hook["preStop"]["exec"]["command"]
    assert command[:2] == ["python3", "-c"]
    assert "https://127.0.0.1:8000/metrics" in command[2]
    assert "time.monotonic() + 25" in command[2]
