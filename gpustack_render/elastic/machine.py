"""The width-change state machine (docs/contract/elastic-ep.md §4.3, §4.5; D29), as one pure
decision: :func:`decide` takes the intent record as read (or none), the observation record, the
facts of this pass and the time, and says the one next step. :func:`after_scale` says what to
record once the scale call answered.

The controller runs a pass as a loop: decide; write the decision's observation (when it has one);
carry out its action; decide again on what it wrote, until the action is ``NONE`` or ``HOLD``
(or a write failed: then the pass ends and is retried, and nothing else is sent).

- ``WRITE``: write :attr:`Decision.record` with the resourceVersion of :attr:`Decision.expected`
  (create when ``None``), through the record policy of the owned-object path. Only when the write
  succeeded, and only then, send the scale call to :attr:`Decision.scale_to` when set: the record
  saying ``commandSent: true`` and the attempt number is stored **before** the POST.
- ``DELETE``: delete the record with the uid and resourceVersion of :attr:`Decision.expected`.
- ``ASK_ENGINE``: read the engine (:mod:`.engine`: is scaling, then bound, forwards, bound) and
  decide again with its answers (or with :class:`~.layers.Unread` saying why it could not).
  Answers read before a scale call say nothing about the engine after it: once a call was sent,
  decide again with ``engine=None``, so the machine asks afresh (an old "idle at the old width"
  would otherwise read as an attempt that did not take).

The rules (each is a row of §4.3 or §4.5; docs/elastic-ep.md, "Width changes", words them):

- Width only grows (D29). A change is **recorded** when no record exists, the engine proves a
  width below the desired one with its own answers, and admitted, allocated and ray each reach
  the target (every ordinal below it). It captures the master, the head, the members and the
  workers it adds; those and the widths never change afterwards.
- **CommandSent** is written (intent ``scale to T``, ``commandSent: true``, ``scaleAttempts`` n)
  before each POST. A record whose last attempt has no recorded outcome (``scaleRefusals <
  scaleAttempts``) is never resent on a guess: the engine scaling holds it (``AwaitingWidth``);
  the engine idle at the target moves it on (``NativeComplete``, then ``Completed`` once every
  rank served); the engine idle at another width records that attempt as failed, no answer
  having reached the controller (observation, not a guess, decides it).
- A failed attempt n is retried only when ``/is_scaling_elastic_ep`` answered false this pass and
  min(15 s·2^(n−1), 4 min) passed since it failed; ``scaleAttempts`` grows first (the write
  before the POST). The fifth failure is ``Abandoned``: terminal, ``ElasticResize`` False.
- **Generation moved** (or every captured member is gone): reconstruction. Nothing is sent. The
  record is deleted once the live world proves its target (the engine serves it and the lower
  layers reach it) or, when no attempt's outcome is unknown, its old width. A captured identity
  gone while the generation holds: hold.
- A record of the shrink path (``Withdrawn``, ``Released``, or a target below the old width)
  holds: this release does not shrink (D29).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final

from pydantic import ValidationError

from gpustack_render.elastic.engine import ScaleAnswer, ScaleVerdict
from gpustack_render.elastic.layers import (
    Facts,
    Layers,
    behind,
    layer_records,
    layers_of,
    live_members,
    master_of,
)
from gpustack_render.elastic.records import (
    DOWN_STATES,
    IDLE,
    MAX_REFUSALS,
    Identity,
    IntentRecord,
    ObservationRecord,
    RecordUnreadable,
    State,
    StoredIntent,
    StoredObservation,
    Widths,
    intent_configmap,
    observation_configmap,
    scale_intent,
)
from gpustack_render.reconcile.observed import ObservedPod
from gpustack_render.reconcile.owned import Owner

#: The first retry's delay, doubled per failure, and its cap (§4.5).
FIRST_BACKOFF: Final = timedelta(seconds=15)
MAX_BACKOFF: Final = timedelta(minutes=4)
#: The observation's state when the intent record is unreadable.
UNREADABLE: Final = "Unreadable"


def backoff(failures: int) -> timedelta:
    """The wait after failure ``failures`` (1-based): min(15 s·2^(n−1), 4 min)."""
    delay: timedelta = FIRST_BACKOFF * (2 ** max(failures - 1, 0))
    return min(delay, MAX_BACKOFF)


class Action(enum.Enum):
    #: Nothing to do: no change is needed.
    NONE = "none"
    #: Wait; :attr:`Decision.reason` says for what.
    HOLD = "hold"
    #: Write the intent record, then (only if it was written) send the scale call when set.
    WRITE = "write"
    #: Delete the intent record (uid and resourceVersion preconditions).
    DELETE = "delete"
    #: Read the engine's answers and decide again.
    ASK_ENGINE = "ask-engine"


@dataclass(frozen=True)
class World:
    """What one decision reads: the deployment, this pass's facts, and both records as read."""

    owner: Owner
    generation: int
    facts: Facts
    intent: StoredIntent | RecordUnreadable | None = None
    observation: StoredObservation | RecordUnreadable | None = None


@dataclass(frozen=True)
class Decision:
    action: Action
    #: What the step does or why it waits, in words (the status message's detail).
    reason: str
    layers: Layers
    #: The machine's state after the step: a :class:`State` value, ``Idle`` or ``Unreadable``.
    state: str
    #: ``WRITE``: the record to write.
    record: IntentRecord | None = None
    #: ``WRITE``/``DELETE``: the record as read, whose uid and resourceVersion are the
    #: preconditions (``None`` with ``WRITE``: create; the name must still be free).
    expected: StoredIntent | None = None
    #: ``WRITE``: send the scale call to this width once the record is written.
    scale_to: int | None = None
    #: The observation record to write first (``None``: unchanged, or not to be written).
    observation: ObservationRecord | None = None
    #: ``HOLD``: when deciding again is useful (a retry's backoff), if not before.
    retry_after: timedelta | None = None
    #: The record this decision was made on (for status), when there is one.
    current: IntentRecord | None = None

    def configmap(self, owner: Owner) -> dict[str, Any]:
        """``WRITE``: the ConfigMap to write (the owned-object path adds the resourceVersion of
        :attr:`expected`)."""
        if self.record is None:
            raise ValueError("only a WRITE decision has a record to write")
        return intent_configmap(self.record, owner)

    def observation_configmap(self, owner: Owner) -> dict[str, Any] | None:
        return observation_configmap(self.observation, owner) if self.observation else None


# ---- records: the only ways a record changes ---------------------------------------------------


def evolve(record: IntentRecord, **changes: Any) -> IntentRecord:
    """``record`` with ``changes``, validated as a decode would (a successor that breaks the
    record's own rules raises)."""
    return IntentRecord.model_validate_json(
        record.model_copy(update=changes).model_dump_json(by_alias=True), strict=True
    )


def _sent(record: IntentRecord) -> IntentRecord:
    """The write before attempt n+1's POST."""
    return evolve(
        record,
        state=State.COMMAND_SENT,
        command_intent=scale_intent(record.width.target),
        command_sent=True,
        scale_attempts=record.scale_attempts + 1,
    )


def _failed(record: IntentRecord, error: str, now: datetime) -> IntentRecord:
    """The last attempt failed (a refusal, or observation proved it did not take)."""
    refusals = record.scale_refusals + 1
    return evolve(
        record,
        state=State.ABANDONED if refusals >= MAX_REFUSALS else record.state,
        scale_refusals=refusals,
        scale_last_error=error[:512],
        scale_last_failed_at=now,
    )


def after_scale(sent: IntentRecord, answer: ScaleAnswer, now: datetime) -> IntentRecord:
    """The record to write (at the resourceVersion the CommandSent write returned) once the scale
    call of attempt ``sent.scale_attempts`` answered. Scaled: ``AwaitingWidth`` with the last
    failure cleared. Refused: the failure recorded (the fifth abandons). Lost: ``AwaitingWidth``
    and nothing else; observation decides what happened."""
    if not sent.outcome_unknown:
        raise ValueError("after_scale takes the record written before the call")
    if answer.verdict is ScaleVerdict.REFUSED:
        return _failed(sent, f"attempt {sent.scale_attempts}: {answer.refusal}", now)
    if answer.verdict is ScaleVerdict.SCALED:
        return evolve(
            sent, state=State.AWAITING_WIDTH, scale_last_error="", scale_last_failed_at=None
        )
    return evolve(sent, state=State.AWAITING_WIDTH)


# ---- the decision ------------------------------------------------------------------------------


@dataclass
class _Pass:
    world: World
    now: datetime
    members: list[ObservedPod]
    layers: Layers
    stable: int = 0
    stable_master: str = ""
    current: IntentRecord | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def master(self) -> ObservedPod | None:
        return master_of(self.members)

    def observation(self, state: str, reason: str) -> ObservationRecord | None:
        stored = self.world.observation
        new = ObservationRecord(
            deployment_uid=self.world.owner.uid,
            observed_generation=self.world.generation,
            **layer_records(self.layers),
            state=state,
            reason=reason[:4096],
            stable_width=self.stable,
            master_uid=self.stable_master if self.stable else "",
        )
        if isinstance(stored, StoredObservation) and (
            stored.record.observed_generation > self.world.generation or stored.record == new
        ):
            return None
        return new

    def decision(self, action: Action, reason: str, state: str, **kw: Any) -> Decision:
        return Decision(
            action=action,
            reason=reason,
            layers=self.layers,
            state=state,
            observation=None if action is Action.ASK_ENGINE else self.observation(state, reason),
            current=self.current,
            **kw,
        )

    def hold(self, reason: str, state: str, **kw: Any) -> Decision:
        return self.decision(Action.HOLD, reason, state, **kw)

    def ask(self, state: str) -> Decision:
        return self.decision(Action.ASK_ENGINE, "the engine's answers are needed", state)

    def write(
        self,
        record: IntentRecord,
        reason: str,
        *,
        expected: StoredIntent | None,
        scale: bool = False,
    ) -> Decision:
        return self.decision(
            Action.WRITE,
            reason,
            record.state.value,
            record=record,
            expected=expected,
            scale_to=record.width.target if scale else None,
        )

    def delete(self, reason: str, expected: StoredIntent, *, proven: int) -> Decision:
        master = self.master
        if proven and master is not None:
            self.stable, self.stable_master = proven, master.uid
        return self.decision(Action.DELETE, reason, IDLE, expected=expected)


def _stable(world: World, members: Sequence[ObservedPod]) -> tuple[int, str]:
    """The stable width of the stored observation, when proven on the live master."""
    master = master_of(members)
    stored = world.observation
    if (
        isinstance(stored, StoredObservation)
        and master is not None
        and stored.record.master_uid == master.uid
        and stored.record.stable_width
    ):
        return stored.record.stable_width, master.uid
    return 0, ""


def decide(world: World, now: datetime) -> Decision:
    """The next step for ``world`` at ``now`` (see the module docstring)."""
    members = live_members(world.facts.pods, world.facts.component)
    layers = layers_of(world.facts, members=members)
    stable, stable_master = _stable(world, members)
    ctx = _Pass(world, now, members, layers, stable, stable_master)
    intent = world.intent
    if isinstance(intent, RecordUnreadable):
        return ctx.hold(
            f"{intent.message}; the controller neither overwrites nor deletes it, so no width "
            "change proceeds until it is removed",
            UNREADABLE,
        )
    if intent is None:
        return _idle(ctx)
    ctx.current = intent.record
    return _with_record(ctx, intent)


# ---- no record ---------------------------------------------------------------------------------


def _idle(ctx: _Pass) -> Decision:
    desired = ctx.world.facts.desired
    layers = ctx.layers
    if ctx.stable == desired and not (layers.admitted.known and layers.admitted.value > ctx.stable):
        return ctx.decision(Action.NONE, f"the engine runs {desired} engines, as desired", IDLE)
    master = ctx.master
    if master is None:
        return ctx.hold(f"width {desired} waits for the master Pod (ordinal 0) to run", IDLE)
    if ctx.world.facts.engine is None:
        return ctx.ask(IDLE)
    if layers.scaling:
        return ctx.hold(
            "the engine is scaling and no record of this controller's says why: waiting for it "
            "to end",
            IDLE,
        )
    if not layers.effective.known:
        # The lower layers are named first: a member Kueue cannot admit says why (its
        # ClusterQueue and the resource it lacks) even where the engine cannot be asked.
        why = f"the engine's width is not proven: {layers.effective.reason}"
        waits = behind(layers, desired)
        return ctx.hold(f"{waits}; {why}" if waits else why, IDLE)
    width = layers.effective.value
    ctx.stable, ctx.stable_master = width, master.uid
    if width == desired:
        return ctx.decision(Action.NONE, f"the engine runs {desired} engines, as desired", IDLE)
    if width > desired:
        return ctx.hold(
            f"the engine runs {width} engines, more than the desired width {desired}: "
            "this release does not shrink (D29)",
            IDLE,
        )
    waits = behind(layers, desired)
    if waits:
        return ctx.hold(f"{waits} (the engine runs {width})", IDLE)
    return _record(ctx, old=width, target=desired)


def _identity(pod: ObservedPod) -> Identity:
    return Identity(name=pod.name, uid=pod.uid)


def _record(ctx: _Pass, *, old: int, target: int) -> Decision:
    by_ordinal: dict[int, list[ObservedPod]] = {}
    for pod in ctx.members:
        by_ordinal.setdefault(pod.ordinal or 0, []).append(pod)
    doubled = [o for o in range(target) if len(by_ordinal.get(o, ())) != 1]
    head = ctx.world.facts.head
    if doubled:
        return ctx.hold(f"width {target} waits: ordinals {doubled} are not one live Pod each", IDLE)
    if head is None or not head.uid or head.terminating:
        return ctx.hold(f"width {target} waits for the Ray head Pod", IDLE)
    members = [by_ordinal[o][0] for o in range(target)]
    try:
        record = IntentRecord(
            name=ctx.world.owner.name,
            deployment_uid=ctx.world.owner.uid,
            namespace=ctx.world.owner.namespace,
            generation=ctx.world.generation,
            width=Widths(old=old, target=target),
            workers=tuple(_identity(p) for p in members[old:]),
            master=_identity(members[0]),
            head=_identity(head),
            members=tuple(_identity(p) for p in members),
            state=State.RECORDED,
        )
    except ValidationError as exc:
        return ctx.hold(
            f"width {old} to {target} cannot be recorded: {exc.errors()[0]['msg']}", IDLE
        )
    return ctx.write(record, f"recorded the width change {old} to {target}", expected=None)


# ---- a record ----------------------------------------------------------------------------------


def _with_record(ctx: _Pass, stored: StoredIntent) -> Decision:
    record = stored.record
    state = record.state.value
    if record.state in DOWN_STATES or record.width.target < record.width.old:
        return ctx.hold(
            f"the record shrinks the width {record.width.old} to {record.width.target}: this "
            "release does not shrink (D29); the record is kept as found",
            state,
        )
    if record.state is State.COMPLETED:
        return ctx.delete(
            f"the width change {record.width.old} to {record.width.target} completed",
            stored,
            proven=record.width.target if _held(ctx, record.master) else 0,
        )
    moved = ctx.world.generation != record.generation
    live = {p.uid for p in ctx.members}
    if ctx.world.facts.head is not None:
        live.add(ctx.world.facts.head.uid)
    gone = [i for i in record.captured() if i.uid not in live]
    members = {i.uid for i in (record.master, *record.members, *record.workers)}
    if gone and not (moved and not members & live):
        return ctx.hold(
            f"Pod {gone[0].name} (uid {gone[0].uid}) the width change captured is gone"
            + (f" with {len(gone) - 1} more" if len(gone) > 1 else "")
            + ": the change holds until the deployment's spec changes (its generation moves), "
            "then the width is proven again from the live world",
            state,
        )
    if moved or gone:
        return _reconstruct(ctx, stored)
    if record.state is State.ABANDONED:
        return ctx.hold(_abandoned(record), state)
    if ctx.world.facts.engine is None:
        return ctx.ask(state)
    if record.state is State.RECORDED:
        return _first_send(ctx, stored)
    return _follow(ctx, stored)


def _held(ctx: _Pass, ident: Identity) -> bool:
    master = ctx.master
    return master is not None and master.uid == ident.uid


def _abandoned(record: IntentRecord) -> str:
    return (
        f"the engine refused the width change {record.width.old} to {record.width.target} "
        f"{record.scale_refusals} times, the bound of {MAX_REFUSALS} is spent; its last "
        f"refusal: {record.scale_last_error}. The record stays until the deployment's spec "
        "changes (its generation moves); then the width is proven again from the live world"
    )


def _engine_hold(ctx: _Pass, state: str, what: str) -> Decision | None:
    """Hold while the engine's state is unread or it scales (``None``: idle, go on)."""
    layers = ctx.layers
    if layers.scaling is None:
        return ctx.hold(f"{what}: {layers.engine_reason}", state)
    if layers.scaling:
        return ctx.hold(f"{what}: the engine is scaling", state)
    if layers.native is None:
        return ctx.hold(f"{what}: {layers.engine_reason}", state)
    return None


def _served(ctx: _Pass, width: int) -> bool:
    return ctx.layers.effective.known and ctx.layers.effective.value == width


def _first_send(ctx: _Pass, stored: StoredIntent) -> Decision:
    record = stored.record
    old, target = record.width.old, record.width.target
    held = _engine_hold(ctx, record.state.value, f"the width change {old} to {target} waits")
    if held is not None:
        return held
    native = ctx.layers.native
    if native == target and _served(ctx, target):
        return ctx.write(
            evolve(record, state=State.COMPLETED),
            f"the engine already runs {target} engines; nothing to send",
            expected=stored,
        )
    if native != old:
        return ctx.hold(
            f"the engine runs {native} engines, the record expects {old}: nothing is sent",
            record.state.value,
        )
    waits = behind(ctx.layers, target)
    if waits:
        return ctx.hold(waits, record.state.value)
    return ctx.write(
        _sent(record),
        f"asking the engine to scale from {old} to {target}",
        expected=stored,
        scale=True,
    )


def _follow(ctx: _Pass, stored: StoredIntent) -> Decision:
    """A record whose command was sent at least once (§4.3 CommandSent..NativeComplete)."""
    record = stored.record
    old, target = record.width.old, record.width.target
    state = record.state.value
    layers = ctx.layers
    if layers.scaling and record.state is not State.AWAITING_WIDTH:
        return ctx.write(
            evolve(record, state=State.AWAITING_WIDTH),
            f"the engine is scaling to {target}",
            expected=stored,
        )
    held = _engine_hold(ctx, state, f"the width change {old} to {target} waits")
    if held is not None:
        return held
    native = layers.native
    if native == target:
        if _served(ctx, target):
            return ctx.write(
                evolve(record, state=State.COMPLETED),
                f"the engine runs and serves {target} engines",
                expected=stored,
            )
        if record.state is not State.NATIVE_COMPLETE:
            return ctx.write(
                evolve(record, state=State.NATIVE_COMPLETE),
                f"the engine runs {target} engines; waiting for every rank to serve",
                expected=stored,
            )
        return ctx.hold(f"the engine runs {target} engines: {layers.effective.reason}", state)
    if record.outcome_unknown:
        return ctx.write(
            _failed(
                record,
                f"attempt {record.scale_attempts}: no answer reached the controller, and the "
                f"engine is idle at {native} engines",
                ctx.now,
            ),
            f"attempt {record.scale_attempts} did not take: the engine is idle at {native} engines",
            expected=stored,
        )
    return _retry(ctx, stored, native)


def _retry(ctx: _Pass, stored: StoredIntent, native: int | None) -> Decision:
    record = stored.record
    old, target = record.width.old, record.width.target
    state = record.state.value
    failed_at = record.scale_last_failed_at
    if failed_at is not None:
        due = failed_at + backoff(record.scale_refusals)
        if ctx.now < due:
            return ctx.hold(
                f"attempt {record.scale_attempts} failed ({record.scale_last_error}); the next "
                f"is sent after {due.isoformat()}",
                state,
                retry_after=due - ctx.now,
            )
    if native != old:
        return ctx.hold(
            f"the engine is idle at {native} engines, neither the old width {old} nor the "
            f"target {target}: nothing is sent",
            state,
        )
    waits = behind(ctx.layers, target)
    if waits:
        return ctx.hold(waits, state)
    return ctx.write(
        _sent(record),
        f"asking the engine again (attempt {record.scale_attempts + 1}) to scale from {old} to "
        f"{target}",
        expected=stored,
        scale=True,
    )


def _reconstruct(ctx: _Pass, stored: StoredIntent) -> Decision:
    """The generation moved (or no captured member lives): nothing is sent, no member is
    removed; the record goes once the live world proves its target or, with no attempt's
    outcome unknown, its old width (§4.5)."""
    record = stored.record
    old, target = record.width.old, record.width.target
    state = record.state.value
    what = f"reconstructing the width change {old} to {target} after the deployment changed"
    if ctx.master is None:
        return ctx.hold(f"{what}: no live master Pod", state)
    if ctx.world.facts.engine is None:
        return ctx.ask(state)
    held = _engine_hold(ctx, state, what)
    if held is not None:
        return held
    native = ctx.layers.native
    if native == target and _served(ctx, target) and not behind(ctx.layers, target):
        return ctx.delete(f"{what}: the live world proves width {target}", stored, proven=target)
    if native == old and _served(ctx, old) and not record.outcome_unknown:
        return ctx.delete(f"{what}: the live world proves width {old}", stored, proven=old)
    if record.outcome_unknown and native != target:
        return ctx.write(
            _failed(
                record,
                f"attempt {record.scale_attempts}: no answer reached the controller, and the "
                f"engine is idle at {native} engines",
                ctx.now,
            ),
            f"{what}: attempt {record.scale_attempts} did not take",
            expected=stored,
        )
    return ctx.hold(
        f"{what}: waiting for the live world to prove width {old} or {target} "
        f"({ctx.layers.effective.reason or behind(ctx.layers, target)})",
        state,
    )
