"""Warning events a ModelDeployment records (docs/contract/controller.md §16, the seed's "Replica
departures").

:func:`departure_events` reads the deployment's Pods and returns one event per departing or
restarted replica Pod; :func:`render_failed` carries the renderer's own message. Events are
emitted on every pass while their cause holds; the controller de-duplicates repeats itself
(D24: the same object, reason and message within 10 minutes updates the existing Event's
``count`` and ``lastTimestamp``), which :func:`dedup_key` names.

A departing replica of a deployment on a KV cache pool costs its siblings the blocks it held: a
lease on cached blocks does not survive an interrupted heartbeat, so every message names the
lease window. A deployment without a pool has neither, and gets no departure event.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from gpustack_render.api.modeldeployment import ModelDeployment
from gpustack_render.core.errors import RenderError
from gpustack_render.core.ownerrefs import OwnedConflict
from gpustack_render.reconcile.observed import ObservedPod
from gpustack_render.schema.lookups import LookupFailed

WARNING: Final = "Warning"
REPLICA_EVICTED: Final = "ReplicaEvicted"
REPLICA_LEAVING: Final = "ReplicaLeaving"
REPLICA_RESTARTED: Final = "ReplicaRestarted"
RENDER_FAILED: Final = "RenderFailed"
#: An object the deployment reads is stored but cannot be decoded (one hostile object must
#: stop only the deployments that read it).
INPUT_UNREADABLE: Final = "InputUnreadable"
#: The ModelDeployment itself is stored but cannot be decoded.
DEPLOYMENT_UNREADABLE: Final = "DeploymentUnreadable"
LOCAL_QUEUE_CONFLICT: Final = "LocalQueueConflict"
#: A scaler name the deployment renders is held by an object it does not control (D27).
SCALER_CONFLICT: Final = "ScalerConflict"
#: The store's ``kv_lease_duration`` default (the injection seed's "Workload impact").
KV_LEASE_SECONDS: Final = 30
#: A repeat within this window updates the existing Event (D24).
DEDUP_WINDOW_SECONDS: Final = 600

_LEASE = (
    f"its cached blocks are lost to its siblings, and any KV lease it held lapses after the "
    f"{KV_LEASE_SECONDS} s kv_lease_duration window"
)


@dataclass(frozen=True, slots=True)
class Event:
    """One event on the ModelDeployment; ``pod`` names the replica Pod it is about, if any."""

    reason: str
    message: str
    type: str = WARNING
    pod: str | None = None


def departure_events(
    md: ModelDeployment, pods: Iterable[ObservedPod], *, seen_before: Iterable[ObservedPod] = ()
) -> list[Event]:
    """``ReplicaEvicted``, ``ReplicaLeaving`` and ``ReplicaRestarted`` for the owned Pods of
    ``md``, in Pod-name order (a Pod may carry more than one); none when ``md`` names no KV
    cache pool (no ``spec.kvCache``): each event is the cost of a departure to the pool — the
    blocks its siblings lose, the lease that lapses — and without a pool there is neither, so a
    routine rollout or a deleted Pod is no warning.

    ``seen_before`` is an earlier observation in the same pass (the one the pass acted on): a
    Pod in it that is no longer in ``pods`` finished leaving during the pass (its Workload's
    deletion released Kueue's finalizer, say) and still gets its events, as it was seen then.
    """
    if md.spec.kv_cache is None:
        return []
    current = {p.uid: p for p in pods}
    gone = [p for p in seen_before if p.uid not in current]
    out: list[Event] = []
    for pod in sorted((p for p in (*current.values(), *gone) if p.owned), key=lambda p: p.name):
        where = f"replica Pod {pod.name}"
        if pod.role is not None and pod.ordinal is not None:
            where += f" (role {pod.role}, replica {pod.ordinal}, member {pod.member})"
        if pod.evicted:
            out.append(Event(REPLICA_EVICTED, f"{where} was evicted: {_LEASE}", pod=pod.name))
        if pod.terminating:
            out.append(Event(REPLICA_LEAVING, f"{where} is leaving: {_LEASE}", pod=pod.name))
        if pod.restarts > 0:
            out.append(
                Event(
                    REPLICA_RESTARTED,
                    f"{where} restarted ({pod.restarts} container restart(s)): any KV lease it "
                    f"held lapses after the {KV_LEASE_SECONDS} s kv_lease_duration window",
                    pod=pod.name,
                )
            )
    return out


def conflict_event(reason: str, conflict: OwnedConflict) -> Event:
    """The Warning event ``reason`` for an owned-object conflict (``reconcile/owned.py``: the
    policy names the reason)."""
    if reason == SCALER_CONFLICT:
        return scaler_conflict(conflict.namespace, conflict.name, conflict.deployment)
    return Event(reason, conflict.message)


def local_queue_conflict(message: str) -> Event:
    """``LocalQueueConflict``: a LocalQueue the deployment needs feeds another ClusterQueue
    (docs/contract/controller.md §10)."""
    return Event(LOCAL_QUEUE_CONFLICT, message)


def scaler_conflict(namespace: str, name: str, deployment: str) -> Event:
    """``ScalerConflict``: the ModelDeploymentScaler ``name`` exists and the deployment does
    not control it; it is never written and its count is not read (D27)."""
    return Event(
        SCALER_CONFLICT,
        f"ModelDeploymentScaler {namespace}/{name} exists and is not controlled by "
        f"ModelDeployment {namespace}/{deployment}: it is neither written nor read, and the "
        "scaled role keeps the count it runs. Delete it and the controller creates its own",
    )


def render_failed(error: RenderError) -> Event:
    """``RenderFailed`` with the renderer's own message (docs/contract/render.md §21)."""
    return Event(RENDER_FAILED, str(error))


def input_unreadable(failure: LookupFailed) -> Event:
    """``InputUnreadable``: a stored object the deployment reads does not decode (the failed
    read of :func:`~gpustack_render.schema.lookups.decode_stored`, which names it)."""
    where = f"{failure.namespace}/{failure.name}" if failure.namespace else failure.name
    return Event(
        INPUT_UNREADABLE,
        f"{failure.kind} {where} is stored but cannot be read ({failure.reason}); this "
        f"deployment is not reconciled against it until that object is fixed or replaced",
    )


def deployment_unreadable(problems: Iterable[object], *, deleting: bool) -> Event:
    """``DeploymentUnreadable``: the stored ModelDeployment does not decode, so nothing is
    rendered, rolled or reported for it; each problem names its field."""
    what = "; ".join(str(p) for p in problems) or "no reason given"
    then = (
        "its teardown still runs from its metadata: its Pods and their Workloads are deleted "
        "and its finalizer removed"
        if deleting
        else "it is not reconciled (no Pod is created, rolled or deleted, and its status is not "
        "updated) until the object is fixed"
    )
    return Event(
        DEPLOYMENT_UNREADABLE, f"the stored ModelDeployment cannot be read ({what}); {then}"
    )


def dedup_key(event: Event, *, namespace: str, name: str) -> tuple[str, str, str, str]:
    """What makes two events the same for D24: the object, the reason and the message."""
    return (namespace, name, event.reason, event.message)
