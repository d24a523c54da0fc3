"""What ``make engines-check`` would check, without the engines (hack/engines-check.py).

The engines themselves are too heavy for every run; these tests keep the collection honest: the
launchers are seen through, take-over roles are skipped, and both engines have command lines.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name.replace("-", "_"), ROOT / "hack" / name)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


check = _load("engines-check.py")

VLLM = ["vllm", "serve", "--model", "m", "--kv-cache-dtype", "bfloat16"]
SGLANG = ["python3", "-m", "sglang.launch_server", "--model-path", "m"]


@pytest.mark.parametrize(
    ("argv", "engine", "engine_argv"),
    [
        (VLLM, "vllm", VLLM),
        (["/opt/venv/bin/vllm", *VLLM[1:]], "vllm", VLLM),
        (["tini", "--", *VLLM], "vllm", VLLM),
        (["/usr/bin/tini", "--", *VLLM], "vllm", VLLM),
        (["dumb-init", "--rewrite", "15:2", *VLLM], "vllm", VLLM),
        (["env", "-u", "PYTHONPATH", "HF_HUB_OFFLINE=1", *VLLM], "vllm", VLLM),
        (["env", "-S", "vllm serve --model m", *VLLM[4:]], "vllm", VLLM),
        (["env", "-S", "", *VLLM], "vllm", VLLM),
        (["busybox", "env", *VLLM], "vllm", VLLM),
        (["toybox", "timeout", "24h", *VLLM], "vllm", VLLM),
        (["tini", "--", "env", "X=1", "timeout", "1h", *VLLM], "vllm", VLLM),
        (["/entrypoint", *VLLM], "vllm", VLLM),
        (SGLANG, "sglang", SGLANG),
        (["/usr/bin/python3", "-u", "-m", *SGLANG[2:]], "sglang", SGLANG),
        (["timeout", "-s", "KILL", "24h", *SGLANG], "sglang", SGLANG),
    ],
)
def test_launchers_are_seen_through(argv: list[str], engine: str, engine_argv: list[str]) -> None:
    launch = check.find_launch(argv)
    assert launch is not None
    assert (launch.engine, launch.argv) == (engine, engine_argv)


@pytest.mark.parametrize(
    "argv",
    [
        ["bash", "-c", "exec vllm serve m"],
        ["envoy", "-c", "/etc/envoy.yaml"],
        ["python3", "-m", "http.server"],
        ["./run.sh", "--hicache-storage-backend", "mooncake"],
    ],
)
def test_no_engine_found(argv: list[str]) -> None:
    assert check.find_launch(argv) is None


@pytest.fixture(scope="module")
def collected() -> object:
    return check.collect(ROOT / "golden")


def test_the_goldens_have_command_lines_for_both_engines(collected: Any) -> None:
    engines = {line.engine for line in collected.lines}
    assert engines == {"vllm", "sglang"}
    for engine in engines:
        assert sum(line.engine == engine for line in collected.lines) > 10
    # Every managed role's main container launches its engine.
    assert not [line for line in collected.lines if line.note.startswith("no engine invocation")]
    reasons = {s.reason for s in collected.skipped}
    assert "take-over role: the command is the user's own" in reasons
    takeover = [s for s in collected.skipped if s.case == "render-takeover-command"]
    assert takeover and not [ln for ln in collected.lines if ln.case == "render-takeover-command"]


def test_a_store_client_carries_its_projected_client_file(collected: Any) -> None:
    lines = [ln for ln in collected.lines if "MooncakeStoreConnector" in " ".join(ln.argv)]
    assert lines
    for line in lines:
        path = line.env.get("MOONCAKE_CONFIG_PATH")
        assert path in line.files, (line.case, line.pod)


ELASTIC_SCRIPT = (
    'set -e; ray start --address=h:6379; exec "$@" --data-parallel-address '
    '"$GPUSTACK_ELASTIC_POD_IP"'
)


def test_an_elastic_master_is_unwrapped_to_the_line_its_shell_execs() -> None:
    argv = ["/bin/sh", "-c", ELASTIC_SCRIPT, "elastic-serve", *VLLM, "--enable-elastic-ep"]
    launch = check.find_launch(argv, {"GPUSTACK_ELASTIC_POD_IP": "192.0.2.10"})
    assert launch is not None
    assert launch.engine == "vllm"
    assert launch.argv == [
        *VLLM,
        "--enable-elastic-ep",
        "--data-parallel-address",
        "192.0.2.10",
    ]


@pytest.mark.parametrize(
    "argv",
    [
        ["/bin/sh", "-ec", "ray start --address=h:6379 --block"],
        ["/bin/sh", "-c", "exec vllm serve m", "name"],
        ["/bin/sh", "-c", 'exec "$@"; echo after', "name", *VLLM],
        ["/bin/sh", "-c", ELASTIC_SCRIPT, "elastic-serve"],
    ],
)
def test_other_shell_lines_are_not_unwrapped(argv: list[str]) -> None:
    assert check.find_launch(argv) is None


def test_elastic_workers_and_heads_are_skipped_and_masters_checked(collected: Any) -> None:
    masters = [ln for ln in collected.lines if ln.case.startswith("render-elastic-")]
    assert masters and all("--enable-elastic-ep" in ln.argv for ln in masters)
    assert all(ln.argv[-2:] == ["--data-parallel-address", "192.0.2.10"] for ln in masters)
    assert all(ln.argv[ln.argv.index("--eplb-config.use_async") + 1] == "false" for ln in masters)
    reasons = {s.reason for s in collected.skipped if s.case.startswith("render-elastic-")}
    assert reasons == {
        "Elastic EP Ray head: runs no engine",
        "Elastic EP worker: joins Ray, runs no engine",
    }
