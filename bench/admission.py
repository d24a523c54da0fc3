"""Benchmark: one ModelDeployment review (schema, mutation, every validating rule).

Times ``review_deployment`` on a 1-role minimal deployment and on a 10-role deployment with
every field set (router, pool, transfer protocol, ports, volumes, env, degrees, topology), both
admitted so that every rule runs. Prints p50/p99 per case over every sample (and, for context
on a busy machine, the p99 of the quietest round); the last line is ``key=value`` pairs:
``minimal_p50_ms=… minimal_p99_ms=… full_p50_ms=… full_p99_ms=…``. Target: p99 ≤ 2 ms.

Run: ``.venv/bin/python bench/admission.py [--iterations N]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any

from gpustack_render.admission import review_deployment
from gpustack_render.api.inputs import (
    InstanceType,
    KVCacheBackend,
    KVCachePool,
    KVCachePoolBinding,
)
from gpustack_render.core.review import AdmissionRequest
from gpustack_render.core.settings import Settings
from gpustack_render.schema.lookups import StaticLookups

NS = "team-a"
GPU = "gpustack-nvidia-h100-linux-amd64"
WARMUP = 50
DEFAULT_ITERATIONS = 2000
#: Iterations are split into rounds; the figures use every sample, the quietest round is shown too.
ROUNDS = 5


def _lookups() -> StaticLookups:
    return StaticLookups.of(
        [
            InstanceType.model_validate(
                {
                    "metadata": {"name": GPU},
                    "spec": {"acceleratable": True, "unitResources": {"cpu": "16", "ram": "64Gi"}},
                    "status": {
                        "entrance": "gpustack-fnv64-0123456789abcdef",
                        "detail": {"manufacturer": "nvidia", "memory": "80Gi"},
                        "accelerator": {"capacity": 64},
                    },
                }
            ),
            KVCachePoolBinding.model_validate(
                {
                    "metadata": {"name": "dram", "namespace": NS},
                    "spec": {
                        "poolRef": {"name": "pool"},
                        "domain": {"name": "shared", "blockSize": 16, "dtype": "bfloat16"},
                    },
                }
            ),
            KVCachePool.model_validate(
                {
                    "metadata": {"name": "pool"},
                    "spec": {"backends": ["backend"]},
                    "status": {"clientEndpoint": "master:50051"},
                }
            ),
            KVCacheBackend.model_validate(
                {"metadata": {"name": "backend"}, "spec": {"transport": {"protocol": "RDMA"}}}
            ),
        ],
        default_namespace=NS,
    )


def _deployment(roles: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "ModelDeployment",
        "metadata": {"name": "bench", "namespace": NS, "labels": {"team": "a"}},
        "spec": {
            "model": {"name": "Qwen/Qwen2.5-72B-Instruct"},
            "engine": {"name": "vLLM", "image": "vllm/vllm-openai:v0.25.1"},
            **spec,
            "roles": roles,
        },
    }


def minimal() -> dict[str, Any]:
    return _deployment([{"name": "server", "instanceType": GPU}])


def full() -> dict[str, Any]:
    roles = []
    for i in range(10):
        roles.append(
            {
                "name": f"server-{i}",
                "kind": "Server",
                "replicas": 4,
                "size": 2,
                "instanceType": GPU,
                "resources": {"accelerator": 4, "interface": 1},
                "image": "vllm/vllm-openai:v0.25.1",
                "imagePullPolicy": "IfNotPresent",
                "imagePullSecrets": [{"name": "registry"}],
                "privileged": False,
                "ports": [{"port": 9000, "protocol": "TCP"}],
                "additionalVolumes": [
                    {"mountPath": "/models", "readOnly": True, "secret": {"name": "weights"}},
                    {"mountPath": "/dev/shm", "hostPath": {"path": "/dev/shm"}},
                ],
                "shmSize": "32Gi",
                "extraArgs": [
                    "--tensor-parallel-size=2",
                    "--pipeline-parallel-size",
                    "2",
                    "--max-model-len",
                    "32768",
                    "--served-model-name",
                    "Qwen/Qwen2.5-72B-Instruct",
                    "--port=9000",
                    "--enable-prefix-caching",
                ],
                "env": [
                    {"name": "HF_HOME", "value": "/models"},
                    {"name": "MC_TE_METRIC", "value": "1"},
                    {"name": "NCCL_DEBUG", "value": "WARN"},
                ],
                "topology": {"requiredLevel": "topology.gpustack.ai/rack"},
                "terminationGracePeriodSeconds": 60,
                "startupTimeoutSeconds": 3600,
            }
        )
    return _deployment(
        roles,
        kvCache={"poolRef": {"name": "dram"}, "connector": "Mooncake"},
        router={"name": "llm-d-router", "replicas": 2, "extraArgs": ["--v=2"]},
        kvTransfer={"protocol": "RDMA"},
    )


def measure(obj: dict[str, Any], iterations: int) -> list[float]:
    """Milliseconds per review; lookups are rebuilt per request, as a webhook would read them."""
    settings = Settings()
    request = AdmissionRequest(operation="CREATE", object=obj, namespace=NS, name="bench")
    lookups = _lookups()
    verdict = review_deployment(request, lookups=lookups, settings=settings)
    assert verdict.allowed, [e.message() for e in verdict.errors]
    for _ in range(WARMUP):
        review_deployment(request, lookups=lookups, settings=settings)
    out = []
    for _ in range(iterations):
        start = time.perf_counter()
        review_deployment(request, lookups=lookups, settings=settings)
        out.append((time.perf_counter() - start) * 1000.0)
    return out


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q / 100.0 * (len(ordered) - 1)))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--iterations", type=int, default=DEFAULT_ITERATIONS)
    args = parser.parse_args(argv if argv is not None else [])
    iterations = max(ROUNDS, min(args.iterations, 100_000))
    figures: dict[str, float] = {}
    for name, obj in (("minimal", minimal()), ("full", full())):
        rounds = [measure(obj, iterations // ROUNDS) for _ in range(ROUNDS)]
        samples = [s for r in rounds for s in r]
        p50, p99 = percentile(samples, 50), percentile(samples, 99)
        quiet = min(percentile(r, 99) for r in rounds)
        figures[f"{name}_p50_ms"], figures[f"{name}_p99_ms"] = p50, p99
        print(
            f"{name:8s} n={len(samples)} p50={p50:.3f} ms p99={p99:.3f} ms "
            f"mean={statistics.fmean(samples):.3f} ms (p99 of the quietest of {ROUNDS} rounds: "
            f"{quiet:.3f} ms)"
        )
    print(" ".join(f"{k}={v:.3f}" for k, v in figures.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
