"""``make cluster``, ``make cluster-demo``, ``make cluster-down`` (hack/cluster.py) as a person
runs them: the cluster comes up in the background, every bundled example becomes Ready, and
``down`` leaves no process and no state behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from .cluster import ClusterBinaries
from .webhook_fixtures import forbidden_answers

pytestmark = [pytest.mark.integration]

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRIPT = REPO_ROOT / "hack" / "cluster.py"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie has exited; only its parent has not reaped it yet.
    try:
        return "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()
    except OSError:
        return False


def _identity(binaries: ClusterBinaries, pid: int) -> str:
    """Who the process ``pid`` is to the API server: ``kubectl auth whoami`` with its kubeconfig."""
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    kubeconfig = next(
        a.removeprefix("--kubeconfig=") for a in argv if a.startswith("--kubeconfig=")
    )
    whoami = subprocess.run(
        [str(binaries.kubectl), f"--kubeconfig={kubeconfig}", "auth", "whoami", "-o", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return str(json.loads(whoami.stdout)["status"]["userInfo"]["username"])


def test_up_demo_down(envtest_binaries: ClusterBinaries, tmp_path: Path) -> None:
    state = tmp_path / "cluster"
    env = {
        **os.environ,
        "GPUSTACK_CLUSTER_DIR": str(state),
        "GPUSTACK_ENVTEST_BIN_DIR": str(envtest_binaries.bin_dir),
    }

    def run(command: str, timeout: float) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, str(SCRIPT), command, "--timeout", "120"],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    up = run("up", 300)
    pids: list[int] = []
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        assert f"export KUBECONFIG={state / 'kubeconfig'}" in up.stdout
        pids = json.loads((state / "ready.json").read_text())["pids"]
        # etcd, API server, KCM, scheduler, KWOK, metrics-server, Kueue, webhook, controller
        assert len(pids) == 9
        demo = run("demo", 600)
        assert demo.returncode == 0, demo.stdout + demo.stderr
        examples = len(list((REPO_ROOT / "examples").glob("*.yaml")))
        # Each example Ready; the two weights examples Ready and WeightsReady.
        assert demo.stdout.count("condition met") == examples + 2 * 2, demo.stdout
        weights = [x for x in demo.stdout.splitlines() if x.startswith("weights demo: ")]
        assert weights == [
            "weights demo: modeldeployment/qwen-image -n team-a: WeightsReady Mounted, "
            "delivery Image",
            "weights demo: modeldeployment/qwen-claim -n team-a: WeightsReady Mounted, "
            "delivery PVC",
        ], demo.stdout
        _quota_demo_says_what_runs_out(envtest_binaries, state / "kubeconfig", demo.stdout)
        # The bundled prefill/decode pair is served through its rendered router (D26).
        pair = subprocess.run(
            [
                str(envtest_binaries.kubectl),
                f"--kubeconfig={state / 'kubeconfig'}",
                "get",
                "md",
                "qwen3-pd",
                "-n",
                "team-a",
                "-o",
                "json",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        status = json.loads(pair.stdout)["status"]
        router_ready = next(c for c in status["conditions"] if c["type"] == "RouterReady")
        assert (router_ready["status"], router_ready["reason"]) == ("True", "Ready")
        assert status["endpoint"] == "http://qwen3-pd-router.team-a.svc:8000"
        assert status["router"]["endpoint"] == status["endpoint"]
        assert status["roleSummary"].startswith("1R")
        # The shells ran as the shipped ServiceAccounts (not the admin), and the shipped RBAC let
        # them do all of it.
        for pid, account in zip(
            pids[-2:], ("gpustack-webhook", "gpustack-controller"), strict=True
        ):
            assert (
                _identity(envtest_binaries, pid)
                == f"system:serviceaccount:gpustack-system:{account}"
            )
        logs = [
            line
            for log in ("webhook.log", "controller.log")
            for line in (state / log).read_text(errors="replace").splitlines()
        ]
        assert forbidden_answers(logs) == []
        # The autoscaling option is on: the resource metrics API answers through the API server.
        metrics = subprocess.run(
            [
                str(envtest_binaries.kubectl),
                f"--kubeconfig={state / 'kubeconfig'}",
                "get",
                "--raw",
                "/apis/metrics.k8s.io/v1beta1/pods",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert metrics.returncode == 0, metrics.stderr
        assert json.loads(metrics.stdout)["kind"] == "PodMetricsList"
        _pair_runs_without_its_router(envtest_binaries, state / "kubeconfig")
    finally:
        down = run("down", 120)
    assert down.returncode == 0, down.stdout + down.stderr
    assert not state.exists()
    assert [p for p in pids if _alive(p)] == []


def _quota_demo_says_what_runs_out(binaries: ClusterBinaries, kubeconfig: Path, out: str) -> None:
    """Issue 37: the quota demo (examples/quota/) asks for three one-GPU replicas on a
    ClusterQueue of two: two serve, the third waits, and status says which ClusterQueue lacks
    which resource (the deployment's QuotaReserved, its scaler's, and the demo's output)."""
    queue = "gpustack-fnv64-9a8b7c6d5e4f3a2b"
    lacks = f"ClusterQueue {queue} lacks nvidia.com/gpu in flavor default-flavor"
    line = next(x for x in out.splitlines() if x.startswith("quota demo: "))
    assert "1 of 3 replicas wait for quota" in line and f"ClusterQueue {queue}" in line, line
    assert "it lacks nvidia.com/gpu in flavor default-flavor" in line, line

    def get(*args: str) -> dict[str, Any]:
        got = subprocess.run(
            [str(binaries.kubectl), f"--kubeconfig={kubeconfig}", "get", *args, "-o", "json"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        found: dict[str, Any] = json.loads(got.stdout)
        return found

    md = get("md", "quota-demo", "-n", "quota-demo")
    conditions = {c["type"]: c for c in md["status"]["conditions"]}
    quota = conditions["QuotaReserved"]
    assert (quota["status"], quota["reason"]) == ("False", "Pending"), quota
    assert conditions["Ready"]["status"] == "False"
    assert lacks in conditions["Ready"]["message"], conditions["Ready"]
    assert md["status"]["roleReadiness"] == "server 2/3 Server", md["status"]
    scaler = get("mdscaler", "quota-demo-server", "-n", "quota-demo")
    assert scaler["status"]["quotaPending"] == 1, scaler["status"]


def _pair_runs_without_its_router(binaries: ClusterBinaries, kubeconfig: Path) -> None:
    """Issue 31: with the administrator's llm-d-router default image emptied, the bundled pair
    (which names no router image) is admitted with a warning, every engine replica runs, its
    plain Service has ready endpoints, no router object is created, and RouterReady is False
    RenderFailed naming both ways out."""

    def kubectl(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(binaries.kubectl), f"--kubeconfig={kubeconfig}", *args],
            capture_output=True,
            text=True,
            input=stdin,
            timeout=120,
        )

    def until(check: Callable[[], Any], what: str, timeout: float = 180) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = check()
            if found:
                return found
            time.sleep(1)
        raise AssertionError(f"timed out waiting for {what}")

    key = "model-deployment-router-image-llm-d-router"
    patched = kubectl(
        "-n", "gpustack-system", "patch", "configmap", "gpustack-settings", "--type=merge",
        "-p", json.dumps({"data": {key: ""}}),
    )  # fmt: skip
    assert patched.returncode == 0, patched.stderr
    gone = kubectl("-n", "team-a", "delete", "md", "qwen3-pd", "--wait=true", "--timeout=120s")
    assert gone.returncode == 0, gone.stderr
    example = (REPO_ROOT / "examples" / "pd-vllm-llm-d.yaml").read_text()
    pair = next(d for d in example.split("\n---\n") if "kind: ModelDeployment" in d)

    def warned_dry_run() -> bool:
        # The webhook reads the Settings from its cache: wait until it has the emptied value.
        dry = kubectl("apply", "--dry-run=server", "-f", "-", stdin=pair)
        return dry.returncode == 0 and "spec.router.image" in dry.stderr

    until(warned_dry_run, "the webhook to warn about the router image", timeout=60)
    applied = kubectl("apply", "-f", "-", stdin=pair)
    assert applied.returncode == 0, applied.stderr
    assert "Warning: spec.router.image" in applied.stderr and key in applied.stderr

    def status() -> dict[str, Any] | None:
        got = kubectl("-n", "team-a", "get", "md", "qwen3-pd", "-o", "json")
        if got.returncode != 0:
            return None
        found: dict[str, Any] = json.loads(got.stdout).get("status") or {}
        conditions = {c["type"]: c for c in found.get("conditions") or ()}
        router = conditions.get("RouterReady") or {}
        # Two prefillers and two decoders ready; no router Pod (none is created).
        ready = found.get("roleSummary") == "0R2P2D"
        return found if ready and router.get("reason") == "RenderFailed" else None

    found = until(status, "every engine replica ready and RouterReady RenderFailed")
    conditions = {c["type"]: c for c in found["conditions"]}
    router = conditions["RouterReady"]
    assert router["status"] == "False"
    assert "spec.router.image" in router["message"] and key in router["message"]
    assert conditions["Ready"]["status"] == "False"
    assert found["endpoint"] == "http://qwen3-pd.team-a.svc:8000"

    def endpoints() -> int:
        got = kubectl(
            "-n", "team-a", "get", "endpointslices",
            "-l", "kubernetes.io/service-name=qwen3-pd", "-o", "json",
        )  # fmt: skip
        slices = json.loads(got.stdout)["items"] if got.returncode == 0 else []
        return sum(
            1
            for s in slices
            for e in s.get("endpoints") or ()
            if (e.get("conditions") or {}).get("ready")
        )

    # The deployment-wide Service fronts the first role's leaders: the two prefillers.
    assert until(lambda: endpoints() == 2, "two ready endpoints behind the plain Service")
    router_dep = kubectl("-n", "team-a", "get", "deployment", "qwen3-pd-router")
    assert router_dep.returncode != 0 and "NotFound" in router_dep.stderr
