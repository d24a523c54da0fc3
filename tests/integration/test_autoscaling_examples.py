"""The autoscaling examples (examples/autoscaling/, examples/pd-autoscaled.yaml) against the real
API server with KEDA's own CRDs installed (v2.20.2, hack/envtest/keda): every object is created
with ``dryRun=All`` and ``fieldValidation=Strict`` (the structural schema prunes an unknown field
silently otherwise), each autoscaler targets a scaler the example deployments render, and the
triggers read the metrics the engines export. KEDA itself does not run (D27; the notes on the
test infrastructure in docs/decisions.md)."""

from __future__ import annotations

import copy
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from example_objects import rendered_scalers

from gpustack_render.cli.yamlio import load_documents

from .cluster import ClusterBinaries
from .controlplane import APIError, ControlPlane
from .webhook_fixtures import create_namespace

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
FILES = [EXAMPLES / "pd-autoscaled.yaml", *sorted((EXAMPLES / "autoscaling").glob("*.yaml"))]
#: What the engines export, as their own sources name it: vLLM's Prometheus logger
#: (vllm/v1/metrics/loggers.py) and SGLang's scheduler collector
#: (python/sglang/srt/metrics/collector.py).
ENGINE_METRICS = {
    "vllm:num_requests_waiting",
    "vllm:kv_cache_usage_perc",
    "sglang:num_queue_reqs",
    "sglang:token_usage",
}
PATHS = {
    "ModelDeployment": "/apis/worker.gpustack.ai/v1/namespaces/{ns}/modeldeployments",
    "InstanceType": "/apis/worker.gpustack.ai/v1/instancetypes",
    "ScaledObject": "/apis/keda.sh/v1alpha1/namespaces/{ns}/scaledobjects",
    "HorizontalPodAutoscaler": "/apis/autoscaling/v2/namespaces/{ns}/horizontalpodautoscalers",
}


def _documents() -> list[dict[str, Any]]:
    return [doc for path in FILES for doc in load_documents(path.read_text())]


def _rendered_scalers(docs: list[dict[str, Any]]) -> set[tuple[str, str]]:
    return {(s["metadata"]["namespace"], s["metadata"]["name"]) for s in rendered_scalers(docs)}


@pytest.fixture(scope="module")
def keda(control_plane: ControlPlane, envtest_binaries: ClusterBinaries) -> ControlPlane:
    crds = control_plane.install_crd_files(
        [envtest_binaries.keda_crd_dir / "keda.sh_scaledobjects.yaml"]
    )
    assert crds == ["scaledobjects.keda.sh"]
    return control_plane


def _dry_run(control_plane: ControlPlane, doc: dict[str, Any], namespace: str) -> Any:
    body = copy.deepcopy(doc)
    body.pop("status", None)
    if "namespace" in body["metadata"]:
        body["metadata"]["namespace"] = namespace
    path = PATHS[body["kind"]].format(ns=namespace)
    _, stored = control_plane.request(
        "POST", path, body, query={"dryRun": "All", "fieldValidation": "Strict"}
    )
    return stored


def test_every_example_passes_the_api_servers_strict_schema(keda: ControlPlane) -> None:
    namespace = f"examples-{uuid.uuid4().hex[:6]}"
    create_namespace(keda, namespace, {})
    docs = _documents()
    kinds = sorted({d["kind"] for d in docs})
    assert kinds == ["HorizontalPodAutoscaler", "InstanceType", "ModelDeployment", "ScaledObject"]
    for doc in docs:
        stored = _dry_run(keda, doc, namespace)
        assert stored["metadata"]["name"] == doc["metadata"]["name"]


def test_a_misspelt_scaled_object_field_is_refused(keda: ControlPlane) -> None:
    """What the check above is worth: with strict field validation a typo is an error, not a
    silently pruned field."""
    namespace = f"examples-{uuid.uuid4().hex[:6]}"
    create_namespace(keda, namespace, {})
    scaled = next(d for d in _documents() if d["kind"] == "ScaledObject")
    bad = copy.deepcopy(scaled)
    bad["spec"]["triggers"][0]["metadta"] = bad["spec"]["triggers"][0].pop("metadata")
    with pytest.raises(APIError) as info:
        _dry_run(keda, bad, namespace)
    assert info.value.status == 400
    message = json.loads(info.value.body)["message"]
    assert 'strict decoding error: unknown field "spec.triggers[0].metadta"' in message
    wrong = copy.deepcopy(scaled)
    wrong["spec"]["maxReplicaCount"] = "four"
    with pytest.raises(APIError) as info:
        _dry_run(keda, wrong, namespace)
    assert "spec.maxReplicaCount" in info.value.body


def test_every_autoscaler_targets_a_rendered_scaler_on_the_engines_metrics() -> None:
    docs = _documents()
    scalers = _rendered_scalers(docs)
    assert scalers == {("team-b", "qwen3-pd-pd"), ("team-b", "gemma-server")}
    seen_metrics: set[str] = set()
    for doc in docs:
        if doc["kind"] not in ("ScaledObject", "HorizontalPodAutoscaler"):
            continue
        ref = doc["spec"]["scaleTargetRef"]
        assert (ref["apiVersion"], ref["kind"]) == (
            "worker.gpustack.ai/v1",
            "ModelDeploymentScaler",
        )
        assert (doc["metadata"]["namespace"], ref["name"]) in scalers
        for trigger in doc["spec"].get("triggers", ()):
            query = trigger["metadata"]["query"]
            used = {m for m in ENGINE_METRICS if m in query}
            assert used, query
            seen_metrics |= used
    assert seen_metrics == ENGINE_METRICS
