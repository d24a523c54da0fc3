"""Builders for the Elastic EP width-change tests: members, Workloads, Ray answers, engine
answers, a world, and a record store that writes the way the controller does (through the record
policy of the owned-object path, compare-and-swap), so a test can stop "the controller" between
any two steps and start it again from what was stored."""

from __future__ import annotations

import copy
import itertools
import json
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from gpustack_render.core import labels
from gpustack_render.core.ownerrefs import OwnedConflict
from gpustack_render.elastic.engine import EngineAnswers
from gpustack_render.elastic.layers import Facts, RayNodes, Unread, read_ray_nodes
from gpustack_render.elastic.machine import Action, Decision, World, decide
from gpustack_render.elastic.records import (
    IntentRecord,
    ObservationRecord,
    RecordUnreadable,
    StoredIntent,
    StoredObservation,
    decode_intent,
    decode_observation,
    intent_configmap,
    intent_name,
    observation_configmap,
    observation_name,
)
from gpustack_render.reconcile.observed import (
    ObservedPod,
    ObservedWorkload,
    observe_pod,
    observe_workload,
)
from gpustack_render.reconcile.owned import (
    ELASTIC_RECORD_POLICY,
    Owner,
    plan_owned,
    plan_record_delete,
)

NS = "team-a"
MD = "moe"
MD_UID = "md-uid-1"
OWNER = Owner(NS, MD, MD_UID)
ROLE = f"{MD}-server"
T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
QUEUE = "gpu-pool"
GPU = "nvidia.com/gpu"


def member(ordinal: int, *, node: str = "node-a", uid: str = "", **extra: Any) -> ObservedPod:
    """A live member Pod of the elastic role, read by the real Pod observer."""
    uid = uid or f"pod-{ordinal}"
    obj: dict[str, Any] = {
        "metadata": {
            "name": f"{ROLE}-{ordinal}x",
            "uid": uid,
            "labels": {labels.COMPONENT: ROLE, labels.POD_ORDINAL: str(ordinal)},
            "annotations": {labels.PROMETHEUS_SCRAPE: "true", labels.POD_GROUP_TOTAL_COUNT: "1"},
            "ownerReferences": [{"uid": MD_UID, "controller": True, "kind": "ModelDeployment"}],
        },
        "spec": {"nodeName": node} if node else {},
        "status": {"phase": "Running"},
    }
    pod = observe_pod(obj, owner_uid=MD_UID)
    return replace(pod, **extra) if extra else pod


def head(uid: str = "head-uid") -> ObservedPod:
    return ObservedPod(name=f"{MD}-elastic-head-x", uid=uid, role=f"{MD}-elastic-head", ordinal=0)


def workload(
    pod_uid: str,
    *,
    admitted: bool = True,
    reserved: bool | None = None,
    message: str = "",
    pods: tuple[str, ...] = (),
    pod_sets: list[dict[str, Any]] | None = None,
    assignments: list[dict[str, Any]] | None = None,
    cluster_queue: str | None = QUEUE,
) -> ObservedWorkload:
    """A member's Kueue Workload (v1beta2 JSON), read by the real Workload observer."""
    reserved = admitted if reserved is None else reserved
    conditions = [
        {
            "type": "QuotaReserved",
            "status": "True" if reserved else "False",
            "reason": "QuotaReserved" if reserved else "Pending",
            "message": "" if reserved else message,
        }
    ]
    if admitted:
        conditions.append({"type": "Admitted", "status": "True", "reason": "Admitted"})
    status: dict[str, Any] = {"conditions": conditions}
    if reserved:
        status["admission"] = {
            "podSetAssignments": assignments
            if assignments is not None
            else [{"name": "main", "count": 1, "flavors": {GPU: "default"}}],
        }
        if cluster_queue is not None:
            status["admission"]["clusterQueue"] = cluster_queue
    obj = {
        "metadata": {
            "name": f"wl-{pod_uid}",
            "uid": f"wl-uid-{pod_uid}",
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Pod", "uid": u} for u in (pods or (pod_uid,))
            ],
        },
        "spec": {
            "queueName": QUEUE,
            "podSets": pod_sets if pod_sets is not None else [{"name": "main", "count": 1}],
        },
        "status": status,
    }
    return observe_workload(obj)


def ray_body(uids: list[str], *, dead: tuple[str, ...] = (), head_uid: str = "head-uid") -> str:
    """The head's ``GET /api/v0/nodes`` answer (Ray 2.x shape) with one ALIVE node per uid."""
    rows = [
        {
            "node_id": f"n{i}",
            "node_ip": f"10.0.0.{i}",
            "is_head_node": False,
            "state": "ALIVE",
            "state_message": None,
            "node_name": f"10.0.0.{i}",
            "resources_total": {"CPU": 8.0, "GPU": 1.0},
            "labels": {"gpustack-pod-uid": uid, "ray.io/node-id": f"n{i}"},
        }
        for i, uid in enumerate(uids)
    ]
    rows += [
        {"node_id": f"d-{u}", "state": "DEAD", "labels": {"gpustack-pod-uid": u}} for u in dead
    ]
    rows.append(
        {
            "node_id": "head",
            "is_head_node": True,
            "state": "ALIVE",
            "labels": {"gpustack-pod-uid": head_uid},
        }
    )
    return json.dumps(
        {
            "result": True,
            "msg": "",
            "data": {
                "result": {
                    "total": len(rows),
                    "num_after_truncation": len(rows),
                    "num_filtered": len(rows),
                    "result": rows,
                    "partial_failure_warning": "",
                    "warnings": None,
                }
            },
        }
    )


def ray_of(pods: list[ObservedPod]) -> RayNodes | Unread:
    return read_ray_nodes(200, ray_body([p.uid for p in pods]))


def engine(
    master_uid: str = "pod-0",
    *,
    width: int | None = 2,
    scaling: bool = False,
    served: bool = True,
) -> EngineAnswers:
    """The engine's answers of one pass: idle at ``width`` and every rank serving, by default."""
    if scaling:
        return EngineAnswers(master_uid, True)
    if width is None:
        return EngineAnswers(master_uid, False, bound_problem="the bound probe answered HTTP 503")
    forwards = tuple("" if served else "answered HTTP 503 (scaling)" for _ in range(width))
    return EngineAnswers(
        master_uid, False, bound_before=width, bound_after=width, forwards=forwards
    )


def facts(
    desired: int,
    running: int,
    *,
    admitted: int | None = None,
    joined: int | None = None,
    eng: EngineAnswers | Unread | None = None,
    nodes: dict[str, int] | Unread | None = None,
    uid_prefix: str = "pod-",
) -> Facts:
    """``running`` members (ordinals 0..running-1, uids ``<uid_prefix><ordinal>``), the first
    ``admitted`` admitted (default all), the first ``joined`` in Ray (default all)."""
    pods = [member(o, uid=f"{uid_prefix}{o}") for o in range(running)]
    admitted = running if admitted is None else admitted
    joined = running if joined is None else joined
    workloads = [
        workload(
            p.uid,
            admitted=i < admitted,
            message="couldn't assign flavors to pod set main: insufficient unused quota for "
            f"{GPU} in flavor default, 1 more needed",
        )
        for i, p in enumerate(pods)
    ]
    return Facts(
        desired=desired,
        pods=pods,
        head=head(),
        workloads=workloads,
        nodes={"node-a": 64} if nodes is None else nodes,
        cards_per_member=1,
        card_resource=GPU,
        component=ROLE,
        ray=ray_of(pods[:joined]),
        engine=eng,
    )


@dataclass
class Store:
    """The intent and observation ConfigMaps as the API server would hold them, written only
    the controller's way: the owned-object path's record policy (create when the decision read
    none, replace at the resourceVersion it read, delete with uid and resourceVersion)."""

    objects: dict[str, dict[str, Any]] = field(default_factory=dict)
    _versions: itertools.count[int] = field(default_factory=lambda: itertools.count(100))
    _uids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def _store(self, obj: dict[str, Any]) -> dict[str, Any]:
        obj = copy.deepcopy(obj)
        meta = obj["metadata"]
        meta.setdefault("uid", f"cm-{next(self._uids)}")
        meta["resourceVersion"] = str(next(self._versions))
        self.objects[meta["name"]] = obj
        return copy.deepcopy(obj)

    def write(self, body: dict[str, Any], read: dict[str, Any] | None) -> dict[str, Any]:
        """Plan ``body`` against what the decision ``read`` and carry it out as the API server
        would; a stale read raises :class:`ConflictError`."""
        name = body["metadata"]["name"]
        plan = plan_owned(
            ELASTIC_RECORD_POLICY, [body], stored={name: read}, owner=OWNER, manager="test"
        )
        assert not plan.conflicts, plan.conflicts
        for create in plan.creates:
            if name in self.objects:
                raise ConflictError(f"{name} exists")
            return self._store(create)
        for put in plan.replaces:
            current = self.objects.get(name)
            if current is None:
                raise ConflictError(f"{name} is gone")
            if put["metadata"]["resourceVersion"] != current["metadata"]["resourceVersion"]:
                raise ConflictError(f"{name} changed")
            return self._store({**put, "metadata": {**put["metadata"]}})
        assert read is not None
        return copy.deepcopy(read)  # in line: nothing written

    def delete(self, read: dict[str, Any]) -> None:
        planned = plan_record_delete(ELASTIC_RECORD_POLICY, read, owner=OWNER)
        assert not isinstance(planned, OwnedConflict)
        current = self.objects.get(planned.name)
        if current is None:
            return
        meta = current["metadata"]
        if (meta["uid"], meta["resourceVersion"]) != (planned.uid, planned.resource_version):
            raise ConflictError(f"{planned.name} changed")
        del self.objects[planned.name]

    def intent(self) -> StoredIntent | RecordUnreadable | None:
        obj = self.objects.get(intent_name(MD_UID))
        return decode_intent(obj, owner=OWNER) if obj is not None else None

    def observation(self) -> StoredObservation | RecordUnreadable | None:
        obj = self.objects.get(observation_name(MD_UID))
        return decode_observation(obj, owner=OWNER) if obj is not None else None

    def record(self) -> IntentRecord | None:
        stored = self.intent()
        return stored.record if isinstance(stored, StoredIntent) else None

    def world(self, facts: Facts, *, generation: int = 1) -> World:
        return World(OWNER, generation, facts, self.intent(), self.observation())

    def put_intent(self, record: IntentRecord) -> StoredIntent:
        self._store(intent_configmap(record, OWNER))
        stored = self.intent()
        assert isinstance(stored, StoredIntent)
        return stored

    def put_observation(self, record: ObservationRecord) -> None:
        self._store(observation_configmap(record, OWNER))


class ConflictError(Exception):
    """The API server's 409 on a record write."""


def carry_out(store: Store, decision: Decision) -> dict[str, Any] | None:
    """Write what ``decision`` says (observation first, then the intent record); the intent
    ConfigMap as written (``None``: nothing written or deleted)."""
    if decision.observation is not None:
        obs = store.objects.get(observation_name(MD_UID))
        store.write(observation_configmap(decision.observation, OWNER), obs)
    if decision.action is Action.WRITE:
        read = decision.expected.raw if decision.expected is not None else None
        return store.write(decision.configmap(OWNER), dict(read) if read is not None else None)
    if decision.action is Action.DELETE:
        assert decision.expected is not None
        store.delete(dict(decision.expected.raw))
    return None


def settle(store: Store, f: Facts, now: datetime = T0, *, generation: int = 1) -> list[Decision]:
    """Decide and write until the machine holds, idles, asks the engine or wants a call; every
    decision, in order."""
    out = []
    for _ in range(12):
        decision = decide(store.world(f, generation=generation), now)
        out.append(decision)
        carry_out(store, decision)
        if decision.action not in (Action.WRITE, Action.DELETE) or decision.scale_to:
            return out
    raise AssertionError("the machine did not settle")
