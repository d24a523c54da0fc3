"""How long the controller takes to bring up a 64 × 2 deployment, next to a bare create loop.

Starts an envtest control plane (etcd + kube-apiserver, the project's and Kueue's CRDs) and, in
the same run:

* ``bare``: a plain loop of the 128 rendered Pod creates, one after another, through the same
  client (the floor: what creating those Pods costs the API server and the client);
* ``controller``: the controller running in-process (informers synced beforehand); the clock
  starts when the ModelDeployment is created and stops when all 128 Pods exist.

Prints both times and their ratio; the last line is ``key=value`` pairs
(``controller_s=… bare_s=… ratio=…``). Target: ratio ≤ 1.5.

Run: ``python -m bench.controller [--replicas 64] [--size 2] [--rounds 1]``.
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

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "tests"))

from integration.controlplane import started_control_plane  # noqa: E402

from gpustack_controller.controller import Controller, Options  # noqa: E402
from gpustack_controller.kube import (  # noqa: E402
    INSTANCE_TYPES,
    MODEL_DEPLOYMENTS,
    PODS,
    Kube,
    Resource,
)
from gpustack_render.api.inputs import InstanceType  # noqa: E402
from gpustack_render.core.settings import Settings  # noqa: E402
from gpustack_render.rendering.renderer import render  # noqa: E402
from gpustack_render.schema.decoding import decode_deployment, decode_model  # noqa: E402
from gpustack_render.schema.lookups import StaticLookups  # noqa: E402

NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
INSTANCE_TYPE = "gpustack-nvidia-h100-linux-amd64"


def _instance_type() -> dict[str, Any]:
    return {
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "InstanceType",
        "metadata": {"name": INSTANCE_TYPE},
        "spec": {"acceleratable": True, "unitResources": {"cpu": "24", "ram": "224Gi"}},
        "status": {
            "entrance": "gpustack-fnv64-9b8a7c6d5e4f3a21",
            "detail": {"manufacturer": "nvidia", "memory": "80Gi"},
            "accelerator": {"capacity": 1024},
        },
    }


def _deployment(name: str, namespace: str, replicas: int, size: int) -> dict[str, Any]:
    return {
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "ModelDeployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "model": {"name": "meta-llama/Llama-3.1-405B-Instruct-FP8"},
            "engine": {"name": "vLLM", "image": "vllm/vllm-openai:v0.25.1"},
            "roles": [
                {
                    "name": "server",
                    "replicas": replicas,
                    "size": size,
                    "instanceType": INSTANCE_TYPE,
                    "resources": {"accelerator": 8},
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


async def _bare(kube: Kube, replicas: int, size: int) -> float:
    """The rendered Pods of the same shape, created one after another."""
    ns = await _namespace(kube, "bare")
    body = _deployment("bench", ns, replicas, size)
    body["metadata"]["uid"] = str(uuid.uuid4())
    md, errs = decode_deployment(body)
    assert md is not None, errs
    it, _ = decode_model(InstanceType, _instance_type())
    assert it is not None
    pods = render(md, lookups=StaticLookups.of([it]), settings=Settings()).pods()
    started = time.perf_counter()
    for pod in pods:
        await kube.create(PODS, pod, ns)
    return time.perf_counter() - started


async def _controller(kube: Kube, kubeconfig: Path, replicas: int, size: int) -> float:
    ns = await _namespace(kube, "ctl")
    client = await Kube.connect(kubeconfig=str(kubeconfig))
    controller = Controller(
        client, Options(system_namespace="gpustack-system", leader_election=False)
    )
    await controller.start(sync_timeout=60)
    want = replicas * size
    try:
        started = time.perf_counter()
        await kube.create(MODEL_DEPLOYMENTS, _deployment("bench", ns, replicas, size), ns)
        deadline = started + 300
        while True:
            items, _ = await kube.list(PODS, ns)
            if len(items) >= want:
                return time.perf_counter() - started
            if time.perf_counter() > deadline:
                raise RuntimeError(f"only {len(items)} of {want} Pods after 300 s")
            await asyncio.sleep(0.05)
    finally:
        await controller.stop()
        await client.close()


async def run(replicas: int, size: int, rounds: int) -> tuple[float, float]:
    with started_control_plane() as cp:
        kube = await Kube.connect(kubeconfig=str(cp.kubeconfig))
        try:
            it = _instance_type()
            status = it.pop("status")
            await kube.create(INSTANCE_TYPES, it)
            await kube.merge_patch(
                INSTANCE_TYPES, INSTANCE_TYPE, {"status": status}, subresource="status"
            )
            await _bare(kube, 2, 1)  # warm the API server's and the client's paths
            bare, ctl = [], []
            for _ in range(rounds):
                bare.append(await _bare(kube, replicas, size))
                ctl.append(await _controller(kube, cp.kubeconfig, replicas, size))
            return statistics.median(ctl), statistics.median(bare)
        finally:
            await kube.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.controller", description=__doc__)
    parser.add_argument("--replicas", type=int, default=64)
    parser.add_argument("--size", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args(argv)
    controller_s, bare_s = asyncio.run(run(args.replicas, args.size, args.rounds))
    pods = args.replicas * args.size
    print(f"pods: {pods} ({args.replicas} replicas x size {args.size})")
    print(f"controller: {controller_s:.3f} s from ModelDeployment create to all Pods existing")
    print(f"bare loop:  {bare_s:.3f} s for the same {pods} creates, one after another")
    print(f"controller_s={controller_s:.3f} bare_s={bare_s:.3f} ratio={controller_s / bare_s:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
