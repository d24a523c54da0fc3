"""A generation that cannot be rendered, through the real reconcile pass against an in-memory
API server (issue 37): its status is written once, at its generation, naming the failure;
nothing of what runs is touched; the retry writes nothing; a fix converges. The same on the
simulated cluster: tests/integration/test_controller_status.py."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from controller_support import MemoryKube, reconciler

from gpustack_controller.metrics import StatusGauges
from gpustack_render.cli.yamlio import load_documents
from gpustack_render.core.errors import RenderError
from gpustack_render.reconcile.events import RENDER_FAILED

EXAMPLE = Path(__file__).parents[2] / "examples" / "cpu-only.yaml"
DOCS = {str(d["kind"]): d for d in load_documents(EXAMPLE.read_text())}
NS = DOCS["ModelDeployment"]["metadata"]["namespace"]
NAME = DOCS["ModelDeployment"]["metadata"]["name"]
KEY = f"{NS}/{NAME}"
#: The InstanceType of the edit, created with no status yet.
FRESH = "gpustack-cpu-fresh"


def _conditions(kube: MemoryKube) -> dict[str, dict[str, Any]]:
    md = kube.stored("ModelDeployment", NS, NAME)
    assert md is not None
    return {c["type"]: c for c in md["status"]["conditions"]}


def _uids(kube: MemoryKube) -> set[str]:
    return {p["metadata"]["uid"] for p in kube.of_kind("Pod")}


async def test_a_generation_that_cannot_render_is_reported_in_status_once() -> None:
    kube = MemoryKube()
    for doc in DOCS.values():
        kube.put(copy.deepcopy(doc))
    reconcile = reconciler(kube, StatusGauges())
    await reconcile(KEY)
    running = _uids(kube)
    assert running
    fresh = copy.deepcopy(DOCS["InstanceType"])
    fresh["metadata"] = {"name": FRESH}
    del fresh["status"]
    kube.put(fresh)
    md = kube.stored("ModelDeployment", NS, NAME)
    assert md is not None
    md["spec"]["roles"][0]["instanceType"] = FRESH
    md["metadata"]["generation"] += 1
    generation = md["metadata"]["generation"]

    with pytest.raises(RenderError):  # the work queue retries it with backoff
        await reconcile(KEY)
    md = kube.stored("ModelDeployment", NS, NAME)
    assert md is not None and md["status"]["observedGeneration"] == generation
    got = _conditions(kube)
    assert (got["Ready"]["status"], got["Ready"]["reason"]) == ("False", "RenderFailed")
    assert (got["Stalled"]["status"], got["Stalled"]["reason"]) == ("True", "RenderFailed")
    assert f"InstanceType {FRESH!r}" in got["Stalled"]["message"]
    assert got["Ready"]["observedGeneration"] == generation
    assert md["status"]["phase"] != "Ready"
    assert _uids(kube) == running  # nothing created, replaced or deleted
    assert any(e["reason"] == RENDER_FAILED for e in kube.of_kind("Event"))

    # The retry fails the same way: the same status, not written again.
    version = md["metadata"]["resourceVersion"]
    with pytest.raises(RenderError):
        await reconcile(KEY)
    md = kube.stored("ModelDeployment", NS, NAME)
    assert md is not None and md["metadata"]["resourceVersion"] == version

    # Its status filled in, the type renders: the deployment converges from there.
    stored_type = kube.stored("InstanceType", "", FRESH)
    assert stored_type is not None
    stored_type["status"] = copy.deepcopy(DOCS["InstanceType"]["status"])
    await reconcile(KEY)
    got = _conditions(kube)
    assert got["Stalled"]["status"] == "False"
    assert got["Ready"]["reason"] != "RenderFailed"
    assert got["ReplicasUpToDate"]["observedGeneration"] == generation
