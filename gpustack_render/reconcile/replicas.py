"""The replica index: one observation of a deployment's Pods and Workloads, indexed once.

The planner, the status rules and the joint admission check all ask the same questions of what
the controller observed — which Pods stand at an ordinal, which are leaving it, which Workloads
own a set of Pods — so the answers are computed here, once per observation, and passed to
each of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from gpustack_render.reconcile.observed import ObservedPod, ObservedWorkload


@dataclass(frozen=True)
class ReplicaIndex:
    """Pods (owned or not, terminating or not) and Workloads as observed in one list.

    ``owned`` are the Pods this deployment controls; ``live`` those of them not terminating;
    ``terminating`` the rest. Slots key live and terminating owned Pods by (role, ordinal), in
    the order they were observed; orphans (no ordinal) are in no slot.
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

    def admitted(self, pods: Iterable[ObservedPod]) -> bool:
        """Some Workload owning one of ``pods`` is admitted now."""
        return any(wl.admitted for wl in self.workloads_of(pods))

    def never_admitted(self, pods: Iterable[ObservedPod]) -> bool:
        """No Workload owning one of ``pods`` was ever admitted."""
        return not any(wl.ever_admitted for wl in self.workloads_of(pods))

    def owned_workloads(self) -> list[ObservedWorkload]:
        """The Workloads owning at least one owned Pod, in observed order."""
        uids = {p.uid for p in self.owned}
        return [w for w in self.workloads if w.owns_any(uids)]

    def live_at(self, role: str, ordinal: int) -> Sequence[ObservedPod]:
        """The live owned Pods of ``role`` at ``ordinal``."""
        return self._live_slots.get((role, ordinal), ())

    def leaving_at(self, role: str, ordinal: int) -> Sequence[ObservedPod]:
        """The terminating owned Pods of ``role`` at ``ordinal``."""
        return self._leaving_slots.get((role, ordinal), ())

    def live_of(self, role: str) -> list[ObservedPod]:
        """The live owned Pods of ``role`` (orphans included), in observed order."""
        return [p for p in self.live if p.role == role]


def _slots(pods: Iterable[ObservedPod]) -> dict[tuple[str | None, int], tuple[ObservedPod, ...]]:
    out: dict[tuple[str | None, int], list[ObservedPod]] = {}
    for pod in pods:
        if pod.ordinal is not None:
            out.setdefault((pod.role, pod.ordinal), []).append(pod)
    return {key: tuple(members) for key, members in out.items()}
