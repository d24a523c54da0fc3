"""The router's objects through the real reconcile pass against an in-memory API server (D26):
applied with the engine objects, observed for ``RouterReady``, a name held by another owner never
written, pruned when the router block goes. Alignment against a real API server's managed fields
is tests/integration/test_router_discovery.py's."""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path
from typing import Any, cast

import pytest
from controller_support import MemoryKube, reconciler

from gpustack_controller.kube import Kube
from gpustack_controller.metrics import StatusGauges
from gpustack_controller.reconciler import DeploymentReconciler
from gpustack_controller.watches import Informer, object_key
from gpustack_render.cli.yamlio import load_documents
from gpustack_render.core.ownerrefs import OwnedConflict
from gpustack_render.core.settings import Settings
from gpustack_render.schema.resources import ROUTER_RESOURCES

EXAMPLE = Path(__file__).parents[2] / "examples" / "cpu-only.yaml"
DOCS = {str(d["kind"]): d for d in load_documents(EXAMPLE.read_text())}
NS = DOCS["ModelDeployment"]["metadata"]["namespace"]
NAME = DOCS["ModelDeployment"]["metadata"]["name"]
KEY = f"{NS}/{NAME}"
ROUTER = f"{NAME}-router"
IMAGE = "registry.example.com/vllm-router:0.1.17"


def _cluster(router: dict[str, Any] | None) -> MemoryKube:
    kube = MemoryKube()
    for kind, doc in DOCS.items():
        doc = copy.deepcopy(doc)
        if kind == "ModelDeployment" and router is not None:
            doc["spec"]["router"] = router
        kube.put(doc)
    return kube


def _reconciler(kube: MemoryKube) -> DeploymentReconciler:
    """The pass, with router informers whose caches :func:`_watch` fills as a watch would."""
    out = reconciler(kube, StatusGauges())
    live = cast(Kube, kube)
    out.caches.routers = {kind: Informer(live, r) for kind, r in ROUTER_RESOURCES.items()}
    return out


def _watch(kube: MemoryKube, pass_: DeploymentReconciler) -> None:
    """Fill the router caches as a watch would: synced and following its stream."""
    for informer in pass_.caches.routers.values():
        informer.cache = {
            object_key(o): copy.deepcopy(o) for o in kube.of_kind(informer.resource.kind)
        }
        informer.synced.set()
        informer.current = True


def _run(pass_: DeploymentReconciler) -> float | None:
    return asyncio.run(pass_(KEY))


def _condition(kube: MemoryKube, type_: str) -> dict[str, Any]:
    md = kube.stored("ModelDeployment", NS, NAME)
    assert md is not None
    return dict(next(c for c in md["status"]["conditions"] if c["type"] == type_))


def _router_objects(kube: MemoryKube) -> list[str]:
    return sorted(
        f"{kind}/{name}"
        for (kind, ns, name) in kube.objects
        if ns == NS and name == ROUTER and kind in ROUTER_RESOURCES
    )


def test_the_pass_applies_the_router_and_status_follows_its_deployment() -> None:
    kube = _cluster({"name": "vllm-router", "image": IMAGE})
    pass_ = _reconciler(kube)
    _run(pass_)
    assert _router_objects(kube) == [
        f"Deployment/{ROUTER}",
        f"Role/{ROUTER}",
        f"RoleBinding/{ROUTER}",
        f"Service/{ROUTER}",
        f"ServiceAccount/{ROUTER}",
    ]
    deployment = kube.stored("Deployment", NS, ROUTER)
    assert deployment is not None
    (ref,) = deployment["metadata"]["ownerReferences"]
    md = kube.stored("ModelDeployment", NS, NAME)
    assert md is not None and ref["uid"] == md["metadata"]["uid"]
    ready = _condition(kube, "RouterReady")
    assert (ready["status"], ready["reason"]) == ("False", "NoReadyReplicas")

    deployment["status"] = {"readyReplicas": 1}
    _watch(kube, pass_)
    _run(pass_)
    ready = _condition(kube, "RouterReady")
    assert (ready["status"], ready["reason"]) == ("True", "Ready")
    md = kube.stored("ModelDeployment", NS, NAME)
    assert md is not None
    assert md["status"]["roleSummary"].startswith("1R")
    assert md["status"]["router"]["metrics"] == {"port": 29000}


def test_a_router_object_held_by_another_owner_fails_the_pass_and_is_never_written() -> None:
    kube = _cluster({"name": "vllm-router", "image": IMAGE})
    foreign = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": ROUTER, "namespace": NS, "uid": "other", "resourceVersion": "1"},
        "rules": [],
    }
    kube.objects[("Role", NS, ROUTER)] = copy.deepcopy(foreign)
    with pytest.raises(OwnedConflict, match=f"Role {NS}/{ROUTER} exists"):
        _run(_reconciler(kube))
    assert kube.stored("Role", NS, ROUTER) == foreign
    assert kube.stored("Deployment", NS, ROUTER) is not None


def test_removing_the_router_block_prunes_its_objects() -> None:
    kube = _cluster({"name": "vllm-router", "image": IMAGE})
    pass_ = _reconciler(kube)
    _run(pass_)
    assert len(_router_objects(kube)) == 5
    md = kube.stored("ModelDeployment", NS, NAME)
    assert md is not None
    del md["spec"]["router"]
    md["metadata"]["generation"] += 1
    _watch(kube, pass_)
    _run(pass_)
    assert _router_objects(kube) == []
    ready = _condition(kube, "RouterReady")
    assert (ready["status"], ready["reason"]) == ("True", "NotApplicable")


#: The administrator emptied vllm-router's default image (D26 amended).
NO_DEFAULT_IMAGE = Settings(router_image_vllm_router="")


def test_a_router_without_an_image_is_reported_and_nothing_of_it_applied() -> None:
    kube = _cluster({"name": "vllm-router"})
    pass_ = _reconciler(kube)
    pass_.settings = lambda: NO_DEFAULT_IMAGE
    _run(pass_)
    assert _router_objects(kube) == []
    ready = _condition(kube, "RouterReady")
    assert (ready["status"], ready["reason"]) == ("False", "RenderFailed")
    assert "spec.router.image" in ready["message"]
    assert "model-deployment-router-image-vllm-router" in ready["message"]
    # The engine Pods are there all the same.
    assert kube.of_kind("Pod")


def test_a_router_naming_no_image_runs_the_default_image() -> None:
    kube = _cluster({"name": "vllm-router"})
    _run(_reconciler(kube))
    (deployment,) = kube.of_kind("Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == Settings().router_image_vllm_router


def test_a_router_that_stops_rendering_is_left_running() -> None:
    kube = _cluster({"name": "vllm-router", "image": IMAGE})
    pass_ = _reconciler(kube)
    _run(pass_)
    before = _router_objects(kube)
    md = kube.stored("ModelDeployment", NS, NAME)
    assert md is not None
    del md["spec"]["router"]["image"]
    md["metadata"]["generation"] += 1
    pass_.settings = lambda: NO_DEFAULT_IMAGE
    _watch(kube, pass_)
    _run(pass_)
    assert _router_objects(kube) == before
    ready = _condition(kube, "RouterReady")
    assert (ready["status"], ready["reason"]) == ("False", "RenderFailed")
