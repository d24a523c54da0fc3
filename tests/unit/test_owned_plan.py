"""The one owned-object path (``reconcile/owned.py``): each policy's creates, applies, patches,
prunes and conflicts, from wanted, stored and foreign objects."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gpustack_render.core import labels
from gpustack_render.core.ownerrefs import OwnedConflict
from gpustack_render.reconcile.observed import ObservedPod
from gpustack_render.reconcile.owned import (
    LOCAL_QUEUE_POLICY,
    ROUTER_POLICIES,
    SCALER_POLICY,
    SERVICE_POLICY,
    OwnedPlan,
    OwnedPolicy,
    Owner,
    PassFacts,
    plan_owned,
)

NS = "team-a"
OWNER = Owner(NS, "chat", "uid-chat")
MANAGER = "gpustack-controller"
NO_FACTS = PassFacts()


def _ref(uid: str) -> list[dict[str, Any]]:
    return [{"kind": "ModelDeployment", "name": "x", "uid": uid, "controller": True}]


def service(name: str, *, uid: str | None = "uid-chat", **selector: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": NS}
    if uid is not None:
        meta["ownerReferences"] = _ref(uid)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta,
        "spec": {"selector": dict(selector), "ports": [{"port": 8000}]},
    }


def stored(obj: dict[str, Any], *, manager: str = MANAGER, uid: str = "s-1") -> dict[str, Any]:
    """``obj`` as the API server holds it after an apply by ``manager``: every field stored and
    owned by that manager."""
    out = copy.deepcopy(obj)
    out["metadata"]["uid"] = uid
    selector = (out.get("spec") or {}).get("selector") or {}
    fields: dict[str, Any] = {
        "f:spec": {"f:selector": {f"f:{k}": {} for k in selector}, "f:ports": {}}
    }
    out["metadata"]["managedFields"] = [
        {"manager": manager, "operation": "Apply", "fieldsV1": fields}
    ]
    return out


def _plan(
    policy: OwnedPolicy,
    wanted: list[dict[str, Any]],
    stored_objects: dict[str, dict[str, Any] | None],
    others: list[dict[str, Any]] | None = None,
    facts: PassFacts = NO_FACTS,
) -> OwnedPlan:
    return plan_owned(
        policy,
        wanted,
        stored=stored_objects,
        others=others or [],
        owner=OWNER,
        manager=MANAGER,
        facts=facts,
    )


def _names(objs: tuple[dict[str, Any], ...]) -> list[str]:
    return [o["metadata"]["name"] for o in objs]


def test_apply_kinds_write_only_what_is_not_aligned() -> None:
    aligned = service("chat", app="x")
    moved = service("chat-server", app="x")
    new = service("chat-new", app="x")
    before = {"chat": stored(aligned), "chat-server": stored(service("chat-server", app="old"))}
    plan = _plan(SERVICE_POLICY, [aligned, moved, new], {**before, "chat-new": None})
    assert _names(plan.applies) == ["chat-server", "chat-new"]
    assert plan.creates == () and plan.prunes == () and plan.conflicts == ()
    # A field the manager owns that the rendering dropped is not aligned either.
    narrowed = service("chat")
    plan = _plan(SERVICE_POLICY, [narrowed], {"chat": stored(aligned)})
    assert _names(plan.applies) == ["chat"]


def test_a_name_held_by_another_owner_is_a_conflict_never_written() -> None:
    theirs = stored(service("chat", uid="someone-else", app="x"))
    for policy in (SERVICE_POLICY, ROUTER_POLICIES["Service"], SCALER_POLICY):
        wanted = {**service("chat", app="x"), "kind": policy.kind}
        plan = _plan(policy, [wanted], {"chat": {**theirs, "kind": policy.kind}})
        assert plan.writes == 0
        (conflict,) = plan.conflicts
        assert isinstance(conflict, OwnedConflict)
        assert (conflict.kind, conflict.namespace, conflict.name) == (policy.kind, NS, "chat")
        assert "is not owned by ModelDeployment team-a/chat" in str(conflict)


def test_prune_only_what_the_owner_controls_in_its_namespace() -> None:
    ours = stored(service("chat-gone", app="x"), uid="u-gone")
    theirs = stored(service("chat-theirs", uid="other", app="x"))
    elsewhere = stored(service("chat-else", app="x"))
    elsewhere["metadata"]["namespace"] = "team-b"
    unowned = stored(service("chat-plain", uid=None, app="x"))
    plan = _plan(SERVICE_POLICY, [], {}, [ours, theirs, elsewhere, unowned])
    assert plan.prunes == (("chat-gone", "u-gone"),)


def test_an_instance_service_stays_while_a_pod_of_its_ordinal_remains() -> None:
    selector = {labels.COMPONENT: "big", labels.POD_ORDINAL: "1"}
    instance = stored(service("chat-big-r1", **selector), uid="u-r1")
    pod = ObservedPod(name="chat-big-r1-m0", uid="p", role="big", ordinal=1, member=0, owned=True)
    kept = _plan(SERVICE_POLICY, [], {}, [instance], PassFacts(pods=(pod,)))
    assert kept.prunes == ()
    gone = _plan(SERVICE_POLICY, [], {}, [instance], PassFacts(pods=()))
    assert gone.prunes == (("chat-big-r1", "u-r1"),)
    # The router's objects have no such guard.
    router = _plan(ROUTER_POLICIES["Service"], [], {}, [instance], PassFacts(pods=(pod,)))
    assert router.prunes == (("chat-big-r1", "u-r1"),)


def local_queue(name: str, cluster_queue: str) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"clusterQueue": cluster_queue},
    }


def test_local_queues_are_created_never_written_pruned_or_adopted() -> None:
    wanted = [local_queue("a", "a"), local_queue("b", "b"), local_queue("c", "c")]
    before: dict[str, dict[str, Any] | None] = {
        "a": None,
        "b": local_queue("b", "b"),
        "c": local_queue("c", "someone-elses"),
    }
    plan = _plan(LOCAL_QUEUE_POLICY, wanted, before, [local_queue("old", "old")])
    assert _names(plan.creates) == ["a"]
    assert plan.applies == () and plan.patches == () and plan.prunes == ()
    (conflict,) = plan.conflicts
    assert conflict.name == "c"
    assert "feeds ClusterQueue someone-elses, not c" in conflict.message


def scaler(name: str, *, replicas: int = 1, maximum: int = 4, owner: str = "uid-chat") -> Any:
    return {
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "ModelDeploymentScaler",
        "metadata": {"name": name, "namespace": NS, "ownerReferences": _ref(owner), "uid": "u"},
        "spec": {"replicas": replicas, "minReplicas": 1, "maxReplicas": maximum, "role": "r"},
    }


def test_scalers_keep_their_fields_and_never_replicas() -> None:
    rendered = scaler("chat-r", replicas=1, maximum=8)
    held = scaler("chat-r", replicas=6, maximum=4)
    plan = _plan(SCALER_POLICY, [rendered], {"chat-r": held, "chat-old": scaler("chat-old")})
    assert plan.patches == (("chat-r", {"spec": {"maxReplicas": 8}}),)
    assert plan.prunes == (("chat-old", "u"),)
    assert plan.creates == () and plan.applies == ()
    # In line (replicas differ: the autoscaler's): nothing to write.
    same = _plan(SCALER_POLICY, [rendered], {"chat-r": scaler("chat-r", replicas=6, maximum=8)})
    assert same.writes == 0
    # Missing: created as rendered.
    fresh = _plan(SCALER_POLICY, [rendered], {"chat-r": None})
    assert _names(fresh.creates) == ["chat-r"]


@pytest.mark.parametrize("policy", [SERVICE_POLICY, LOCAL_QUEUE_POLICY, SCALER_POLICY])
def test_an_object_is_in_at_most_one_list(policy: OwnedPolicy) -> None:
    wanted = [{**service(f"n{i}", app="x"), "kind": policy.kind} for i in range(3)]
    plan = _plan(policy, wanted, {"n0": None, "n1": stored(wanted[1])})
    names = [
        *_names(plan.creates),
        *_names(plan.applies),
        *(n for n, _ in plan.patches),
        *(c.name for c in plan.conflicts),
    ]
    assert len(names) == len(set(names))
