"""The ``ElasticResize`` condition (docs/contract/elastic-ep.md §5): what the deployment's status
says about width changes, from the pass's last :class:`~gpustack_render.elastic.machine.Decision`.

- ``True``, ``NoRefusal``: no record, a change in flight, or one just completed. The message
  says what the machine does or waits for: which layer is behind and why (a width Kueue cannot
  admit waits, naming the ClusterQueue and the resource it lacks, from the members' Workloads),
  the engine scaling, a retry's time.
- ``False``, ``ScaleRefused``: the record is ``Abandoned``; the message names both widths, the
  refusal count, the bound spent and the engine's last refusal, and the way out.
- ``Unknown``, ``RecordUnreadable`` (this project's): the intent record cannot be read; nothing
  moves until it is removed. (Upstream documents ``Unknown``/``WorldUnprovable`` for a record
  gone with an unprovable width; this machine holds in ``True`` with the reason instead, since
  it never loses a record it wrote.)

The width itself is not in status: the observation record holds it (§5).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from gpustack_render.api.common import Condition
from gpustack_render.api.modeldeployment import ModelDeploymentStatus
from gpustack_render.core.vocabulary import ConditionStatus
from gpustack_render.elastic.machine import UNREADABLE, Action, Decision
from gpustack_render.elastic.records import State
from gpustack_render.reconcile.conditions.common import ConditionVerdict, conditions_with_times

ELASTIC_RESIZE: Final = "ElasticResize"
NO_REFUSAL: Final = "NoRefusal"
SCALE_REFUSED: Final = "ScaleRefused"
RECORD_UNREADABLE: Final = "RecordUnreadable"


def resize_verdict(decision: Decision) -> ConditionVerdict:
    """``ElasticResize`` for the pass whose last decision is ``decision``."""
    if decision.state == UNREADABLE:
        return ConditionVerdict(ConditionStatus.UNKNOWN, RECORD_UNREADABLE, decision.reason)
    record = decision.current
    if decision.state == State.ABANDONED.value and record is not None:
        return ConditionVerdict(ConditionStatus.FALSE, SCALE_REFUSED, decision.reason)
    if record is None or decision.action is Action.DELETE:
        return ConditionVerdict(ConditionStatus.TRUE, NO_REFUSAL, decision.reason)
    change = f"width {record.width.old} to {record.width.target} ({decision.state})"
    refused = (
        f"; {record.scale_refusals} of {record.scale_attempts} attempts failed, the last: "
        f"{record.scale_last_error}"
        if record.scale_last_error and record.scale_last_error not in decision.reason
        else ""
    )
    return ConditionVerdict(
        ConditionStatus.TRUE, NO_REFUSAL, f"{change}: {decision.reason}{refused}"
    )


def resize_condition(
    decision: Decision,
    previous: Sequence[Condition] | None,
    *,
    generation: int | None,
    now: str,
) -> Condition:
    """The ``ElasticResize`` condition to put in ``status.conditions`` (its
    ``lastTransitionTime`` kept while its status holds)."""
    (condition,) = conditions_with_times(
        {ELASTIC_RESIZE: resize_verdict(decision)},
        previous,
        generation=generation,
        now=now,
        types=(ELASTIC_RESIZE,),
    )
    return condition


def kept_resize_condition(
    status: ModelDeploymentStatus, stored: ModelDeploymentStatus | None
) -> ModelDeploymentStatus:
    """``status`` (a held pass's: a render failure, weights not deliverable) with the stored
    ``ElasticResize`` kept as it was: the step did not run, so nothing new is known."""
    kept = [c for c in (stored.conditions if stored else None) or () if c.type == ELASTIC_RESIZE]
    if not kept:
        return status
    others = [c for c in status.conditions or () if c.type != ELASTIC_RESIZE]
    return status.model_copy(update={"conditions": [*others, *kept]})


def with_resize_condition(
    status: ModelDeploymentStatus,
    decision: Decision,
    previous: Sequence[Condition] | None,
    *,
    generation: int | None,
    now: str,
) -> ModelDeploymentStatus:
    """``status`` (a deployment's, computed by the reconcile pass) with ``ElasticResize`` after
    its other conditions: only a deployment with an elastic role carries it."""
    condition = resize_condition(decision, previous, generation=generation, now=now)
    others = [c for c in status.conditions or () if c.type != ELASTIC_RESIZE]
    return status.model_copy(update={"conditions": [*others, condition]})
