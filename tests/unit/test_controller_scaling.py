"""The controller's real reconcile pass with autoscaled roles, against an in-memory API server
(D27, docs/autoscaling.md): the scaler is created at the running count and owned by the
deployment; its ``spec.replicas`` then sets the count and is never written by the controller;
the bounds follow the deployment; turning External off keeps the count and deletes the scaler;
a converged pass writes nothing."""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path
from typing import Any, cast

from controller_support import MemoryKube, reconciler

from gpustack_controller.controller import Controller, Options
from gpustack_controller.kube import Kube
from gpustack_controller.metrics import StatusGauges
from gpustack_render.cli.yamlio import load_documents
from gpustack_render.core import labels

EXAMPLE = Path(__file__).parents[2] / "examples" / "cpu-only.yaml"
DOCS = {str(d["kind"]): d for d in load_documents(EXAMPLE.read_text())}
NS = DOCS["ModelDeployment"]["metadata"]["namespace"]
NAME = DOCS["ModelDeployment"]["metadata"]["name"]
KEY = f"{NS}/{NAME}"


def _role_name() -> str:
    return str(DOCS["ModelDeployment"]["spec"]["roles"][0]["name"])


ROLE = _role_name()
SCALER = f"{NAME}-{ROLE}"


def _cluster(**scaling: Any) -> MemoryKube:
    kube = MemoryKube()
    for doc in DOCS.values():
        doc = copy.deepcopy(doc)
        if doc["kind"] == "ModelDeployment":
            doc["spec"]["roles"][0]["replicas"] = 2
            doc["spec"]["roles"][0]["scaling"] = {"mode": "External", **scaling}
        kube.put(doc)
    return kube


def _run(kube: MemoryKube) -> float | None:
    async def main() -> float | None:
        return await reconciler(kube, StatusGauges())(KEY)

    return asyncio.run(main())


def _ordinals(kube: MemoryKube) -> list[int]:
    return sorted(int(p["metadata"]["labels"][labels.POD_ORDINAL]) for p in kube.of_kind("Pod"))


def _md(kube: MemoryKube) -> dict[str, Any]:
    md = kube.stored("ModelDeployment", NS, NAME)
    assert md is not None
    return md


def _role_status(kube: MemoryKube) -> dict[str, Any]:
    (status,) = _md(kube)["status"]["roles"]
    return dict(status)


def _scaler(kube: MemoryKube) -> dict[str, Any] | None:
    return kube.stored("ModelDeploymentScaler", NS, SCALER)


def _set(kube: MemoryKube, kind: str, name: str, path: tuple[str, ...], value: Any) -> None:
    obj = kube.stored(kind, NS, name)
    assert obj is not None
    for key in path[:-1]:
        obj = obj[key]
    obj[path[-1]] = value


def _edit_role(kube: MemoryKube, **fields: Any) -> None:
    md = _md(kube)
    md["spec"]["roles"][0].update(fields)
    md["metadata"]["generation"] += 1


def test_the_scaler_is_created_at_the_running_count_and_then_sets_it() -> None:
    kube = _cluster(maxReplicas=6)
    _run(kube)
    scaler = _scaler(kube)
    assert scaler is not None
    assert scaler["spec"] == {
        "replicas": 2,
        "minReplicas": 1,
        "maxReplicas": 6,
        "modelDeployment": NAME,
        "role": ROLE,
    }
    owner = scaler["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("ModelDeployment", NAME, True)
    assert _ordinals(kube) == [0, 1]
    status = scaler["status"]
    assert status["desired"] == 2 and status["replicas"] == 0  # nothing Ready yet
    assert status["selector"] == (
        f"app.kubernetes.io/name=model-deployment,app.kubernetes.io/instance={NAME},"
        f"app.kubernetes.io/component={ROLE},modeldeployment.gpustack.ai/member-index=0"
    )
    role = _role_status(kube)
    assert role["desired"] == 2
    assert role["scaling"] == {"source": "Scaler", "scaler": SCALER}

    # The autoscaler writes 4: two more replicas, the deployment's replicas untouched.
    _set(kube, "ModelDeploymentScaler", SCALER, ("spec", "replicas"), 4)
    _run(kube)
    assert _ordinals(kube) == [0, 1, 2, 3]
    assert _role_status(kube)["desired"] == 4
    assert _md(kube)["spec"]["roles"][0]["replicas"] == 2
    scaler = _scaler(kube)
    assert scaler is not None and scaler["spec"]["replicas"] == 4

    # Down to 1: the highest ordinals leave.
    _set(kube, "ModelDeploymentScaler", SCALER, ("spec", "replicas"), 1)
    _run(kube)
    assert _ordinals(kube) == [0]


def test_the_controller_never_writes_the_count_and_keeps_the_bounds() -> None:
    kube = _cluster(maxReplicas=6)
    _run(kube)
    _set(kube, "ModelDeploymentScaler", SCALER, ("spec", "replicas"), 5)
    _run(kube)
    # The deployment narrows the bounds below the count: the bound is patched, the count is
    # left to the autoscaler, and the role runs the count within the new bounds.
    _edit_role(kube, scaling={"mode": "External", "maxReplicas": 3})
    _run(kube)
    scaler = _scaler(kube)
    assert scaler is not None
    assert (scaler["spec"]["replicas"], scaler["spec"]["maxReplicas"]) == (5, 3)
    assert _ordinals(kube) == [0, 1, 2]
    assert scaler["status"]["desired"] == 3


def test_a_converged_pass_writes_no_scaler_and_no_status() -> None:
    """The scaler's spec and status and the deployment's status are compared with what is
    stored and written only when they changed. (The in-memory server keeps no managed fields,
    so the Services' alignment, which reads them, is not judged here.)"""
    kube = _cluster()
    _run(kube)
    _run(kube)
    before = copy.deepcopy(kube.objects)
    _run(kube)
    changed = [k for k in set(before) | set(kube.objects) if before.get(k) != kube.objects.get(k)]
    assert [k for k in changed if k[0] in ("ModelDeploymentScaler", "ModelDeployment", "Pod")] == []


def test_turning_external_off_keeps_the_count_and_deletes_the_scaler() -> None:
    kube = _cluster()
    _run(kube)
    _set(kube, "ModelDeploymentScaler", SCALER, ("spec", "replicas"), 3)
    _run(kube)
    assert _ordinals(kube) == [0, 1, 2]

    _edit_role(kube, scaling={"mode": "Replicas"})
    _run(kube)
    assert _scaler(kube) is None
    assert _ordinals(kube) == [0, 1, 2]  # no surprise scale-down to replicas: 2
    role = _role_status(kube)
    assert role["desired"] == 3
    assert role["scaling"] == {"source": "Held", "specReplicas": 2}
    _run(kube)
    assert _ordinals(kube) == [0, 1, 2]

    # Editing the deployment's own replicas ends the hold.
    _edit_role(kube, replicas=1)
    _run(kube)
    assert _ordinals(kube) == [0]
    assert "scaling" not in _role_status(kube)


def test_a_deleted_scaler_comes_back_at_the_running_count() -> None:
    kube = _cluster()
    _run(kube)
    _set(kube, "ModelDeploymentScaler", SCALER, ("spec", "replicas"), 3)
    _run(kube)
    del kube.objects[("ModelDeploymentScaler", NS, SCALER)]
    _run(kube)
    scaler = _scaler(kube)
    assert scaler is not None and scaler["spec"]["replicas"] == 3
    assert _ordinals(kube) == [0, 1, 2]


def test_a_scaler_name_held_by_another_owner_is_neither_written_nor_read() -> None:
    kube = _cluster()
    kube.put(
        {
            "apiVersion": "worker.gpustack.ai/v1",
            "kind": "ModelDeploymentScaler",
            "metadata": {"name": SCALER, "namespace": NS},
            "spec": {"replicas": 9, "modelDeployment": NAME, "role": ROLE},
        }
    )
    _run(kube)
    scaler = _scaler(kube)
    assert scaler is not None and scaler["spec"] == {
        "replicas": 9,
        "modelDeployment": NAME,
        "role": ROLE,
    }
    assert "status" not in scaler
    assert _ordinals(kube) == [0, 1]
    assert "ScalerConflict" in [e["reason"] for e in kube.of_kind("Event")]


def _stored_scaler(generation: int, **status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "ModelDeploymentScaler",
        "metadata": {
            "name": SCALER,
            "namespace": NS,
            "generation": generation,
            "ownerReferences": [
                {"kind": "ModelDeployment", "name": NAME, "uid": "u", "controller": True}
            ],
        },
        "spec": {"replicas": generation},
        "status": status,
    }


def test_a_new_count_enqueues_the_deployment_and_a_status_write_does_not() -> None:
    """The HPA's write through /scale moves the scaler's generation: the deployment is
    reconciled. The controller's own status writes move none: ignored (a converged cluster
    stays quiet)."""

    def queued(controller: Controller) -> set[str]:
        return set(controller.queue._queued)

    controller = Controller(cast(Kube, MemoryKube()), Options())
    controller._on_scaler("ADDED", _stored_scaler(1), None)
    assert queued(controller) == {KEY}
    controller.queue = type(controller.queue)("modeldeployment")
    controller._on_scaler("MODIFIED", _stored_scaler(1, ready=2), _stored_scaler(1))
    assert queued(controller) == set()
    controller._on_scaler("MODIFIED", _stored_scaler(2), _stored_scaler(1))
    assert queued(controller) == {KEY}
    controller.queue = type(controller.queue)("modeldeployment")
    controller._on_scaler("DELETED", _stored_scaler(2), None)
    assert queued(controller) == {KEY}
