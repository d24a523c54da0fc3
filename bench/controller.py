"""How long the controller takes to converge 64 deployments x 2 replicas on the simulated cluster,
next to a bare loop that creates the same Pods, in the same run.

Starts the simulated GPU cluster of tests/integration/cluster.py (16 KWOK Nodes of 8 GPUs, the
real Kueue, scheduler and garbage collector) and measures:

* ``controller``: the controller running in-process (informers synced beforehand); the clock
  starts when the first of the ModelDeployments is created and stops when every Pod of every
  deployment is Running and Ready: the controller created them, Kueue admitted every group
  (through the project's joint AdmissionCheck), the scheduler bound them and KWOK ran them;
* ``bare``: the same rendered Pods created by a plain loop through the same client, queued on a
  ClusterQueue without the AdmissionCheck (nobody else would answer it), until every Pod is
  Running and Ready: the floor of what Kueue, the scheduler and KWOK cost for those Pods.

Prints both times and their ratio, the cluster's cold start time, and the build time of each
binary as ``hack/envtest/build.sh`` recorded it when it first built it on this machine. The last
line is ``key=value`` pairs (``controller_s=… bare_s=… ratio=… cluster_start_s=…``).

Run: ``python -m bench.controller [--deployments 64] [--replicas 2] [--rounds 1]``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from integration.cluster import Cluster, default_nodes, locate_cluster_binaries

from gpustack_controller.controller import Controller, Options
from gpustack_controller.kube import (
    INSTANCE_TYPES,
    MODEL_DEPLOYMENTS,
    PODS,
    Kube,
    Resource,
)
from gpustack_render.api.inputs import InstanceType
from gpustack_render.core.settings import Settings
from gpustack_render.rendering.renderer import render
from gpustack_render.schema.decoding import decode_deployment, decode_model
from gpustack_render.schema.lookups import StaticLookups

NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
LOCAL_QUEUES = Resource("kueue.x-k8s.io", "v1beta2", "localqueues", "LocalQueue")
WORKLOADS = Resource("kueue.x-k8s.io", "v1beta2", "workloads", "Workload")
CONTROLLED = ("gpustack-nvidia-h100-ctl", "gpustack-fnv64-9b8a7c6d5e4f3a21")
BARE = ("gpustack-nvidia-h100-bare", "gpustack-fnv64-0b0a0e0b0a0e0000")
BINARIES = (
    "etcd",
    "kube-apiserver",
    "kube-scheduler",
    "kube-controller-manager",
    "kubectl",
    "kueue",
    "kwok",
)


def _instance_type(name: str, entrance: str) -> dict[str, Any]:
    return {
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "InstanceType",
        "metadata": {"name": name},
        "spec": {"acceleratable": True, "unitResources": {"cpu": "8", "ram": "64Gi"}},
        "status": {
            "entrance": entrance,
            "detail": {"manufacturer": "nvidia", "memory": "80Gi"},
            "accelerator": {"capacity": 1024},
        },
    }


def _deployment(name: str, namespace: str, instance_type: str, replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "ModelDeployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "model": {"name": "Qwen/Qwen3-8B"},
            "engine": {"name": "vLLM", "image": "vllm/vllm-openai:v0.25.1"},
            "roles": [
                {
                    "name": "server",
                    "replicas": replicas,
                    "instanceType": instance_type,
                    "resources": {"accelerator": 1},
                }
            ],
        },
    }


async def _namespace(kube: Kube, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    await kube.create(
        NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )
    return name


def _ready(pod: dict[str, Any]) -> bool:
    status = pod.get("status") or {}
    return status.get("phase") == "Running" and any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or ()
    )


async def _until_ready(kube: Kube, ns: str, want: int, started: float) -> float:
    deadline = started + 600
    while True:
        items, _ = await kube.list(PODS, ns)
        live = [p for p in items if not p["metadata"].get("deletionTimestamp")]
        if len(live) >= want and all(_ready(p) for p in live):
            return time.perf_counter() - started
        if time.perf_counter() > deadline:
            ready = sum(_ready(p) for p in live)
            raise RuntimeError(f"{ready} of {want} Pods Ready after 600 s")
        await asyncio.sleep(0.2)


async def _drain(kube: Kube, ns: str) -> None:
    """Delete the namespace and wait until its Pods are gone (their quota released).

    Kubernetes 1.35 deletes a namespace's Pods before anything else and Kueue keeps its
    finalizer on a deleted Pod while the group's Workload exists, so the Workloads are deleted
    here explicitly (docs/decisions.md, "Namespace deletion and plain Pod groups")."""
    await kube.delete(NAMESPACES, ns)
    workloads, _ = await kube.list(WORKLOADS, ns)
    for workload in workloads:
        await kube.delete(WORKLOADS, workload["metadata"]["name"], ns)
    deadline = time.perf_counter() + 300
    while time.perf_counter() < deadline:
        items, _ = await kube.list(PODS, ns)
        if not items:
            return
        await asyncio.sleep(0.5)
    raise RuntimeError(f"namespace {ns} still has Pods after 300 s")


async def _bare(kube: Kube, deployments: int, replicas: int) -> float:
    ns = await _namespace(kube, "bare")
    await kube.create(
        LOCAL_QUEUES,
        {
            "apiVersion": LOCAL_QUEUES.api_version,
            "kind": "LocalQueue",
            "metadata": {"name": BARE[1], "namespace": ns},
            "spec": {"clusterQueue": BARE[1]},
        },
        ns,
    )
    it, _ = decode_model(InstanceType, _instance_type(*BARE))
    assert it is not None
    pods = []
    for i in range(deployments):
        body = _deployment(f"bench-{i}", ns, BARE[0], replicas)
        body["metadata"]["uid"] = str(uuid.uuid4())
        md, errs = decode_deployment(body)
        assert md is not None, errs
        pods += render(md, lookups=StaticLookups.of([it]), settings=Settings()).pods()
    started = time.perf_counter()
    for pod in pods:
        pod["metadata"].pop("ownerReferences", None)  # no ModelDeployment to own them
        await kube.create(PODS, pod, ns)
    took = await _until_ready(kube, ns, len(pods), started)
    await _drain(kube, ns)
    return took


async def _controller(kube: Kube, kubeconfig: Path, deployments: int, replicas: int) -> float:
    ns = await _namespace(kube, "ctl")
    client = await Kube.connect(kubeconfig=str(kubeconfig))
    controller = Controller(
        client, Options(system_namespace="gpustack-system", leader_election=False)
    )
    await controller.start(sync_timeout=60)
    try:
        started = time.perf_counter()
        for i in range(deployments):
            body = _deployment(f"bench-{i}", ns, CONTROLLED[0], replicas)
            await kube.create(MODEL_DEPLOYMENTS, body, ns)
        took = await _until_ready(kube, ns, deployments * replicas, started)
        for i in range(deployments):
            await kube.delete(MODEL_DEPLOYMENTS, f"bench-{i}", ns)
        await _drain(kube, ns)
        return took
    finally:
        await controller.stop()
        await client.close()


async def run(
    cluster: Cluster, deployments: int, replicas: int, rounds: int
) -> tuple[float, float]:
    kube = await Kube.connect(kubeconfig=str(cluster.kubeconfig))
    try:
        for name, entrance in (CONTROLLED, BARE):
            body = _instance_type(name, entrance)
            status = body.pop("status")
            await kube.create(INSTANCE_TYPES, body)
            await kube.merge_patch(INSTANCE_TYPES, name, {"status": status}, subresource="status")
        gpus = deployments * replicas
        quota: dict[str, str | int] = {
            "nvidia.com/gpu": gpus,
            "cpu": gpus * 8,
            "memory": f"{gpus * 64}Gi",
        }
        cluster.ensure_cluster_queue(CONTROLLED[1], quota=quota)
        cluster.ensure_cluster_queue(BARE[1], quota=quota, admission_check=None)
        await kube.create(
            NAMESPACES,
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpustack-system"}},
        )
        await _bare(kube, 2, 1)  # warm the API server's, Kueue's and the client's paths
        bare, ctl = [], []
        for _ in range(rounds):
            bare.append(await _bare(kube, deployments, replicas))
            ctl.append(await _controller(kube, cluster.kubeconfig, deployments, replicas))
        return statistics.median(ctl), statistics.median(bare)
    finally:
        await kube.close()


def _build_seconds(bin_dir: Path) -> str:
    parts = []
    for name in BINARIES:
        record = (bin_dir / name).resolve().with_name(f"{name}.build-seconds")
        try:
            parts.append(f"{name} {int(record.read_text())} s")
        except (OSError, ValueError):
            parts.append(f"{name} (not recorded)")
    return ", ".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.controller", description=__doc__)
    parser.add_argument("--deployments", type=int, default=64)
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args(argv)
    binaries = locate_cluster_binaries()
    gpus = args.deployments * args.replicas
    nodes = default_nodes(count=max(8, -(-gpus // 8)))
    with Cluster(binaries, nodes=nodes) as cluster:
        controller_s, bare_s = asyncio.run(
            run(cluster, args.deployments, args.replicas, args.rounds)
        )
        start_s = cluster.startup_seconds
    pods = args.deployments * args.replicas
    print(f"cluster: {len(nodes)} KWOK Nodes x 8 GPUs; cold start {start_s:.1f} s")
    print(f"binaries (first build on this machine): {_build_seconds(binaries.bin_dir)}")
    print(f"pods: {pods} ({args.deployments} deployments x {args.replicas} replicas)")
    print(f"controller: {controller_s:.2f} s from the first create to every Pod admitted and Ready")
    print(f"bare loop:  {bare_s:.2f} s for the same {pods} Pods created, admitted and Ready")
    print(
        f"controller_s={controller_s:.2f} bare_s={bare_s:.2f} "
        f"ratio={controller_s / bare_s:.2f} cluster_start_s={start_s:.1f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
