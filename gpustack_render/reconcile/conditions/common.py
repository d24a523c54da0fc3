"""What every condition rule shares: the condition types in ``status.conditions`` order, one
condition's verdict before times are attached, ``lastTransitionTime`` carried over while a
condition's ``status`` is unchanged, the bound on a message (docs/contract/controller.md
§14), and the bound on a list a message names (counts and the first few names,
docs/autoscaling.md "What status tells when capacity runs out")."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from gpustack_render.api.common import Condition
from gpustack_render.core.vocabulary import ConditionStatus
from gpustack_render.reconcile.replicas import Replica, ReplicaIndex
from gpustack_render.rendering.renderer import Rendering

DOMAIN_REGISTERED: Final = "DomainRegistered"
QUOTA_RESERVED: Final = "QuotaReserved"
REPLICAS_UP_TO_DATE: Final = "ReplicasUpToDate"
ROLE_KINDS_READY: Final = "RoleKindsReady"
CACHE_ATTACHED: Final = "CacheAttached"
KV_EVENTS_PUBLISHING: Final = "KVEventsPublishing"
ROUTER_READY: Final = "RouterReady"
WEIGHTS_READY: Final = "WeightsReady"
#: Condition order in ``status.conditions``.
CONDITION_TYPES: Final = (
    DOMAIN_REGISTERED,
    QUOTA_RESERVED,
    REPLICAS_UP_TO_DATE,
    ROLE_KINDS_READY,
    CACHE_ATTACHED,
    KV_EVENTS_PUBLISHING,
    ROUTER_READY,
    WEIGHTS_READY,
)

#: The summary conditions tools read (kstatus: ``Ready`` normal-true, ``Reconciling`` and
#: ``Stalled`` abnormal-true), computed from the eight above (docs/decisions.md, "Readiness for
#: tools"). Exactly one of the three is ``True``.
READY: Final = "Ready"
RECONCILING: Final = "Reconciling"
STALLED: Final = "Stalled"
SUMMARY_CONDITION_TYPES: Final = (READY, RECONCILING, STALLED)
#: Every condition, in ``status.conditions`` order: the summary first, then the eight.
ALL_CONDITION_TYPES: Final = (*SUMMARY_CONDITION_TYPES, *CONDITION_TYPES)

#: The reason of a condition about something the deployment does not use.
NOT_APPLICABLE: Final = "NotApplicable"
#: The reason of ``QuotaReserved`` and ``Ready`` when every role's scaler asks for zero (D27).
SCALED_TO_ZERO: Final = "ScaledToZero"

#: The longest condition message (and ``phaseMessage``) written: Kubernetes' bound on a
#: condition's message, which Kueue applies to its own. A message naming every waiting
#: replica's downstream check grows with the replica count; unbounded, the status of a large
#: deployment would outgrow what the API server stores and no status would be written at all.
MAX_MESSAGE_CHARS: Final = 32768
_TRUNCATED: Final = " ..."
#: How many names a status message lists of a longer list (replicas, Workloads, Pods): the
#: count and these first few, so a message stays short whatever the replica count.
NAMES_SHOWN: Final = 3
#: Another component's words (Kueue's, the scheduler's, an admission check's) are quoted up to
#: this length, once per message.
QUOTED_CHARS: Final = 400


@dataclass(frozen=True, slots=True)
class ConditionVerdict:
    """One condition's ``status``/``reason``/``message`` before times are attached.

    ``summary`` is the brief form the summary conditions and ``phaseMessage`` quote when the
    message carries detail (the replicas waiting, the queue's words): the detail is said once,
    in this condition, and the others refer to it. Empty: the message is brief itself."""

    status: ConditionStatus
    reason: str
    message: str = ""
    summary: str = ""

    @property
    def brief(self) -> str:
        """What another field quotes of this condition: its summary, else its message."""
        return self.summary or self.message


def declared_replicas(rendering: Rendering, index: ReplicaIndex) -> list[Replica]:
    """The occupied replicas at declared ordinals, role by role in spec order (what the
    conditions count; a Pod beyond ``replicas`` or without an ordinal is no replica)."""
    return [r for role in rendering.roles for r in index.replicas_of(role.name, role.replicas)]


def few(names: Iterable[str], *, shown: int = NAMES_SHOWN) -> str:
    """``names`` joined by ``, ``, at most ``shown`` of them: ``a, b, c`` when that is all, else
    ``a, b, c … (+75 more)``. The caller says the count."""
    items = list(names)
    listed = ", ".join(items[:shown])
    rest = len(items) - shown
    return f"{listed} … (+{rest} more)" if rest > 0 else listed


def bounded_message(message: str) -> str:
    """``message`` cut to :data:`MAX_MESSAGE_CHARS`, ending in `` ...`` when cut."""
    if len(message) <= MAX_MESSAGE_CHARS:
        return message
    return message[: MAX_MESSAGE_CHARS - len(_TRUNCATED)] + _TRUNCATED


def conditions_with_times(
    verdicts: Mapping[str, ConditionVerdict],
    previous: Sequence[Condition] | None,
    *,
    generation: int | None,
    now: str,
    types: Sequence[str] = CONDITION_TYPES,
) -> list[Condition]:
    """Conditions in ``types`` order (default :data:`CONDITION_TYPES`); ``lastTransitionTime``
    moves only when ``status`` changes. Types not in ``verdicts`` keep their previous value
    untouched."""
    before = {c.type: c for c in previous or ()}
    out: list[Condition] = []
    for type_ in types:
        verdict = verdicts.get(type_)
        if verdict is None:
            if type_ in before:
                out.append(before[type_])
            continue
        old = before.get(type_)
        when = (
            old.last_transition_time
            if old is not None and old.status == verdict.status and old.last_transition_time
            else now
        )
        out.append(
            Condition(
                type=type_,
                status=verdict.status,
                reason=verdict.reason,
                message=bounded_message(verdict.message),
                last_transition_time=when,
                observed_generation=generation,
            )
        )
    return out
