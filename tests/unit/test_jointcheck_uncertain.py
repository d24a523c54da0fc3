"""The joint check is never ``Ready`` on uncertainty (docs/contract/controller.md §9): when no
owner Pod of a Workload resolves, or its ModelDeployment is gone, replaced or does not decode,
it looks again later; only a resolved owner that is positively not a ModelDeployment's replica
(or a Workload no Pod owns) gets ``Ready`` with "nothing to wait for"."""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path
from typing import Any, cast

import pytest

from gpustack_controller.admissioncheck import READ_RETRY_SECONDS, AdmissionCheckReconciler
from gpustack_controller.kube import Kube, Resource
from gpustack_controller.watches import Informer
from gpustack_render.cli.yamlio import load_documents
from gpustack_render.reconcile.jointcheck import (
    CHECK_NAME,
    Uncertain,
    resolve_deployment,
    resolve_owner,
)

EXAMPLE = Path(__file__).parents[2] / "examples" / "sglang-pool.yaml"
MD_UID = "md-uid"
NS = "ns"


def md_ref(uid: str = MD_UID) -> dict[str, Any]:
    return {
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "ModelDeployment",
        "name": "chat",
        "uid": uid,
        "controller": True,
    }


def pod(name: str, *, owner: dict[str, Any] | None = None) -> dict[str, Any]:
    refs = [owner] if owner is not None else []
    return {"metadata": {"name": name, "uid": f"uid-{name}", "ownerReferences": refs}}


def workload(*pods: str) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": "wl",
            "namespace": NS,
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Pod", "name": p, "uid": f"uid-{p}"} for p in pods
            ],
        },
        "spec": {"active": True},
        "status": {
            "conditions": [{"type": "QuotaReserved", "status": "True"}],
            "admissionChecks": [{"name": CHECK_NAME, "state": "Pending"}],
        },
    }


def deployment_object() -> dict[str, Any]:
    raw = next(d for d in load_documents(EXAMPLE.read_text()) if d["kind"] == "ModelDeployment")
    raw = copy.deepcopy(raw)
    raw["metadata"].update({"name": "chat", "namespace": NS, "uid": MD_UID})
    return raw


UNDECODABLE = {
    "apiVersion": "worker.gpustack.ai/v1",
    "kind": "ModelDeployment",
    "metadata": {"name": "chat", "namespace": NS, "uid": MD_UID},
    "spec": {"roles": "not a list"},
}


# ---- the pure decisions -------------------------------------------------------------------


def test_no_owner_pod_resolving_is_uncertain() -> None:
    assert isinstance(resolve_owner(workload("a", "b"), [None, None]), Uncertain)


def test_a_resolved_owner_decides() -> None:
    assert resolve_owner(workload("a", "b"), [None, pod("b")]) is None
    assert resolve_owner(workload("a"), [pod("a", owner=md_ref())]) == md_ref()
    assert resolve_owner(workload(), []) is None  # no Pod owns it: not a Pod group at all


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(None, id="not-found"),
        pytest.param({**deployment_object(), "metadata": {"uid": "other"}}, id="replaced"),
        pytest.param(UNDECODABLE, id="undecodable"),
    ],
)
def test_a_deployment_that_cannot_be_read_is_uncertain(raw: dict[str, Any] | None) -> None:
    assert isinstance(resolve_deployment(md_ref(), raw), Uncertain)


def test_a_deployment_that_reads_is_returned() -> None:
    md = resolve_deployment(md_ref(), deployment_object())
    assert not isinstance(md, Uncertain) and md.metadata.name == "chat"


# ---- the shell: no verdict is written on uncertainty ---------------------------------------


class FakeKube:
    def __init__(self, objects: dict[tuple[str, str], dict[str, Any]]) -> None:
        self.objects = objects
        self.applied: list[dict[str, Any]] = []

    async def get(self, resource: Resource, name: str, namespace: str | None = None) -> Any:
        return copy.deepcopy(self.objects.get((resource.kind, name)))

    async def list(self, resource: Resource, namespace: str | None = None, **_: Any) -> Any:
        return [copy.deepcopy(o) for (k, _n), o in self.objects.items() if k == resource.kind], ""

    async def apply(self, resource: Resource, body: dict[str, Any], **_: Any) -> dict[str, Any]:
        self.applied.append(body)
        return body

    async def merge_patch(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return {}


class NoCache:
    def get(self, key: str) -> None:
        return None


def run_check(objects: dict[tuple[str, str], dict[str, Any]]) -> tuple[float | None, FakeKube]:
    fake = FakeKube({("Workload", "wl"): objects.pop(("Workload", "wl")), **objects})
    check = AdmissionCheckReconciler(cast(Kube, fake), cast(Informer, NoCache()))
    return asyncio.run(check(f"{NS}/wl")), fake


@pytest.mark.parametrize(
    "objects",
    [
        pytest.param({("Workload", "wl"): workload("a", "b")}, id="owner-pods-404"),
        pytest.param(
            {
                ("Workload", "wl"): workload("a"),
                ("Pod", "a"): pod("a", owner=md_ref()),
                ("ModelDeployment", "chat"): UNDECODABLE,
            },
            id="deployment-does-not-decode",
        ),
        pytest.param(
            {("Workload", "wl"): workload("a"), ("Pod", "a"): pod("a", owner=md_ref())},
            id="deployment-404",
        ),
    ],
)
def test_uncertainty_writes_no_verdict_and_looks_again(
    objects: dict[tuple[str, str], dict[str, Any]],
) -> None:
    after, fake = run_check(objects)
    assert after == READ_RETRY_SECONDS
    assert fake.applied == []


def test_a_resolved_owner_that_is_no_replica_is_ready() -> None:
    after, fake = run_check({("Workload", "wl"): workload("a"), ("Pod", "a"): pod("a")})
    assert after is None
    [entry] = [e for body in fake.applied for e in body["status"]["admissionChecks"]]
    assert entry["state"] == "Ready" and "nothing to wait for" in entry["message"]
