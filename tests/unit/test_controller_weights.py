"""A deployment naming a ModelArtifact, through the real reconcile pass against an in-memory API
server (docs/weights.md, "What status says"): while the weights cannot be delivered nothing is
created, replaced or deleted and status says why; once the artifact resolves the deployment
converges and ``status.model`` names it; a revalidation failure afterwards touches no Pod, and an
edit made while it holds rolls nothing."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from controller_support import MemoryKube, reconciler

from gpustack_controller.metrics import StatusGauges
from gpustack_render.cli.yamlio import load_documents

EXAMPLE = Path(__file__).parents[2] / "examples" / "cpu-only.yaml"
DOCS = {str(d["kind"]): d for d in load_documents(EXAMPLE.read_text())}
NS = DOCS["ModelDeployment"]["metadata"]["namespace"]
NAME = DOCS["ModelDeployment"]["metadata"]["name"]
KEY = f"{NS}/{NAME}"
ARTIFACT = "bge-small"
IMAGE = "registry.example/models/bge-small@sha256:" + "ab" * 32


def _artifact(resolved: str = "True", reason: str = "Resolved") -> dict[str, Any]:
    return {
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "ModelArtifact",
        "metadata": {"name": ARTIFACT, "namespace": NS},
        "spec": {"source": {"image": {"reference": IMAGE}}},
        "status": {
            "resolved": {"resolvedTime": "2026-01-01T00:00:00Z"},
            "conditions": [
                {"type": "Resolved", "status": resolved, "reason": reason, "message": "m"}
            ],
        },
    }


def _deployment() -> dict[str, Any]:
    md = copy.deepcopy(DOCS["ModelDeployment"])
    md["metadata"]["generation"] = 1
    md["spec"]["model"]["artifactRef"] = {"name": ARTIFACT}
    return md


def _stored(kube: MemoryKube) -> dict[str, Any]:
    md = kube.stored("ModelDeployment", NS, NAME)
    assert md is not None
    return md


def _status(kube: MemoryKube) -> dict[str, Any]:
    return dict(_stored(kube)["status"])


def _conditions(kube: MemoryKube) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in _status(kube)["conditions"]}


def _uids(kube: MemoryKube) -> set[str]:
    return {p["metadata"]["uid"] for p in kube.of_kind("Pod")}


async def test_a_missing_artifact_creates_nothing_and_says_why() -> None:
    kube = MemoryKube()
    kube.put(copy.deepcopy(DOCS["InstanceType"]))
    kube.put(_deployment())
    reconcile = reconciler(kube, StatusGauges())
    assert await reconcile(KEY) is None

    assert kube.of_kind("Pod") == []
    got = _conditions(kube)
    assert (got["WeightsReady"]["status"], got["WeightsReady"]["reason"]) == (
        "False",
        "ArtifactNotFound",
    )
    assert f"{NS}/{ARTIFACT}" in got["WeightsReady"]["message"]
    assert got["ReplicasUpToDate"]["reason"] == "RolloutHeldByWeights"
    assert (got["Stalled"]["status"], got["Stalled"]["reason"]) == ("True", "ArtifactNotFound")
    status = _status(kube)
    assert status["phase"] == "Starting"
    assert status["phaseMessage"].startswith(got["WeightsReady"]["message"][:40])
    assert status["observedGeneration"] == 1

    # A retry that finds the same writes nothing.
    version = _stored(kube)["metadata"]["resourceVersion"]
    await reconcile(KEY)
    assert _stored(kube)["metadata"]["resourceVersion"] == version


async def test_an_unresolved_artifact_waits_then_the_deployment_converges() -> None:
    kube = MemoryKube()
    kube.put(copy.deepcopy(DOCS["InstanceType"]))
    kube.put(_deployment())
    kube.put(_artifact(resolved="Unknown", reason="Resolving"))
    reconcile = reconciler(kube, StatusGauges())
    await reconcile(KEY)
    assert kube.of_kind("Pod") == []
    got = _conditions(kube)
    assert got["WeightsReady"]["reason"] == "ArtifactNotResolved"
    assert "Resolving" in got["WeightsReady"]["message"]
    # Resolution is under way: the deployment reconciles, nobody has to act.
    assert (got["Reconciling"]["status"], got["Stalled"]["status"]) == ("True", "False")

    kube.put(_artifact())
    await reconcile(KEY)
    pods = kube.of_kind("Pod")
    assert len(pods) == 2
    status = _status(kube)
    assert status["model"] == {"artifact": ARTIFACT, "delivery": "Image"}
    got = _conditions(kube)
    # Created, not yet started by a kubelet: the image volume is not mounted.
    assert (got["WeightsReady"]["status"], got["WeightsReady"]["reason"]) == (
        "False",
        "WeightsNotMounted",
    )
    assert got["ReplicasUpToDate"]["reason"] != "RolloutHeldByWeights"


async def test_a_revalidation_failure_touches_no_pod_and_holds_an_edit() -> None:
    kube = MemoryKube()
    kube.put(copy.deepcopy(DOCS["InstanceType"]))
    kube.put(_deployment())
    kube.put(_artifact())
    reconcile = reconciler(kube, StatusGauges())
    await reconcile(KEY)
    running = _uids(kube)
    assert len(running) == 2

    kube.put(_artifact(resolved="False", reason="AccessDenied"))
    md = kube.stored("ModelDeployment", NS, NAME)
    assert md is not None
    md["spec"]["roles"][0]["extraArgs"] = [*md["spec"]["roles"][0]["extraArgs"], "--seed", "7"]
    md["metadata"]["generation"] += 1
    await reconcile(KEY)

    assert _uids(kube) == running  # nothing created, replaced or deleted
    got = _conditions(kube)
    assert got["WeightsReady"]["reason"] == "ArtifactNotResolved"
    assert "AccessDenied" in got["WeightsReady"]["message"]
    assert got["ReplicasUpToDate"]["reason"] == "RolloutHeldByWeights"
    # The artifact it names was written while it resolved, and is kept.
    assert _status(kube)["model"] == {"artifact": ARTIFACT, "delivery": "Image"}

    # Resolved again: the held edit's rollout starts (its cadence is the rollout's own).
    kube.put(_artifact())
    await reconcile(KEY)
    assert _conditions(kube)["ReplicasUpToDate"]["reason"] == "RolloutInProgress"
