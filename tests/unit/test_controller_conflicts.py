"""The two conflicts a reconcile pass reports without writing over them, through the real pass
against an in-memory API server: a LocalQueue that feeds another ClusterQueue (the planner gets
it as an input and creates no Pod of its roles, docs/contract/controller.md §10) and a rendered
Service held by another owner (``ServiceConflict``: the pass fails and is retried, §11)."""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path
from typing import Any

import pytest
from controller_support import MemoryKube, reconciler

from gpustack_controller import workqueue
from gpustack_controller.metrics import StatusGauges, error_labels
from gpustack_controller.reconciler import QUEUE_RECHECK_SECONDS
from gpustack_render.api.inputs import InstanceType
from gpustack_render.cli.yamlio import load_documents
from gpustack_render.core.ownerrefs import OwnedConflict
from gpustack_render.core.settings import Settings
from gpustack_render.rendering.renderer import Rendering, render
from gpustack_render.schema.decoding import decode_deployment, decode_model
from gpustack_render.schema.lookups import StaticLookups

EXAMPLE = Path(__file__).parents[2] / "examples" / "cpu-only.yaml"
DOCS = {str(d["kind"]): d for d in load_documents(EXAMPLE.read_text())}
NS = DOCS["ModelDeployment"]["metadata"]["namespace"]
NAME = DOCS["ModelDeployment"]["metadata"]["name"]
KEY = f"{NS}/{NAME}"


def _rendering() -> Rendering:
    md, errs = decode_deployment(copy.deepcopy(DOCS["ModelDeployment"]))
    assert md is not None, errs
    instance_type, errs = decode_model(InstanceType, DOCS["InstanceType"])
    assert instance_type is not None, errs
    return render(md, lookups=StaticLookups.of([instance_type]), settings=Settings())


def _cluster() -> MemoryKube:
    kube = MemoryKube()
    for doc in DOCS.values():
        kube.put(doc)
    return kube


def _run(kube: MemoryKube) -> float | None:
    async def main() -> float | None:
        return await reconciler(kube, StatusGauges())(KEY)

    return asyncio.run(main())


def _condition(kube: MemoryKube, type_: str) -> dict[str, Any]:
    md = kube.stored("ModelDeployment", NS, NAME)
    assert md is not None
    return next(c for c in md["status"]["conditions"] if c["type"] == type_)


def test_a_local_queue_feeding_another_cluster_queue_gets_no_pod_until_it_is_fixed() -> None:
    kube = _cluster()
    queue = copy.deepcopy(_rendering().local_queues[0])
    name = queue["metadata"]["name"]
    queue["spec"]["clusterQueue"] = "someone-elses"
    kube.put(queue)

    assert _run(kube) == QUEUE_RECHECK_SECONDS
    assert kube.of_kind("Pod") == []
    stored = kube.stored("LocalQueue", NS, name)
    assert stored is not None and stored["spec"]["clusterQueue"] == "someone-elses"
    quota = _condition(kube, "QuotaReserved")
    assert (quota["status"], quota["reason"]) == ("False", "LocalQueueConflict")
    assert "feeds ClusterQueue someone-elses" in quota["message"]
    assert [e["reason"] for e in kube.of_kind("Event")] == ["LocalQueueConflict"]

    # The administrator deletes it: the next pass creates the right one, then the Pods.
    del kube.objects[("LocalQueue", NS, name)]
    _run(kube)
    recreated = kube.stored("LocalQueue", NS, name)
    assert recreated is not None and recreated["spec"]["clusterQueue"] == name
    assert len(kube.of_kind("Pod")) == DOCS["ModelDeployment"]["spec"]["roles"][0]["replicas"]


def test_a_service_held_by_another_owner_fails_the_pass_and_is_never_written() -> None:
    kube = _cluster()
    wanted = _rendering().services()[0]
    name = wanted["metadata"]["name"]
    theirs = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": name,
            "namespace": NS,
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "name": "x",
                    "uid": "u",
                    "controller": True,
                }
            ],
        },
        "spec": {"ports": [{"port": 1}]},
    }
    kube.put(theirs)
    with pytest.raises(OwnedConflict) as raised:
        _run(kube)
    conflict = raised.value
    assert (conflict.namespace, conflict.name, conflict.deployment) == (NS, name, NAME)
    assert str(conflict) == (
        f"Service {NS}/{name} exists and is not owned by ModelDeployment {NS}/{NAME}"
    )
    # The pass made its other writes first; the held Service is untouched.
    assert kube.of_kind("Pod") != []
    stored = kube.stored("Service", NS, name)
    assert stored is not None and stored["spec"] == theirs["spec"]
    # Counted, logged without a traceback and retried as the API server's refusal was.
    assert error_labels(conflict) == ("api", "AlreadyExists")
    assert workqueue._expected(conflict)


def test_a_router_object_held_by_another_owner_is_counted_as_a_service_is() -> None:
    """A router object under another owner is the same finding as a Service (one conflict type
    on the owned-object path): counted as the API server's refusal, logged without a
    traceback."""
    conflict = OwnedConflict("Deployment", NS, f"{NAME}-router", NAME)
    assert str(conflict) == (
        f"Deployment {NS}/{NAME}-router exists and is not owned by ModelDeployment {NS}/{NAME}"
    )
    assert error_labels(conflict) == ("api", "AlreadyExists")
    assert workqueue._expected(conflict)
