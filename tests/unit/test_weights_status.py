"""``WeightsReady``, ``status.model``, the held status, the Pod facts they read, and what a
deployment naming an artifact reads (docs/weights.md, "What status says")."""

from __future__ import annotations

from typing import Any

from gpustack_render.api.artifact import ModelArtifact
from gpustack_render.api.common import Condition
from gpustack_render.api.modeldeployment import ModelDeployment, ModelDeploymentStatus
from gpustack_render.api.storage import (
    CSIDriver,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
)
from gpustack_render.core.settings import Settings
from gpustack_render.reconcile.conditions.weights import model_status, weights_ready
from gpustack_render.reconcile.inputindex import InputIndex
from gpustack_render.reconcile.inputs import Read, deployment_reads, references
from gpustack_render.reconcile.observed import ObservedPod, observe_pod
from gpustack_render.reconcile.replicas import ReplicaIndex
from gpustack_render.reconcile.status import weights_held_status
from gpustack_render.weights.delivery import WeightsBlock, WeightsPlan

NS = "team-a"


def _artifact(source: dict[str, Any]) -> ModelArtifact:
    return ModelArtifact.model_validate(
        {
            "metadata": {"name": "w", "namespace": NS, "uid": "u-1"},
            "spec": {"source": source},
            "status": {
                "resolved": {
                    "revision": "c" * 40,
                    "manifestDigest": "sha256:" + "d" * 64,
                    "sizeBytes": 10,
                },
                "conditions": [{"type": "Resolved", "status": "True", "reason": "Resolved"}],
            },
        }
    )


HUB = {"huggingFace": {"repository": "org/model"}}
IMAGE = {"image": {"reference": "r.example/m@sha256:" + "a" * 64}}


def _plan(source: dict[str, Any], delivery: str) -> WeightsPlan:
    return WeightsPlan(artifact=_artifact(source), delivery=delivery, settings=Settings())  # type: ignore[arg-type]


def test_without_an_artifact_weights_are_not_applicable() -> None:
    verdict = weights_ready(None, [ObservedPod(name="p")])
    assert (verdict.status, verdict.reason) == ("True", "NotApplicable")
    assert model_status(None) is None


def test_engine_delivery_waits_for_the_main_container() -> None:
    plan = _plan(HUB, "Engine")
    pods = [ObservedPod(name="b", main_ready=True), ObservedPod(name="a", main_ready=False)]
    verdict = weights_ready(plan, pods)
    assert (verdict.status, verdict.reason) == ("False", "Downloading")
    assert "1 Pod(s)" in verdict.message and "a" in verdict.message.split(": ")[-1]
    # A take-over role's Pod downloads nothing of ours; a terminating one is gone.
    done = [
        ObservedPod(name="b", main_ready=True),
        ObservedPod(name="t", takeover=True),
        ObservedPod(name="x", terminating=True),
    ]
    verdict = weights_ready(plan, done)
    assert (verdict.status, verdict.reason) == ("True", "Downloaded")


def test_mount_deliveries_wait_for_the_volumes() -> None:
    plan = _plan(IMAGE, "Image")
    verdict = weights_ready(plan, [ObservedPod(name="a", main_ready=True)])
    assert (verdict.status, verdict.reason) == ("False", "WeightsNotMounted")
    verdict = weights_ready(plan, [ObservedPod(name="a", volumes_ready=True)])
    assert (verdict.status, verdict.reason) == ("True", "Mounted")


def test_status_model_echoes_commit_and_digest_for_hub_sources_only() -> None:
    hub = model_status(_plan(HUB, "Engine"))
    assert hub is not None
    assert (hub.artifact, hub.revision, hub.manifest_digest, hub.delivery) == (
        "w",
        "c" * 40,
        "sha256:" + "d" * 64,
        "Engine",
    )
    image = model_status(_plan(IMAGE, "Image"))
    assert image is not None
    assert (image.revision, image.manifest_digest, image.delivery) == (None, None, "Image")


def test_observe_pod_reads_the_volume_and_main_container_facts() -> None:
    pod = observe_pod(
        {
            "metadata": {"name": "p"},
            "status": {
                "conditions": [{"type": "PodReadyToStartContainers", "status": "True"}],
                "containerStatuses": [
                    {"name": "routing-proxy", "ready": True},
                    {"name": "main", "ready": False},
                ],
            },
        }
    )
    assert (pod.volumes_ready, pod.main_ready) == (True, False)
    pod = observe_pod(
        {
            "metadata": {"name": "p"},
            "status": {
                "conditions": [{"type": "PodReadyToStartContainers", "status": "False"}],
                "containerStatuses": [{"name": "main", "ready": True}],
            },
        }
    )
    assert (pod.volumes_ready, pod.main_ready) == (False, True)


def _md(**status: Any) -> ModelDeployment:
    return ModelDeployment.model_validate(
        {
            "metadata": {"name": "m", "namespace": NS, "generation": 3},
            "spec": {
                "model": {"name": "org/model", "artifactRef": {"name": "w"}},
                "engine": {"name": "vLLM", "image": "vllm/vllm-openai:v0.33.0"},
                "roles": [{"name": "r", "instanceType": "t"}],
            },
            "status": status or None,
        }
    )


def test_the_held_status_keeps_what_runs_and_names_the_block() -> None:
    previous = ModelDeploymentStatus.model_validate(
        {
            "conditions": [
                {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved"},
            ],
            "roles": [{"name": "r", "desired": 1, "ready": 1}],
        }
    )
    md = _md(**previous.model_dump(by_alias=True, exclude_none=True))
    pod = observe_pod(
        {
            "metadata": {
                "name": "m-r-0",
                "labels": {
                    "app.kubernetes.io/component": "r",
                    "modeldeployment.gpustack.ai/ordinal": "0",
                },
            },
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
        }
    )
    block = WeightsBlock("ClaimNotBound", "claim c is Pending: bind it")
    status = weights_held_status(md, block, index=ReplicaIndex.of([pod], []), now="T")
    by_type = {c.type: c for c in status.conditions or ()}
    assert (by_type["WeightsReady"].status, by_type["WeightsReady"].reason) == (
        "False",
        "ClaimNotBound",
    )
    assert by_type["WeightsReady"].message == block.message
    assert by_type["ReplicasUpToDate"].reason == "RolloutHeldByWeights"
    assert by_type["QuotaReserved"].reason == "QuotaReserved"  # kept
    assert (by_type["Stalled"].status, by_type["Stalled"].reason) == ("True", "ClaimNotBound")
    assert status.phase_message is not None and status.phase_message.startswith(block.message)
    assert status.observed_generation == 3


def test_an_unresolved_artifact_reconciles_rather_than_stalls() -> None:
    block = WeightsBlock("ArtifactNotResolved", "not yet")
    status = weights_held_status(_md(), block, index=ReplicaIndex.of([], []), now="T")
    by_type: dict[str, Condition] = {c.type: c for c in status.conditions or ()}
    assert (by_type["Reconciling"].status, by_type["Stalled"].status) == ("True", "False")
    assert status.phase == "Starting"


def test_a_deployment_reads_its_artifact_and_what_its_delivery_needs() -> None:
    md = _md()
    assert Read(ModelArtifact, NS, "w") in deployment_reads(md)
    claim_artifact = _artifact({"persistentVolumeClaim": {"claimName": "c"}})
    assert references(claim_artifact) == [Read(PersistentVolumeClaim, NS, "c")]
    assert references(_artifact(HUB)) == [Read(CSIDriver, "", "model.csi.gpustack.ai")]
    assert references(_artifact(IMAGE)) == []
    claim = PersistentVolumeClaim.model_validate(
        {
            "metadata": {"name": "c", "namespace": NS},
            "spec": {"volumeName": "pv-1", "storageClassName": "local"},
        }
    )
    assert references(claim) == [
        Read(PersistentVolume, "", "pv-1"),
        Read(StorageClass, "", "local"),
    ]


def test_a_driver_or_claim_event_reaches_the_deployments_that_read_it() -> None:
    index = InputIndex()
    md = _md().model_dump(by_alias=True, exclude_none=True)
    index.deployment_changed(f"{NS}/m", md)
    artifact = _artifact({"persistentVolumeClaim": {"claimName": "c"}}).model_dump(
        by_alias=True, exclude_none=True
    )
    assert index.input_changed(ModelArtifact, artifact) == [f"{NS}/m"]
    claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "c", "namespace": NS},
        "spec": {"storageClassName": "local"},
    }
    assert index.input_changed(PersistentVolumeClaim, claim) == [f"{NS}/m"]
    cls = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "local"}}
    assert index.input_changed(StorageClass, cls) == [f"{NS}/m"]
    other = {**cls, "metadata": {"name": "other"}}
    assert index.input_changed(StorageClass, other) == []


def test_a_claim_event_reaches_the_artifacts_whose_source_names_it() -> None:
    from gpustack_render.reconcile.artifacts import claiming

    def artifact(name: str, ns: str, claim: str) -> dict[str, Any]:
        return {
            "metadata": {"name": name, "namespace": ns},
            "spec": {"source": {"persistentVolumeClaim": {"claimName": claim}}},
        }

    artifacts = [
        artifact("b", NS, "models"),
        artifact("a", NS, "models"),
        artifact("c", NS, "other"),
        artifact("d", "elsewhere", "models"),
        {"metadata": {"name": "hub", "namespace": NS}, "spec": {"source": HUB}},
    ]
    claim = {"metadata": {"name": "models", "namespace": NS}}
    assert claiming(artifacts, claim) == [f"{NS}/a", f"{NS}/b"]
