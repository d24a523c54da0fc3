"""The two Elastic EP records and their ConfigMaps (docs/contract/elastic-ep.md §4.1, D28, D29).

- The **intent record** (``elastic-resize-<md uid>``, key ``operation.json``): the one width
  change in flight, written before any call to the engine, so a restarted controller knows what
  it may have sent. Only the controller writes it, always with the resourceVersion it read
  (the record policy of the owned-object path,
  :data:`~gpustack_render.reconcile.owned.ELASTIC_RECORD_POLICY`).
- The **observation record** (``elastic-observation-<md uid>``, key ``observation.json``): what
  each layer knows (desired, admitted, allocated, ray, effective), the machine's state and reason,
  and the width last proven stable with the master it was proven on.

Reading is strict, unlike the lenient reads of objects others write (:mod:`observed
<gpustack_render.reconcile.observed>`): a record that is not exactly what this controller writes
cannot say whether a command went out, so it is never guessed at. One JSON document (a trailing
value, a duplicate key, ``NaN``, an unknown field or a wrong type refuses it), one data key, the
expected name, and a controller owner reference to the deployment whose kind, apiVersion, name
and uid all match. A refusal is a :class:`RecordUnreadable` naming what is wrong; the machine
holds on it and never overwrites it.

What a write may change (:func:`successor_problems`): the deployment's name, namespace and uid,
the generation, both widths, every captured identity and the release list are fixed once
written; the command intent and ``commandSent`` are never cleared; the attempt and refusal
counts never go down.

The record's ``resourceVersion`` (a field of upstream's record) is the ConfigMap's
``metadata.resourceVersion``: carried beside the record (:class:`StoredIntent`), never inside the
JSON, where it would be stale by construction.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Final, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic.alias_generators import to_camel

from gpustack_render.api.common import API_VERSION
from gpustack_render.api.modeldeployment import KIND
from gpustack_render.core import jsonview, labels, ownerrefs
from gpustack_render.reconcile.owned import Owner
from gpustack_render.rendering.elastic import MAX_WIDTH, MIN_WIDTH

#: The records' kind and apiVersion.
CONFIGMAP_API_VERSION: Final = "v1"
CONFIGMAP_KIND: Final = "ConfigMap"
#: Name prefixes; the deployment's uid follows.
INTENT_PREFIX: Final = "elastic-resize-"
OBSERVATION_PREFIX: Final = "elastic-observation-"
#: The label each record carries (``"true"``).
INTENT_LABEL: Final = "gpustack.ai/elastic-operation"
OBSERVATION_LABEL: Final = "gpustack.ai/elastic-observation"
#: The one data key of each record.
INTENT_KEY: Final = "operation.json"
OBSERVATION_KEY: Final = "observation.json"
#: Definite refusals before a change is abandoned (§4.5).
MAX_REFUSALS: Final = 5
#: The longest text a record keeps of an engine's answer.
MAX_ERROR_CHARS: Final = 512


def intent_name(deployment_uid: str) -> str:
    return f"{INTENT_PREFIX}{deployment_uid}"


def observation_name(deployment_uid: str) -> str:
    return f"{OBSERVATION_PREFIX}{deployment_uid}"


class State(enum.StrEnum):
    """The states of a width change (§4.3). Only the first five and the last two are written by
    this release; ``Withdrawn`` and ``Released`` belong to the shrink path, which is not
    delivered (D29), and are read only to hold on them."""

    RECORDED = "Recorded"
    COMMAND_SENT = "CommandSent"
    AWAITING_WIDTH = "AwaitingWidth"
    NATIVE_COMPLETE = "NativeComplete"
    WITHDRAWN = "Withdrawn"
    RELEASED = "Released"
    COMPLETED = "Completed"
    ABANDONED = "Abandoned"


#: The states of the shrink path (never entered by this release).
DOWN_STATES: Final = frozenset({State.WITHDRAWN, State.RELEASED})


class _Record(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        alias_generator=to_camel,
        populate_by_name=True,
        frozen=True,
    )


Width = Annotated[int, Field(ge=MIN_WIDTH, le=MAX_WIDTH)]
Text = Annotated[str, Field(max_length=MAX_ERROR_CHARS)]
NonEmpty = Annotated[str, Field(min_length=1, max_length=253)]


class Identity(_Record):
    """A Pod the change captured: its name and uid (the uid is what is compared)."""

    name: NonEmpty
    uid: NonEmpty


class Widths(_Record):
    old: Width
    target: Width


def scale_intent(target: int) -> str:
    """The intent a sent command records (§4.3)."""
    return f"scale to {target}"


class IntentRecord(_Record):
    """The intent record (§4.1). Field names are upstream's, camel-cased in JSON; one field is
    this project's: ``scaleRefusals``, the attempts whose failure is known, so that an attempt
    whose answer was lost (``scaleRefusals < scaleAttempts``) is told apart from a refused one
    after a restart (docs/elastic-ep.md, "Width changes")."""

    name: NonEmpty
    deployment_uid: NonEmpty = Field(alias="deploymentUID")
    namespace: NonEmpty
    generation: Annotated[int, Field(ge=1)]
    width: Widths
    #: Up: the members the change adds (ordinals old..target-1). Down: those it removes.
    workers: tuple[Identity, ...] = ()
    master: Identity
    head: Identity
    #: Every member the change counts on (ordinals 0..target-1 for a raise).
    members: tuple[Identity, ...] = ()
    #: Down only: what the change deletes once released.
    release: tuple[Identity, ...] = ()
    state: State
    command_intent: Text = ""
    command_sent: bool = False
    scale_attempts: Annotated[int, Field(ge=0, le=MAX_REFUSALS)] = 0
    scale_refusals: Annotated[int, Field(ge=0, le=MAX_REFUSALS)] = 0
    scale_last_error: Text = ""
    scale_last_failed_at: datetime | None = None

    @model_validator(mode="after")
    def _consistent(self) -> IntentRecord:
        problems = []
        if self.width.old == self.width.target:
            problems.append("width.old equals width.target: nothing to change")
        if self.scale_refusals > self.scale_attempts:
            problems.append("scaleRefusals exceeds scaleAttempts")
        if self.command_sent != (self.scale_attempts > 0):
            problems.append("commandSent must be true exactly when scaleAttempts is above 0")
        if self.command_sent and self.command_intent != scale_intent(self.width.target):
            problems.append(f"commandIntent must be {scale_intent(self.width.target)!r}")
        if not self.command_sent and self.command_intent:
            problems.append("commandIntent is set but commandSent is false")
        if self.state is State.RECORDED and self.command_sent:
            problems.append("state Recorded with a sent command")
        if self.state is State.ABANDONED and self.scale_refusals < MAX_REFUSALS:
            problems.append(f"state Abandoned before {MAX_REFUSALS} refusals")
        if bool(self.scale_last_error) != (self.scale_last_failed_at is not None):
            problems.append("scaleLastError and scaleLastFailedAt are set together or not at all")
        if self.scale_last_failed_at is not None and self.scale_last_failed_at.tzinfo is None:
            problems.append("scaleLastFailedAt must carry a time zone")
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @property
    def outcome_unknown(self) -> bool:
        """The last command sent has no known outcome: its answer was lost, or the controller
        stopped before recording it. Only observation decides it (§4.5)."""
        return self.command_sent and self.scale_refusals < self.scale_attempts

    def captured(self) -> tuple[Identity, ...]:
        """Every identity the change captured, once each: master, head, members, workers."""
        seen: dict[str, Identity] = {}
        for ident in (self.master, self.head, *self.members, *self.workers, *self.release):
            seen.setdefault(ident.uid, ident)
        return tuple(seen.values())


class Layer(_Record):
    """One layer of the observation (§4.2): ``known`` false means unread, with the reason;
    the value is then 0 and never borrowed from a neighbouring layer."""

    known: bool
    value: Annotated[int, Field(ge=0, le=1024)] = 0
    reason: Text = ""

    @model_validator(mode="after")
    def _unknown_is_zero(self) -> Layer:
        if not self.known and self.value:
            raise ValueError("an unknown layer has no value")
        if not self.known and not self.reason:
            raise ValueError("an unknown layer says why")
        return self


#: The observation's state when no change is in flight.
IDLE: Final = "Idle"


class ObservationRecord(_Record):
    """The observation record (§4.1). ``stableWidth`` 0: no width proven yet."""

    deployment_uid: NonEmpty = Field(alias="deploymentUID")
    observed_generation: Annotated[int, Field(ge=1)]
    desired: Layer
    admitted: Layer
    allocated: Layer
    ray: Layer
    effective: Layer
    #: A :class:`State` value, or :data:`IDLE`.
    state: Annotated[str, Field(pattern=r"^[A-Z][A-Za-z]+$", max_length=32)]
    reason: Annotated[str, Field(max_length=4096)] = ""
    stable_width: Annotated[int, Field(ge=0, le=MAX_WIDTH)] = 0
    #: The master Pod's uid the stable width was proven on ("" with no stable width).
    master_uid: Annotated[str, Field(max_length=253)] = Field("", alias="masterUID")


# ---- what a write may change -------------------------------------------------------------------

#: Fields fixed once an intent record is written.
FIXED_FIELDS: Final = (
    "name",
    "deployment_uid",
    "namespace",
    "generation",
    "width",
    "workers",
    "master",
    "head",
    "members",
    "release",
)


def successor_problems(old: IntentRecord, new: IntentRecord) -> list[str]:
    """Why ``new`` may not replace ``old`` (empty: it may): a fixed field moved, the intent or
    ``commandSent`` was cleared, a count went down, or a terminal record was left."""
    problems = [
        f"{f} is fixed once written" for f in FIXED_FIELDS if getattr(old, f) != getattr(new, f)
    ]
    if old.command_intent and new.command_intent != old.command_intent:
        problems.append("commandIntent is never cleared or changed")
    if old.command_sent and not new.command_sent:
        problems.append("commandSent is never cleared")
    if new.scale_attempts < old.scale_attempts or new.scale_refusals < old.scale_refusals:
        problems.append("scaleAttempts and scaleRefusals never go down")
    if old.state is State.ABANDONED and new.state is not State.ABANDONED:
        problems.append("Abandoned is terminal")
    if old.state is State.COMPLETED and new.state is not State.COMPLETED:
        problems.append("Completed only leads to the record's deletion")
    return problems


# ---- decoding ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class RecordUnreadable:
    """A stored record this controller cannot read: what is wrong with it, in words."""

    name: str
    problem: str

    @property
    def message(self) -> str:
        return f"ConfigMap {self.name} is not a record this controller can read: {self.problem}"


@dataclass(frozen=True)
class StoredIntent:
    """An intent record as read: the record, and the ConfigMap's uid and resourceVersion (the
    preconditions of its next write or delete)."""

    record: IntentRecord
    uid: str
    resource_version: str
    #: The ConfigMap as read (the owned-object path's ``stored``).
    raw: Mapping[str, Any]


@dataclass(frozen=True)
class StoredObservation:
    record: ObservationRecord
    uid: str
    resource_version: str
    raw: Mapping[str, Any]


class _DuplicateKeyError(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKeyError(f"duplicate key {key!r}")
        out[key] = value
    return out


def _no_constant(token: str) -> Any:
    raise ValueError(f"{token} is not JSON")


M = TypeVar("M", bound=_Record)


def _document(text: str, model: type[M]) -> M:
    """One strict JSON document as ``model``; ``ValueError`` naming what is wrong."""
    try:
        json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except RecursionError:
        raise ValueError("nested too deep") from None
    except json.JSONDecodeError as exc:
        # "Extra data" is a trailing value after the one document.
        raise ValueError(f"not one JSON document: {exc.msg} at character {exc.pos}") from None
    try:
        return model.model_validate_json(text, strict=True)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(document)"
        raise ValueError(f"{where}: {first['msg']} ({exc.error_count()} problem(s))") from None


def _owner_problem(obj: Mapping[str, Any], owner: Owner) -> str:
    ref = ownerrefs.controller_of(obj, kind=KIND)
    refs = [r for r in ownerrefs.references(obj) if r.get("controller") is True]
    if ref is None or len(refs) != 1:
        return f"it has no single controller reference to ModelDeployment {owner.name}"
    want = {"apiVersion": API_VERSION, "kind": KIND, "name": owner.name, "uid": owner.uid}
    wrong = [f"{k} {ref.get(k)!r} (want {v!r})" for k, v in want.items() if ref.get(k) != v]
    return "its controller reference has " + ", ".join(wrong) if wrong else ""


def _configmap_text(obj: Mapping[str, Any], *, name: str, key: str, owner: Owner) -> str:
    meta = jsonview.view(obj.get("metadata"))
    if obj.get("apiVersion") not in (None, CONFIGMAP_API_VERSION) or obj.get("kind") not in (
        None,
        CONFIGMAP_KIND,
    ):
        raise ValueError(f"it is a {obj.get('apiVersion')} {obj.get('kind')}, not a ConfigMap")
    if meta.get("name") != name or meta.get("namespace") not in (None, owner.namespace):
        raise ValueError(
            f"it is {meta.get('namespace')}/{meta.get('name')}, not {owner.namespace}/{name}"
        )
    problem = _owner_problem(obj, owner)
    if problem:
        raise ValueError(problem)
    data = obj.get("data")
    if not isinstance(data, Mapping) or set(data) != {key} or obj.get("binaryData"):
        keys = sorted(data) if isinstance(data, Mapping) else []
        raise ValueError(f"its data must hold the one key {key}, not {keys}")
    text = data[key]
    if not isinstance(text, str):
        raise ValueError(f"{key} is not text")
    return text


def decode_intent(obj: Mapping[str, Any], *, owner: Owner) -> StoredIntent | RecordUnreadable:
    """The intent record stored in ``obj`` for the deployment ``owner``, or why not."""
    name = intent_name(owner.uid)
    try:
        text = _configmap_text(obj, name=name, key=INTENT_KEY, owner=owner)
        record = _document(text, IntentRecord)
        if (record.deployment_uid, record.name, record.namespace) != (
            owner.uid,
            owner.name,
            owner.namespace,
        ):
            raise ValueError(
                f"it names deployment {record.namespace}/{record.name} uid {record.deployment_uid}"
            )
    except ValueError as exc:
        return RecordUnreadable(name, str(exc))
    meta = jsonview.view(obj.get("metadata"))
    return StoredIntent(
        record,
        uid=str(meta.get("uid") or ""),
        resource_version=str(meta.get("resourceVersion") or ""),
        raw=obj,
    )


def decode_observation(
    obj: Mapping[str, Any], *, owner: Owner
) -> StoredObservation | RecordUnreadable:
    """The observation record stored in ``obj`` for ``owner``, or why not."""
    name = observation_name(owner.uid)
    try:
        text = _configmap_text(obj, name=name, key=OBSERVATION_KEY, owner=owner)
        record = _document(text, ObservationRecord)
        if record.deployment_uid != owner.uid:
            raise ValueError(f"it names deployment uid {record.deployment_uid}")
    except ValueError as exc:
        return RecordUnreadable(name, str(exc))
    meta = jsonview.view(obj.get("metadata"))
    return StoredObservation(
        record,
        uid=str(meta.get("uid") or ""),
        resource_version=str(meta.get("resourceVersion") or ""),
        raw=obj,
    )


# ---- encoding ----------------------------------------------------------------------------------


def owner_reference(owner: Owner) -> dict[str, Any]:
    """The records' controller reference to their deployment."""
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "name": owner.name,
        "uid": owner.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def encode(record: _Record) -> str:
    """The record's one JSON document (camel-cased names, no resourceVersion)."""
    return record.model_dump_json(by_alias=True)


def _configmap(name: str, label: str, key: str, text: str, owner: Owner) -> dict[str, Any]:
    return {
        "apiVersion": CONFIGMAP_API_VERSION,
        "kind": CONFIGMAP_KIND,
        "metadata": {
            "name": name,
            "namespace": owner.namespace,
            "labels": {label: "true", labels.INSTANCE: owner.name},
            "ownerReferences": [owner_reference(owner)],
        },
        "data": {key: text},
    }


def intent_configmap(record: IntentRecord, owner: Owner) -> dict[str, Any]:
    """The ConfigMap holding ``record`` (without a resourceVersion: the owned-object path adds
    the one the decision read)."""
    return _configmap(intent_name(owner.uid), INTENT_LABEL, INTENT_KEY, encode(record), owner)


def observation_configmap(record: ObservationRecord, owner: Owner) -> dict[str, Any]:
    return _configmap(
        observation_name(owner.uid), OBSERVATION_LABEL, OBSERVATION_KEY, encode(record), owner
    )
