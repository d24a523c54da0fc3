"""The five layers of an Elastic EP deployment's width (docs/contract/elastic-ep.md §4.2, D29),
each computed from facts the controller read this pass:

- **desired**: the spec's ``width``.
- **admitted**: members whose Kueue Workload is a group of one, QuotaReserved and Admitted, with
  one PodSet of count 1, one assignment of that PodSet and a named ClusterQueue.
- **allocated** (D29): members scheduled on a node whose allocatable covers their cards (the
  members on one node together).
- **ray**: members that are exactly one ALIVE node of the Ray cluster labelled
  ``gpustack-pod-uid=<the member Pod's uid>``, read from the head's own state API (``GET
  /api/v0/nodes`` on the dashboard port 8265 at the head Pod's address; never ``pods/exec``).
- **effective**: the width the engine proves with its own answers (:mod:`.engine`): idle, two
  bound probes naming the same width N, and a completion served by each rank 0..N-1, all sent
  to the master the pass found.

A layer whose facts were not read is ``known: false`` with the reason (the Nodes could not be
listed, the head's state API did not answer, no engine process runs on a simulated cluster): it
is never filled in from a neighbouring layer. A member is a live Pod of the role (controlled by
the deployment, not terminating, not Failed or Succeeded, with an ordinal).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from gpustack_render.core import jsonview, nesting
from gpustack_render.elastic.engine import EngineAnswers
from gpustack_render.elastic.records import Layer
from gpustack_render.reconcile.conditions.common import QUOTED_CHARS, few
from gpustack_render.reconcile.observed import ObservedPod, ObservedWorkload
from gpustack_render.reconcile.quotashortfall import missing_resources
from gpustack_render.rendering.elastic import DASHBOARD_PORT, RAY_NODE_LABEL

#: The Ray node label naming the member Pod a Ray node runs in (the renderer's join command sets
#: it, docs/contract/elastic-ep.md §3.3).
POD_UID_LABEL: Final = RAY_NODE_LABEL
#: A Ray node's state while it is part of the cluster.
ALIVE: Final = "ALIVE"
#: The head's state API (the dashboard's port the renderer opens, D29).
RAY_DASHBOARD_PORT: Final = DASHBOARD_PORT
#: The request the controller sends to read the Ray layer: every ALIVE node, up to the most a
#: width-64 cluster holds with room (members plus the head), so a complete answer is one page.
RAY_NODES_PATH: Final = (
    "/api/v0/nodes?limit=1000&filter_keys=state&filter_predicates=%3D&filter_values=ALIVE"
)


@dataclass(frozen=True)
class Unread:
    """A fact the controller could not read this pass, and why (the layers over it are
    unknown with this reason)."""

    reason: str


# ---- the Ray state API's answer ----------------------------------------------------------------


@dataclass(frozen=True)
class RayNode:
    """One node of the state API's answer: its id, state and labels."""

    node_id: str
    state: str
    labels: Mapping[str, str] = field(default_factory=dict)
    is_head: bool = False


@dataclass(frozen=True)
class RayNodes:
    """The head's answer to :data:`RAY_NODES_PATH`, complete (every node the filter matched,
    none truncated, no partial failure) or not read at all (an :class:`Unread`)."""

    nodes: tuple[RayNode, ...] = ()


def read_ray_nodes(status: int, body: str | bytes) -> RayNodes | Unread:
    """The Ray state API's ``GET /api/v0/nodes`` answer (Ray 2.x: ``{"result": true, "msg":
    "", "data": {"result": {"total", "num_after_truncation", "num_filtered", "result": [{
    "node_id", "state", "labels", "is_head_node", ...}], "partial_failure_warning"}}}``). An
    answer that is not a success, not that shape, truncated or partial is :class:`Unread`: a
    node left out could be a member's."""
    if status != 200:
        return Unread(f"the Ray head's state API answered HTTP {status}")
    try:
        doc = nesting.loads(body)
    except ValueError:
        return Unread("the Ray head's state API answered something that is not JSON")
    doc = jsonview.view(doc)
    if doc.get("result") is not True:
        msg = str(doc.get("msg") or "")[:QUOTED_CHARS]
        return Unread(f"the Ray head's state API reported a failure ({msg or 'no message'})")
    page = jsonview.view(jsonview.view(doc.get("data")).get("result"))
    rows = page.get("result")
    if not isinstance(rows, list):
        return Unread("the Ray head's state API answer has no node list")
    counts = [page.get(k) for k in ("num_after_truncation", "total", "num_filtered")]
    if not all(isinstance(c, int) for c in counts):
        return Unread("the Ray head's state API answer lacks its counts")
    after, total, matched = counts
    if after != total or matched != len(rows):
        return Unread(
            f"the Ray head's state API answer is truncated ({len(rows)} of {matched} matching "
            f"nodes, {after} of {total} read)"
        )
    if page.get("partial_failure_warning"):
        return Unread("the Ray head's state API answer is partial")
    nodes = []
    for row in rows:
        row = jsonview.view(row)
        nodes.append(
            RayNode(
                node_id=str(row.get("node_id") or ""),
                state=str(row.get("state") or ""),
                labels=jsonview.strings(row.get("labels")),
                is_head=row.get("is_head_node") is True,
            )
        )
    return RayNodes(tuple(nodes))


# ---- facts and layers --------------------------------------------------------------------------


@dataclass(frozen=True)
class Facts:
    """What the controller read this pass for one elastic deployment."""

    #: The spec's ``width``.
    desired: int
    #: The role's Pods (every one the pass found; the live members are picked here).
    pods: Sequence[ObservedPod] = ()
    #: The members' component label (``<md>-<role>``): when set, a Pod of another component
    #: (the head, which also carries ordinal 0) is never taken for a member.
    component: str = ""
    #: The Ray head Pod (``None``: none found).
    head: ObservedPod | None = None
    #: The namespace's Workloads the deployment's Pods belong to, or why they were not read.
    workloads: Sequence[ObservedWorkload] | Unread = ()
    #: Node name → allocatable cards of the members' accelerator resource, or why not read.
    nodes: Mapping[str, int] | Unread = field(default_factory=dict)
    #: Whole cards each member asks for (TP) and the resource's name (for messages).
    cards_per_member: int = 1
    card_resource: str = "cards"
    #: The head's state API answer (:func:`read_ray_nodes`), or why not read.
    ray: RayNodes | Unread = field(default_factory=lambda: Unread("the Ray head was not asked"))
    #: The engine's answers this pass; ``None``: not asked (the machine asks when it needs them).
    engine: EngineAnswers | Unread | None = None


def live_members(pods: Iterable[ObservedPod], component: str = "") -> list[ObservedPod]:
    """The members: owned, not terminating, not finished, with an ordinal (and of
    ``component`` when given); by ordinal."""
    live = [
        p
        for p in pods
        if p.owned
        and (not component or p.role == component)
        and not p.terminating
        and p.phase not in ("Failed", "Succeeded")
        and p.ordinal is not None
        and p.uid
    ]
    return sorted(live, key=lambda p: (p.ordinal or 0, p.name))


def master_of(members: Sequence[ObservedPod]) -> ObservedPod | None:
    """The live master (ordinal 0), when exactly one lives."""
    masters = [p for p in members if p.ordinal == 0]
    return masters[0] if len(masters) == 1 else None


@dataclass(frozen=True)
class LayerView:
    """One layer as computed: the record's ``{known, value, reason}`` plus the ordinals of the
    members that pass (the machine checks coverage of 0..target-1, not only a count)."""

    known: bool
    value: int = 0
    reason: str = ""
    ordinals: frozenset[int] = frozenset()

    def covers(self, width: int) -> bool:
        """Known, and every ordinal 0..width-1 passes."""
        return self.known and all(o in self.ordinals for o in range(width))

    def record(self) -> Layer:
        if not self.known:
            return Layer(known=False, value=0, reason=self.reason[:512] or "not read")
        return Layer(known=True, value=self.value, reason=self.reason[:512])


@dataclass(frozen=True)
class Layers:
    desired: LayerView
    admitted: LayerView
    allocated: LayerView
    ray: LayerView
    effective: LayerView
    #: The engine's own width from its two bound probes while idle (``None``: not proven),
    #: whether or not every rank served.
    native: int | None = None
    #: The engine's ``/is_scaling_elastic_ep`` answer (``None``: not read).
    scaling: bool | None = None
    #: Why the engine facts are missing or incomplete ("" when all read).
    engine_reason: str = ""

    def lower(self) -> tuple[tuple[str, LayerView], ...]:
        """The layers a raise needs before the command (§4.3 ``Recorded``), in order."""
        return (("admitted", self.admitted), ("allocated", self.allocated), ("ray", self.ray))


def _grouped(causes: Mapping[int, str]) -> str:
    """``members 2, 3: cause; member 5: other`` (bounded lists)."""
    by_cause: dict[str, list[int]] = defaultdict(list)
    for ordinal, cause in sorted(causes.items()):
        by_cause[cause].append(ordinal)
    parts = []
    for cause, ordinals in by_cause.items():
        word = "member" if len(ordinals) == 1 else f"{len(ordinals)} members"
        parts.append(f"{word} {few(str(o) for o in ordinals)}: {cause}")
    return "; ".join(parts)


def _passing(members: Sequence[ObservedPod], causes: Mapping[int, str]) -> LayerView:
    ordinals = frozenset(p.ordinal for p in members if p.ordinal is not None) - set(causes)
    return LayerView(True, len(ordinals), _grouped(causes), ordinals)


# ---- admitted ----------------------------------------------------------------------------------


def _wait_cause(w: ObservedWorkload) -> str:
    queue = w.cluster_queue or w.queue or "(none)"
    if not w.quota_reserved:
        lacks = missing_resources([w.quota_message]) if w.quota_message else []
        text = f"Kueue has not admitted it: ClusterQueue {queue}"
        text += f" lacks {'; '.join(lacks)}" if lacks else " has not reserved its quota"
        if w.quota_message:
            text += f' (Kueue: "{w.quota_message[:QUOTED_CHARS]}")'
        return text
    said = w.admitted_message or w.evicted_message or w.admitted_reason or w.evicted_reason
    text = f"quota reserved in ClusterQueue {queue}, not admitted"
    return f'{text} (Kueue: "{said[:QUOTED_CHARS]}")' if said else text


def _shape_cause(w: ObservedWorkload, pod_uid: str) -> str:
    if w.owner_pods != {pod_uid}:
        return f"Workload {w.name} groups {len(w.owner_pods)} Pods, not the member alone"
    if len(w.pod_sets) != 1 or w.pod_sets[0][1] != 1:
        return f"Workload {w.name} is not one PodSet of count 1"
    name = w.pod_sets[0][0]
    if len(w.assignments) != 1 or w.assignments[0][0] != name or w.assignments[0][1] not in (1, -1):
        return f"Workload {w.name} is not assigned its one PodSet {name}"
    if not w.cluster_queue:
        return f"Workload {w.name} names no ClusterQueue"
    return ""


def admitted_layer(
    members: Sequence[ObservedPod], workloads: Sequence[ObservedWorkload] | Unread
) -> LayerView:
    """§4.2 ``admitted``."""
    if isinstance(workloads, Unread):
        return LayerView(False, reason=workloads.reason)
    causes: dict[int, str] = {}
    for pod in members:
        assert pod.ordinal is not None
        own = [w for w in workloads if pod.uid in w.owner_pods]
        if not own:
            causes[pod.ordinal] = "no Workload yet"
        elif len(own) > 1:
            causes[pod.ordinal] = f"{len(own)} Workloads claim it"
        elif not (own[0].quota_reserved and own[0].admitted):
            causes[pod.ordinal] = _wait_cause(own[0])
        elif cause := _shape_cause(own[0], pod.uid):
            causes[pod.ordinal] = cause
    return _passing(members, causes)


def waiting_workloads(
    members: Sequence[ObservedPod], workloads: Sequence[ObservedWorkload] | Unread
) -> list[ObservedWorkload]:
    """The members' Workloads Kueue has not admitted (what a quota message names)."""
    if isinstance(workloads, Unread):
        return []
    uids = {p.uid for p in members}
    return [w for w in workloads if w.owns_any(uids) and not (w.quota_reserved and w.admitted)]


# ---- allocated ---------------------------------------------------------------------------------


def allocated_layer(
    members: Sequence[ObservedPod],
    nodes: Mapping[str, int] | Unread,
    *,
    cards: int,
    resource: str,
) -> LayerView:
    """§4.2 ``allocated`` as D29 words it: the members a node holds are allocated when its
    allocatable covers all their cards."""
    if isinstance(nodes, Unread):
        return LayerView(False, reason=nodes.reason)
    causes: dict[int, str] = {}
    on_node: dict[str, list[ObservedPod]] = defaultdict(list)
    for pod in members:
        assert pod.ordinal is not None
        if not pod.node_name:
            why = f" ({pod.unscheduled_message[:QUOTED_CHARS]})" if pod.unscheduled_message else ""
            causes[pod.ordinal] = f"not scheduled on a node yet{why}"
        else:
            on_node[pod.node_name].append(pod)
    for node, pods in sorted(on_node.items()):
        have = nodes.get(node)
        need = cards * len(pods)
        if have is None:
            cause = f"node {node} is not found"
        elif have < need:
            cause = f"node {node} has {have} {resource} allocatable, its members need {need}"
        else:
            continue
        for pod in pods:
            assert pod.ordinal is not None
            causes[pod.ordinal] = cause
    return _passing(members, causes)


# ---- ray ---------------------------------------------------------------------------------------


def ray_layer(members: Sequence[ObservedPod], ray: RayNodes | Unread) -> LayerView:
    """§4.2 ``ray``: each member is exactly one ALIVE Ray node labelled with its Pod's uid."""
    if isinstance(ray, Unread):
        return LayerView(False, reason=ray.reason)
    alive: dict[str, int] = defaultdict(int)
    for node in ray.nodes:
        uid = node.labels.get(POD_UID_LABEL)
        if node.state == ALIVE and uid:
            alive[uid] += 1
    causes: dict[int, str] = {}
    for pod in members:
        assert pod.ordinal is not None
        n = alive.get(pod.uid, 0)
        if n == 0:
            causes[pod.ordinal] = "not joined to Ray (no ALIVE node carries its Pod uid)"
        elif n > 1:
            causes[pod.ordinal] = f"{n} ALIVE Ray nodes carry its Pod uid"
    return _passing(members, causes)


# ---- effective ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Engine:
    effective: LayerView
    native: int | None
    scaling: bool | None
    reason: str


def _engine(engine: EngineAnswers | Unread | None, master: ObservedPod | None) -> _Engine:
    if engine is None:
        return _Engine(
            LayerView(False, reason="the engine was not asked this pass"),
            None,
            None,
            "the engine was not asked this pass",
        )
    if isinstance(engine, Unread):
        return _Engine(LayerView(False, reason=engine.reason), None, None, engine.reason)
    if master is None or engine.master_uid != master.uid:
        why = "the master the engine was asked on is not the live master"
        return _Engine(LayerView(False, reason=why), None, None, why)
    if engine.scaling is None:
        why = engine.scaling_problem or "the engine's scaling state was not read"
        return _Engine(LayerView(False, reason=why), None, None, why)
    if engine.scaling:
        why = "the engine is scaling"
        return _Engine(LayerView(False, reason=why), None, True, why)
    native = engine.native_width
    if native is None:
        why = engine.bound_problem or "the engine's bound probes did not name one width"
        return _Engine(LayerView(False, reason=why), None, False, why)
    unserved = engine.unserved(native)
    if unserved:
        why = f"the engine runs {native} engines but {unserved}"
        return _Engine(LayerView(False, reason=why), native, False, why)
    ordinals = frozenset(range(native))
    return _Engine(LayerView(True, native, "", ordinals), native, False, "")


def layers_of(facts: Facts, *, members: Sequence[ObservedPod] | None = None) -> Layers:
    """Every layer from ``facts`` (see the module docstring)."""
    members = live_members(facts.pods, facts.component) if members is None else members
    engine = _engine(facts.engine, master_of(members))
    desired = LayerView(True, facts.desired, "", frozenset(range(facts.desired)))
    return Layers(
        desired=desired,
        admitted=admitted_layer(members, facts.workloads),
        allocated=allocated_layer(
            members, facts.nodes, cards=facts.cards_per_member, resource=facts.card_resource
        ),
        ray=ray_layer(members, facts.ray),
        effective=engine.effective,
        native=engine.native,
        scaling=engine.scaling,
        engine_reason=engine.reason,
    )


def layer_records(layers: Layers) -> dict[str, Any]:
    """The observation record's five layers."""
    return {
        "desired": layers.desired.record(),
        "admitted": layers.admitted.record(),
        "allocated": layers.allocated.record(),
        "ray": layers.ray.record(),
        "effective": layers.effective.record(),
    }


def behind(layers: Layers, width: int) -> str:
    """The first layer that does not reach ``width``, and why, for status and hold reasons:
    ``width 4 waits for admitted (2 of 4): 2 members 2, 3: Kueue has not admitted it: …``.
    Empty when admitted, allocated and ray all reach it."""
    for name, view in layers.lower():
        if not view.known:
            return f"width {width} waits: the {name} layer is unknown ({view.reason})"
        if not view.covers(width):
            missing = [str(o) for o in range(width) if o not in view.ordinals]
            detail = view.reason or f"no live member {few(missing)} yet"
            return f"width {width} waits for {name} ({view.value} of {width}): {detail}"
    return ""


# ---- what the controller reads for the facts ---------------------------------------------------

#: The annotation KWOK puts on every Node it simulates (``make cluster``): no process runs in a
#: Pod bound there, so neither Ray nor the engine can answer (D29).
SIMULATED_NODE_ANNOTATION: Final = "kwok.x-k8s.io/node"
#: The resources a member's ``main`` container asks for that are not its cards.
_NOT_CARDS: Final = frozenset({"cpu", "memory", "ephemeral-storage"})


def simulated_node(node: Mapping[str, Any] | None) -> bool:
    """A Node KWOK simulates (its annotation): Pods bound there run no process."""
    meta = jsonview.view(jsonview.view(node).get("metadata"))
    return SIMULATED_NODE_ANNOTATION in jsonview.strings(meta.get("annotations"))


def no_process(what: str, pod: str, node: str) -> Unread:
    """Why ``what`` is not read: ``pod`` is bound to the simulated node ``node`` (D29)."""
    return Unread(
        f"{what} is not asked: Pod {pod} runs on the simulated node {node} (KWOK), where no "
        "process runs"
    )


def node_allocatable(node: Mapping[str, Any], resource: str) -> int:
    """A Node's allocatable whole ``resource`` (0 when absent or not a whole number)."""
    allocatable = jsonview.strings(
        jsonview.view(jsonview.view(node).get("status")).get("allocatable")
    )
    raw = allocatable.get(resource, "0").strip()
    return int(raw) if raw.isdigit() else 0


def member_cards(pod: Mapping[str, Any]) -> tuple[str, int]:
    """(resource, count) of the whole cards a rendered member asks for: the one extended
    resource of its ``main`` container (an elastic role has no slices, partitions or fabric
    interface, S13–S15); ``("cards", 0)`` for a member that asks for none."""
    for container in jsonview.items(
        jsonview.view(jsonview.view(pod).get("spec")).get("containers")
    ):
        container = jsonview.view(container)
        if container.get("name") != "main":
            continue
        limits = jsonview.strings(jsonview.view(container.get("resources")).get("limits"))
        for key, value in sorted(limits.items()):
            if key not in _NOT_CARDS and not key.startswith("hugepages-") and value.isdigit():
                return key, int(value)
    return "cards", 0
