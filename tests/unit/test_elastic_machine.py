"""The width-change state machine (docs/contract/elastic-ep.md §4.3, §4.5; D29), driven in
process: every row of the state table and of the failure table, against the real
:func:`~gpustack_render.elastic.machine.decide` and
:func:`~gpustack_render.elastic.machine.after_scale`, with the records written the controller's
way (tests/unit/elastic_support.py)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from elastic_support import (
    GPU,
    OWNER,
    QUEUE,
    T0,
    ConflictError,
    Store,
    carry_out,
    engine,
    facts,
    member,
    settle,
)

from gpustack_render.elastic.engine import ScaleVerdict, classify_scale
from gpustack_render.elastic.layers import Unread
from gpustack_render.elastic.machine import (
    Action,
    Decision,
    after_scale,
    backoff,
    decide,
    evolve,
)
from gpustack_render.elastic.records import (
    MAX_REFUSALS,
    IntentRecord,
    State,
    StoredIntent,
    intent_configmap,
    successor_problems,
)

REFUSED = classify_scale(500, b'{"error": {"message": "Scale failed", "code": 500}}')
SCALED = classify_scale(200, b'{"message": "Scaled to 4 data parallel engines"}')
LOST = classify_scale(None, transport_error="TimeoutError: 150 s")


def recorded(store: Store) -> Decision:
    """From a deployment running 2 engines raised to 4 with every layer ready: the Recorded
    write, carried out."""
    steps = settle(store, facts(4, 4, eng=engine(width=2)))
    assert steps[-1].action is Action.WRITE and steps[-1].scale_to == 4
    return steps[-1]


def sent(store: Store) -> IntentRecord:
    """The CommandSent record of attempt 1 (written, the POST not yet answered)."""
    recorded(store)
    record = store.record()
    assert record is not None and record.state is State.COMMAND_SENT
    return record


def answer(store: Store, verdict: object, now: object = T0) -> IntentRecord:
    stored = store.intent()
    assert isinstance(stored, StoredIntent)
    nxt = after_scale(stored.record, verdict, now)  # type: ignore[arg-type]
    assert successor_problems(stored.record, nxt) == []
    store.write(intent_configmap(nxt, OWNER), dict(stored.raw))
    record = store.record()
    assert record is not None
    return record


def rewrite(store: Store, **changes: object) -> None:
    """Store the intent record with ``changes`` (a state the machine reached another way)."""
    stored = store.intent()
    assert isinstance(stored, StoredIntent)
    store.write(intent_configmap(evolve(stored.record, **changes), OWNER), dict(stored.raw))


# ---- §4.3 Recorded ---------------------------------------------------------------------------


def test_recorded_needs_the_engines_own_width_first() -> None:
    store = Store()
    decision = decide(store.world(facts(4, 4)), T0)
    assert decision.action is Action.ASK_ENGINE
    assert decision.observation is None and decision.record is None


def test_recorded_when_the_proven_width_is_below_desired_and_every_lower_layer_reaches_it() -> None:
    store = Store()
    decision = decide(store.world(facts(4, 4, eng=engine(width=2))), T0)
    assert decision.action is Action.WRITE and decision.scale_to is None
    record = decision.record
    assert record is not None and decision.expected is None  # a create
    assert record.state is State.RECORDED and not record.command_sent
    assert (record.width.old, record.width.target) == (2, 4)
    assert [m.uid for m in record.members] == ["pod-0", "pod-1", "pod-2", "pod-3"]
    assert [w.uid for w in record.workers] == ["pod-2", "pod-3"]
    assert (record.master.uid, record.head.uid) == ("pod-0", "head-uid")
    assert record.generation == 1
    # The engine's width is proven: the observation says so.
    assert decision.observation is not None and decision.observation.stable_width == 2


def test_no_record_and_the_engine_at_the_desired_width_is_steady() -> None:
    store = Store()
    decision = decide(store.world(facts(2, 2, eng=engine(width=2))), T0)
    assert decision.action is Action.NONE
    assert decision.observation is not None
    assert (decision.observation.stable_width, decision.observation.master_uid) == (2, "pod-0")
    carry_out(store, decision)
    # Next pass: the stable width on the same master answers without asking the engine.
    again = decide(store.world(facts(2, 2)), T0)
    assert again.action is Action.NONE and again.observation is not None
    assert not again.observation.effective.known  # not asked: never borrowed from stableWidth
    assert again.observation.stable_width == 2


def test_a_width_kueue_cannot_admit_waits_naming_its_cluster_queue_and_resource() -> None:
    store = Store()
    decision = decide(store.world(facts(4, 4, admitted=2, eng=engine(width=2))), T0)
    assert decision.action is Action.HOLD and decision.record is None
    assert "width 4 waits for admitted (2 of 4)" in decision.reason
    assert f"ClusterQueue {QUEUE} lacks {GPU} in flavor default" in decision.reason
    assert "2 members 2, 3" in decision.reason


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"nodes": {"node-a": 3}}, f"node node-a has 3 {GPU} allocatable, its members need 4"),
        ({"nodes": Unread("the Nodes could not be listed")}, "the allocated layer is unknown"),
        ({"joined": 3}, "member 3: not joined to Ray"),
    ],
)
def test_recorded_waits_for_each_lower_layer(kwargs: dict[str, object], says: str) -> None:
    store = Store()
    decision = decide(store.world(facts(4, 4, eng=engine(width=2), **kwargs)), T0)  # type: ignore[arg-type]
    assert decision.action is Action.HOLD and says in decision.reason


def test_on_a_simulated_cluster_the_change_ends_at_desired_admitted_and_allocated() -> None:
    """D29: no Ray or engine process runs on KWOK; nothing is recorded or sent."""
    f = replace(
        facts(4, 4, eng=Unread("no engine process runs on a simulated cluster")),
        ray=Unread("no Ray process runs on a simulated cluster"),
    )
    decision = decide(Store().world(f), T0)
    assert decision.action is Action.HOLD
    obs = decision.observation
    assert obs is not None
    assert (obs.desired.value, obs.admitted.value, obs.allocated.value) == (4, 4, 4)
    assert not obs.ray.known and "simulated" in obs.ray.reason
    assert not obs.effective.known and "simulated" in obs.effective.reason


def test_an_unproven_engine_still_names_the_quota_a_member_waits_for() -> None:
    """On a simulated cluster the engine is never proven, yet a width Kueue cannot admit is
    named first (its ClusterQueue and resource), then why the engine is not proven."""
    f = facts(4, 4, admitted=3, eng=Unread("no engine process runs on a simulated cluster"))
    decision = decide(Store().world(f), T0)
    assert decision.action is Action.HOLD and decision.record is None
    assert decision.reason.startswith("width 4 waits for admitted (3 of 4): member 3:")
    assert f"ClusterQueue {QUEUE} lacks {GPU}" in decision.reason
    assert decision.reason.endswith(
        "; the engine's width is not proven: no engine process runs on a simulated cluster"
    )


# ---- §4.3 CommandSent, AwaitingWidth, NativeComplete, Completed ------------------------------


def test_command_sent_is_stored_before_the_post() -> None:
    store = Store()
    decision = recorded(store)
    record = decision.record
    assert record is not None and decision.scale_to == 4
    # The write that goes before the POST carries the intent, the flag and the attempt.
    assert record.state is State.COMMAND_SENT
    assert (record.command_intent, record.command_sent, record.scale_attempts) == (
        "scale to 4",
        True,
        1,
    )
    assert store.record() == record  # stored (carried out) before any call


def test_a_sent_record_is_never_sent_again_while_the_engine_scales() -> None:
    store = Store()
    sent(store)
    decision = decide(store.world(facts(4, 4, eng=engine(scaling=True))), T0)
    assert decision.action is Action.WRITE and decision.scale_to is None
    assert decision.record is not None and decision.record.state is State.AWAITING_WIDTH
    carry_out(store, decision)
    again = decide(store.world(facts(4, 4, eng=engine(scaling=True))), T0)
    assert again.action is Action.HOLD and "scaling" in again.reason and not again.scale_to


def test_scaled_answer_then_native_then_completed() -> None:
    store = Store()
    sent(store)
    record = answer(store, SCALED)
    assert record.state is State.AWAITING_WIDTH and not record.scale_last_error
    # Idle at the target, not every rank served yet: NativeComplete.
    steps = settle(store, facts(4, 4, eng=engine(width=4, served=False)))
    assert [d.state for d in steps] == ["NativeComplete", "NativeComplete"]
    assert steps[-1].action is Action.HOLD
    # Every rank serves: Completed, then the record goes and the stable width is the target.
    steps = settle(store, facts(4, 4, eng=engine(width=4)))
    assert [d.action for d in steps] == [Action.WRITE, Action.DELETE, Action.NONE]
    assert steps[0].record is not None and steps[0].record.state is State.COMPLETED
    assert steps[1].expected is not None and steps[1].observation is not None
    assert steps[1].observation.stable_width == 4
    assert store.intent() is None


def test_completed_record_found_after_a_restart_is_deleted() -> None:
    store = Store()
    sent(store)
    rewrite(store, state=State.COMPLETED)
    decision = decide(store.world(facts(4, 4)), T0)
    assert decision.action is Action.DELETE


def test_abandoned_after_the_fifth_refusal() -> None:
    store = Store()
    sent(store)
    now = T0
    for attempt in range(1, MAX_REFUSALS + 1):
        record = answer(store, REFUSED, now)
        assert record.scale_refusals == attempt
        if attempt == MAX_REFUSALS:
            break
        now = now + backoff(attempt)
        decision = decide(store.world(facts(4, 4, eng=engine(width=2))), now)
        assert decision.scale_to == 4 and decision.record is not None
        assert decision.record.scale_attempts == attempt + 1
        carry_out(store, decision)
    final = store.record()
    assert final is not None and final.state is State.ABANDONED
    decision = decide(store.world(facts(4, 4, eng=engine(width=2))), now + timedelta(hours=1))
    assert decision.action is Action.HOLD and not decision.scale_to
    assert "refused the width change 2 to 4 5 times" in decision.reason
    assert "Scale failed" in decision.reason


@pytest.mark.parametrize("state", [State.WITHDRAWN, State.RELEASED])
def test_a_carried_over_shrink_record_holds(state: State) -> None:
    store = Store()
    sent(store)
    rewrite(store, state=state)
    decision = decide(store.world(facts(4, 4, eng=engine(width=4))), T0)
    assert decision.action is Action.HOLD and "does not shrink" in decision.reason


# ---- §4.5 failure and restart ----------------------------------------------------------------


def test_lost_answer_is_never_resent_on_a_guess() -> None:
    store = Store()
    sent(store)
    record = answer(store, LOST)
    assert record.state is State.AWAITING_WIDTH and record.outcome_unknown
    assert not record.scale_last_error  # a lost answer is no refusal
    # Engine unreadable: hold, nothing written, nothing sent.
    unread = decide(store.world(facts(4, 4, eng=Unread("connection refused"))), T0)
    assert (
        unread.action is Action.HOLD
        and not unread.scale_to
        and "connection refused" in unread.reason
    )
    # Engine at the target: done without a second send.
    done = settle(Store(objects=dict(store.objects)), facts(4, 4, eng=engine(width=4)))
    assert [d.action for d in done] == [Action.WRITE, Action.DELETE, Action.NONE]
    assert not any(d.scale_to for d in done)


def test_lost_answer_with_the_engine_idle_at_the_old_width_is_recorded_before_any_retry() -> None:
    store = Store()
    sent(store)
    answer(store, LOST)
    first = decide(store.world(facts(4, 4, eng=engine(width=2))), T0)
    assert first.action is Action.WRITE and not first.scale_to
    assert first.record is not None and first.record.scale_refusals == 1
    assert "no answer reached the controller" in first.record.scale_last_error
    carry_out(store, first)
    hold = decide(store.world(facts(4, 4, eng=engine(width=2))), T0 + timedelta(seconds=5))
    assert hold.action is Action.HOLD and hold.retry_after == timedelta(seconds=10)
    retry = decide(store.world(facts(4, 4, eng=engine(width=2))), T0 + timedelta(seconds=15))
    assert retry.scale_to == 4 and retry.record is not None
    assert retry.record.scale_attempts == 2


@pytest.mark.parametrize(
    ("n", "seconds"), [(1, 15), (2, 30), (3, 60), (4, 120), (5, 240), (6, 240), (9, 240)]
)
def test_backoff(n: int, seconds: int) -> None:
    assert backoff(n) == timedelta(seconds=seconds)


def test_a_refusal_is_retried_only_after_is_scaling_answers_false_and_the_backoff() -> None:
    store = Store()
    sent(store)
    record = answer(store, REFUSED)
    assert (
        record.scale_last_error.startswith("attempt 1: HTTP 500")
        and record.scale_last_failed_at == T0
    )
    later = T0 + timedelta(seconds=15)
    # is_scaling not read: hold.
    unread = decide(store.world(facts(4, 4, eng=Unread("timeout"))), later)
    assert unread.action is Action.HOLD and not unread.scale_to
    # is_scaling true: hold (the write moves it to AwaitingWidth, no call).
    busy = decide(store.world(facts(4, 4, eng=engine(scaling=True))), later)
    assert not busy.scale_to
    # Too early: hold with the time left.
    early = decide(store.world(facts(4, 4, eng=engine(width=2))), T0 + timedelta(seconds=14))
    assert early.action is Action.HOLD and early.retry_after == timedelta(seconds=1)
    # is_scaling false after the backoff: attempts +1 written, then the call.
    retry = decide(store.world(facts(4, 4, eng=engine(width=2))), later)
    assert retry.action is Action.WRITE and retry.scale_to == 4
    assert retry.record is not None and retry.record.scale_attempts == 2
    carry_out(store, retry)
    success = answer(store, SCALED, later)
    assert not success.scale_last_error and success.scale_last_failed_at is None


def test_a_busy_engine_is_a_definite_refusal() -> None:
    busy = classify_scale(
        503, b'{"error": "The model is currently scaling. Please try again later."}'
    )
    assert busy.verdict is ScaleVerdict.REFUSED
    store = Store()
    sent(store)
    record = answer(store, busy)
    assert "busy" in record.scale_last_error and record.scale_refusals == 1


def test_generation_moved_reconstructs_without_sending() -> None:
    """A sent record, then a spec edit: nothing is sent; the record goes once the world proves
    the target."""
    store = Store()
    sent(store)
    answer(store, LOST)
    scaling = decide(store.world(facts(4, 4, eng=engine(scaling=True)), generation=2), T0)
    assert scaling.action is Action.HOLD and not scaling.scale_to
    proven = decide(store.world(facts(4, 4, eng=engine(width=4)), generation=2), T0)
    assert proven.action is Action.DELETE and proven.observation is not None
    assert proven.observation.stable_width == 4


def test_generation_moved_on_an_unsent_record_clears_it_once_the_old_width_is_proven() -> None:
    store = Store()
    carry_out(store, decide(store.world(facts(4, 4, eng=engine(width=2))), T0))  # Recorded only
    record = store.record()
    assert record is not None and not record.command_sent
    # The generation moved (desired now 6): the unsent record is cleared on the old width...
    cleared = decide(store.world(facts(6, 4, eng=engine(width=2)), generation=2), T0)
    assert cleared.action is Action.DELETE and not cleared.scale_to
    carry_out(store, cleared)
    # ...and the next decision records from the live world again.
    again = decide(store.world(facts(6, 6, eng=engine(width=2)), generation=2), T0)
    assert again.record is not None and again.record.width.target == 6
    assert again.record.generation == 2


def test_generation_moved_with_an_unknown_outcome_records_the_failure_then_clears() -> None:
    store = Store()
    sent(store)  # CommandSent, the answer never recorded (a restart)
    f = facts(4, 4, eng=engine(width=2))
    first = decide(store.world(f, generation=2), T0)
    assert first.action is Action.WRITE and not first.scale_to
    assert first.record is not None and first.record.scale_refusals == 1
    carry_out(store, first)
    second = decide(store.world(f, generation=2), T0)
    assert second.action is Action.DELETE and second.observation is not None
    assert second.observation.stable_width == 2


def test_interrupted_raise_with_the_spec_back_at_the_old_width_deletes_the_record() -> None:
    store = Store()
    sent(store)
    answer(store, REFUSED)
    decision = decide(store.world(facts(2, 4, eng=engine(width=2)), generation=3), T0)
    assert decision.action is Action.DELETE and not decision.scale_to


def test_abandoned_record_is_reconstructed_once_the_spec_changes() -> None:
    store = Store()
    sent(store)
    stored = store.intent()
    assert isinstance(stored, StoredIntent)
    abandoned = stored.record
    for _ in range(MAX_REFUSALS):
        abandoned = after_scale(abandoned, REFUSED, T0)
        if abandoned.state is State.ABANDONED:
            break
        abandoned = evolve(
            abandoned,
            state=State.COMMAND_SENT,
            scale_attempts=abandoned.scale_attempts + 1,
        )
    assert abandoned.state is State.ABANDONED
    store.write(intent_configmap(abandoned, OWNER), dict(stored.raw))
    held = decide(store.world(facts(4, 4, eng=engine(width=2))), T0)
    assert held.action is Action.HOLD
    cleared = decide(store.world(facts(4, 4, eng=engine(width=2)), generation=2), T0)
    assert cleared.action is Action.DELETE


def test_captured_identity_gone_holds() -> None:
    store = Store()
    sent(store)
    f = facts(4, 4, eng=engine(width=2))
    f = replace(f, pods=[*f.pods[:3], member(3, uid="pod-3-successor")])
    decision = decide(store.world(f), T0)
    assert decision.action is Action.HOLD and not decision.scale_to
    assert "uid pod-3" in decision.reason and "captured is gone" in decision.reason
    # The same with the generation moved but a captured member alive: still a hold.
    moved = decide(store.world(f, generation=2), T0)
    assert moved.action is Action.HOLD and "captured is gone" in moved.reason


def test_node_loss_with_the_generation_moved_reconstructs() -> None:
    """Every captured member is gone and the spec changed: the world is proven afresh."""
    store = Store()
    sent(store)
    answer(store, LOST)
    f = facts(4, 4, eng=engine("new-0", width=4), uid_prefix="new-")
    # Generation unchanged: a hold, though the new members run the target width.
    assert decide(store.world(f), T0).action is Action.HOLD
    decision = decide(store.world(f, generation=2), T0)
    assert decision.action is Action.DELETE and decision.observation is not None
    assert decision.observation.stable_width == 4


def test_no_record_and_a_live_world_wider_than_the_stable_width_is_proven_again() -> None:
    store = Store()
    carry_out(store, decide(store.world(facts(2, 2, eng=engine(width=2))), T0))
    # The record of a raise to 4 was lost; the stable width still says 2 on the same master.
    decision = decide(store.world(facts(4, 4)), T0)
    assert decision.action is Action.ASK_ENGINE
    proven = decide(store.world(facts(4, 4, eng=engine(width=4))), T0)
    assert proven.action is Action.NONE and proven.observation is not None
    assert proven.observation.stable_width == 4


def test_the_engine_wider_than_desired_holds_never_shrinks() -> None:
    decision = decide(Store().world(facts(2, 4, eng=engine(width=4))), T0)
    assert decision.action is Action.HOLD and "does not shrink" in decision.reason


def test_an_unreadable_record_holds_and_is_never_overwritten() -> None:
    store = Store()
    sent(store)
    name = next(n for n in store.objects if n.startswith("elastic-resize-"))
    store.objects[name]["data"]["operation.json"] += " {}"
    decision = decide(store.world(facts(4, 4, eng=engine(width=2))), T0)
    assert decision.action is Action.HOLD and decision.state == "Unreadable"
    assert "not one JSON document" in decision.reason


def test_a_write_on_a_stale_read_is_refused() -> None:
    """Compare-and-swap: a decision made on a record that changed since is not written."""
    store = Store()
    sent(store)
    stale = decide(store.world(facts(4, 4, eng=engine(scaling=True))), T0)
    answer(store, REFUSED)  # the record moves on meanwhile
    with pytest.raises(ConflictError):
        carry_out(store, stale)
