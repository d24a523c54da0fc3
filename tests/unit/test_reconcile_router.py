"""The router's writes of a pass (the owned-object path, ``reconcile/owned.py``, under the router
kinds' policies) and its observation (``reconcile/routerstate.py``), pure."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from gpustack_render.core.ownerrefs import OwnedConflict
from gpustack_render.reconcile.keys import FIELD_MANAGER
from gpustack_render.reconcile.owned import ROUTER_KINDS, ROUTER_POLICIES, Owner, plan_owned
from gpustack_render.reconcile.routerstate import observe_router

UID = "md-uid"


def _obj(kind: str, name: str = "qwen-router", *, owner: str | None = UID) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "team-a", "uid": f"uid-{kind}"}
    if owner is not None:
        meta["ownerReferences"] = [{"uid": owner, "controller": True, "kind": "ModelDeployment"}]
    return {"apiVersion": "v1", "kind": kind, "metadata": meta, "data": {"a": "1"}}


def _applied(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` as stored after our apply: the fields we own recorded for our manager."""
    out = copy.deepcopy(obj)
    out["metadata"]["managedFields"] = [
        {
            "manager": FIELD_MANAGER,
            "operation": "Apply",
            "fieldsV1": {"f:data": {"f:a": {}}, "f:metadata": {"f:ownerReferences": {}}},
        }
    ]
    return out


@dataclass
class _Plans:
    """Every router kind's plan, flattened in apply order."""

    apply: list[dict[str, Any]]
    conflicts: list[OwnedConflict]
    prune: list[tuple[str, str, str]]


def _sync(wanted: list[dict[str, Any]], stored: list[dict[str, Any]]) -> _Plans:
    out = _Plans([], [], [])
    for kind in ROUTER_KINDS:
        mine = [o for o in wanted if o["kind"] == kind]
        stored_of = {o["metadata"]["name"]: o for o in stored if o["kind"] == kind}
        plan = plan_owned(
            ROUTER_POLICIES[kind],
            mine,
            stored={o["metadata"]["name"]: stored_of.get(o["metadata"]["name"]) for o in mine},
            others=[o for o in stored if o["kind"] == kind],
            owner=Owner("team-a", "qwen", UID),
            manager=FIELD_MANAGER,
        )
        out.apply += [*plan.creates, *plan.applies]
        out.conflicts += plan.conflicts
        out.prune += [(kind, name, uid) for name, uid in plan.prunes]
    return out


def test_an_aligned_object_is_not_written_a_changed_one_is() -> None:
    wanted = [_obj("ConfigMap"), _obj("Role")]
    stored = [_applied(_obj("ConfigMap")), _applied(_obj("Role"))]
    stored[1]["data"] = {"a": "2"}
    plan = _sync(wanted, stored)
    assert [o["kind"] for o in plan.apply] == ["Role"]
    assert plan.prune == [] and plan.conflicts == []


def test_an_object_without_our_apply_entry_is_applied() -> None:
    plan = _sync([_obj("ConfigMap")], [_obj("ConfigMap")])
    assert [o["kind"] for o in plan.apply] == ["ConfigMap"]


def test_conflicts_and_prunes() -> None:
    wanted = [_obj("ConfigMap"), _obj("Role")]
    stored = [
        _obj("Role", owner="someone-else"),
        _applied(_obj("Deployment")),  # ours, no longer rendered
        _obj("Service", owner="someone-else"),  # not ours, not rendered: left alone
        {**_obj("InferencePool", "qwen"), "metadata": {**_obj("X")["metadata"], "name": "qwen"}},
    ]
    plan = _sync(wanted, stored)
    assert [o["kind"] for o in plan.apply] == ["ConfigMap"]
    assert [(c.kind, c.name) for c in plan.conflicts] == [("Role", "qwen-router")]
    assert plan.prune == [
        ("Deployment", "qwen-router", "uid-Deployment"),
        ("InferencePool", "qwen", "uid-X"),
    ]


def test_observe_the_router_deployment() -> None:
    assert not observe_router(None, owner_uid=UID).deployed
    foreign = observe_router(_obj("Deployment", owner="x"), owner_uid=UID)
    assert not foreign.deployed and "not owned" in foreign.conflict
    ours = {**_obj("Deployment"), "status": {"readyReplicas": 2}}
    assert observe_router(ours, owner_uid=UID).ready == 2
    assert observe_router(_obj("Deployment"), owner_uid=UID).ready == 0
