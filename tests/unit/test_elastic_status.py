"""The ``ElasticResize`` condition (docs/contract/elastic-ep.md §5) from the pass's last
decision: which layer is behind and why, a change in flight, an abandoned change."""

from __future__ import annotations

from datetime import timedelta

from elastic_support import (
    GPU,
    OWNER,
    QUEUE,
    T0,
    Store,
    carry_out,
    engine,
    facts,
    settle,
)

from gpustack_render.api.common import Condition
from gpustack_render.elastic.engine import classify_scale
from gpustack_render.elastic.machine import after_scale, decide
from gpustack_render.elastic.records import MAX_REFUSALS, State, StoredIntent, intent_configmap
from gpustack_render.elastic.status import (
    ELASTIC_RESIZE,
    NO_REFUSAL,
    RECORD_UNREADABLE,
    SCALE_REFUSED,
    resize_condition,
    resize_verdict,
)

NOW = "2026-03-01T12:00:00Z"


def test_steady_is_true_no_refusal() -> None:
    decision = decide(Store().world(facts(2, 2, eng=engine(width=2))), T0)
    verdict = resize_verdict(decision)
    assert (verdict.status, verdict.reason) == ("True", NO_REFUSAL)
    assert verdict.message == "the engine runs 2 engines, as desired"


def test_quota_wait_names_cluster_queue_and_resource() -> None:
    decision = decide(Store().world(facts(4, 4, admitted=3, eng=engine(width=2))), T0)
    verdict = resize_verdict(decision)
    assert (verdict.status, verdict.reason) == ("True", NO_REFUSAL)
    assert "width 4 waits for admitted (3 of 4)" in verdict.message
    assert f"ClusterQueue {QUEUE} lacks {GPU} in flavor default" in verdict.message


def test_in_flight_names_both_widths_and_the_last_failure() -> None:
    store = Store()
    settle(store, facts(4, 4, eng=engine(width=2)))
    stored = store.intent()
    assert isinstance(stored, StoredIntent)
    failed = after_scale(stored.record, classify_scale(408, b'{"error": {"message": "drain"}}'), T0)
    store.write(intent_configmap(failed, OWNER), dict(stored.raw))
    decision = decide(store.world(facts(4, 4, eng=engine(width=2))), T0 + timedelta(seconds=3))
    verdict = resize_verdict(decision)
    assert (verdict.status, verdict.reason) == ("True", NO_REFUSAL)
    assert verdict.message.startswith("width 2 to 4 (CommandSent): attempt 1 failed")
    assert verdict.message.count("attempt 1: HTTP 408: drain") == 1
    # Where the reason does not say it, the last failure is added.
    scaling = decide(store.world(facts(4, 4, eng=engine(scaling=True))), T0)
    assert "1 of 1 attempts failed, the last: attempt 1: HTTP 408: drain" in (
        resize_verdict(scaling).message
    )


def test_abandoned_is_false_scale_refused() -> None:
    store = Store()
    settle(store, facts(4, 4, eng=engine(width=2)))
    stored = store.intent()
    assert isinstance(stored, StoredIntent)
    record = stored.record
    refused = classify_scale(500, b'{"error": {"message": "Scale failed"}}')
    while True:
        record = after_scale(record, refused, T0)
        if record.state is State.ABANDONED:
            break
        record = record.model_copy(update={"scale_attempts": record.scale_attempts + 1})
    store.write(intent_configmap(record, OWNER), dict(stored.raw))
    verdict = resize_verdict(decide(store.world(facts(4, 4)), T0))
    assert (verdict.status, verdict.reason) == ("False", SCALE_REFUSED)
    for part in (
        "2 to 4",
        f"{MAX_REFUSALS} times",
        f"bound of {MAX_REFUSALS} is spent",
        "Scale failed",
    ):
        assert part in verdict.message


def test_unreadable_record_is_unknown() -> None:
    store = Store()
    settle(store, facts(4, 4, eng=engine(width=2)))
    name = next(n for n in store.objects if n.startswith("elastic-resize-"))
    store.objects[name]["metadata"]["ownerReferences"][0]["uid"] = "other"
    verdict = resize_verdict(decide(store.world(facts(4, 4)), T0))
    assert (verdict.status, verdict.reason) == ("Unknown", RECORD_UNREADABLE)
    assert "uid 'other'" in verdict.message


def test_just_completed_is_true_and_the_time_holds_while_the_status_does() -> None:
    store = Store()
    steps = settle(store, facts(4, 4, eng=engine(width=2)))
    stored = store.intent()
    assert isinstance(stored, StoredIntent)
    done = after_scale(stored.record, classify_scale(200, b'{"message": "Scaled"}'), T0)
    store.write(intent_configmap(done, OWNER), dict(stored.raw))
    steps = settle(store, facts(4, 4, eng=engine(width=4)))
    deleting = steps[-2]
    verdict = resize_verdict(deleting)
    assert (verdict.status, verdict.reason) == ("True", NO_REFUSAL)
    assert "completed" in verdict.message
    before = Condition(
        type=ELASTIC_RESIZE, status="True", reason=NO_REFUSAL, last_transition_time="earlier"
    )
    condition = resize_condition(steps[-1], [before], generation=1, now=NOW)
    assert condition.last_transition_time == "earlier" and condition.observed_generation == 1
    carry_out(store, steps[-1])
