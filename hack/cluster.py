"""A simulated GPU cluster for a person: ``make cluster``, ``cluster-demo``, ``cluster-down``.

``up`` builds the components when needed (hack/envtest/build.sh), then starts, in the background,
one supervisor process that runs the cluster of tests/integration/cluster.py (etcd,
kube-apiserver, kube-controller-manager, kube-scheduler, KWOK with 8 fake Nodes of 8 GPUs and 2
of 8 Ascend NPUs, Kueue; with the autoscaling option: metrics-server over KWOK's emulated Pod
metrics, the HPA, Deployment and ReplicaSet controllers, so `kubectl top` and a
HorizontalPodAutoscaler work) plus the project's controller and webhook server as local processes,
with the webhook configurations of deploy/webhook pointed at the local server. The two shells run
as their shipped ServiceAccounts (deploy/'s identities, RBAC, Settings and empty Secret are
applied first), so the shipped RBAC judges them. It writes the admin kubeconfig to
``.cluster/kubeconfig`` and waits until everything is ready.

``demo`` applies the bundled examples (with the InstanceTypes, pools and bindings they name and a
ClusterQueue per entrance), waits with ``kubectl wait --for=condition=Ready`` until every
ModelDeployment is ready (the condition tools read, docs/api.md "Readiness"; a deployment behind
a router is Ready once its rendered router Deployment has a ready Pod, which KWOK runs), the
weights examples that need no hub (an image and a claim source, ``examples/weights/``) until
``WeightsReady`` too, and prints ``kubectl get md,mart,pods,workloads,deployments``. Then the
quota demo (``examples/quota/``: a deployment asking for more than the small ClusterQueue
shipped beside it holds): it waits until its ``QuotaReserved`` condition says the queue lacks
quota, and prints that message (docs/operations.md, "Watch a quota run out"). The cluster has
the InferencePool CRD installed (tests/integration/cluster.py).

``down`` stops the supervisor (which stops every process it started) and removes ``.cluster/``.

Everything listens on 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "tests"))

from integration.cluster import (  # noqa: E402
    BLOCK_LABEL,
    RACK_LABEL,
    Cluster,
    FakeNode,
    default_nodes,
    locate_cluster_binaries,
)
from integration.controlplane import (  # noqa: E402
    ManagedProcess,
    free_port,
    load_yaml_documents,
    pid_alive,
    start_process,
)
from integration.manifests import yaml_stream  # noqa: E402
from integration.webhook_fixtures import (  # noqa: E402
    calling_without_ca_bundle,
    token_kubeconfig,
)

#: Where the cluster keeps its kubeconfig, logs and state (``$GPUSTACK_CLUSTER_DIR`` overrides).
STATE = Path(os.environ.get("GPUSTACK_CLUSTER_DIR") or REPO_ROOT / ".cluster")
KUBECONFIG = STATE / "kubeconfig"
PID_FILE = STATE / "supervisor.pid"
READY_FILE = STATE / "ready.json"
LOG = STATE / "supervisor.log"
WEBHOOKS = REPO_ROOT / "deploy" / "webhook" / "webhooks.yaml"
DEPLOY = REPO_ROOT / "deploy"
#: What the supervisor applies of ``kubectl kustomize deploy``: the identities, their RBAC, the
#: Settings and the empty webhook Secret (the Deployments, Services and webhook configurations
#: are left out: the shells run as local processes and the configurations call them by URL).
SHIPPED_KINDS = frozenset(
    {"ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"}
    | {"ConfigMap", "Secret"}
)
#: The shells' tokens last this long (a TokenRequest; the kubelet would rotate them).
TOKEN_SECONDS = 30 * 24 * 3600
EXAMPLES = REPO_ROOT / "examples"
#: The quota demo: its deployments never turn Ready (one replica more than its queue holds).
QUOTA_DEMO = EXAMPLES / "quota"
#: The weights examples that need no hub (docs/weights.md): an image and a claim source, whose
#: artifacts the controller resolves on the cluster itself.
WEIGHTS_DEMO = (EXAMPLES / "weights" / "image.yaml", EXAMPLES / "weights" / "claim.yaml")
#: Kinds whose status the cluster writes itself: the controller (deployments, artifacts) and
#: the PV binder (claims, volumes). The demo applies the others' status as an operator would.
WRITTEN_BY_CLUSTER = frozenset(
    {"ModelDeployment", "ModelArtifact", "PersistentVolumeClaim", "PersistentVolume"}
)
SYSTEM_NAMESPACE = "gpustack-system"


def _running_pid() -> int | None:
    try:
        pid = int(PID_FILE.read_text())
    except (OSError, ValueError):
        return None
    return pid if pid_alive(pid) else None


# ---- the supervisor (runs in the background) ----------------------------------------------


def _serve() -> int:
    """Run the cluster, the controller and the webhook server until SIGTERM."""
    stop = {"now": False}

    def _on_signal(signum: int, frame: object) -> None:
        stop["now"] = True

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    binaries = locate_cluster_binaries()
    # The default 8 GPU Nodes, plus two Ascend Nodes for the vLLM-Ascend example.
    npu_nodes = [
        FakeNode(
            f"npu-node-{i}",
            accelerator="huawei.com/npu",
            labels={BLOCK_LABEL: "block-2", RACK_LABEL: "rack-4"},
        )
        for i in range(2)
    ]
    cluster = Cluster(
        binaries, nodes=[*default_nodes(), *npu_nodes], root=STATE / "run", autoscaling=True
    )
    shells: list[ManagedProcess] = []
    try:
        cluster.start()
        shutil.copyfile(cluster.kubeconfig, KUBECONFIG)
        cp = cluster.control_plane
        cluster.apply(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SYSTEM_NAMESPACE}}
        )
        # The shipped identities, RBAC, Settings and empty Secret; each shell then runs as its
        # own ServiceAccount, so every request it makes is judged by the shipped RBAC.
        for obj in yaml_stream(cluster.kubectl("kustomize", str(DEPLOY)).stdout):
            if obj.get("kind") in SHIPPED_KINDS:
                cluster.apply(obj)
        kubeconfigs = {
            account: token_kubeconfig(
                cp,
                SYSTEM_NAMESPACE,
                account,
                STATE / f"{account}.kubeconfig",
                expires_in=TOKEN_SECONDS,
            )
            for account in ("gpustack-webhook", "gpustack-controller")
        }
        # The webhook server with self-managed certificates, as the manifests run it: the
        # configurations are registered by URL (no caBundle yet); the server fills the empty
        # Secret with its CA and serving certificate and writes the caBundle into them itself.
        port = free_port()
        for configuration in load_yaml_documents(WEBHOOKS):
            cluster.apply(calling_without_ca_bundle(configuration, port))
        env = {**os.environ, "POD_NAMESPACE": SYSTEM_NAMESPACE}
        env.pop("KUBECONFIG", None)
        shells.append(
            start_process(
                "gpustack-webhook",
                [
                    sys.executable,
                    "-m",
                    "gpustack_webhook",
                    "--tls-secret=gpustack-webhook-tls",
                    "--cert-host=127.0.0.1",
                    "--host=127.0.0.1",
                    f"--port={port}",
                    f"--kubeconfig={kubeconfigs['gpustack-webhook']}",
                ],
                STATE / "webhook.log",
                env=env,
            )
        )
        _wait_https(port, shells[-1])
        _wait_ca_bundles(cluster, shells[-1])
        health = free_port()
        shells.append(
            start_process(
                "gpustack-controller",
                [
                    sys.executable,
                    "-m",
                    "gpustack_controller",
                    f"--kubeconfig={kubeconfigs['gpustack-controller']}",
                    f"--health-port={health}",
                    "--health-host=127.0.0.1",
                ],
                STATE / "controller.log",
                env=env,
            )
        )
        READY_FILE.write_text(
            json.dumps(
                {
                    "kubeconfig": str(KUBECONFIG),
                    "apiserver": cp.url,
                    "webhook_port": port,
                    "controller_health_port": health,
                    "pids": [*cluster.pids(), *(p.popen.pid for p in shells)],
                    "startup_seconds": round(cluster.startup_seconds, 1),
                }
            )
        )
        while not stop["now"]:
            for proc in shells:
                if proc.popen.poll() is not None:
                    print(f"{proc.name} exited with {proc.popen.returncode}", flush=True)
                    stop["now"] = True
            time.sleep(0.5)
    finally:
        for proc in reversed(shells):
            with contextlib.suppress(Exception):
                proc.stop()
        cluster.stop()
    return 0


def _wait_https(port: int, proc: ManagedProcess, timeout: float = 60) -> None:
    import socket

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.popen.poll() is not None:
            raise RuntimeError(f"{proc.name} exited:\n{proc.log_tail()}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
            return
        time.sleep(0.2)
    raise RuntimeError(f"{proc.name} not listening on {port}:\n{proc.log_tail()}")


def _wait_ca_bundles(cluster: Cluster, proc: ManagedProcess, timeout: float = 60) -> None:
    """Until the webhook server has written its CA into every webhook it serves."""
    names = [
        (str(c["kind"]).lower(), str(c["metadata"]["name"])) for c in load_yaml_documents(WEBHOOKS)
    ]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.popen.poll() is not None:
            raise RuntimeError(f"{proc.name} exited:\n{proc.log_tail()}")
        done = True
        for kind, name in names:
            got = cluster.kubectl("get", kind, name, "-o", "json", check=False)
            hooks = json.loads(got.stdout).get("webhooks", []) if got.returncode == 0 else []
            done = done and bool(hooks) and all(h["clientConfig"].get("caBundle") for h in hooks)
        if done:
            return
        time.sleep(0.5)
    raise RuntimeError(f"{proc.name} wrote no caBundle within {timeout:.0f} s:\n{proc.log_tail()}")


# ---- commands -------------------------------------------------------------------------------


def up(timeout: float) -> int:
    if _running_pid():
        print(f"a cluster is already running (kubeconfig {KUBECONFIG}); `make cluster-down` first")
        return 0
    shutil.rmtree(STATE, ignore_errors=True)
    STATE.mkdir(parents=True)
    started = time.monotonic()
    binaries = locate_cluster_binaries()  # build in the foreground: progress on the terminal
    with LOG.open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "serve"],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, "GPUSTACK_ENVTEST_BIN_DIR": str(binaries.bin_dir)},
        )
    PID_FILE.write_text(str(proc.pid))
    deadline = time.monotonic() + timeout
    while not READY_FILE.exists():
        if proc.poll() is not None:
            print(LOG.read_text(errors="replace")[-4000:], file=sys.stderr)
            print(f"the cluster did not start (exit {proc.returncode}); see {LOG}", file=sys.stderr)
            return 1
        if time.monotonic() > deadline:
            print(f"the cluster is not ready after {timeout:.0f}s; log: {LOG}", file=sys.stderr)
            return 1
        time.sleep(0.5)
    ready = json.loads(READY_FILE.read_text())
    print(
        f"simulated GPU cluster ready in {time.monotonic() - started:.0f}s "
        f"(8 KWOK Nodes x 8 nvidia.com/gpu, 2 x 8 huawei.com/npu, Kueue, metrics-server and the "
        f"HPA, the controller and the webhook server)\n"
        f"  export KUBECONFIG={KUBECONFIG}\n"
        f"  {binaries.kubectl} get nodes\n"
        f"  make cluster-demo     # apply examples/ and wait until they are Ready\n"
        f"  make cluster-down     # stop everything and remove .cluster/\n"
        f"kubectl: {binaries.kubectl} (API server {ready['apiserver']}); logs in {STATE}/"
    )
    return 0


def down() -> int:
    pid = _running_pid()
    if pid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 60
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        if pid_alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
    # Anything the supervisor started that is somehow still there (it records every pid).
    with contextlib.suppress(OSError, ValueError):
        for child in json.loads(READY_FILE.read_text()).get("pids", []):
            if pid_alive(int(child)):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(child), signal.SIGKILL)
    shutil.rmtree(STATE, ignore_errors=True)
    print("simulated cluster stopped; .cluster/ removed" if pid else "no cluster was running")
    return 0


def _kubectl(*args: str, check: bool = True, input: str | None = None) -> str:
    binaries = locate_cluster_binaries(build=False)
    result = subprocess.run(
        [str(binaries.kubectl), f"--kubeconfig={KUBECONFIG}", *args],
        capture_output=True,
        text=True,
        input=input,
        timeout=600,
    )
    if check and result.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)}: {result.stderr.strip()}")
    return result.stdout


def _apply(doc: dict[str, Any]) -> None:
    """Server-side apply one example object as it is in the file, then its status (what an
    operator would write), except for the kinds whose status the cluster writes."""
    status = doc.pop("status", None)
    for server_set in ("uid", "resourceVersion", "creationTimestamp", "generation"):
        doc["metadata"].pop(server_set, None)
    _kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=json.dumps(doc))
    kind = doc["kind"].lower()
    ns = doc["metadata"].get("namespace")
    if status is not None and doc["kind"] not in WRITTEN_BY_CLUSTER:
        args = ["patch", kind, doc["metadata"]["name"], "--subresource=status", "--type=merge"]
        if ns:
            args += ["-n", ns]
        _kubectl(*args, "-p", json.dumps({"status": status}))


def _documents(paths: list[Path]) -> list[dict[str, Any]]:
    return [doc for path in paths for doc in load_yaml_documents(path)]


def _kubectl_wait(
    ns: str, name: str, condition: str, timeout: float
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            str(locate_cluster_binaries(build=False).kubectl),
            f"--kubeconfig={KUBECONFIG}",
            "wait",
            "-n",
            ns,
            f"modeldeployment/{name}",
            f"--for={condition}",
            f"--timeout={int(timeout)}s",
        ],
        capture_output=True,
        text=True,
    )


def demo(timeout: float) -> int:
    if not _running_pid():
        print("no cluster is running: `make cluster` first", file=sys.stderr)
        return 1
    os.environ.setdefault(
        "GPUSTACK_ENVTEST_BIN_DIR", str(locate_cluster_binaries(build=True).bin_dir)
    )
    from integration.cluster import cluster_queue

    examples = _documents(sorted(EXAMPLES.glob("*.yaml")))
    quota_demo = _documents(sorted(QUOTA_DEMO.glob("*.yaml")))
    weights_demo = _documents(list(WEIGHTS_DEMO))
    documents = examples + quota_demo + weights_demo
    shipped = {d["metadata"]["name"] for d in documents if d.get("kind") == "ClusterQueue"}
    namespaces = sorted(
        {str(d["metadata"]["namespace"]) for d in documents if d["metadata"].get("namespace")}
    )
    entrances = sorted(
        {
            str((d.get("status") or {}).get("entrance"))
            for d in documents
            if d.get("kind") == "InstanceType" and (d.get("status") or {}).get("entrance")
        }
        - shipped
    )
    for namespace in namespaces:
        _kubectl("create", "namespace", namespace, check=False)
    for entrance in entrances:
        _kubectl("apply", "--server-side", "-f", "-", input=json.dumps(cluster_queue(entrance)))
    # What a deployment names first (with its status), the deployments last: the webhook
    # looks the named objects up.
    documents.sort(key=lambda d: d.get("kind") == "ModelDeployment")
    for doc in documents:
        _apply(doc)

    def deployments(docs: list[dict[str, Any]]) -> list[tuple[str, str]]:
        return [
            (str(d["metadata"].get("namespace") or "default"), str(d["metadata"]["name"]))
            for d in docs
            if d.get("kind") == "ModelDeployment"
        ]

    ready, queued = deployments(examples) + deployments(weights_demo), deployments(quota_demo)
    print(f"applied {len(documents)} objects; waiting for {len(ready)} ModelDeployments")
    failed = 0
    for ns, name in ready:
        result = _kubectl_wait(ns, name, "condition=Ready", timeout)
        print(result.stdout.strip() or result.stderr.strip())
        failed += result.returncode != 0
    for ns, name in deployments(weights_demo):
        # The weights reached every Pod: KWOK reports the volumes ready as a kubelet does.
        result = _kubectl_wait(ns, name, "condition=WeightsReady", timeout)
        print(result.stdout.strip() or result.stderr.strip())
        failed += result.returncode != 0
        jsonpath = (
            "jsonpath=WeightsReady {.status.conditions[?(@.type=='WeightsReady')].reason}, "
            "delivery {.status.model.delivery}"
        )
        said = _kubectl("get", "md", name, "-n", ns, "-o", jsonpath, check=False).strip()
        print(f"weights demo: modeldeployment/{name} -n {ns}: {said}")
    listed = "md,mart,pods,workloads.kueue.x-k8s.io,deployments"
    print(_kubectl("get", listed, "-A", "-o", "wide"))
    for ns, name in queued:
        # Kueue's reason lands after the controller's first status: wait for the queue's words
        # (which ClusterQueue lacks which resource).
        deadline = time.monotonic() + timeout
        message = ""
        while " lacks " not in message and time.monotonic() < deadline:
            time.sleep(1)
            message = _kubectl(
                "get", "md", name, "-n", ns, "-o",
                "jsonpath={.status.conditions[?(@.type=='QuotaReserved')].message}",
                check=False,
            ).strip()  # fmt: skip
        print(f"quota demo: modeldeployment/{name} -n {ns}: QuotaReserved: {message}")
        failed += " lacks " not in message
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["up", "down", "demo", "serve"])
    parser.add_argument("--timeout", type=float, default=300, help="seconds to wait")
    args = parser.parse_args(argv)
    if args.command == "serve":
        return _serve()
    if args.command == "up":
        return up(args.timeout)
    if args.command == "demo":
        return demo(args.timeout)
    return down()


if __name__ == "__main__":
    sys.exit(main())
