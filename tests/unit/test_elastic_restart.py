"""A controller killed between any two steps of a width change (docs/contract/elastic-ep.md §4.5:
"record + fresh facts re-derive the same decision"; "never resent on a guess").

A simulated engine answers the scale call in each of the ways vLLM 0.33.0 can (scaled; refused
with 400, 408, 500 or 503; the answer lost with the engine scaled, unchanged, or still scaling for
a while), and the controller is stopped after any write, before or after the call, or after the
answer. Whatever hypothesis draws:

- every POST is preceded by a stored record saying ``commandSent: true`` with that attempt's
  number, and no attempt number is ever sent twice;
- nothing is sent while the engine scales, nor while the last attempt's outcome is unknown;
- at most five POSTs;
- re-deciding from what is stored gives the decision the running controller made;
- once the engine behaves and the controller runs undisturbed, the change ends: the record is
  deleted with the stable width at the target, or it is ``Abandoned`` after five failures.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from elastic_support import OWNER, T0, Store, carry_out, engine, facts
from hypothesis import given, settings
from hypothesis import strategies as st

from gpustack_render.elastic.engine import EngineAnswers, ScaleAnswer, classify_scale
from gpustack_render.elastic.machine import Action, after_scale, decide
from gpustack_render.elastic.records import (
    MAX_REFUSALS,
    State,
    StoredIntent,
    StoredObservation,
    decode_intent,
    intent_configmap,
    successor_problems,
)


class Reply(enum.Enum):
    SCALED = "scaled"
    REFUSED_400 = "400"
    REFUSED_408 = "408"
    REFUSED_500 = "500"
    BUSY_503 = "503"
    LOST_DONE = "lost, scaled"
    LOST_NONE = "lost, unchanged"
    LOST_SLOW = "lost, still scaling"


class Crash(enum.Enum):
    NONE = "none"
    AFTER_WRITE = "after the write, before the call"
    AFTER_CALL = "after the call, before its answer is recorded"
    AFTER_ANSWER = "after the answer is recorded"


@dataclass
class Engine:
    width: int = 2
    scaling_passes: int = 0
    posts: list[int] = field(default_factory=list)  # the attempt number of each POST

    def answers(self) -> EngineAnswers:
        if self.scaling_passes:
            return engine(scaling=True)
        return engine(width=self.width)

    def tick(self, target: int) -> None:
        if self.scaling_passes:
            self.scaling_passes -= 1
            if not self.scaling_passes:
                self.width = target

    def post(self, attempt: int, target: int, reply: Reply) -> ScaleAnswer:
        assert not self.scaling_passes, "a POST while the engine scales"
        self.posts.append(attempt)
        if reply in (Reply.SCALED, Reply.LOST_DONE):
            self.width = target
        if reply is Reply.LOST_SLOW:
            self.scaling_passes = 2
        if reply is Reply.SCALED:
            return classify_scale(200, b'{"message": "Scaled to 4 data parallel engines"}')
        if reply.name.startswith(("REFUSED", "BUSY")):
            return classify_scale(int(reply.value), b'{"error": {"message": "no"}}')
        return classify_scale(None, transport_error="TimeoutError")


def run_pass(
    store: Store, eng: Engine, now: datetime, replies: list[Reply], crashes: list[Crash]
) -> None:
    """One pass of the controller: decide, write, call, until it holds; it stops where
    ``crashes`` says (the next pass starts again from what is stored)."""
    for _ in range(12):
        f = facts(4, 4)
        decision = decide(store.world(f), now)
        if decision.action is Action.ASK_ENGINE:
            f = facts(4, 4, eng=eng.answers())
            decision = decide(store.world(f), now)
        # A restarted controller reading the same store decides the same.
        assert decide(store.world(f), now) == decision
        before = store.intent()
        if decision.scale_to is not None:
            assert isinstance(before, StoredIntent) or before is None
            assert decision.record is not None
            assert not (isinstance(before, StoredIntent) and before.record.outcome_unknown), (
                "a send while the last attempt's outcome is unknown"
            )
            assert not eng.scaling_passes, "a send decided while the engine scales"
            assert decision.record.scale_attempts == len(eng.posts) + 1 or (
                decision.record.scale_attempts > len(eng.posts)
            )
        if isinstance(before, StoredIntent) and decision.record is not None:
            assert successor_problems(before.record, decision.record) == []
        written = carry_out(store, decision)
        crash = crashes.pop(0) if crashes else Crash.NONE
        if decision.action in (Action.NONE, Action.HOLD, Action.ASK_ENGINE):
            return
        if crash is Crash.AFTER_WRITE:
            return
        if decision.scale_to is None:
            continue
        assert written is not None
        stored = decode_intent(written, owner=OWNER)
        assert isinstance(stored, StoredIntent) and stored.record.command_sent
        attempt = stored.record.scale_attempts
        assert attempt not in eng.posts, f"attempt {attempt} sent twice"
        reply = replies.pop(0) if replies else Reply.SCALED
        answer = eng.post(attempt, decision.scale_to, reply)
        if crash is Crash.AFTER_CALL:
            return
        nxt = after_scale(stored.record, answer, now)
        store.write(intent_configmap(nxt, OWNER), written)
        if crash is Crash.AFTER_ANSWER:
            return
    raise AssertionError("the pass did not settle")


@settings(max_examples=300, deadline=None)
@given(
    replies=st.lists(st.sampled_from(Reply), max_size=8),
    crashes=st.lists(st.sampled_from(Crash), max_size=20),
    gaps=st.lists(st.integers(min_value=0, max_value=300), min_size=1, max_size=30),
)
def test_killed_anywhere_never_resends_and_ends(
    replies: list[Reply], crashes: list[Crash], gaps: list[int]
) -> None:
    store = Store()
    eng = Engine()
    # The engine runs 2 and that is proven; the spec is then raised to 4 (members 2, 3 ready).
    carry_out(store, decide(store.world(facts(2, 2, eng=engine(width=2))), T0))
    now = T0
    for gap in gaps:
        now += timedelta(seconds=gap)
        eng.tick(4)
        run_pass(store, eng, now, replies, crashes)
    # Then undisturbed passes, the engine scaling when asked.
    for _ in range(40):
        now += timedelta(minutes=5)
        eng.tick(4)
        run_pass(store, eng, now, [], [])
    assert eng.posts == sorted(set(eng.posts)), "an attempt number sent twice"
    assert len(eng.posts) <= MAX_REFUSALS
    record = store.record()
    if record is None:
        observation = store.observation()
        assert isinstance(observation, StoredObservation)
        assert observation.record.stable_width == 4 and eng.width == 4
    else:
        assert record.state is State.ABANDONED, record
        assert record.scale_refusals == MAX_REFUSALS and eng.width == 2


def test_a_controller_killed_after_the_command_sent_write_does_not_guess() -> None:
    """The record says sent, the POST never went: the engine idle at the old width is what
    records the attempt as failed; only after its backoff is attempt 2 sent."""
    store = Store()
    eng = Engine()
    carry_out(store, decide(store.world(facts(2, 2, eng=engine(width=2))), T0))
    run_pass(store, eng, T0, [], [Crash.NONE, Crash.AFTER_WRITE])
    record = store.record()
    assert record is not None and record.state is State.COMMAND_SENT and eng.posts == []
    run_pass(store, eng, T0 + timedelta(seconds=1), [], [])
    record = store.record()
    assert record is not None and record.scale_refusals == 1 and eng.posts == []
    run_pass(store, eng, T0 + timedelta(seconds=16), [], [])
    assert eng.posts == [2] and store.record() is None and eng.width == 4
