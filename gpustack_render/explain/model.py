"""The explanation as typed, frozen values: what ``explain`` found, before any formatting.

``report.explanation_json`` writes these as the documented JSON (docs/explain.md, schema in
``schema.py``); ``text.py`` writes them as terminal tables. Nothing here computes anything.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from gpustack_render.api.modeldeployment import RoleKindName
from gpustack_render.core.vocabulary import Engine
from gpustack_render.explain.observed import ObservedReport

#: What an edit does to one role.
Action = Literal["create", "unchanged", "scale", "roll", "floor"]

#: The role actions that replace running replicas (``--fail-on roll``).
ROLLING: Final = ("roll", "floor")
#: The cost of a role whose roll the controller holds while the store connection is unresolved.
HELD_BY_CACHE: Final = "explain.held-by-cache"


@dataclass(frozen=True, slots=True)
class Cause:
    """One reason admission refuses: the field, the error type, the rule id and the message."""

    field: str
    type: str
    origin: str
    message: str


@dataclass(frozen=True, slots=True)
class Admission:
    """The admission verdict of the create or update, as the API server would answer it."""

    operation: Literal["CREATE", "UPDATE"]
    allowed: bool
    code: int
    reason: str
    message: str
    causes: tuple[Cause, ...] = ()
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class RenderProblem:
    """Why the deployment (``side`` ``new`` or ``old``) cannot be rendered."""

    side: Literal["new", "old"]
    message: str
    field: str = ""
    origin: str = ""


@dataclass(frozen=True, slots=True)
class Change:
    """One input of a role's pod-spec-hash that moved.

    ``source`` names the object the field belongs to: ``ModelDeployment`` for the deployment's
    own fields, ``InstanceType/<name>``, ``KVCachePoolBinding/<name>``, ``KVCachePool/<name>``,
    or ``resolved`` for a value the renderer derives (the fabric interface key, the store
    transport, the vLLM-Ascend transfer document both halves of a pair carry).
    """

    source: str
    path: str
    old: Any
    new: Any


@dataclass(frozen=True, slots=True)
class Cost:
    """A consequence of the edit worth knowing before applying it (rule id ``explain.*``)."""

    id: str
    message: str


@dataclass(frozen=True, slots=True)
class RoleExplanation:
    """What happens to one role.

    ``added`` are the ordinals a scale-up creates; ``removed`` those a scale-down deletes,
    highest first; ``untouched`` the ordinals neither deleted nor replaced; ``replaced`` those a
    roll replaces, in the planner's order (highest first, one per pass).
    """

    name: str
    #: The kind in API spelling (``Server`` when unset).
    kind: RoleKindName
    engine: Engine
    action: Action
    replicas: int
    size: int
    instance_type: str
    entrance: str
    groups: tuple[str, ...]
    #: What one replica (every member Pod) requests, resource name → quantity.
    replica_requests: Mapping[str, str]
    old_replicas: int | None = None
    old_size: int | None = None
    old_instance_type: str | None = None
    old_entrance: str | None = None
    added: tuple[int, ...] = ()
    removed: tuple[int, ...] = ()
    untouched: tuple[int, ...] = ()
    replaced: tuple[int, ...] = ()
    changes: tuple[Change, ...] = ()
    costs: tuple[Cost, ...] = ()


@dataclass(frozen=True, slots=True)
class EntranceLoad:
    """What the deployment holds on one entrance (a LocalQueue and the ClusterQueue of the same
    name): before the edit, after it, and the most at any step of the roll."""

    entrance: str
    local_queue: str
    roles: tuple[str, ...]
    after: Mapping[str, str]
    before: Mapping[str, str] | None = None
    peak: Mapping[str, str] | None = None


@dataclass(frozen=True, slots=True)
class JointSet:
    """The groups admitted as one set (every replica of every role of a multi-role deployment),
    or none for a single role."""

    joint: bool
    roles: tuple[str, ...]
    groups: int


@dataclass(frozen=True, slots=True)
class RenderFloor:
    """The render-version currency: this renderer's baseline and the deployment's floor."""

    current: int
    floor: int
    old_floor: int | None = None
    #: The raw ``min-render-version`` annotation when present.
    requested: str | None = None


@dataclass(frozen=True, slots=True)
class RouterChange:
    """One router object the edit touches: ``change`` is ``created``, ``deleted``, ``updated``,
    ``updated; its Pods roll`` (the Deployment's Pod template moved) or ``scaled <a> -> <b>``."""

    kind: str
    name: str
    change: str


@dataclass(frozen=True, slots=True)
class RouterExplanation:
    """What the edit does to the router's objects (D26); none of it restarts an engine Pod."""

    #: ``spec.router.name`` (the stored one when the edit removes the router).
    name: str
    #: The edit removes the router block: its objects are deleted.
    removed: bool = False
    changes: tuple[RouterChange, ...] = ()
    #: Why the router's objects are not rendered (empty when they are).
    failure: str = ""


@dataclass(frozen=True, slots=True)
class ScaledRole:
    """One role of the answer: its count now and at the asked count."""

    name: str
    before: int
    after: int
    entrance: str


@dataclass(frozen=True, slots=True)
class QueueFit:
    """Whether the extra replicas of an asked count fit one ClusterQueue's free quota.

    ``needed`` is what the asked count needs beyond what the deployment holds now (only the
    resources it needs more of); ``free`` what the queue has free of those now; ``short`` by
    how much each resource falls short (empty when it fits); ``uncovered`` the resources the
    queue does not cover at all (Kueue admits no Pod asking for one)."""

    cluster_queue: str
    fits: bool
    needed: Mapping[str, str] = field(default_factory=dict)
    free: Mapping[str, str] = field(default_factory=dict)
    short: Mapping[str, str] = field(default_factory=dict)
    uncovered: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ScaleQuestion:
    """The answer to ``--replicas TARGET=N``.

    ``group`` says ``replicas`` counts units of a ratio group. ``scaler`` is the
    ModelDeploymentScaler that carries the count (``None`` for a role the deployment's own
    ``replicas`` sets: the answer is then what editing it to N needs). ``refused`` says why the
    count cannot be set (outside the bounds, an unknown target, a grouped role asked alone);
    ``roles`` and ``entrances`` are empty then. ``queues`` says, per ClusterQueue read from the
    cluster, whether what the count needs beyond the deployment now fits its free quota (empty
    when no ClusterQueue was read: offline).
    """

    target: str
    group: bool
    replicas: int
    scaler: str | None = None
    bounds: tuple[int, int] | None = None
    refused: str = ""
    roles: tuple[ScaledRole, ...] = ()
    entrances: tuple[EntranceLoad, ...] = ()
    queues: tuple[QueueFit, ...] = ()


@dataclass(frozen=True, slots=True)
class Explanation:
    """The whole answer for one deployment; ``observed`` is the observed-state part (opaque
    here, written by ``gpustack_render.explain.observed``)."""

    namespace: str
    name: str
    admission: Admission
    roles: tuple[RoleExplanation, ...] = ()
    entrances: tuple[EntranceLoad, ...] = ()
    joint: JointSet | None = None
    render_version: RenderFloor | None = None
    problems: tuple[RenderProblem, ...] = ()
    notes: tuple[str, ...] = ()
    observed: ObservedReport | None = None
    router: RouterExplanation | None = None
    #: ``--replicas TARGET=N``: what each asked count needs from the queue (D27).
    scaling: tuple[ScaleQuestion, ...] = ()

    @property
    def operation(self) -> str:
        return self.admission.operation

    @property
    def uncompared(self) -> bool:
        """An update whose stored object cannot be rendered: its replicas' pod-spec-hashes
        cannot be compared, so every replica may roll."""
        return self.operation == "UPDATE" and any(p.side == "old" for p in self.problems)

    def replaced(self) -> int:
        """How many replicas the edit replaces at most (offline and, when given, observed);
        every replica when the stored object cannot be compared."""
        if self.uncompared:
            offline = sum(r.replicas for r in self.roles)
        else:
            offline = sum(len(r.replaced) for r in self.roles)
        observed = self.observed.replaced if self.observed is not None else 0
        return max(offline, observed)

    def rolls(self) -> bool:
        """Whether any role rolls (offline, or in the observed state when given); an update
        whose stored object cannot be compared may roll every replica."""
        offline = self.uncompared or any(r.action in ROLLING for r in self.roles)
        return offline or (self.observed is not None and self.observed.rolls)
