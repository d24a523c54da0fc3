"""``explain``: what creating or editing a ModelDeployment will do, and why
(docs/explain.md).

One pure function over the library's own parts: admission answers whether the API server would
accept the create or update; the renderer says what every Pod becomes and what its
pod-spec-hash is made of; the rollout rules say which replicas are added, removed or replaced.
With the observed state (``observed``) the rollout planner itself runs on the live Pods and
Workloads (``observed.py``). :func:`explanation_json` writes the documented JSON (``schema.py``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Final, Literal

from gpustack_render.admission import review_deployment
from gpustack_render.api.modeldeployment import ModelDeployment
from gpustack_render.core import naming
from gpustack_render.core.errors import RenderError, Verdict
from gpustack_render.core.labels import MIN_RENDER_VERSION
from gpustack_render.core.review import AdmissionRequest
from gpustack_render.core.settings import Settings
from gpustack_render.deployment.scaling import scale_targets
from gpustack_render.explain.create import explain_create, joint_set
from gpustack_render.explain.model import (
    Admission,
    Cause,
    EntranceLoad,
    Explanation,
    JointSet,
    RenderFloor,
    RenderProblem,
    RoleExplanation,
    ScaleQuestion,
)
from gpustack_render.explain.observed import (
    ObservedState,
    deployment_objects,
    explain_observed,
    observed_to_json,
)
from gpustack_render.explain.router import explain_router
from gpustack_render.explain.scaling import explain_scaling
from gpustack_render.explain.update import dropped_fields, explain_update
from gpustack_render.explain.weights import held_note, weights_note
from gpustack_render.reconcile.rolloutinputs import cache_hold
from gpustack_render.reconcile.scaling import resolve_scaling
from gpustack_render.rendering.hashing import CURRENT_RENDER_VERSION
from gpustack_render.rendering.renderer import Rendering, render
from gpustack_render.schema.decoding import decode_deployment
from gpustack_render.schema.lookups import LookupFailed, Lookups
from gpustack_render.weights.delivery import WeightsBlock, weights_of

#: ``schemaVersion`` of :func:`explanation_json`'s output; raised only by an incompatible change.
SCHEMA_VERSION: Final = 1


def _meta(doc: Mapping[str, Any] | None) -> Mapping[str, Any]:
    meta = (doc or {}).get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def updated_identity(new: Mapping[str, Any], old: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """``new`` as the API server stores an update of ``old``: an edited file (from Git, say)
    carries no ``metadata.uid``, but the update keeps the stored object's, and every owner
    reference the renderer writes names it. Without this, each owned object would differ from
    the stored rendering by its owner reference alone and read as changed."""
    uid = _meta(old).get("uid")
    if old is None or not uid or _meta(new).get("uid"):
        return new
    return {**new, "metadata": {**_meta(new), "uid": uid}}


def _admission(verdict: Verdict, operation: Literal["CREATE", "UPDATE"]) -> Admission:
    return Admission(
        operation=operation,
        allowed=verdict.allowed,
        code=verdict.status_code(),
        reason=verdict.status_reason(),
        message="" if verdict.allowed else verdict.status_message(),
        causes=tuple(Cause(e.field, e.type.value, e.origin, e.message()) for e in verdict.errors),
        warnings=tuple(verdict.warnings),
    )


def _status_of(md: ModelDeployment, old: Mapping[str, Any] | None) -> Any:
    """The status the controller would read: the stored object's, else ``md``'s own."""
    stored = _decoded(old) if old is not None else None
    return stored.status if stored is not None else md.status


def running_counts(md: ModelDeployment, stored: ModelDeployment | None = None) -> dict[str, int]:
    """The count of each role the controller would apply: an autoscaled (or held) role runs the
    count the stored object's status remembers, not ``roles[].replicas`` (D27,
    ``reconcile/scaling.resolve_scaling``; ``explain`` reads no scaler)."""
    base = stored if stored is not None else md
    return resolve_scaling(md.model_copy(update={"status": base.status})).counts()


def _render(
    md: ModelDeployment,
    *,
    lookups: Lookups,
    settings: Settings,
    side: Literal["new", "old"],
    stored: ModelDeployment | None = None,
) -> Rendering | RenderProblem:
    try:
        return render(md, lookups=lookups, settings=settings, counts=running_counts(md, stored))
    except RenderError as exc:
        return RenderProblem(side, str(exc), exc.field, exc.origin)


def _weights_block(
    md: ModelDeployment, *, lookups: Lookups, settings: Settings
) -> WeightsBlock | None:
    """The block that kept ``md`` from rendering, if its weights did."""
    try:
        found = weights_of(md, lookups=lookups, settings=settings)
    except LookupFailed:
        return None
    return found if isinstance(found, WeightsBlock) else None


def explain_deployment(
    new: Mapping[str, Any],
    *,
    lookups: Lookups,
    settings: Settings,
    old: Mapping[str, Any] | None = None,
    old_lookups: Lookups | None = None,
    old_settings: Settings | None = None,
    observed: ObservedState | None = None,
    replicas: Sequence[tuple[str, int]] = (),
) -> Explanation:
    """Explain creating ``new`` or, with ``old`` (the stored object), updating it.

    ``lookups`` serve the objects ``new`` names; ``old_lookups`` those the stored object was
    rendered with (an InstanceType before its edit), defaulting to ``lookups``; ``old_settings``
    the Settings it was rendered with (what a Settings change does), defaulting to
    ``settings``. ``observed``
    adds the observed-state part: the planner's next pass on the live Pods and Workloads.
    ``replicas`` asks, per (role or ratio group, count), what that count would need from the
    queue (``--replicas``, :mod:`gpustack_render.explain.scaling`).
    Never raises for bad input: a refusal or a render problem is part of the answer.
    """
    operation: Literal["CREATE", "UPDATE"] = "UPDATE" if old is not None else "CREATE"
    new = updated_identity(new, old)
    meta = _meta(new) or _meta(old)
    namespace = str(meta.get("namespace") or naming.DEFAULT_NAMESPACE)
    name = str(meta.get("name") or "")
    request = AdmissionRequest(
        operation=operation,
        object=dict(new),
        old_object=dict(old) if old is not None else None,
        namespace=namespace,
        name=name,
    )
    verdict = review_deployment(request, lookups=lookups, settings=settings)
    answer = Explanation(namespace=namespace, name=name, admission=_admission(verdict, operation))
    md, _ = decode_deployment(dict(new))
    if md is None or not verdict.allowed:
        answer = replace(answer, notes=(_refused_note(operation),))
        if observed is not None:
            answer = _observed_refused(
                answer, verdict, old, observed, old_lookups or lookups, settings
            )
        return answer
    stored_md = _decoded(old) if old is not None else None
    rendered = _render(md, lookups=lookups, settings=settings, side="new", stored=stored_md)
    if isinstance(rendered, RenderProblem):
        blocked = _weights_block(md, lookups=lookups, settings=settings)
        return replace(
            answer,
            problems=(rendered,),
            notes=(held_note(blocked),) if blocked is not None else (),
        )
    notes: list[str] = []
    if rendered.weights is not None:
        notes.append(weights_note(rendered.weights))
    problems: list[RenderProblem] = []
    previous = _previous(old, lookups=old_lookups or lookups, settings=old_settings or settings)
    old_floor: int | None = None
    roles: tuple[RoleExplanation, ...]
    entrances: tuple[EntranceLoad, ...]
    if isinstance(previous, Rendering):
        stored = _decoded(old) if old is not None else None
        held = stored is not None and cache_hold(stored, rendered.cache)
        roles, entrances = explain_update(previous, rendered, held=held)
        old_floor = previous.floor
        notes.extend(dropped_fields(old or {}, new, old_rendering=previous, new_rendering=rendered))
        notes.extend(_floor_notes(previous.floor, rendered.floor, roles))
    else:
        if isinstance(previous, RenderProblem):
            problems.append(previous)
            notes.append(
                "the stored object cannot be rendered here, so its replicas cannot be compared: "
                "the roles are shown as they would be created, and the gates count every "
                "replica as one that may roll"
            )
        roles, entrances = explain_create(rendered)
    for rc in resolve_scaling(md.model_copy(update={"status": _status_of(md, old)})).roles.values():
        if rc.source == "Held":
            notes.append(
                f"role {rc.role} keeps {rc.count} replica(s), the count its scaler last set: "
                "External was turned off, and the count holds until roles[].replicas is edited "
                f"away from {rc.spec_replicas} (docs/autoscaling.md)"
            )
    targets = scale_targets(md)
    if targets and len(rendered.roles) > 1:
        notes.append(
            "autoscaled ("
            + ", ".join(f"scaler {t.scaler_name(md.metadata.name)}" for t in targets)
            + "): the joint admission check admits the base set together (every replica of a "
            "role its own replicas counts, replica 0 of an External role, the first unit of a "
            "ratio group), and each further replica or unit with the base set only, whatever the "
            "others do (docs/autoscaling.md)"
        )
    answer = replace(
        answer,
        roles=roles,
        entrances=entrances,
        joint=joint_set(rendered, previous=previous if isinstance(previous, Rendering) else None),
        router=explain_router(previous if isinstance(previous, Rendering) else None, rendered),
        render_version=RenderFloor(
            current=CURRENT_RENDER_VERSION,
            floor=rendered.floor,
            old_floor=old_floor,
            requested=md.metadata.annotations.get(MIN_RENDER_VERSION)
            if md.metadata.annotations
            else None,
        ),
        problems=tuple(problems),
        notes=tuple(notes),
    )
    if observed is not None:
        # The stored object carries what the controller remembers (status.roles[].replacing,
        # the cache status, the uid that owns the Pods); without --old the object explained is
        # the stored one ("why is it stuck").
        stored = _decoded(old) if old is not None else md
        answer = replace(
            answer,
            observed=explain_observed(md, rendered, observed, settings=settings, stored=stored),
        )
    if replicas:
        answer = replace(
            answer,
            scaling=_scaling(
                md,
                rendered,
                replicas,
                lookups=lookups,
                settings=settings,
                cluster_queues=(
                    {_name_of(q): q for q in observed.cluster_queues}
                    if observed is not None
                    else None
                ),
                workloads=(
                    deployment_objects(md, rendered, observed, owner_uid=md.metadata.uid or "")[2]
                    if observed is not None
                    else ()
                ),
            ),
        )
    return answer


def _name_of(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    return str(meta.get("name") or "") if isinstance(meta, Mapping) else ""


def _scaling(
    md: ModelDeployment,
    rendered: Rendering,
    replicas: Sequence[tuple[str, int]],
    *,
    lookups: Lookups,
    settings: Settings,
    cluster_queues: Mapping[str, Mapping[str, Any]] | None = None,
    workloads: Sequence[Mapping[str, Any]] = (),
) -> tuple[ScaleQuestion, ...]:
    """The ``--replicas`` answers; what one replica requests is read off a rendering with at
    least one replica of every role (a role scaled to zero renders none). ``cluster_queues``:
    the ClusterQueues observed (live mode, ``--observed``), else ``None``; ``workloads`` the
    deployment's observed Workloads."""
    counts = {r.name: max(1, r.replicas) for r in rendered.roles}
    probe = render(md, lookups=lookups, settings=settings, counts=counts)
    return explain_scaling(
        md, rendered, replicas, probe=probe, cluster_queues=cluster_queues, workloads=workloads
    )


def _decoded(obj: Mapping[str, Any]) -> ModelDeployment | None:
    md, _ = decode_deployment(dict(obj))
    return md


def _observed_refused(
    answer: Explanation,
    verdict: Verdict,
    old: Mapping[str, Any] | None,
    observed: ObservedState,
    lookups: Lookups,
    settings: Settings,
) -> Explanation:
    """A refused edit changes nothing: the observed replicas go on as the stored object says,
    each carrying the refusal first in its reason chain."""
    stored = _decoded(old) if old is not None else None
    if stored is None:
        return answer
    try:
        rendering = render(stored, lookups=lookups, settings=settings)
    except RenderError:
        return answer
    causes = tuple(e.message() for e in verdict.errors) or (verdict.status_message(),)
    report = explain_observed(
        stored, rendering, observed, settings=settings, stored=stored, refused=causes
    )
    return replace(answer, observed=report)


def _previous(
    old: Mapping[str, Any] | None, *, lookups: Lookups, settings: Settings
) -> Rendering | RenderProblem | None:
    """The stored object's rendering; ``None`` without one. A stored object that no longer
    decodes cannot be rendered either: its replicas cannot be compared, which the answer says."""
    if old is None:
        return None
    md, errs = decode_deployment(dict(old))
    if md is None:
        first = errs[0] if errs else None
        detail = "; ".join(e.message() for e in errs) or "not a ModelDeployment"
        return RenderProblem(
            "old",
            f"the stored object does not decode: {detail}",
            first.field if first is not None else "",
            first.origin if first is not None else "schema",
        )
    return _render(md, lookups=lookups, settings=settings, side="old", stored=md)


def _refused_note(operation: str) -> str:
    if operation == "CREATE":
        return "admission refuses the create: nothing is rendered or queued"
    return "admission refuses the update: the stored object and every replica stay as they are"


def _floor_notes(old: int, new: int, roles: tuple[RoleExplanation, ...]) -> list[str]:
    if new > old:
        return [
            f"the render-version floor rises from {old} to {new}: replicas rendered below "
            f"render version {new} are replaced, one per role per pass, and those at {new} or "
            "above stay; without the observed Pods every surviving replica is counted as one "
            "that may roll"
        ]
    if new < old and not any(r.action == "roll" for r in roles):
        return [
            f"the render-version floor falls from {old} to {new}: nothing rolls for it; "
            "replicas keep the render version they were created with"
        ]
    return []


# --- JSON ----------------------------------------------------------------------------------


def _role_json(role: RoleExplanation) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": role.name,
        "kind": role.kind,
        "engine": role.engine.value,  # plain text: the YAML writer knows only str
        "action": role.action,
        "replicas": role.replicas,
        "size": role.size,
        "instanceType": role.instance_type,
        "entrance": role.entrance,
        "groups": list(role.groups),
        "replicaRequests": dict(role.replica_requests),
    }
    if role.old_replicas is not None:
        out["old"] = {
            "replicas": role.old_replicas,
            "size": role.old_size,
            "instanceType": role.old_instance_type,
            "entrance": role.old_entrance,
        }
    out.update(
        added=list(role.added),
        removed=list(role.removed),
        untouched=list(role.untouched),
        replaced=list(role.replaced),
        changes=[
            {"source": c.source, "path": c.path, "old": c.old, "new": c.new} for c in role.changes
        ],
        costs=[{"id": c.id, "message": c.message} for c in role.costs],
    )
    return out


def _entrance_json(load: EntranceLoad) -> dict[str, Any]:
    out: dict[str, Any] = {
        "entrance": load.entrance,
        "localQueue": load.local_queue,
        "roles": list(load.roles),
        "after": dict(load.after),
    }
    if load.before is not None:
        out["before"] = dict(load.before)
    if load.peak is not None:
        out["peak"] = dict(load.peak)
    return out


def _joint_json(joint: JointSet) -> dict[str, Any]:
    return {"joint": joint.joint, "roles": list(joint.roles), "groups": joint.groups}


def _router_json(answer: Explanation) -> dict[str, Any]:
    router = answer.router
    assert router is not None
    return {
        "name": router.name,
        "removed": router.removed,
        "changes": [{"kind": c.kind, "name": c.name, "change": c.change} for c in router.changes],
        "failure": router.failure,
        "enginePodsRoll": answer.rolls(),
    }


def explanation_json(answer: Explanation) -> dict[str, Any]:
    """The documented JSON of an explanation (docs/explain.md; ``schema.EXPLAIN_JSON_SCHEMA``).

    Keys are always present except ``renderVersion``, ``jointAdmission`` (absent when nothing
    was rendered), ``router`` (only when either side declares a router) and ``observed`` (only
    with the observed state).
    """
    adm = answer.admission
    out: dict[str, Any] = {
        "schemaVersion": SCHEMA_VERSION,
        "kind": "Explanation",
        "deployment": {"namespace": answer.namespace, "name": answer.name},
        "operation": adm.operation,
        "admission": {
            "allowed": adm.allowed,
            "code": adm.code,
            "reason": adm.reason,
            "message": adm.message,
            "causes": [
                {"field": c.field, "type": c.type, "origin": c.origin, "message": c.message}
                for c in adm.causes
            ],
            "warnings": list(adm.warnings),
        },
        "problems": [
            {"side": p.side, "message": p.message, "field": p.field, "origin": p.origin}
            for p in answer.problems
        ],
        "roles": [_role_json(r) for r in answer.roles],
        "entrances": [_entrance_json(e) for e in answer.entrances],
    }
    if answer.joint is not None:
        out["jointAdmission"] = _joint_json(answer.joint)
    if answer.render_version is not None:
        rv = answer.render_version
        floor: dict[str, Any] = {"current": rv.current, "floor": rv.floor}
        if rv.old_floor is not None:
            floor["oldFloor"] = rv.old_floor
        if rv.requested is not None:
            floor["requested"] = rv.requested
        out["renderVersion"] = floor
    if answer.router is not None:
        out["router"] = _router_json(answer)
    out["notes"] = list(answer.notes)
    out["replaced"] = answer.replaced()
    out["rolls"] = answer.rolls()
    if answer.observed is not None:
        out["observed"] = observed_to_json(answer.observed)
    if answer.scaling:
        out["scaling"] = [_scaling_json(q) for q in answer.scaling]
    return out


def _scaling_json(question: ScaleQuestion) -> dict[str, Any]:
    out: dict[str, Any] = {
        "target": question.target,
        "group": question.group,
        "replicas": question.replicas,
        "scaler": question.scaler,
        "refused": question.refused,
        "roles": [
            {"name": r.name, "before": r.before, "after": r.after, "entrance": r.entrance}
            for r in question.roles
        ],
        "entrances": [_entrance_json(e) for e in question.entrances],
    }
    if question.queues:
        out["queues"] = [
            {
                "clusterQueue": q.cluster_queue,
                "fits": q.fits,
                "needed": dict(q.needed),
                "free": dict(q.free),
                "short": dict(q.short),
                "uncovered": list(q.uncovered),
            }
            for q in question.queues
        ]
    if question.bounds is not None:
        out["bounds"] = {"min": question.bounds[0], "max": question.bounds[1]}
    return out
