"""Explain against observed state: the next pass, the timeline to completion, and why each
replica that is not serving is held (docs/explain.md, "Observed state").

:func:`split_observed` sorts what ``kubectl get pods,workloads.kueue.x-k8s.io,services -l
app.kubernetes.io/instance=NAME -o yaml`` prints (plus ClusterQueues and LocalQueues) by kind.
:func:`explain_observed` reads the Pods and Workloads the way the controller's pass does
(``observe_pod`` with the deployment's uid, the Workloads owning one of them or named after one
of its groups), runs the real rollout planner on them with the replacement the stored status
remembers and the LocalQueues given that feed another ClusterQueue (their roles get no Pod),
simulates the passes to completion (:mod:`gpustack_render.explain.timeline`), and
reads each non-serving replica's reason chain and the upgrade impact
(:mod:`gpustack_render.explain.reasons`). :func:`observed_to_json` is the stable JSON shape
(:data:`OBSERVED_JSON_SCHEMA`), :func:`observed_text` the terminal table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from gpustack_render.api import ModelDeployment
from gpustack_render.core import jsonview, labels
from gpustack_render.core.ownerrefs import OwnedConflict
from gpustack_render.core.paths import FieldPath
from gpustack_render.core.settings import Settings
from gpustack_render.explain.columns import table
from gpustack_render.explain.reasons import (
    REASON_KINDS,
    STAYS,
    WILL_ROLL,
    Impact,
    Queues,
    ReplicaReasons,
    replica_reasons,
    upgrade_impact,
)
from gpustack_render.explain.timeline import (
    WAIT_KINDS,
    Creation,
    Deletion,
    RoleCount,
    Step,
    Timeline,
    serving_counts,
    simulate,
)
from gpustack_render.reconcile.jointcheck import joint_deployment
from gpustack_render.reconcile.observed import (
    ObservedPod,
    ObservedWorkload,
    observe_pod,
    observe_workload,
)
from gpustack_render.reconcile.queues import queue_conflict
from gpustack_render.reconcile.replicas import ReplicaIndex
from gpustack_render.reconcile.rolloutinputs import (
    cache_hold,
    desired_from_rendering,
    remembered_replacing,
)
from gpustack_render.rendering.renderer import Rendering
from gpustack_render.schema.kinds import KUEUE_API_VERSION

__all__ = [
    "OBSERVED_JSON_SCHEMA",
    "ObservedReport",
    "ObservedState",
    "explain_observed",
    "observed_text",
    "observed_to_json",
    "split_observed",
]

#: The API group of Kueue's kinds (any served version is read).
_KUEUE_GROUP = KUEUE_API_VERSION.partition("/")[0]
#: Passes simulated per declared replica before the timeline is called unsettled (a replica
#: takes two passes to roll: delete, then create).
PASSES_PER_REPLICA = 4


@dataclass(frozen=True, slots=True)
class ObservedState:
    """What ``--observed`` gave: the raw objects of a ``kubectl get … -o yaml`` List, sorted by
    kind (Pods, Kueue Workloads, Services, ClusterQueues, LocalQueues); anything else ignored."""

    pods: tuple[Mapping[str, Any], ...] = ()
    workloads: tuple[Mapping[str, Any], ...] = ()
    services: tuple[Mapping[str, Any], ...] = ()
    cluster_queues: tuple[Mapping[str, Any], ...] = ()
    local_queues: tuple[Mapping[str, Any], ...] = ()
    #: Objects of other kinds, by "kind/name", reported and otherwise ignored.
    ignored: tuple[str, ...] = ()
    #: Items that are not readable objects, skipped: "<where>: <what is wrong>".
    malformed: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ObservedReport:
    """The observed-state part of an explanation."""

    #: How many replicas the passes to completion replace (for ``--max-replaced``).
    replaced: int = 0
    #: Whether any replica rolls (for ``--fail-on roll``).
    rolls: bool = False
    #: ``namespace/name`` of the deployment explained.
    deployment: str = ""
    #: Objects read: Pods, Workloads and Services this deployment's pass reads.
    pods: int = 0
    workloads: int = 0
    services: int = 0
    ignored: tuple[str, ...] = ()
    malformed: tuple[str, ...] = ()
    #: Serving replicas per role in the observed state.
    serving: tuple[RoleCount, ...] = ()
    #: The passes, the first being the next pass the controller makes.
    timeline: tuple[Step, ...] = ()
    converged: bool = True
    #: Why the passes stop short of completion ("" when they converge).
    stuck: str = ""
    not_serving: tuple[ReplicaReasons, ...] = ()
    upgrade: tuple[Impact, ...] = ()

    @property
    def next_pass(self) -> Step | None:
        """What the controller does next."""
        return self.timeline[0] if self.timeline else None


# --- sorting the input ------------------------------------------------------------------------


_BUCKETS = {
    ("", "Pod"): "pods",
    ("", "Service"): "services",
    (_KUEUE_GROUP, "Workload"): "workloads",
    (_KUEUE_GROUP, "ClusterQueue"): "cluster_queues",
    (_KUEUE_GROUP, "LocalQueue"): "local_queues",
}
#: Lists nest at most this deep (a List of Lists is what several ``kubectl get`` calls give).
_MAX_LIST_DEPTH = 4


def split_observed(documents: Sequence[Mapping[str, Any]]) -> ObservedState:
    """Sort a List's items (or a stream of documents, or several Lists) by kind. An item that
    is not an object, has no kind or no ``metadata.name`` is skipped and named in
    ``malformed``; an empty document is skipped silently."""
    buckets: dict[str, list[Mapping[str, Any]]] = {b: [] for b in _BUCKETS.values()}
    ignored: list[str] = []
    malformed: list[str] = []
    root = FieldPath.root("documents")
    stack: list[tuple[FieldPath, object, int]] = [
        (root.index(i), doc, 0) for i, doc in enumerate(documents)
    ]
    stack.reverse()
    while stack:
        where, obj, depth = stack.pop()
        if obj is None:
            continue
        if not isinstance(obj, Mapping):
            malformed.append(f"{where}: not an object")
            continue
        kind = obj.get("kind")
        api_version = obj.get("apiVersion")
        if not isinstance(kind, str) or not kind:
            malformed.append(f"{where}: no kind")
            continue
        if kind == "List" or (kind.endswith("List") and "items" in obj):
            items = obj.get("items")
            if items is None:
                continue
            if not isinstance(items, list) or depth >= _MAX_LIST_DEPTH:
                malformed.append(f"{where.child('items')}: not a list of objects")
                continue
            base = where.child("items")
            stack.extend(
                (base.index(j), item, depth + 1) for j, item in reversed(list(enumerate(items)))
            )
            continue
        meta = obj.get("metadata")
        name = meta.get("name") if isinstance(meta, Mapping) else None
        if not isinstance(name, str) or not name:
            malformed.append(f"{where} ({kind}): {where.child('metadata', 'name')} is missing")
            continue
        group = (
            api_version.partition("/")[0]
            if isinstance(api_version, str) and "/" in api_version
            else ""
        )
        bucket = _BUCKETS.get((group, kind))
        if bucket is None:
            ignored.append(f"{kind}/{name}")
        else:
            buckets[bucket].append(obj)
    return ObservedState(
        pods=tuple(buckets["pods"]),
        workloads=tuple(buckets["workloads"]),
        services=tuple(buckets["services"]),
        cluster_queues=tuple(buckets["cluster_queues"]),
        local_queues=tuple(buckets["local_queues"]),
        ignored=tuple(ignored),
        malformed=tuple(malformed),
    )


# --- the explanation --------------------------------------------------------------------------


def _in_namespace(obj: Mapping[str, Any], namespace: str) -> bool:
    ns = jsonview.view(obj.get("metadata")).get("namespace")
    return not (isinstance(ns, str) and ns and namespace and ns != namespace)


def _selected(obj: Mapping[str, Any], selector: Mapping[str, str], namespace: str) -> bool:
    own = jsonview.strings(jsonview.view(obj.get("metadata")).get("labels"))
    return _in_namespace(obj, namespace) and all(own.get(k) == v for k, v in selector.items())


def _with_uid(pod: ObservedPod) -> ObservedPod:
    # The planner keys deletions and Workload ownership by uid; a hand-written Pod without one
    # still needs an identity of its own.
    return pod if pod.uid else replace(pod, uid=f"(no uid) {pod.name}")


def deployment_objects(
    md: ModelDeployment, rendering: Rendering, observed: ObservedState, *, owner_uid: str
) -> tuple[
    list[Mapping[str, Any]], list[ObservedPod], list[Mapping[str, Any]], list[ObservedWorkload]
]:
    """The deployment's Pods (by its label selector, in its namespace) and the Workloads the
    controller's pass reads for it (owning one of those Pods or named after one of its groups),
    each raw and observed."""
    namespace = md.metadata.namespace or ""
    selector = labels.deployment_selector(md.metadata.name)
    raw_pods = [p for p in observed.pods if _selected(p, selector, namespace)]
    pods = [_with_uid(observe_pod(p, owner_uid=owner_uid)) for p in raw_pods]
    groups = desired_from_rendering(rendering).groups
    uids = {p.uid for p in pods}
    raw_workloads: list[Mapping[str, Any]] = []
    workloads: list[ObservedWorkload] = []
    for obj in observed.workloads:
        if not _in_namespace(obj, namespace):
            continue
        wl = observe_workload(obj)
        if wl.of_deployment(pod_uids=uids, groups=groups):
            raw_workloads.append(obj)
            workloads.append(wl)
    return raw_pods, pods, raw_workloads, workloads


def explain_observed(
    md: ModelDeployment,
    rendering: Rendering,
    observed: ObservedState,
    *,
    settings: Settings,
    stored: ModelDeployment | None = None,
    refused: Sequence[str] = (),
    now: datetime | None = None,
) -> ObservedReport:
    """Run the real planner on the observed Pods and Workloads: next pass, timeline, reasons,
    upgrade impact.

    ``md`` and ``rendering`` are what the controller will reconcile (the edit when one is
    explained). ``stored`` is the object on the cluster: its status (the remembered replacement,
    ``status.kvCache``) and uid are what the controller's pass reads, since an edit never
    changes status; without it ``md``'s own are used. ``refused`` are the admission causes
    of a refused edit: the controller then keeps reconciling the stored object, so pass that
    object and its rendering as ``md`` and ``rendering``; the causes head every non-serving
    replica's reasons. ``now``
    lets the joint check predict parking; without it parking is only read from the observed
    Workloads.
    """
    status = stored.status if stored is not None else md.status
    current = md if status is md.status else md.model_copy(update={"status": status})
    owner_uid = md.metadata.uid or (stored.metadata.uid if stored is not None else "") or ""
    namespace = md.metadata.namespace or ""
    selector = labels.deployment_selector(md.metadata.name)
    raw_pods, pods, raw_workloads, workloads = deployment_objects(
        md, rendering, observed, owner_uid=owner_uid
    )
    desired = desired_from_rendering(rendering)
    services = [s for s in observed.services if _selected(s, selector, namespace)]
    index = ReplicaIndex.of(pods, workloads)
    replacing = remembered_replacing(current)
    queues = Queues(
        local={_name(q): q for q in observed.local_queues if _in_namespace(q, namespace)},
        cluster={_name(q): q for q in observed.cluster_queues},
        listed_local=bool(observed.local_queues),
    )
    conflicts = _queue_conflicts(rendering, queues)
    total = sum(r.replicas for r in desired.roles) + len({(p.role, p.ordinal) for p in pods})
    timeline: Timeline = simulate(
        desired,
        rendering,
        pods=pods,
        workloads=workloads,
        replacing=replacing,
        cache_hold=cache_hold(current, rendering.cache),
        max_passes=PASSES_PER_REPLICA * max(1, total) + PASSES_PER_REPLICA,
        queue_conflicts=conflicts,
    )
    joint = None
    if len(current.spec.roles) > 1:
        # The joint check reads the deployment exactly as the controller's check does.
        joint = joint_deployment(current, pods=raw_pods, workloads=raw_workloads)
        joint = replace(joint, pods=[_with_uid(p) for p in joint.pods])
    assert timeline.first is not None  # max_passes ≥ 1
    reasons = replica_reasons(
        desired,
        index,
        timeline.first,
        joint=joint,
        queues=queues,
        refused=refused,
        park_after=settings.park_after_seconds,
        now=now,
        queue_conflicts=conflicts,
    )
    impact = upgrade_impact(desired, index)
    return ObservedReport(
        replaced=timeline.replaced,
        rolls=timeline.rolled > 0 or any(i.verdict == WILL_ROLL for i in impact),
        deployment=f"{namespace}/{md.metadata.name}",
        pods=len(pods),
        workloads=len(workloads),
        services=len(services),
        ignored=observed.ignored,
        malformed=observed.malformed,
        serving=serving_counts(desired, index),
        timeline=timeline.steps,
        converged=timeline.converged,
        stuck=timeline.stuck,
        not_serving=reasons,
        upgrade=impact,
    )


def _name(obj: Mapping[str, Any]) -> str:
    return str(jsonview.view(obj.get("metadata")).get("name") or "")


def _queue_conflicts(rendering: Rendering, queues: Queues) -> dict[str, OwnedConflict]:
    """The rendered LocalQueues the observed state holds pointing at another ClusterQueue, by
    name, as the controller's pass finds them (a queue not given is not known to conflict)."""
    out: dict[str, OwnedConflict] = {}
    for wanted in rendering.local_queues:
        stored = queues.local.get(_name(wanted))
        conflict = queue_conflict(wanted, stored) if stored is not None else None
        if conflict is not None:
            out[conflict.name] = conflict
    return out


# --- JSON -------------------------------------------------------------------------------------


def _counts(counts: Sequence[RoleCount]) -> list[dict[str, Any]]:
    return [{"role": c.role, "serving": c.serving, "desired": c.desired} for c in counts]


def _deletion(d: Deletion) -> dict[str, Any]:
    return {"role": d.role, "ordinal": d.ordinal, "why": d.why, "pods": list(d.pods)}


def _creation(c: Creation) -> dict[str, Any]:
    return {"role": c.role, "ordinal": c.ordinal, "pods": list(c.pods)}


def _step_json(step: Step) -> dict[str, Any]:
    return {
        "pass": step.number,
        "delete": [_deletion(d) for d in step.deletes],
        "deleteWorkloads": list(step.delete_workloads),
        "create": [_creation(c) for c in step.creates],
        "wait": [
            {"role": w.role, "ordinal": w.ordinal, "on": w.on, "message": w.message}
            for w in step.waits
        ],
        "replacing": [{"role": r, "ordinal": o} for r, o in (step.replacing or {}).items()],
        "minServing": _counts(step.min_serving),
    }


def observed_to_json(report: ObservedReport) -> dict[str, Any]:
    """The ``observed`` key of ``explain -o json`` (schema: ``OBSERVED_JSON_SCHEMA``)."""
    return {
        "deployment": report.deployment,
        "objects": {
            "pods": report.pods,
            "workloads": report.workloads,
            "services": report.services,
            "ignored": list(report.ignored),
            "malformed": list(report.malformed),
        },
        "serving": _counts(report.serving),
        "nextPass": _step_json(report.next_pass) if report.next_pass is not None else None,
        "timeline": [_step_json(s) for s in report.timeline],
        "converged": report.converged,
        "stuck": report.stuck,
        "notServing": [
            {
                "role": r.role,
                "ordinal": r.ordinal,
                "reasons": [{"kind": x.kind, "message": x.message} for x in r.reasons],
            }
            for r in report.not_serving
        ],
        "upgrade": [
            {
                "role": i.role,
                "ordinal": i.ordinal,
                "verdict": i.verdict,
                "reason": i.reason,
                "pods": list(i.pods),
                "renderVersion": i.render_version,
                "hashMatches": i.hash_matches,
            }
            for i in report.upgrade
        ],
        "replaced": report.replaced,
        "rolls": report.rolls,
    }


def _object(properties: Mapping[str, Any]) -> dict[str, Any]:
    """A closed object schema: every property required, nothing else allowed."""
    return {
        "type": "object",
        "properties": dict(properties),
        "required": list(properties),
        "additionalProperties": False,
    }


def _array(items: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": "array", "items": dict(items)}


_STRING: dict[str, Any] = {"type": "string"}
_COUNT: dict[str, Any] = {"type": "integer", "minimum": 0}
_ORDINAL_OR_NULL: dict[str, Any] = {"type": ["integer", "null"], "minimum": 0}
_STRINGS = _array(_STRING)
_ROLE_COUNTS = _array(_object({"role": _STRING, "serving": _COUNT, "desired": _COUNT}))
_STEP = _object(
    {
        "pass": {"type": "integer", "minimum": 1},
        "delete": _array(
            _object(
                {"role": _STRING, "ordinal": _ORDINAL_OR_NULL, "why": _STRING, "pods": _STRINGS}
            )
        ),
        "deleteWorkloads": _STRINGS,
        "create": _array(_object({"role": _STRING, "ordinal": _COUNT, "pods": _STRINGS})),
        "wait": _array(
            _object(
                {
                    "role": _STRING,
                    "ordinal": _ORDINAL_OR_NULL,
                    "on": {"enum": list(WAIT_KINDS)},
                    "message": _STRING,
                }
            )
        ),
        "replacing": _array(_object({"role": _STRING, "ordinal": _ORDINAL_OR_NULL})),
        "minServing": _ROLE_COUNTS,
    }
)

#: JSON Schema (draft 2020-12) of ``observed_to_json``'s output, embedded by the explain schema.
#: Self-contained (no ``$ref``) and its own resource (``$id``), so it embeds anywhere.
OBSERVED_JSON_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "urn:gpustack-render:explain:observed",
    "title": "gpustack-render explain: observed state",
    **_object(
        {
            "deployment": _STRING,
            "objects": _object(
                {
                    "pods": _COUNT,
                    "workloads": _COUNT,
                    "services": _COUNT,
                    "ignored": _STRINGS,
                    "malformed": _STRINGS,
                }
            ),
            "serving": _ROLE_COUNTS,
            "nextPass": {"anyOf": [_STEP, {"type": "null"}]},
            "timeline": _array(_STEP),
            "converged": {"type": "boolean"},
            "stuck": _STRING,
            "notServing": _array(
                _object(
                    {
                        "role": _STRING,
                        "ordinal": _COUNT,
                        "reasons": _array(
                            _object({"kind": {"enum": list(REASON_KINDS)}, "message": _STRING})
                        ),
                    }
                )
            ),
            "upgrade": _array(
                _object(
                    {
                        "role": _STRING,
                        "ordinal": _COUNT,
                        "verdict": {"enum": [WILL_ROLL, STAYS]},
                        "reason": _STRING,
                        "pods": _STRINGS,
                        "renderVersion": _COUNT,
                        "hashMatches": {"type": "boolean"},
                    }
                )
            ),
            "replaced": _COUNT,
            "rolls": {"type": "boolean"},
        }
    ),
}


# --- text -------------------------------------------------------------------------------------


def _seat(role: str, ordinal: int | None) -> str:
    return role if ordinal is None else f"{role}/{ordinal}"


def _serving_text(counts: Sequence[RoleCount]) -> str:
    return "  ".join(f"{c.role} {c.serving}/{c.desired}" for c in counts)


def _actions(step: Step) -> str:
    parts = [f"delete {_seat(d.role, d.ordinal)} ({d.why})" for d in step.deletes]
    parts += [f"create {_seat(c.role, c.ordinal)}" for c in step.creates]
    if not parts and step.delete_workloads:
        parts.append(f"delete {len(step.delete_workloads)} Workload(s)")
    if not parts:
        parts = [f"wait {_seat(w.role, w.ordinal)} ({w.on})" for w in step.waits] or ["-"]
    return ", ".join(parts)


def observed_text(report: ObservedReport) -> list[str]:
    """The lines ``explain -o text`` prints for the observed state (compact tables)."""
    lines = [
        f"observed {report.deployment}: {report.pods} Pod(s), {report.workloads} Workload(s), "
        f"{report.services} Service(s)"
    ]
    lines += [f"  ignored {name}" for name in report.ignored]
    lines += [f"  malformed {what}" for what in report.malformed]
    lines.append(f"serving now: {_serving_text(report.serving)}")
    step = report.next_pass
    if step is not None:
        lines.append("next pass:")
        rows = [
            ["delete", _seat(d.role, d.ordinal), d.why, ", ".join(d.pods)] for d in step.deletes
        ]
        if step.delete_workloads:
            rows.append(["delete", "Workloads", "", ", ".join(step.delete_workloads)])
        rows += [["create", _seat(c.role, c.ordinal), "", ", ".join(c.pods)] for c in step.creates]
        rows += [["wait", _seat(w.role, w.ordinal), w.on, w.message] for w in step.waits]
        lines += table(rows, indent="  ") or ["  nothing to do"]
    outcome = "converged" if report.converged else f"stops short: {report.stuck}"
    lines.append(f"timeline ({len(report.timeline)} pass(es), {outcome}):")
    rows = [["PASS", "ACTIONS", "MIN SERVING"]]
    rows += [[str(s.number), _actions(s), _serving_text(s.min_serving)] for s in report.timeline]
    lines += table(rows, indent="  ")
    if report.not_serving:
        lines.append("not serving:")
        rows = []
        for replica in report.not_serving:
            seat = _seat(replica.role, replica.ordinal)
            for i, reason in enumerate(replica.reasons):
                rows.append([seat if i == 0 else "", reason.kind, reason.message])
        lines += table(rows, indent="  ")
    if report.upgrade:
        lines.append("upgrade impact:")
        lines += table(
            [[_seat(i.role, i.ordinal), i.verdict, i.reason] for i in report.upgrade], indent="  "
        )
    lines.append(
        f"replaced: {report.replaced} replica(s); rolls: {'yes' if report.rolls else 'no'}"
    )
    return lines
