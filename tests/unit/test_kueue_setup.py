"""The Kueue objects an administrator gives (deploy/kueue/, applied as they are by the simulated
cluster) cover what the renderer asks for: a ClusterQueue that does not cover a requested
resource leaves the group without quota forever."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from integration.cluster import (
    COVERED_RESOURCES,
    KUEUE_SETUP_DIR,
    cluster_queue,
    kueue_configuration,
    kueue_webhook_configurations,
)

from gpustack_render.api.modeldeployment import RoleSpec
from gpustack_render.cli.yamlio import load_documents
from gpustack_render.rendering import resources

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "golden"


def _requested(rendered: list[dict[str, Any]]) -> set[str]:
    keys: set[str] = set()
    for pod in rendered:
        if pod.get("kind") != "Pod":
            continue
        for container in pod["spec"].get("containers") or ():
            for part in ("requests", "limits"):
                keys |= set((container.get("resources") or {}).get(part) or {})
    return keys


def _golden_renders() -> list[Path]:
    return sorted(GOLDEN.glob("render-*/rendered.yaml"))


def test_the_template_covers_exactly_the_harness_resources() -> None:
    (template,) = load_documents((KUEUE_SETUP_DIR / "clusterqueue.yaml").read_text())
    (group,) = template["spec"]["resourceGroups"]
    assert tuple(group["coveredResources"]) == COVERED_RESOURCES
    (flavor,) = group["flavors"]
    assert [r["name"] for r in flavor["resources"]] == list(COVERED_RESOURCES)
    checks = template["spec"]["admissionChecksStrategy"]["admissionChecks"]
    assert [c["name"] for c in checks] == ["gpustack-model-deployment-joint"]


def test_every_network_key_the_renderer_knows_is_covered() -> None:
    for key in (resources.RDMA_KEY, resources.RDMA_SHARED_KEY, resources.EFA_KEY):
        assert key in COVERED_RESOURCES
    for manufacturer in ("nvidia", "ascend"):  # the accelerators the simulated Nodes offer
        assert resources.ACCELERATOR_KEYS[manufacturer] in COVERED_RESOURCES
    nvidia = resources.ACCELERATOR_KEYS["nvidia"]
    for suffix in (resources.SLICED_SUFFIX, resources.PARTITIONED_SUFFIX):
        assert nvidia + suffix in COVERED_RESOURCES


@pytest.mark.parametrize("path", _golden_renders(), ids=lambda p: p.parent.name)
def test_every_resource_a_golden_render_requests_is_covered_or_another_accelerator(
    path: Path,
) -> None:
    other_accelerators = {
        key + suffix
        for key in resources.ACCELERATOR_KEYS.values()
        for suffix in ("", resources.SLICED_SUFFIX, resources.PARTITIONED_SUFFIX)
    } - set(COVERED_RESOURCES)
    uncovered = _requested(load_documents(path.read_text())) - set(COVERED_RESOURCES)
    assert uncovered <= other_accelerators, uncovered


def test_a_stamped_queue_names_the_entrance_and_overrides_only_the_given_quota() -> None:
    body = cluster_queue("gpustack-fnv64-00000000000000aa", quota={"nvidia.com/gpu": 3})
    assert body["metadata"] == {"name": "gpustack-fnv64-00000000000000aa"}
    quotas = {
        r["name"]: r["nominalQuota"]
        for r in body["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
    }
    assert quotas["nvidia.com/gpu"] == 3 and quotas["cpu"] == 4096
    with pytest.raises(ValueError, match="not covered"):
        cluster_queue("x", quota={"example.com/unknown": 1})
    assert "admissionChecksStrategy" not in cluster_queue("x", admission_check=None)["spec"]


def test_the_kueue_configuration_lists_the_pod_integration_explicitly() -> None:
    config = kueue_configuration(
        webhook_port=1, health_port=2, cert_dir=Path("/tmp/x"), wait_for_pods_ready=False
    )
    assert config["integrations"]["frameworks"] == ["pod"]
    assert "waitForPodsReady" not in config
    waiting = kueue_configuration(
        webhook_port=1, health_port=2, cert_dir=Path("/tmp/x"), wait_for_pods_ready=True
    )
    assert waiting["waitForPodsReady"]["timeout"] == "5m"


def test_only_pod_and_kueue_webhooks_are_registered(tmp_path: Path) -> None:
    manifests = tmp_path / "manifests.yaml"
    manifests.write_text(
        """
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: mutating-webhook-configuration}
webhooks:
- name: mpod.kb.io
  clientConfig: {service: {name: s, namespace: system, path: /mutate--v1-pod}}
  rules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]
- name: mjob.kb.io
  clientConfig: {service: {name: s, namespace: system, path: /mutate-batch-v1-job}}
  rules: [{apiGroups: [batch], apiVersions: [v1], operations: [CREATE], resources: [jobs]}]
- name: mworkload.kb.io
  clientConfig:
    service: {name: s, namespace: system, path: /mutate-kueue-x-k8s-io-v1beta2-workload}
  rules:
  - {apiGroups: [kueue.x-k8s.io], apiVersions: [v1beta2], operations: [CREATE],
     resources: [workloads]}
"""
    )
    (config,) = kueue_webhook_configurations(
        manifests, webhook_url="https://127.0.0.1:9", ca_bundle="Q0E="
    )
    assert [h["name"] for h in config["webhooks"]] == ["mpod.kb.io", "mworkload.kb.io"]
    pod = config["webhooks"][0]
    assert pod["clientConfig"] == {"url": "https://127.0.0.1:9/mutate--v1-pod", "caBundle": "Q0E="}
    assert pod["namespaceSelector"]["matchExpressions"][0]["values"] == [
        "kube-system",
        "kueue-system",
    ]


def _operations_yaml_blocks() -> list[str]:
    text = (Path(__file__).parents[2] / "docs" / "operations.md").read_text()
    return [block.split("```", 1)[0] for block in text.split("```yaml\n")[1:]]


def _seconds(duration: str) -> int:
    units = {"s": 1, "m": 60, "h": 3600}
    return int(duration[:-1]) * units[duration[-1]]


def test_the_guide_s_wait_for_pods_ready_timeout_exceeds_the_default_startup_budget() -> None:
    """docs/operations.md, "Kueue setup": Kueue evicts a group not Ready within
    waitForPodsReady.timeout, so the guide's timeout must exceed startupTimeoutSeconds'
    default (1800 s) and the section must say what TAS does on a NotReady node."""
    budget = RoleSpec.model_fields["startup_timeout_seconds"].default
    assert budget == 1800
    configs = [d for b in _operations_yaml_blocks() for d in load_documents(b)]
    (wait,) = [d["waitForPodsReady"] for d in configs if "waitForPodsReady" in d]
    assert _seconds(wait["timeout"]) > budget
    guide = (Path(__file__).parents[2] / "docs" / "operations.md").read_text()
    section = guide.split("## Kueue setup", 1)[1].split("\n## ", 1)[0]
    for fact in (
        "PodsReadyTimeout",
        "startupTimeoutSeconds",
        "NotReady",
        "TASFailedNodeReplacement",
    ):
        assert fact in section, fact
