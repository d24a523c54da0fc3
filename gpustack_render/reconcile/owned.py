"""The one owned-object path: what a pass writes for every kind the controller keeps beside a
ModelDeployment (docs/architecture.md, "Owned objects"; docs/contract/controller.md §10–§11).

Every kind goes through :func:`plan_owned` with a per-kind :class:`OwnedPolicy`, as Kueue's
``jobframework`` runs every job kind through one reconciler: a new kind adds a policy (and, in
the shell, one line of the pass), never a new sync function, write loop, cache rule or conflict
type. The function turns the objects the rendering wants, the ones stored under those names,
and the others the pass knows of into an :class:`OwnedPlan`: creates, applies, kept-field
patches, prunes and conflicts, each object in exactly one of them or none (already in line).

The policies (:data:`POLICIES`):

- **Services** (``apply``): server-side apply when the stored one is not aligned
  (:func:`~gpustack_render.reconcile.applied.apply_aligned`: a value differs, or the field
  manager still owns a field the rendering dropped); pruned when no longer rendered, except an
  instance Service while a Pod of its ordinal remains (peers of a terminating instance still
  resolve one another).
- **The router's objects** (``apply``): as Services, without the instance guard.
- **LocalQueues** (``create-only``): created when missing, never patched, pruned or adopted
  (several deployments share one, D16; ``spec.clusterQueue`` is immutable). A stored one that
  feeds another ClusterQueue is a conflict.
- **ModelDeploymentScalers** (``kept-fields``): created as rendered; afterwards only the kept
  fields (bounds, target, labels) are patched, never ``spec.replicas``, which the autoscaler
  owns (D27); pruned when no target renders them. The stored objects are found by name, so the
  cache answers alone once synced (``cache_authoritative``).

- **Records** (``record``): what a state machine must never lose (D28; the Elastic EP intent and
  observation records, docs/contract/elastic-ep.md §4.1). Written with the resourceVersion the
  decision was made on, never a fresher one: created only when the decision read none (a create
  answered 409 fails the pass, it is never taken as done), replaced at that resourceVersion
  (compare-and-swap: a record changed since answers 409 and the pass is retried), never pruned,
  never adopted, and deleted only when the machine says so, with its uid and resourceVersion as
  preconditions (:func:`plan_record_delete`).

A rendered name stored under another owner (or, for a create-only kind, stored incompatible) is
an :class:`~gpustack_render.core.ownerrefs.OwnedConflict`: never written; it fails the pass once
the rest is done, so the pass is retried until the name is free, except where the policy says
the planner acts on it (a LocalQueue's roles get no Pod); a policy may also name the Warning
event each conflict records (:func:`~gpustack_render.reconcile.events.conflict_event`). Prunes
carry the stored uid: the delete's precondition, so a same-named successor is never deleted.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from gpustack_render.api.artifact import ARTIFACT_FINALIZER
from gpustack_render.core import jsonview, labels, ownerrefs
from gpustack_render.core.ownerrefs import OwnedConflict
from gpustack_render.reconcile import events
from gpustack_render.reconcile.applied import apply_aligned
from gpustack_render.reconcile.observed import ObservedPod
from gpustack_render.reconcile.queues import queue_conflict
from gpustack_render.rendering.router.model import OBJECT_ORDER
from gpustack_render.rendering.scalers import KEPT_SPEC_FIELDS


class WriteMode(enum.Enum):
    """How a kind's objects are written."""

    #: Server-side apply (by the controller's field manager) whenever not aligned.
    APPLY = "apply"
    #: Created when missing; a stored object is never written.
    CREATE_ONLY = "create-only"
    #: Created when missing; afterwards only the policy's kept fields are merge-patched.
    KEPT_FIELDS = "kept-fields"
    #: A record a state machine must never lose (D28): created when the decision read none,
    #: else replaced at the resourceVersion it read (compare-and-swap); never pruned.
    RECORD = "record"


@dataclass(frozen=True)
class PassFacts:
    """What a pass observed that a policy's prune guard may need."""

    #: The deployment's Pods, as observed after the pass's Pod writes.
    pods: Sequence[ObservedPod] = ()


#: A prune guard: keep this stored object for now (``True``) although it is no longer rendered.
PruneGuard = Callable[[Mapping[str, Any], PassFacts], bool]
#: The merge patch bringing a stored object's kept fields in line with the rendered one (empty:
#: in line).
KeptFields = Callable[[Mapping[str, Any], Mapping[str, Any]], dict[str, Any]]
#: Why a stored object cannot serve as the rendered one (``""``: it can), for a kind nobody owns.
Compatibility = Callable[[Mapping[str, Any], Mapping[str, Any]], str]


@dataclass(frozen=True)
class OwnedPolicy:
    """One kind's rules on the owned-object path."""

    kind: str
    write: WriteMode
    #: Prune the stored objects the deployment controls that are no longer rendered.
    prune: bool = True
    #: Keep a stored object although no longer rendered (``prune`` only).
    keep_while: PruneGuard | None = None
    #: ``KEPT_FIELDS``: the patch of the kept fields.
    kept_fields: KeptFields | None = None
    #: ``CREATE_ONLY``: the objects are shared, not owned; whether a stored one can serve.
    compatible: Compatibility | None = None
    #: The objects are looked up by name and a synced cache answers for the API server alone
    #: (a miss is absent): most names looked up do not exist, and a live read of each would
    #: cost a request per name per pass. A create the cache had not seen answers 409, and the
    #: object's watch event brings the deployment back.
    cache_authoritative: bool = False
    #: A conflict fails the pass (retried with backoff). ``False``: the planner acts on it
    #: instead (a LocalQueue's roles get no Pod, status says why) and the pass looks again later.
    conflicts_fail: bool = True
    #: The reason of the Warning event recorded for each conflict (``""``: none; the failure is
    #: counted and logged as any failed pass is).
    conflict_event: str = ""

    def __post_init__(self) -> None:
        if self.write is WriteMode.RECORD and (self.prune or self.keep_while is not None):
            raise ValueError(f"{self.kind}: a record policy never prunes (D28)")
        if self.write is WriteMode.RECORD and self.cache_authoritative:
            raise ValueError(f"{self.kind}: a record is read live, never from a cache alone")


@dataclass(frozen=True)
class Owner:
    """The ModelDeployment a pass renders for."""

    namespace: str
    name: str
    uid: str


@dataclass(frozen=True)
class OwnedPlan:
    """The writes of one kind in one pass, in the order they are carried out: creates and
    applies (in rendering order), kept-field patches, then prunes. Conflicts are never
    written."""

    policy: OwnedPolicy
    creates: tuple[dict[str, Any], ...] = ()
    applies: tuple[dict[str, Any], ...] = ()
    #: (name, merge patch) of stored objects whose kept fields moved.
    patches: tuple[tuple[str, dict[str, Any]], ...] = ()
    #: (name, uid) of stored objects to delete, the uid their precondition.
    prunes: tuple[tuple[str, str], ...] = ()
    conflicts: tuple[OwnedConflict, ...] = field(default_factory=tuple)
    #: ``RECORD``: whole objects to replace (PUT), each carrying the resourceVersion read.
    replaces: tuple[dict[str, Any], ...] = ()

    @property
    def writes(self) -> int:
        return (
            len(self.creates)
            + len(self.applies)
            + len(self.patches)
            + len(self.prunes)
            + len(self.replaces)
        )


def name_of(obj: Mapping[str, Any]) -> str:
    return str(jsonview.view(obj.get("metadata")).get("name") or "")


def plan_owned(
    policy: OwnedPolicy,
    wanted: Sequence[Mapping[str, Any]],
    *,
    stored: Mapping[str, Mapping[str, Any] | None],
    others: Iterable[Mapping[str, Any]] = (),
    owner: Owner,
    manager: str,
    facts: PassFacts | None = None,
) -> OwnedPlan:
    """The writes of one kind for one pass (see the module docstring).

    ``wanted`` are the rendered objects of ``policy.kind``; ``stored`` holds the stored object
    under each rendered name (``None``: absent); ``others`` the stored objects of the kind the
    pass knows of besides (any namespace, any owner: only the ones ``owner`` controls, in its
    namespace and no longer rendered, are pruned)."""
    if policy.write is WriteMode.RECORD:
        return _plan_records(policy, wanted, stored=stored, owner=owner)
    return _plan_kind(
        policy, wanted, stored=stored, others=others, owner=owner, manager=manager, facts=facts
    )


def _plan_kind(
    policy: OwnedPolicy,
    wanted: Sequence[Mapping[str, Any]],
    *,
    stored: Mapping[str, Mapping[str, Any] | None],
    others: Iterable[Mapping[str, Any]],
    owner: Owner,
    manager: str,
    facts: PassFacts | None,
) -> OwnedPlan:
    """:func:`plan_owned` for every write mode but ``RECORD``."""
    names = {name_of(o) for o in wanted}
    creates: list[dict[str, Any]] = []
    applies: list[dict[str, Any]] = []
    patches: list[tuple[str, dict[str, Any]]] = []
    conflicts: list[OwnedConflict] = []
    for obj in wanted:
        name = name_of(obj)
        existing = stored.get(name)
        if existing is None:
            (applies if policy.write is WriteMode.APPLY else creates).append(dict(obj))
            continue
        if policy.write is WriteMode.CREATE_ONLY:
            why = policy.compatible(obj, existing) if policy.compatible is not None else ""
            if why:
                conflicts.append(
                    OwnedConflict(policy.kind, owner.namespace, name, owner.name, detail=why)
                )
            continue
        if not ownerrefs.controlled_by(existing, owner.uid):
            conflicts.append(OwnedConflict(policy.kind, owner.namespace, name, owner.name))
        elif policy.write is WriteMode.APPLY:
            if not apply_aligned(existing, obj, manager):
                applies.append(dict(obj))
        elif policy.kept_fields is not None and (patch := policy.kept_fields(obj, existing)):
            patches.append((name, patch))
    prunes: list[tuple[str, str]] = []
    if policy.prune:
        seen: set[str] = set()
        for existing in (*(s for s in stored.values() if s is not None), *others):
            meta = jsonview.view(existing.get("metadata"))
            name = str(meta.get("name") or "")
            if meta.get("namespace") != owner.namespace or name in names or name in seen:
                continue
            if str(existing.get("kind") or policy.kind) != policy.kind:
                continue
            if not ownerrefs.controlled_by(existing, owner.uid):
                continue
            if policy.keep_while is not None and policy.keep_while(existing, facts or PassFacts()):
                continue
            seen.add(name)
            prunes.append((name, str(meta.get("uid") or "")))
    return OwnedPlan(
        policy=policy,
        creates=tuple(creates),
        applies=tuple(applies),
        patches=tuple(patches),
        prunes=tuple(prunes),
        conflicts=tuple(conflicts),
    )


# ---- records: compare-and-swap, never pruned (D28) ------------------------------------------

#: The parts of a record that carry its content: a replace is planned only when one differs.
_RECORD_CONTENT = ("data", "binaryData", "spec")
_RECORD_META = ("labels", "annotations", "ownerReferences")


def _record_content(obj: Mapping[str, Any]) -> tuple[object, ...]:
    meta = jsonview.view(obj.get("metadata"))
    return (
        *(obj.get(k) or None for k in _RECORD_CONTENT),
        *(meta.get(k) or None for k in _RECORD_META),
    )


def _plan_records(
    policy: OwnedPolicy,
    wanted: Sequence[Mapping[str, Any]],
    *,
    stored: Mapping[str, Mapping[str, Any] | None],
    owner: Owner,
) -> OwnedPlan:
    """``RECORD``: ``stored`` is what the decision read under each name, not a fresher read.
    Absent: create (the name must still be free). Controlled by ``owner``: replace at its
    resourceVersion when the content moved. Anyone else's: a conflict, never written."""
    creates: list[dict[str, Any]] = []
    replaces: list[dict[str, Any]] = []
    conflicts: list[OwnedConflict] = []
    for obj in wanted:
        name = name_of(obj)
        existing = stored.get(name)
        if existing is None:
            body = dict(obj)
            body["metadata"] = {
                k: v
                for k, v in jsonview.view(obj.get("metadata")).items()
                if k not in ("resourceVersion", "uid")
            }
            creates.append(body)
        elif not ownerrefs.controlled_by(existing, owner.uid):
            conflicts.append(OwnedConflict(policy.kind, owner.namespace, name, owner.name))
        elif _record_content(existing) != _record_content(obj):
            meta = jsonview.view(existing.get("metadata"))
            body = dict(obj)
            body["metadata"] = {
                **jsonview.view(obj.get("metadata")),
                "resourceVersion": str(meta.get("resourceVersion") or ""),
                "uid": str(meta.get("uid") or ""),
            }
            replaces.append(body)
    return OwnedPlan(
        policy=policy,
        creates=tuple(creates),
        replaces=tuple(replaces),
        conflicts=tuple(conflicts),
    )


@dataclass(frozen=True)
class RecordDelete:
    """The one way a record goes: a delete whose preconditions are the uid and the
    resourceVersion the decision read, so neither a successor under the same name nor a record
    written since is deleted (the API server answers 409 and the pass is retried)."""

    name: str
    uid: str
    resource_version: str


def plan_record_delete(
    policy: OwnedPolicy, stored: Mapping[str, Any], *, owner: Owner
) -> RecordDelete | OwnedConflict:
    """The delete of the record ``stored`` (as the decision read it) for ``owner``; a conflict
    when ``owner`` does not control it or it lacks a uid or resourceVersion to pin."""
    if policy.write is not WriteMode.RECORD:
        raise ValueError(f"{policy.kind}: only a record policy deletes by decision")
    name = name_of(stored)
    meta = jsonview.view(stored.get("metadata"))
    uid = str(meta.get("uid") or "")
    version = str(meta.get("resourceVersion") or "")
    if not ownerrefs.controlled_by(stored, owner.uid) or not uid or not version:
        return OwnedConflict(
            policy.kind,
            owner.namespace,
            name,
            owner.name,
            detail=f"{policy.kind} {owner.namespace}/{name} is not a record of ModelDeployment "
            f"{owner.namespace}/{owner.name} with a uid and resourceVersion to delete it by",
        )
    return RecordDelete(name=name, uid=uid, resource_version=version)


# ---- the policies ----------------------------------------------------------------------------


def _int(text: object) -> int | None:
    try:
        return int(str(text))
    except ValueError:
        return None


def instance_in_use(service: Mapping[str, Any], facts: PassFacts) -> bool:
    """An instance Service (its selector names an ordinal) while a Pod of that ordinal of the
    deployment remains: peers of a terminating instance still resolve one another."""
    selector = jsonview.view(jsonview.view(service.get("spec")).get("selector"))
    ordinal = selector.get(labels.POD_ORDINAL)
    if ordinal is None:
        return False
    held = {(p.role, p.ordinal) for p in facts.pods if p.owned}
    return (selector.get(labels.COMPONENT), _int(ordinal)) in held


def scaler_kept_fields(rendered: Mapping[str, Any], stored: Mapping[str, Any]) -> dict[str, Any]:
    """The merge patch aligning a stored scaler's kept fields (bounds, target, labels) with the
    rendered one; never ``spec.replicas`` (D27)."""
    want_spec = jsonview.view(rendered.get("spec"))
    have_spec = jsonview.view(stored.get("spec"))
    spec = {k: want_spec.get(k) for k in KEPT_SPEC_FIELDS if want_spec.get(k) != have_spec.get(k)}
    want_labels = jsonview.strings(jsonview.view(rendered.get("metadata")).get("labels"))
    have_labels = jsonview.strings(jsonview.view(stored.get("metadata")).get("labels"))
    patch: dict[str, Any] = {}
    if spec:
        patch["spec"] = spec
    moved = {k: v for k, v in want_labels.items() if have_labels.get(k) != v}
    if moved:
        patch["metadata"] = {"labels": moved}
    return patch


def local_queue_compatible(rendered: Mapping[str, Any], stored: Mapping[str, Any]) -> str:
    """``""`` when the stored LocalQueue feeds the rendered one's ClusterQueue, else why not
    (:func:`~gpustack_render.reconcile.queues.queue_conflict`)."""
    conflict = queue_conflict(rendered, stored)
    return conflict.detail if conflict is not None else ""


SERVICE_POLICY: Final = OwnedPolicy("Service", WriteMode.APPLY, keep_while=instance_in_use)
LOCAL_QUEUE_POLICY: Final = OwnedPolicy(
    "LocalQueue",
    WriteMode.CREATE_ONLY,
    prune=False,
    compatible=local_queue_compatible,
    conflicts_fail=False,
    conflict_event=events.LOCAL_QUEUE_CONFLICT,
)
SCALER_POLICY: Final = OwnedPolicy(
    "ModelDeploymentScaler",
    WriteMode.KEPT_FIELDS,
    kept_fields=scaler_kept_fields,
    cache_authoritative=True,
    # The role keeps the count it runs and the event says why; the scaler's watch event brings
    # the deployment back when the name is freed.
    conflicts_fail=False,
    conflict_event=events.SCALER_CONFLICT,
)
#: The router's kinds (D26), in the order they are applied: the renderer's own order.
ROUTER_KINDS: Final = OBJECT_ORDER
ROUTER_POLICIES: Final = {kind: OwnedPolicy(kind, WriteMode.APPLY) for kind in ROUTER_KINDS}
#: The Elastic EP records (ConfigMaps, docs/contract/elastic-ep.md §4.1): the intent record and
#: the observation record of each elastic deployment.
ELASTIC_RECORD_POLICY: Final = OwnedPolicy("ConfigMap", WriteMode.RECORD, prune=False)


# ---- finalizers the controller keeps on objects it does not own ------------------------------


@dataclass(frozen=True)
class FinalizerPolicy:
    """A finalizer the controller keeps on an object a user owns (D28: a ``ModelArtifact``'s
    protection): added on the first pass, removed once the object is being deleted and nothing
    holds it any more. Written like every record the controller must not lose: with the
    resourceVersion just read (compare-and-swap), so a concurrent change of the finalizer list
    answers 409 and the pass is retried instead of overwriting it."""

    kind: str
    finalizer: str


def plan_finalizer(
    policy: FinalizerPolicy, stored: Mapping[str, Any], *, held: bool
) -> dict[str, Any] | None:
    """The merge patch of ``stored``'s finalizers (``None``: nothing to write). An object not
    being deleted gets the finalizer; one being deleted loses it once ``held`` is false."""
    meta = jsonview.view(stored.get("metadata"))
    current = [str(f) for f in meta.get("finalizers") or ()]
    deleting = meta.get("deletionTimestamp") is not None
    if not deleting and policy.finalizer not in current:
        finalizers = [*current, policy.finalizer]
    elif deleting and not held and policy.finalizer in current:
        finalizers = [f for f in current if f != policy.finalizer]
    else:
        return None
    return {
        "metadata": {
            "finalizers": finalizers,
            "resourceVersion": str(meta.get("resourceVersion") or ""),
        }
    }


ARTIFACT_FINALIZER_POLICY: Final = FinalizerPolicy("ModelArtifact", ARTIFACT_FINALIZER)
