"""Where each role's count comes from, and the scaler writes of a pass (D27,
docs/autoscaling.md).

:func:`resolve_scaling` decides every role's count for one pass:

- a role of a scale target (an External role, or a role of a ratio group) takes its count from
  the target's ``ModelDeploymentScaler``: its ``spec.replicas`` within the target's bounds
  (units × ``perUnit`` for a group). Before the scaler exists (or while its name is held by an
  object the deployment does not control) the count is the one the role runs: its
  ``status.roles[].desired``, else ``roles[].replicas``; that is also what a new scaler is
  created with;
- a role that was scaled on the previous pass and is not any more keeps that count (``Held``),
  until ``roles[].replicas`` is edited away from the value it had when the hold began: turning
  External off never scales anything by itself;
- every other role runs ``roles[].replicas``.

The choice is remembered in ``status.roles[].scaling`` (with ``desired``), the third piece of
state carried from one pass to the next after ``replacing`` and the previous
``ReplicasUpToDate`` reason.

The scalers themselves are written on the owned-object path (``reconcile/owned.py``,
``SCALER_POLICY``): the missing ones created, the bounds, target and labels of the stored ones
kept in step (never ``spec.replicas``: the autoscaler owns it), the ones no target renders any
more deleted; a name held by an object the deployment does not control is never written.
:func:`scaler_candidates` names every scaler the pass looks up.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from gpustack_render.api.modeldeployment import (
    ModelDeployment,
    ModelDeploymentStatus,
    RoleScalingStatus,
    RoleStatus,
)
from gpustack_render.core import jsonview, ownerrefs
from gpustack_render.deployment.scaling import ScaleTarget, scale_targets

Source = Literal["Spec", "Scaler", "Held"]
SCALER: Literal["Scaler"] = "Scaler"
HELD: Literal["Held"] = "Held"


@dataclass(frozen=True, slots=True)
class ObservedScaler:
    """A stored ModelDeploymentScaler as the pass reads it."""

    name: str
    uid: str = ""
    #: ``spec.replicas`` (``None`` when absent or not a number).
    replicas: int | None = None
    #: Controlled by the deployment being reconciled.
    owned: bool = False
    generation: int = 0


def observe_scaler(obj: Mapping[str, Any], *, owner_uid: str) -> ObservedScaler:
    """Summarize a stored scaler (plain JSON); a malformed field reads as absent."""
    meta = jsonview.view(obj.get("metadata"))
    replicas = jsonview.view(obj.get("spec")).get("replicas")
    generation = meta.get("generation")
    return ObservedScaler(
        name=str(meta.get("name") or ""),
        uid=str(meta.get("uid") or ""),
        replicas=replicas if isinstance(replicas, int) and not isinstance(replicas, bool) else None,
        owned=ownerrefs.controlled_by(obj, owner_uid),
        generation=generation if isinstance(generation, int) else 0,
    )


@dataclass(frozen=True, slots=True)
class RoleCount:
    """One role's count this pass and where it comes from."""

    role: str
    count: int
    source: Source = "Spec"
    #: The scaler setting it (``Scaler``).
    scaler: str | None = None
    #: ``roles[].replicas`` when the hold began (``Held``).
    spec_replicas: int | None = None

    def status(self) -> RoleScalingStatus | None:
        """``status.roles[].scaling``; ``None`` when ``roles[].replicas`` sets the count."""
        if self.source == "Spec":
            return None
        return RoleScalingStatus(
            source=self.source, scaler=self.scaler, spec_replicas=self.spec_replicas
        )


@dataclass(frozen=True)
class ScalingState:
    """Every role's count for one pass, and the count (units for a group) each target applies."""

    roles: Mapping[str, RoleCount]
    targets: tuple[ScaleTarget, ...] = ()
    #: Target name → the count applied (``spec.replicas`` within the bounds, else the start).
    applied: Mapping[str, int] = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        """The count of every role (what ``render(counts=…)`` takes)."""
        return {name: rc.count for name, rc in self.roles.items()}

    def all_scaled(self) -> bool:
        """Every role's count comes from a scaler."""
        return all(rc.source == SCALER for rc in self.roles.values())

    def status_of(self, role: str) -> RoleScalingStatus | None:
        rc = self.roles.get(role)
        return rc.status() if rc is not None else None


def _previous_roles(status: ModelDeploymentStatus | None) -> dict[str, RoleStatus]:
    return {r.name: r for r in (status.roles or ())} if status is not None else {}


def running_counts(md: ModelDeployment) -> dict[str, int]:
    """The count each role runs as the stored status says (``desired``), else
    ``roles[].replicas``: what a new scaler starts from."""
    previous = _previous_roles(md.status)
    out = {}
    for role in md.spec.roles:
        desired = previous.get(role.name, RoleStatus(name=role.name)).desired
        out[role.name] = desired if desired is not None else role.replicas
    return out


def resolve_scaling(
    md: ModelDeployment, *, scalers: Mapping[str, ObservedScaler | None] | None = None
) -> ScalingState:
    """Every role's count for this pass (see the module docstring).

    ``scalers`` holds the stored scaler of each target's name (``None``: absent). Without it
    (``explain``, which reads no scaler) a target's count is the one the stored status says
    the role runs.
    """
    deployment = md.metadata.name
    previous = _previous_roles(md.status)
    running = running_counts(md)
    targets = scale_targets(md)
    roles: dict[str, RoleCount] = {}
    applied: dict[str, int] = {}
    for target in targets:
        scaler = target.scaler_name(deployment)
        stored = (scalers or {}).get(scaler)
        if stored is not None and stored.owned and stored.replicas is not None:
            units = target.clamp(stored.replicas)
        else:
            units = target.units_of(running)
        applied[target.name] = units
        for name, count in target.counts(units).items():
            roles[name] = RoleCount(name, count, SCALER, scaler=scaler)
    for role in md.spec.roles:
        if role.name in roles:
            continue
        roles[role.name] = _unscaled(role.name, role.replicas, previous.get(role.name))
    return ScalingState(
        roles={r.name: roles[r.name] for r in md.spec.roles}, targets=targets, applied=applied
    )


def _unscaled(role: str, replicas: int, previous: RoleStatus | None) -> RoleCount:
    """The count of a role no target scales: held after External was turned off (until
    ``roles[].replicas`` is edited), else ``roles[].replicas``."""
    if previous is None or previous.scaling is None or previous.desired is None:
        return RoleCount(role, replicas)
    was = previous.scaling
    if was.source == SCALER and previous.desired != replicas:
        return RoleCount(role, previous.desired, HELD, spec_replicas=replicas)
    if was.source == HELD and was.spec_replicas == replicas:
        return RoleCount(role, previous.desired, HELD, spec_replicas=replicas)
    return RoleCount(role, replicas)


# --- the writes ---------------------------------------------------------------------------


def scaler_candidates(md: ModelDeployment) -> list[str]:
    """Every name a scaler of ``md`` may have now or had before: ``<md>-<role>`` of each role,
    ``<md>-<group>`` of each group, and the scalers the stored status names. The controller
    looks these up by name (no scan over the namespace's scalers)."""
    deployment = md.metadata.name
    names = [f"{deployment}-{r.name}" for r in md.spec.roles]
    names += [f"{deployment}-{g.name}" for g in md.spec.scaling_groups or ()]
    for status in _previous_roles(md.status).values():
        if status.scaling is not None and status.scaling.scaler:
            names.append(status.scaling.scaler)
    return list(dict.fromkeys(names))


def observed_scalers(
    stored: Iterable[Mapping[str, Any]], *, owner_uid: str
) -> dict[str, ObservedScaler]:
    """The stored scalers by name, observed for :func:`resolve_scaling`."""
    out = {}
    for obj in stored:
        seen = observe_scaler(obj, owner_uid=owner_uid)
        out[seen.name] = seen
    return out
