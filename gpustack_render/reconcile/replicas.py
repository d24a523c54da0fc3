"""The replica index: one observation of a deployment's Pods and Workloads, grouped into
replicas once.

A replica is the live owned Pods at one (role, ordinal) and the Workloads owning them. The
planner, the status rules, the joint admission check and ``explain`` all ask the same questions
of what the controller observed — which Pods stand at an ordinal, which are leaving it, which
Workloads own them, whether the replica is complete, serving, admitted — so the grouping is done
here, once per observation, and each of them reads it. Nothing else regroups Pods into replicas.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from gpustack_render.reconcile.observed import ObservedPod, ObservedWorkload


def expected_size(pods: Sequence[ObservedPod], size: int) -> int:
    """The member count a replica should have: the size it was created with (its group's
    declared total, when its Pods agree on one), else the role's current ``size``.

    Judging a replica by its own total lets a ``size`` edit roll old replicas through the
    admission gate instead of reading every one of them as broken.
    """
    totals = {p.group_total for p in pods if p.group_total}
    return totals.pop() if len(totals) == 1 else size


def is_complete(pods: Sequence[ObservedPod], size: int) -> bool:
    """Every member 0..n-1 present exactly once (n = :func:`expected_size`)."""
    want = expected_size(pods, size)
    return len(pods) == want and {p.member for p in pods} == set(range(want))


def is_serving(pods: Sequence[ObservedPod], size: int) -> bool:
    """A replica serves (``status.roles[].ready`` counts it) when it is complete and every
    member is Ready."""
    return is_complete(pods, size) and all(p.ready for p in pods)


@dataclass(frozen=True, slots=True)
class Replica:
    """The live owned Pods at one (role, ordinal), by member index then name, and the Workloads
    owning them (each once, in the order their Pods list them).

    ``size`` is what the role declares now; the replica is judged against the size it was
    created with when its Pods agree on one (:func:`expected_size`).
    """

    role: str
    ordinal: int
    pods: tuple[ObservedPod, ...]
    workloads: tuple[ObservedWorkload, ...]

    def expected(self, size: int) -> int:
        """The member count this replica should have (:func:`expected_size`)."""
        return expected_size(self.pods, size)

    def complete(self, size: int) -> bool:
        """Every member present exactly once (:func:`is_complete`)."""
        return is_complete(self.pods, size)

    def serving(self, size: int) -> bool:
        """Complete and every member Ready (:func:`is_serving`)."""
        return is_serving(self.pods, size)

    def failed(self) -> bool:
        """A member is ``Failed``."""
        return any(p.failed for p in self.pods)

    def broken(self, size: int) -> bool:
        """Incomplete, or a member failed: the planner's tier a."""
        return not self.complete(size) or self.failed()

    @property
    def quota_reserved(self) -> bool:
        """A Workload owning one of its Pods holds a quota reservation."""
        return any(w.quota_reserved for w in self.workloads)

    @property
    def admitted(self) -> bool:
        """A Workload owning one of its Pods is admitted now."""
        return any(w.admitted for w in self.workloads)

    @property
    def quota_pending(self) -> bool:
        """Kueue holds it for quota: a Workload owns one of its Pods, none holds a reservation,
        and one is still asking (active, unfinished, not being deleted)."""
        return not self.quota_reserved and any(
            w.active and not w.finished and not w.deleting for w in self.workloads
        )

    @property
    def never_admitted(self) -> bool:
        """No Workload owning one of its Pods was ever admitted."""
        return not any(w.ever_admitted for w in self.workloads)

    def without(self, uids: Iterable[str]) -> Replica:
        """The replica once the Pods ``uids`` are gone (a planner's victims), with the
        Workloads that still own one of the Pods left."""
        gone = set(uids)
        pods = tuple(p for p in self.pods if p.uid not in gone)
        kept = {p.uid for p in pods}
        workloads = tuple(w for w in self.workloads if w.owns_any(kept))
        return Replica(self.role, self.ordinal, pods, workloads)


@dataclass(frozen=True)
class ReplicaIndex:
    """Pods (owned or not, terminating or not) and Workloads as observed in one list.

    ``owned`` are the Pods this deployment controls; ``live`` those of them not terminating;
    ``terminating`` the rest. Slots key live and terminating owned Pods by (role, ordinal), in
    the order they were observed; orphans (no ordinal) are in no slot and in no replica.
    """

    pods: tuple[ObservedPod, ...]
    workloads: tuple[ObservedWorkload, ...]
    owned: tuple[ObservedPod, ...] = field(init=False)
    live: tuple[ObservedPod, ...] = field(init=False)
    terminating: tuple[ObservedPod, ...] = field(init=False)
    _by_pod: Mapping[str, tuple[ObservedWorkload, ...]] = field(init=False, repr=False)
    _live_slots: Mapping[tuple[str | None, int], tuple[ObservedPod, ...]] = field(
        init=False, repr=False
    )
    _leaving_slots: Mapping[tuple[str | None, int], tuple[ObservedPod, ...]] = field(
        init=False, repr=False
    )
    #: Replicas built so far, by (role, ordinal): each is grouped once, when first asked for.
    _replicas: dict[tuple[str, int], Replica] = field(
        init=False, repr=False, compare=False, default_factory=dict
    )

    def __post_init__(self) -> None:
        owned = tuple(p for p in self.pods if p.owned)
        by_pod: dict[str, list[ObservedWorkload]] = {}
        for wl in self.workloads:
            for uid in wl.owner_pods:
                by_pod.setdefault(uid, []).append(wl)
        set_ = object.__setattr__
        set_(self, "owned", owned)
        set_(self, "live", tuple(p for p in owned if not p.terminating))
        set_(self, "terminating", tuple(p for p in owned if p.terminating))
        set_(self, "_by_pod", {uid: tuple(wls) for uid, wls in by_pod.items()})
        set_(self, "_live_slots", _slots(self.live))
        set_(self, "_leaving_slots", _slots(self.terminating))

    @classmethod
    def of(cls, pods: Iterable[ObservedPod], workloads: Iterable[ObservedWorkload]) -> ReplicaIndex:
        return cls(tuple(pods), tuple(workloads))

    def workloads_of(self, pods: Iterable[ObservedPod]) -> list[ObservedWorkload]:
        """The Workloads owning any of ``pods``, each once, in the order first met."""
        seen: dict[str, ObservedWorkload] = {}
        for pod in pods:
            for wl in self._by_pod.get(pod.uid, ()):
                seen.setdefault(wl.name, wl)
        return list(seen.values())

    def owned_workloads(self) -> list[ObservedWorkload]:
        """The Workloads owning at least one owned Pod, in observed order."""
        uids = {p.uid for p in self.owned}
        return [w for w in self.workloads if w.owns_any(uids)]

    def leaving_at(self, role: str, ordinal: int) -> Sequence[ObservedPod]:
        """The terminating owned Pods of ``role`` at ``ordinal``."""
        return self._leaving_slots.get((role, ordinal), ())

    def live_of(self, role: str) -> list[ObservedPod]:
        """The live owned Pods of ``role`` (orphans included), in observed order."""
        return [p for p in self.live if p.role == role]

    def orphans_of(self, role: str) -> list[ObservedPod]:
        """The live owned Pods of ``role`` without an ordinal, in observed order."""
        return [p for p in self.live if p.role == role and p.ordinal is None]

    def beyond(self, role: str, replicas: int) -> list[ObservedPod]:
        """The live owned Pods of ``role`` at an ordinal ``replicas`` or above (removed by a
        scale-down), in observed order."""
        return [
            p
            for p in self.live
            if p.role == role and p.ordinal is not None and p.ordinal >= replicas
        ]

    def replica(self, role: str, ordinal: int) -> Replica | None:
        """The replica at (``role``, ``ordinal``); ``None`` when no live owned Pod stands
        there."""
        key = (role, ordinal)
        found = self._replicas.get(key)
        if found is None:
            live = self._live_slots.get(key)
            if not live:
                return None
            members = tuple(sorted(live, key=lambda p: (p.member, p.name)))
            found = Replica(role, ordinal, members, tuple(self.workloads_of(members)))
            self._replicas[key] = found
        return found

    def replicas_of(self, role: str, replicas: int) -> list[Replica]:
        """The occupied replicas of ``role`` at ordinals below ``replicas``, by ordinal."""
        out = []
        for ordinal in range(replicas):
            replica = self.replica(role, ordinal)
            if replica is not None:
                out.append(replica)
        return out


def _slots(pods: Iterable[ObservedPod]) -> dict[tuple[str | None, int], tuple[ObservedPod, ...]]:
    out: dict[tuple[str | None, int], list[ObservedPod]] = {}
    for pod in pods:
        if pod.ordinal is not None:
            out.setdefault((pod.role, pod.ordinal), []).append(pod)
    return {key: tuple(members) for key, members in out.items()}
