"""Render the largest shape the schema allows and compare it with serializing the output.

One role of 1024 replicas × 64 members (65,536 Pods) on a shared KV-cache pool. Prints the wall
time of ``render(...)`` plus ``.objects()``, Pods per second, peak memory (the process's maximum
resident set), and the ratio of render time to the time ``json.dumps`` takes to serialize the
same output in the same run. The last line is ``key=value`` pairs. Targets: ratio ≤ 5, < 10 s.

Then weight delivery (docs/weights.md, "Delivery"): the same deployment at
:data:`COMPARE_REPLICAS` replicas (8,192 Pods), without ``spec.model.artifactRef`` and naming a
``ModelArtifact`` under each delivery, rendered alternately, best of :data:`ROUNDS` each. One
line per delivery gives its render time over the time without (target ≤ 1.1) and how much
larger its Pod is (JSON objects and arrays per Pod: what the compiled template builds per
seat, so the time follows it). Engine delivery with a token Secret and both proxy Settings is
the largest Pod the weights make.

Run: ``python -m bench.render`` (or ``python -m bench`` for every benchmark).
"""

from __future__ import annotations

import copy
import gc
import json
import resource
import sys
import time
from typing import Any

from gpustack_kube.gcpause import paused_gc
from gpustack_render.api.artifact import ModelArtifact
from gpustack_render.api.inputs import (
    InputObject,
    InstanceType,
    KVCacheBackend,
    KVCachePool,
    KVCachePoolBinding,
)
from gpustack_render.api.modeldeployment import ModelDeployment
from gpustack_render.api.storage import CSIDriver, PersistentVolume, PersistentVolumeClaim
from gpustack_render.core.settings import Settings
from gpustack_render.rendering.renderer import render
from gpustack_render.schema.decoding import decode_deployment
from gpustack_render.schema.lookups import StaticLookups

REPLICAS = 1024
SIZE = 64
#: The weight-delivery comparison: replicas of the same role (× SIZE Pods), renders per side.
COMPARE_REPLICAS = 128
ROUNDS = 5

DEPLOYMENT: dict[str, Any] = {
    "apiVersion": "worker.gpustack.ai/v1",
    "kind": "ModelDeployment",
    "metadata": {
        "name": "big",
        "namespace": "team-a",
        "uid": "0f7c6a52-5d0e-4a9f-8d7b-4f3b9a1c2d3e",
    },
    "spec": {
        "model": {"name": "deepseek-ai/DeepSeek-V3"},
        "engine": {"name": "vLLM", "image": "vllm/vllm-openai:v0.25.1"},
        "kvCache": {"poolRef": {"name": "team-a-dram"}},
        "roles": [
            {
                "name": "server",
                "replicas": REPLICAS,
                "size": SIZE,
                "instanceType": "h20-8x",
                "resources": {"accelerator": 8},
                "extraArgs": ["--tensor-parallel-size", "8", "--pipeline-parallel-size", "64"],
                "env": [{"name": "NCCL_DEBUG", "value": "WARN"}],
            }
        ],
    },
}

INPUTS = [
    InstanceType.model_validate(
        {
            "metadata": {"name": "h20-8x"},
            "spec": {
                "acceleratable": True,
                "unitResources": {"cpu": "12", "ram": "96Gi"},
                "localStorage": "3Ti",
            },
            "status": {
                "entrance": "gpustack-fnv64-1b2c3d4e5f60718a",
                "detail": {"manufacturer": "nvidia", "memory": "96Gi"},
                "accelerator": {"capacity": 65536},
            },
        }
    ),
    KVCachePoolBinding.model_validate(
        {
            "metadata": {"name": "team-a-dram", "namespace": "team-a"},
            "spec": {
                "poolRef": {"name": "dram-pool"},
                "domain": {"name": "team-a", "blockSize": 16, "dtype": "bfloat16"},
            },
            "status": {
                "phase": "Ready",
                "conditions": [{"type": "QuotaGranted", "status": "True"}],
            },
        }
    ),
    KVCachePool.model_validate(
        {
            "metadata": {"name": "dram-pool"},
            "spec": {"backends": ["dram-backend"]},
            "status": {
                "clientEndpoint": "dram-pool-master.gpustack-system.svc:50051",
                "conditions": [{"type": "QuotaLedgerAvailable", "status": "True"}],
            },
        }
    ),
    KVCacheBackend.model_validate(
        {"metadata": {"name": "dram-backend"}, "spec": {"transport": {"protocol": "RDMA"}}}
    ),
]


def _artifact(source: dict[str, Any], resolved: dict[str, Any]) -> ModelArtifact:
    return ModelArtifact.model_validate(
        {
            "metadata": {"name": "weights", "namespace": "team-a", "uid": "9a1d2c3b-4e5f-6071"},
            "spec": {"source": source},
            "status": {
                "resolved": resolved,
                "conditions": [{"type": "Resolved", "status": "True", "reason": "Resolved"}],
            },
        }
    )


_HUB = {
    "huggingFace": {
        "repository": "deepseek-ai/DeepSeek-V3",
        "revision": "main",
        "secretRef": {"name": "hf-token"},
    }
}
_HUB_RESOLVED = {
    "revision": "e" * 40,
    "manifestDigest": "sha256:" + "ab" * 32,
    "digestSource": "Hub",
    "fileCount": 180,
    "sizeBytes": 688_000_000_000,
}
_MOUNTED = {"resolvedTime": "2026-11-30T10:00:00Z"}
_CLAIM = [
    PersistentVolumeClaim.model_validate(
        {
            "metadata": {"name": "weights", "namespace": "team-a"},
            "spec": {"accessModes": ["ReadOnlyMany"], "volumeName": "pv-weights"},
            "status": {"phase": "Bound", "accessModes": ["ReadOnlyMany"]},
        }
    ),
    PersistentVolume.model_validate(
        {
            "metadata": {"name": "pv-weights"},
            "spec": {
                "nodeAffinity": {
                    "required": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "zone", "operator": "In", "values": ["z1"]}
                                ]
                            }
                        ]
                    }
                }
            },
        }
    ),
]
#: Delivery → (the objects it reads, the Settings it renders under).
DELIVERIES: dict[str, tuple[list[InputObject], Settings]] = {
    "PVC": (
        [_artifact({"persistentVolumeClaim": {"claimName": "weights"}}, _MOUNTED), *_CLAIM],
        Settings(),
    ),
    "Image": (
        [
            _artifact(
                {"image": {"reference": "registry.example.com/w@sha256:" + "cd" * 32}}, _MOUNTED
            )
        ],
        Settings(),
    ),
    "Node": (
        [
            _artifact(_HUB, _HUB_RESOLVED),
            CSIDriver.model_validate({"metadata": {"name": "model.csi.gpustack.ai"}}),
        ],
        Settings(artifact_delivery_mode="Node"),
    ),
    "Engine": (
        [_artifact(_HUB, _HUB_RESOLVED)],
        Settings(artifact_https_proxy="http://proxy.example.com:3128", artifact_no_proxy=".svc"),
    ),
}


def _containers(value: Any) -> int:
    """JSON objects and arrays in ``value``."""
    if isinstance(value, dict):
        return 1 + sum(_containers(v) for v in value.values())
    if isinstance(value, list):
        return 1 + sum(_containers(v) for v in value)
    return 0


def _timed(md: ModelDeployment, lookups: StaticLookups, settings: Settings) -> tuple[float, int]:
    """The wall time of one render and its ``objects()``, and the size of its first Pod."""
    gc.collect()
    start = time.perf_counter()
    with paused_gc():
        rendering = render(
            md, lookups=lookups, settings=settings, counts={"server": COMPARE_REPLICAS}
        )
    objects = rendering.objects()
    seconds = time.perf_counter() - start
    assert sum(1 for o in objects if o["kind"] == "Pod") == COMPARE_REPLICAS * SIZE
    return seconds, _containers(rendering.roles[0].seats[0].pod)


def delivery_comparison() -> dict[str, tuple[float, float, int, int]]:
    """Delivery → (best seconds without an artifact, best with, Pod size without, with)."""
    plain, _ = decode_deployment(DEPLOYMENT)
    data = copy.deepcopy(DEPLOYMENT)
    data["spec"]["model"]["artifactRef"] = {"name": "weights"}  # the same, naming an artifact
    named, errs = decode_deployment(data)
    assert plain is not None and named is not None, errs
    out: dict[str, tuple[float, float, int, int]] = {}
    for delivery, (objects, settings) in DELIVERIES.items():
        lookups = StaticLookups.of([*INPUTS, *objects])
        without: list[float] = []
        with_: list[float] = []
        size = named_size = 0
        for _ in range(ROUNDS):
            seconds, size = _timed(plain, lookups, settings)
            without.append(seconds)
            seconds, named_size = _timed(named, lookups, settings)
            with_.append(seconds)
        out[delivery] = (min(without), min(with_), size, named_size)
    return out


def main() -> int:
    md, errs = decode_deployment(DEPLOYMENT)
    assert md is not None, errs
    lookups = StaticLookups.of(INPUTS)
    settings = Settings()

    gc.collect()
    start = time.perf_counter()
    with paused_gc():
        rendering = render(md, lookups=lookups, settings=settings)
    objects = rendering.objects()
    seconds = time.perf_counter() - start

    pods = sum(1 for o in objects if o["kind"] == "Pod")
    assert pods == REPLICAS * SIZE, pods
    assert rendering.roles[0].store_client

    start = time.perf_counter()
    text = json.dumps(objects)
    dump_seconds = time.perf_counter() - start

    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    ratio = seconds / dump_seconds
    print(f"rendered {pods} Pods ({len(objects)} objects, {len(text) / 2**20:.0f} MiB of JSON)")
    print(f"render wall time   {seconds:.2f} s ({pods / seconds:,.0f} Pods/s)")
    print(f"json.dumps         {dump_seconds:.2f} s")
    print(f"peak memory (RSS)  {peak_mib:.0f} MiB")
    del rendering, objects, text

    ratios: dict[str, float] = {}
    print(f"weights, {COMPARE_REPLICAS * SIZE} Pods, best of {ROUNDS}:")
    for delivery, (plain_s, named_s, size, named_size) in delivery_comparison().items():
        ratios[delivery] = named_s / plain_s
        print(
            f"  {delivery:<7} {named_s:.3f} s against {plain_s:.3f} s without: "
            f"{ratios[delivery]:.2f}x; Pod {named_size} JSON containers against {size} "
            f"({named_size / size:.2f}x)"
        )
    print(
        f"pods={pods} seconds={seconds:.3f} pods_per_s={pods / seconds:.0f} "
        f"peak_mib={peak_mib:.0f} ratio={ratio:.2f} "
        + " ".join(f"artifact_ratio_{d.lower()}={r:.2f}" for d, r in ratios.items())
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
