"""Render the largest shape the schema allows and compare it with serializing the output.

One role of 1024 replicas × 64 members (65,536 Pods) on a shared KV-cache pool. Prints the wall
time of ``render(...)`` plus ``.objects()``, Pods per second, peak memory (the process's maximum
resident set), and the ratio of render time to the time ``json.dumps`` takes to serialize the
same output in the same run. The last line is ``key=value`` pairs. Targets: ratio ≤ 5, < 10 s.

Run: ``python -m bench.render`` (or ``python -m bench`` for every benchmark).
"""

from __future__ import annotations

import gc
import json
import resource
import sys
import time

from gpustack_kube.gcpause import paused_gc
from gpustack_render.api.inputs import (
    InstanceType,
    KVCacheBackend,
    KVCachePool,
    KVCachePoolBinding,
)
from gpustack_render.core.settings import Settings
from gpustack_render.rendering.renderer import render
from gpustack_render.schema.decoding import decode_deployment
from gpustack_render.schema.lookups import StaticLookups

REPLICAS = 1024
SIZE = 64

DEPLOYMENT = {
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
    print(
        f"pods={pods} seconds={seconds:.3f} pods_per_s={pods / seconds:.0f} "
        f"peak_mib={peak_mib:.0f} ratio={ratio:.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
