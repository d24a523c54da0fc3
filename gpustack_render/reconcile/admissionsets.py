"""Which replicas are admitted together (D27, docs/autoscaling.md, "Admission together").

The joint admission check admits a multi-role deployment all or nothing. With autoscaling the
"all" is split so that a replica an autoscaler adds waits only for what it needs:

- the **base set**: every replica of each role whose count the deployment sets (its own
  ``replicas``, or a held count), the first replica (ordinal 0) of each External role, and the
  first unit of each ratio group: the smallest deployment that serves;
- a **unit** of a ratio group: ``perUnit`` consecutive ordinals of each of its roles (unit ``u``
  holds ordinals ``u·perUnit … (u+1)·perUnit − 1``);
- a replica of an External role above ordinal 0, and a unit above 0, is judged with the base set
  plus itself (its whole unit): it is admitted once the base holds quota and every replica of
  its unit does, whatever the other units do.

Without External roles and ratio groups the base set is every replica: the check is what it
was. Status reads the same units: a unit counts as admitted (ready) only when every replica of
it is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpustack_render.deployment.scaling import ScaleTarget

Slot = tuple[str, int]


@dataclass(frozen=True)
class AdmissionSets:
    """The base set and the unit structure of one deployment.

    ``counts`` are (role, count) in spec order; ``targets`` the deployment's scale targets.
    """

    counts: tuple[tuple[str, int], ...]
    targets: tuple[ScaleTarget, ...] = ()

    def _target(self, role: str) -> ScaleTarget | None:
        for target in self.targets:
            if role in target.role_names:
                return target
        return None

    @property
    def scaled(self) -> bool:
        """Some role is autoscaled: the sets differ from "every replica"."""
        return bool(self.targets)

    def base(self) -> list[Slot]:
        """The base set, role by role in spec order."""
        out: list[Slot] = []
        for role, count in self.counts:
            target = self._target(role)
            if target is None:
                out.extend((role, o) for o in range(count))
            else:
                out.extend((role, o) for o in range(target.per_unit(role)))
        return out

    def unit(self, target: ScaleTarget, unit: int) -> list[Slot]:
        """Every replica of ``unit`` of ``target``, role by role."""
        return [
            (role, o) for role, per in target.roles for o in range(unit * per, (unit + 1) * per)
        ]

    def own(self, role: str, ordinal: int | None) -> list[Slot]:
        """The replicas judged together with the replica (``role``, ``ordinal``) beyond the base
        set: its unit (its own slot for an External role); none when it is in the base set or
        its role's count is the deployment's."""
        target = self._target(role)
        if target is None or ordinal is None:
            return []
        unit = ordinal // target.per_unit(role)
        return [] if unit == 0 else self.unit(target, unit)

    def judged_with(self, role: str | None, ordinal: int | None) -> list[Slot]:
        """The set the replica (``role``, ``ordinal``) is admitted with: the base set, plus its
        own unit when that is not the first; in spec order of roles, then ordinal."""
        members = self.base()
        if role is not None:
            extra = [s for s in self.own(role, ordinal) if s not in members]
            members += extra
        order = {name: i for i, (name, _) in enumerate(self.counts)}
        return sorted(members, key=lambda s: (order.get(s[0], len(order)), s[1]))

    def units(self, target: ScaleTarget, count: int) -> Sequence[list[Slot]]:
        """The replicas of each of ``count`` units of ``target`` (a role target's units are
        its replicas)."""
        return [self.unit(target, u) for u in range(count)]


def admission_sets(
    counts: Mapping[str, int] | Sequence[tuple[str, int]], targets: Sequence[ScaleTarget] = ()
) -> AdmissionSets:
    """The sets of a deployment whose roles run ``counts`` (spec order) with ``targets``."""
    pairs = tuple(counts.items()) if isinstance(counts, Mapping) else tuple(counts)
    return AdmissionSets(pairs, tuple(targets))
