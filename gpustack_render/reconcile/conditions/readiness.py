"""The summary conditions tools read — ``Ready``, ``Reconciling``, ``Stalled`` (kstatus) —
computed from the eight conditions and the ready count (docs/decisions.md, "Readiness for
tools"). ``reconcile/readinessdoc.py`` writes the reference table from the constants here."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from gpustack_render.core.vocabulary import ConditionStatus
from gpustack_render.reconcile.conditions.common import (
    CACHE_ATTACHED,
    CONDITION_TYPES,
    DOMAIN_REGISTERED,
    QUOTA_RESERVED,
    READY,
    RECONCILING,
    REPLICAS_UP_TO_DATE,
    ROLE_KINDS_READY,
    ROUTER_READY,
    SCALED_TO_ZERO,
    STALLED,
    SUMMARY_CONDITION_TYPES,
    WEIGHTS_READY,
    ConditionVerdict,
)
from gpustack_render.reconcile.conditions.quota import NO_QUEUE_IN_RESERVED_NAMESPACE, PARKED
from gpustack_render.reconcile.conditions.router import RENDER_FAILED
from gpustack_render.reconcile.conditions.weights import STALLING_REASONS as WEIGHTS_STALLING
from gpustack_render.rendering.roleplan import BINDING_DELETING, BINDING_NOT_FOUND

#: ``Ready=False``/``Reconciling=True`` when every condition holds but not every replica is ready.
REPLICAS_NOT_READY: Final = "ReplicasNotReady"
#: ``Ready=False``/``Reconciling=True`` when replicas hold quota but the scheduler finds no node
#: with room for their Pods (the same reason as ``QuotaReserved``'s for Kueue's placement).
NODES_FULL: Final = "NodesFull"
#: The summary conditions' reason while the deployment is being deleted.
DELETING: Final = "Deleting"
#: What a deployment whose generation cannot be rendered asks of its reader (the renderer's
#: message names the field or the object at fault).
RENDER_FAILED_WAY_OUT: Final = (
    "the replicas already running keep serving, and none is created, replaced or deleted until "
    "it renders: correct what the message names (the deployment, or the object it reads) or "
    "wait for that object to converge; the controller retries on its own"
)

#: (condition, reason) pairs that need someone to act: the deployment is ``Stalled``, not
#: ``Reconciling`` (the condition's message names the way out).
STALLING: Final = frozenset(
    {
        (DOMAIN_REGISTERED, BINDING_NOT_FOUND),
        (DOMAIN_REGISTERED, BINDING_DELETING),
        (QUOTA_RESERVED, PARKED),
        (QUOTA_RESERVED, NO_QUEUE_IN_RESERVED_NAMESPACE),
        (ROUTER_READY, RENDER_FAILED),
        *((WEIGHTS_READY, reason) for reason in sorted(WEIGHTS_STALLING)),
    }
)
#: The conditions ``Ready`` needs ``True``, in the order the first unmet one is reported.
#: ``CacheAttached`` counts only when ``False`` (``Unknown`` is all this release can observe);
#: ``KVEventsPublishing`` reports configuration and does not hold readiness back.
#: ``RouterReady`` does (D26): a deployment behind a router serves through it, and so does
#: ``WeightsReady`` (D28): a replica serves the artifact's weights once they have arrived.
READY_NEEDS: Final = (
    DOMAIN_REGISTERED,
    QUOTA_RESERVED,
    REPLICAS_UP_TO_DATE,
    ROLE_KINDS_READY,
    ROUTER_READY,
    WEIGHTS_READY,
)


#: The conditions whose wait is reported before replicas that wait for a node: what holds a
#: replica back before the scheduler places it (the Binding, the quota, the rollout).
BEFORE_PLACEMENT: Final = (DOMAIN_REGISTERED, QUOTA_RESERVED, REPLICAS_UP_TO_DATE)


def _summary(true_type: str, reason: str, message: str) -> dict[str, ConditionVerdict]:
    """The three summary verdicts with ``true_type`` the one that is ``True``; the others are
    ``False`` with the name of the true one as their reason (``Ready``'s keeps ``reason``)."""
    out: dict[str, ConditionVerdict] = {}
    for type_ in SUMMARY_CONDITION_TYPES:
        if type_ == true_type:
            out[type_] = ConditionVerdict(ConditionStatus.TRUE, reason, message)
        elif type_ == READY:
            out[type_] = ConditionVerdict(ConditionStatus.FALSE, reason, message)
        else:
            out[type_] = ConditionVerdict(ConditionStatus.FALSE, true_type, "")
    return out


def _quoted(type_: str, verdict: ConditionVerdict) -> str:
    """What a summary condition says of condition ``type_``: its message when brief, else its
    summary and where the detail is (said once, in that condition)."""
    if verdict.summary:
        return f"{type_}: {verdict.summary} (condition {type_} has the detail)"
    return f"{type_}: {verdict.message}"


def readiness(
    verdicts: Mapping[str, ConditionVerdict],
    *,
    ready: int,
    desired: int,
    scaled_to_zero: bool = False,
    no_node: str = "",
) -> dict[str, ConditionVerdict]:
    """``Ready``, ``Reconciling`` and ``Stalled`` from the eight conditions and the ready count
    (docs/decisions.md, "Readiness for tools"), first match:

    1. a condition with a reason of :data:`STALLING` → ``Stalled`` (its reason and message);
    1b. ``scaled_to_zero`` (every role's scaler asks for zero, D27) and nothing ready →
        ``Ready``, ``ScaledToZero`` (kstatus reads a workload scaled to zero as current);
    2. the first of :data:`READY_NEEDS` that is not ``True``, or ``CacheAttached`` ``False`` →
       ``Reconciling`` (its reason and message);
       (``NodesFull`` with ``no_node`` comes before ``RoleKindsReady`` and ``RouterReady``:
       replicas that hold quota wait for a node with room, ``conditions/quota.no_node_yet``);
    3. fewer ready replicas than declared → ``Reconciling``, ``NodesFull`` as above, else
       ``ReplicasNotReady``;
    4. otherwise ``Ready``.

    A condition quoted in rule 1 or 2 is quoted briefly when it carries detail (its
    ``summary``): the detail is said once, in that condition.
    """
    for type_ in CONDITION_TYPES:
        verdict = verdicts.get(type_)
        if verdict is not None and (type_, verdict.reason) in STALLING:
            return _summary(STALLED, verdict.reason, _quoted(type_, verdict))
    if scaled_to_zero and ready == 0:
        return _summary(
            READY,
            SCALED_TO_ZERO,
            "every role is scaled to zero by its ModelDeploymentScaler: nothing is to be ready",
        )
    waiting = [
        t for t in READY_NEEDS if t in verdicts and verdicts[t].status != ConditionStatus.TRUE
    ]
    cache = verdicts.get(CACHE_ATTACHED)
    if cache is not None and cache.status == ConditionStatus.FALSE:
        waiting.append(CACHE_ATTACHED)
    if waiting and waiting[0] in BEFORE_PLACEMENT:
        verdict = verdicts[waiting[0]]
        return _summary(RECONCILING, verdict.reason, _quoted(waiting[0], verdict))
    if desired and ready < desired and no_node:
        return _summary(
            RECONCILING, NODES_FULL, f"{ready} of {desired} replicas are ready; {no_node}"
        )
    if waiting:
        verdict = verdicts[waiting[0]]
        return _summary(RECONCILING, verdict.reason, _quoted(waiting[0], verdict))
    if not desired or ready < desired:
        return _summary(RECONCILING, REPLICAS_NOT_READY, f"{ready} of {desired} replicas are ready")
    return _summary(READY, READY, f"{ready} of {desired} replicas are ready and up to date")


def deleting_readiness(remaining: int) -> dict[str, ConditionVerdict]:
    """The summary verdicts of a deployment being deleted: ``Reconciling``, ``Deleting``."""
    return _summary(
        RECONCILING, DELETING, f"the deployment is being deleted: {remaining} replica Pod(s) remain"
    )


def render_failed_readiness(failure: str) -> dict[str, ConditionVerdict]:
    """The summary verdicts of a deployment whose generation cannot be rendered: ``Stalled``,
    ``RenderFailed``, the message ``failure`` (the generation and the renderer's message)
    followed by :data:`RENDER_FAILED_WAY_OUT`. First of all rows but ``Deleting``: nothing
    else is computed without a rendering."""
    return _summary(STALLED, RENDER_FAILED, f"{failure}; {RENDER_FAILED_WAY_OUT}")
