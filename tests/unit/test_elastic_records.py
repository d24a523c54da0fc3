"""The Elastic EP records (docs/contract/elastic-ep.md §4.1): their ConfigMaps, strict decoding
(garbage is refused with a reason, never guessed at), round trips, and what a write may change."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from elastic_support import MD, MD_UID, NS, OWNER, T0
from hypothesis import given, settings
from hypothesis import strategies as st

from gpustack_render.elastic.machine import evolve
from gpustack_render.elastic.records import (
    INTENT_KEY,
    INTENT_LABEL,
    MAX_REFUSALS,
    OBSERVATION_KEY,
    OBSERVATION_LABEL,
    Identity,
    IntentRecord,
    Layer,
    ObservationRecord,
    RecordUnreadable,
    State,
    StoredIntent,
    StoredObservation,
    Widths,
    decode_intent,
    decode_observation,
    intent_configmap,
    observation_configmap,
    scale_intent,
    successor_problems,
)


def record(**changes: Any) -> IntentRecord:
    base = IntentRecord(
        name=MD,
        deployment_uid=MD_UID,
        namespace=NS,
        generation=3,
        width=Widths(old=2, target=4),
        workers=(Identity(name="w2", uid="u2"), Identity(name="w3", uid="u3")),
        master=Identity(name="m", uid="u0"),
        head=Identity(name="h", uid="uh"),
        members=tuple(Identity(name=f"p{i}", uid=f"u{i}") for i in range(4)),
        state=State.RECORDED,
    )
    return evolve(base, **changes) if changes else base


def sent(**changes: Any) -> IntentRecord:
    return record(
        **{
            "state": State.COMMAND_SENT,
            "command_intent": scale_intent(4),
            "command_sent": True,
            "scale_attempts": 1,
            **changes,
        }
    )


def stored_cm(rec: IntentRecord) -> dict[str, Any]:
    cm = intent_configmap(rec, OWNER)
    cm["metadata"].update(uid="cm-1", resourceVersion="41")
    return cm


def observation() -> ObservationRecord:
    layer = Layer(known=True, value=4)
    return ObservationRecord(
        deployment_uid=MD_UID,
        observed_generation=3,
        desired=layer,
        admitted=layer,
        allocated=Layer(known=True, value=3, reason="member 3: not scheduled on a node yet"),
        ray=Layer(known=False, reason="no Ray process runs on a simulated cluster"),
        effective=Layer(known=False, reason="the engine was not asked this pass"),
        state="Idle",
        stable_width=2,
        master_uid="u0",
    )


# ---- encoding ----------------------------------------------------------------------------------


def test_the_intent_configmap() -> None:
    cm = intent_configmap(sent(), OWNER)
    assert cm["metadata"]["name"] == f"elastic-resize-{MD_UID}"
    assert cm["metadata"]["namespace"] == NS
    assert cm["metadata"]["labels"][INTENT_LABEL] == "true"
    assert list(cm["data"]) == [INTENT_KEY]
    (ref,) = cm["metadata"]["ownerReferences"]
    assert ref == {
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "ModelDeployment",
        "name": MD,
        "uid": MD_UID,
        "controller": True,
        "blockOwnerDeletion": True,
    }
    doc = json.loads(cm["data"][INTENT_KEY])
    assert doc["deploymentUID"] == MD_UID and doc["width"] == {"old": 2, "target": 4}
    assert doc["commandIntent"] == "scale to 4" and doc["commandSent"] is True
    assert "resourceVersion" not in doc  # the ConfigMap's, never the document's


def test_the_observation_configmap() -> None:
    cm = observation_configmap(observation(), OWNER)
    assert cm["metadata"]["name"] == f"elastic-observation-{MD_UID}"
    assert cm["metadata"]["labels"][OBSERVATION_LABEL] == "true"
    doc = json.loads(cm["data"][OBSERVATION_KEY])
    assert doc["ray"] == {
        "known": False,
        "value": 0,
        "reason": "no Ray process runs on a simulated cluster",
    }
    assert (doc["stableWidth"], doc["masterUID"]) == (2, "u0")


def test_round_trips_carry_uid_and_resource_version() -> None:
    failed = sent(
        scale_refusals=1,
        scale_last_error="attempt 1: HTTP 500: Scale failed",
        scale_last_failed_at=T0,
    )
    got = decode_intent(stored_cm(failed), owner=OWNER)
    assert isinstance(got, StoredIntent)
    assert got.record == failed and (got.uid, got.resource_version) == ("cm-1", "41")
    obs = observation_configmap(observation(), OWNER)
    back = decode_observation(obs, owner=OWNER)
    assert isinstance(back, StoredObservation) and back.record == observation()


# ---- strict decoding ---------------------------------------------------------------------------


def _with_text(text: str) -> dict[str, Any]:
    cm = stored_cm(sent())
    cm["data"][INTENT_KEY] = text
    return cm


def _doc(**changes: Any) -> str:
    doc = json.loads(intent_configmap(sent(), OWNER)["data"][INTENT_KEY])
    doc.update(changes)
    return json.dumps(doc)


GOOD = intent_configmap(sent(), OWNER)["data"][INTENT_KEY]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (GOOD + " {}", "not one JSON document: Extra data"),
        (GOOD + "\n" + GOOD, "Extra data"),
        (GOOD[:-1], "not one JSON document"),
        ("", "not one JSON document"),
        (GOOD[:-1] + ', "state": "Recorded"}', "duplicate key 'state'"),
        (_doc(surplus=1), "surplus: Extra inputs are not permitted"),
        (_doc(scaleAttempts="1"), "scaleAttempts: Input should be a valid integer"),
        (_doc(scaleAttempts=1.0), "scaleAttempts"),
        (_doc(commandSent=1), "commandSent: Input should be a valid boolean"),
        (_doc(state="Scaling"), "state: Input should be"),
        (_doc(width={"old": 2, "target": 65}), "width.target"),
        (_doc(width={"old": 2, "target": 2}), "nothing to change"),
        (_doc(master={"name": "m"}), "master.uid: Field required"),
        (_doc(generation=float("nan")), "NaN is not JSON"),
        (_doc(scaleAttempts=6), "scaleAttempts"),
        (_doc(scaleRefusals=2), "scaleRefusals exceeds scaleAttempts"),
        (_doc(commandIntent="scale to 5"), "commandIntent must be 'scale to 4'"),
        (_doc(commandSent=False), "commandSent must be true exactly when"),
        (_doc(state="Recorded"), "state Recorded with a sent command"),
        (_doc(state="Abandoned"), "state Abandoned before 5 refusals"),
        (_doc(scaleLastError="x"), "set together or not at all"),
        (_doc(scaleLastError="x", scaleLastFailedAt="2026-01-01T00:00:00"), "time zone"),
        (_doc(resourceVersion="3"), "resourceVersion: Extra inputs are not permitted"),
        ("[" * 5000 + "]" * 5000, "nested too deep"),
        ("null", "Input should be an object"),
    ],
)
def test_garbage_is_refused_with_a_reason(text: str, says: str) -> None:
    got = decode_intent(_with_text(text), owner=OWNER)
    assert isinstance(got, RecordUnreadable), got
    assert says in got.problem
    assert got.name == f"elastic-resize-{MD_UID}"
    assert "is not a record this controller can read" in got.message


def _ref(**changes: Any) -> dict[str, Any]:
    cm = stored_cm(sent())
    cm["metadata"]["ownerReferences"][0].update(changes)
    return cm


@pytest.mark.parametrize(
    ("cm", "says"),
    [
        (_ref(kind="Deployment"), "no single controller reference to ModelDeployment"),
        (
            _ref(apiVersion="worker.gpustack.ai/v1alpha1"),
            "apiVersion 'worker.gpustack.ai/v1alpha1'",
        ),
        (_ref(name="other"), "name 'other' (want 'moe')"),
        (_ref(uid="someone-else"), "uid 'someone-else'"),
        (_ref(controller=False), "no single controller reference"),
    ],
)
def test_the_owner_reference_is_checked_on_read(cm: dict[str, Any], says: str) -> None:
    got = decode_intent(cm, owner=OWNER)
    assert isinstance(got, RecordUnreadable) and says in got.problem


def test_two_controller_references_are_refused() -> None:
    cm = stored_cm(sent())
    cm["metadata"]["ownerReferences"].append(
        {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "x", "controller": True}
    )
    got = decode_intent(cm, owner=OWNER)
    assert isinstance(got, RecordUnreadable) and "no single controller" in got.problem


@pytest.mark.parametrize(
    ("mutate", "says"),
    [
        (lambda cm: cm["data"].update(extra="x"), "the one key operation.json"),
        (lambda cm: cm.update(data=None), "the one key operation.json"),
        (lambda cm: cm.update(binaryData={"b": "AA=="}), "the one key"),
        (lambda cm: cm["data"].update({INTENT_KEY: 3}), "is not text"),
        (lambda cm: cm["metadata"].update(name="elastic-resize-x"), "not team-a/elastic-resize-"),
        (lambda cm: cm["metadata"].update(namespace="other"), "is other/"),
        (lambda cm: cm.update(kind="Secret"), "not a ConfigMap"),
    ],
)
def test_the_configmap_itself_is_checked(mutate: Any, says: str) -> None:
    cm = stored_cm(sent())
    mutate(cm)
    got = decode_intent(cm, owner=OWNER)
    assert isinstance(got, RecordUnreadable) and says in got.problem


def test_a_record_of_another_deployment_is_refused() -> None:
    cm = _with_text(_doc(name="other"))
    got = decode_intent(cm, owner=OWNER)
    assert isinstance(got, RecordUnreadable) and "it names deployment team-a/other" in got.problem


def test_a_garbage_observation_is_refused() -> None:
    cm = observation_configmap(observation(), OWNER)
    doc = json.loads(cm["data"][OBSERVATION_KEY])
    doc["ray"] = {"known": False, "value": 3, "reason": "x"}
    cm["data"][OBSERVATION_KEY] = json.dumps(doc)
    got = decode_observation(cm, owner=OWNER)
    assert isinstance(got, RecordUnreadable) and "an unknown layer has no value" in got.problem


# ---- what a write may change -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        ({"generation": 4}, "generation is fixed"),
        ({"width": Widths(old=2, target=6)}, "width is fixed"),
        ({"master": Identity(name="m", uid="other")}, "master is fixed"),
        ({"head": Identity(name="h", uid="other")}, "head is fixed"),
        ({"workers": ()}, "workers is fixed"),
        ({"members": ()}, "members is fixed"),
        ({"release": (Identity(name="x", uid="y"),)}, "release is fixed"),
        ({"namespace": "other"}, "namespace is fixed"),
    ],
)
def test_fixed_fields(changes: dict[str, Any], says: str) -> None:
    old = sent()
    new = old.model_copy(update=changes)
    assert says in " ".join(successor_problems(old, new))


def test_intent_and_sent_are_never_cleared_and_counts_never_fall() -> None:
    old = sent(scale_refusals=1, scale_last_error="e", scale_last_failed_at=T0)
    cleared = old.model_copy(update={"command_intent": "", "command_sent": False})
    assert successor_problems(old, cleared) == [
        "commandIntent is never cleared or changed",
        "commandSent is never cleared",
    ]
    fewer = old.model_copy(update={"scale_refusals": 0})
    assert successor_problems(old, fewer) == ["scaleAttempts and scaleRefusals never go down"]
    assert successor_problems(old, evolve(old, state=State.AWAITING_WIDTH)) == []


def test_abandoned_is_terminal() -> None:
    old = sent(
        scale_attempts=MAX_REFUSALS,
        scale_refusals=MAX_REFUSALS,
        scale_last_error="e",
        scale_last_failed_at=T0,
        state=State.ABANDONED,
    )
    assert "Abandoned is terminal" in successor_problems(old, evolve(old, state=State.COMMAND_SENT))


# ---- round trips of any valid record -----------------------------------------------------------

_names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=20)
_idents = st.builds(Identity, name=_names, uid=_names)


@st.composite
def _records(draw: st.DrawFn) -> IntentRecord:
    old = draw(st.integers(2, 63))
    target = draw(st.integers(2, 64).filter(lambda t: t != old))
    attempts = draw(st.integers(0, MAX_REFUSALS))
    refusals = draw(st.integers(0, attempts))
    failed = refusals > 0 and draw(st.booleans())
    states = [State.RECORDED] if not attempts else [s for s in State if s is not State.RECORDED]
    state = draw(st.sampled_from(states))
    if refusals < MAX_REFUSALS and state is State.ABANDONED:
        state = State.COMMAND_SENT
    when = draw(
        st.datetimes(
            min_value=datetime(2020, 1, 1),
            max_value=datetime(2100, 1, 1),
            timezones=st.sampled_from([UTC, timezone(timedelta(hours=8))]),
        )
    )
    return IntentRecord(
        name=draw(_names),
        deployment_uid=draw(_names),
        namespace=draw(_names),
        generation=draw(st.integers(1, 2**40)),
        width=Widths(old=old, target=target),
        workers=tuple(draw(st.lists(_idents, max_size=3))),
        master=draw(_idents),
        head=draw(_idents),
        members=tuple(draw(st.lists(_idents, max_size=4))),
        state=state,
        command_intent=scale_intent(target) if attempts else "",
        command_sent=attempts > 0,
        scale_attempts=attempts,
        scale_refusals=refusals,
        scale_last_error=draw(st.text(min_size=1, max_size=40)) if failed else "",
        scale_last_failed_at=when.replace(microsecond=0) if failed else None,
    )


@settings(max_examples=200, deadline=None)
@given(rec=_records())
def test_every_valid_record_round_trips(rec: IntentRecord) -> None:
    owner = type(OWNER)(rec.namespace, rec.name, rec.deployment_uid)
    cm = intent_configmap(rec, owner)
    got = decode_intent(copy.deepcopy(cm), owner=owner)
    assert isinstance(got, StoredIntent) and got.record == rec


@settings(max_examples=200, deadline=None)
@given(garbage=st.text(max_size=200) | st.binary(max_size=50).map(lambda b: b.hex()))
def test_no_text_crashes_the_decoder(garbage: str) -> None:
    got = decode_intent(_with_text(garbage), owner=OWNER)
    assert isinstance(got, RecordUnreadable | StoredIntent)


@settings(max_examples=200, deadline=None)
@given(
    value=st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=10),
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
        ),
        max_leaves=10,
    )
)
def test_no_json_value_crashes_the_decoder(value: object) -> None:
    got = decode_intent(_with_text(json.dumps(value)), owner=OWNER)
    assert isinstance(got, RecordUnreadable)
