"""The Elastic EP step of a deployment's pass (docs/elastic-ep.md, "Width changes";
docs/contract/elastic-ep.md §3.8, §4, §5; D29).

Every rule is the library's (:mod:`gpustack_render.elastic`: the layers, the state machine, the
records, the engine calls' requests and readings, ``ElasticResize``; the rollout planner keeps
an elastic role's members, :mod:`gpustack_render.reconcile.rollout`). This module fetches the
facts, runs the machine's loop and carries out what it answers:

- **before the render**: the deployment's Pods, listed live, give the live masters the render
  needs (``render(..., elastic_masters=...)``), so a master keeps its boot width;
- **the head**: the Ray head Pod is created when the deployment has none standing (its Service
  is one of the rendering's Services, kept by the ordinary Service path); a terminal head is
  deleted first (uid precondition);
- **the width change**: both records are read live; the facts are the Pods and Workloads the
  pass observed, the Nodes the members, the master and the head sit on (read live by name:
  an elastic deployment's pass reads a few Nodes, where an informer would hold every Node of
  the cluster in memory for all of them), the head's Ray state API (``GET`` on the dashboard
  port, never ``pods/exec``) and, when the machine asks, the engine's answers (HTTP to the
  master Pod's IP on its ``prometheus.io/port``). On a simulated node (KWOK) no process runs:
  neither Ray nor the engine is asked, and those layers say so. Then ``decide`` in a loop:
  the observation record written when it changed; ``ASK_ENGINE`` reads the engine and decides
  again; ``WRITE`` writes the intent record through the owned-object path's record policy and
  only once that succeeded sends the scale call, then writes ``after_scale``'s record;
  ``DELETE`` deletes the record with its uid and resourceVersion; ``NONE`` and ``HOLD`` end it.
  A write that fails ends the loop (nothing else is sent) and the pass is retried.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

import aiohttp

from gpustack_controller.kube import CONFIGMAPS, NODES, PODS, Kube
from gpustack_controller.owned import OwnedKind, OwnedWriter
from gpustack_render.api.modeldeployment import ModelDeployment, ModelDeploymentStatus
from gpustack_render.core import jsonview, labels, ownerrefs
from gpustack_render.core.ownerrefs import OwnedConflict
from gpustack_render.elastic import engine as calls
from gpustack_render.elastic.layers import (
    RAY_DASHBOARD_PORT,
    RAY_NODES_PATH,
    Facts,
    Unread,
    live_members,
    master_of,
    member_cards,
    no_process,
    node_allocatable,
    read_ray_nodes,
    simulated_node,
)
from gpustack_render.elastic.machine import Action, Decision, World, after_scale, decide
from gpustack_render.elastic.records import (
    RecordUnreadable,
    StoredIntent,
    StoredObservation,
    decode_intent,
    decode_observation,
    intent_configmap,
    intent_name,
    observation_name,
)
from gpustack_render.elastic.status import with_resize_condition
from gpustack_render.reconcile.keys import deployment_selector
from gpustack_render.reconcile.observed import ObservedPod, ObservedWorkload
from gpustack_render.reconcile.owned import (
    ELASTIC_RECORD_POLICY,
    Owner,
    name_of,
    plan_record_delete,
)
from gpustack_render.rendering.elastic import LiveMaster, elastic_index, live_masters
from gpustack_render.rendering.renderer import Rendering, RoleRendering

log = logging.getLogger(__name__)

#: The records' kind on the owned-object path: read live (never from a cache alone), written by
#: compare-and-swap, never pruned (D28).
RECORDS: Final = OwnedKind(ELASTIC_RECORD_POLICY, CONFIGMAPS)
#: Decisions one pass makes at most (a change goes Recorded → CommandSent → AwaitingWidth in
#: one pass; the rest waits for later passes).
MAX_STEPS: Final = 8
#: The annotation naming the port the engine serves on (the renderer writes it on every
#: managed Pod).
ENGINE_PORT_ANNOTATION: Final = labels.PROMETHEUS_PORT
_TERMINAL: Final = ("Failed", "Succeeded")
#: A change in flight is looked at again this often (Ray and the engine send no watch event).
IN_FLIGHT_RECHECK_SECONDS: Final = 10.0


def utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _standing(pod: Mapping[str, Any], owner_uid: str) -> bool:
    """Controlled by the deployment, not being deleted, not finished."""
    meta = jsonview.view(pod.get("metadata"))
    phase = jsonview.view(pod.get("status")).get("phase")
    return (
        ownerrefs.controlled_by(pod, owner_uid)
        and meta.get("deletionTimestamp") is None
        and phase not in _TERMINAL
    )


def elastic_role(rendering: Rendering) -> RoleRendering | None:
    return next((r for r in rendering.roles if r.elastic is not None), None)


def head_component(role: RoleRendering) -> str:
    assert role.elastic is not None
    meta = jsonview.view(role.elastic.head_pod.get("metadata"))
    return jsonview.strings(meta.get("labels")).get(labels.COMPONENT, "")


@dataclass
class ElasticPass:
    """What the step found and did in one pass: the last decision (for ``ElasticResize``) and
    the failures the pass raises after its status write."""

    decision: Decision | None = None
    errors: list[BaseException] = field(default_factory=list)

    def status(
        self,
        status: ModelDeploymentStatus,
        stored: ModelDeploymentStatus | None,
        *,
        generation: int | None,
        now: str,
    ) -> ModelDeploymentStatus:
        """``status`` with ``ElasticResize`` from this pass's last decision (unchanged for a
        deployment without an elastic role, or when the step decided nothing)."""
        if self.decision is None:
            return status
        previous = stored.conditions if stored is not None else None
        return with_resize_condition(
            status, self.decision, previous, generation=generation or None, now=now
        )

    @property
    def requeue(self) -> float | None:
        """When to look again without a watch event: a retry's backoff, or a change in flight
        (the engine and Ray have no watch); ``None`` otherwise."""
        decision = self.decision
        if decision is None or decision.action is not Action.HOLD:
            return None
        if decision.retry_after is not None:
            return max(decision.retry_after.total_seconds(), 1.0)
        return IN_FLIGHT_RECHECK_SECONDS if decision.current is not None else None


class ElasticStep:
    """The Elastic EP part of the deployment pass (see the module docstring)."""

    def __init__(
        self,
        kube: Kube,
        owned: OwnedWriter,
        *,
        clock: Callable[[], datetime.datetime] = utc_now,
        session: Callable[[], aiohttp.ClientSession] | None = None,
    ) -> None:
        self.kube = kube
        self.owned = owned
        self.clock = clock
        self.session = session or _session

    # ---- before the render ------------------------------------------------------------------

    async def pods(self, md: ModelDeployment) -> list[dict[str, Any]]:
        """The deployment's Pods, listed live (the pass's observation reuses them)."""
        raw, _ = await self.kube.list(
            PODS, md.metadata.namespace, label_selector=deployment_selector(md.metadata.name)
        )
        return raw

    @staticmethod
    def masters(md: ModelDeployment, pods: Sequence[Mapping[str, Any]]) -> tuple[LiveMaster, ...]:
        """The live masters the render reads (standing Pods of the deployment at ordinal 0)."""
        standing = [p for p in pods if _standing(p, md.metadata.uid)]
        return live_masters(md, standing, namespace=md.metadata.namespace)

    # ---- the head ---------------------------------------------------------------------------

    async def keep_head(
        self, rendering: Rendering, pods: Sequence[ObservedPod]
    ) -> list[dict[str, Any]]:
        """Create the Ray head when no head of the deployment stands (a terminal one is deleted
        first; one being deleted is waited out). The Pods created."""
        role = elastic_role(rendering)
        if role is None or role.elastic is None:
            return []
        component = head_component(role)
        heads = [p for p in pods if p.owned and p.role == component]
        terminal = [p for p in heads if not p.terminating and p.phase in _TERMINAL]
        for pod in terminal:
            await self.kube.delete(PODS, pod.name, rendering.namespace, uid=pod.uid)
        if heads:
            return []
        return [await self.kube.create(PODS, role.elastic.head_pod, rendering.namespace)]

    # ---- the width change -------------------------------------------------------------------

    async def resize(
        self,
        md: ModelDeployment,
        rendering: Rendering,
        *,
        raw_pods: Sequence[Mapping[str, Any]],
        pods: Sequence[ObservedPod],
        workloads: Sequence[ObservedWorkload],
    ) -> ElasticPass:
        """Run the machine's loop for this pass (the module docstring)."""
        out = ElasticPass()
        role = elastic_role(rendering)
        index = elastic_index(md)
        if role is None or index is None:
            return out
        spec = md.spec.roles[index].elastic_ep
        assert spec is not None
        meta = md.metadata
        owner = Owner(meta.namespace, meta.name, meta.uid)
        by_uid = {str(jsonview.view(p.get("metadata")).get("uid") or ""): p for p in raw_pods}
        members = live_members(pods, role.name)
        component = head_component(role)
        heads = [
            p
            for p in pods
            if p.owned and p.role == component and not p.terminating and p.phase not in _TERMINAL
        ]
        head = heads[0] if len(heads) == 1 else None
        resource, cards = member_cards(role.seats[0].pod) if role.seats else ("cards", 0)
        nodes = await self._nodes({p.node_name for p in [*members, *heads] if p.node_name})
        facts = Facts(
            desired=spec.width,
            pods=pods,
            component=role.name,
            head=head,
            workloads=workloads,
            nodes=_allocatable(nodes, resource),
            cards_per_member=cards or 1,
            card_resource=resource,
            ray=await self._ray(head, by_uid, nodes),
        )
        try:
            intent, observation = await self._records(owner)
            out.decision = await self._loop(
                md, owner, facts, intent, observation, by_uid=by_uid, nodes=nodes
            )
        except Exception as exc:  # a failed write or read ends the loop; the pass is retried
            log.warning("%s/%s: Elastic EP step failed: %s", meta.namespace, meta.name, exc)
            out.errors.append(exc)
        return out

    async def _loop(
        self,
        md: ModelDeployment,
        owner: Owner,
        facts: Facts,
        intent: StoredIntent | RecordUnreadable | None,
        observation: StoredObservation | RecordUnreadable | None,
        *,
        by_uid: Mapping[str, Mapping[str, Any]],
        nodes: Mapping[str, Mapping[str, Any] | None] | Unread,
    ) -> Decision:
        generation = md.metadata.generation or 1
        decision: Decision | None = None
        for _ in range(MAX_STEPS):
            world = World(owner, generation, facts, intent, observation)
            decision = decide(world, self.clock())
            if decision.observation is not None and not isinstance(observation, RecordUnreadable):
                observation = await self._write_observation(owner, decision, observation)
            if decision.action in (Action.NONE, Action.HOLD):
                return decision
            if decision.action is Action.ASK_ENGINE:
                master = master_of(live_members(facts.pods, facts.component))
                answers = await self._ask_engine(md, master, by_uid, nodes)
                facts = replace(facts, engine=answers)
                continue
            if decision.action is Action.DELETE:
                assert decision.expected is not None
                await self._delete_intent(owner, decision.expected)
                intent = None
                continue
            # WRITE, then the scale call only once the write succeeded
            written = await self._write_intent(owner, decision.configmap(owner), decision.expected)
            intent = written
            if decision.scale_to is not None:
                master = master_of(live_members(facts.pods, facts.component))
                answer = await self._scale(master, by_uid, decision.scale_to)
                assert decision.record is not None
                settled = after_scale(decision.record, answer, self.clock())
                intent = await self._write_intent(owner, intent_configmap(settled, owner), written)
                facts = replace(facts, engine=None)  # answers from before the call are stale
        assert decision is not None
        return decision

    # ---- records ----------------------------------------------------------------------------

    async def _records(
        self, owner: Owner
    ) -> tuple[StoredIntent | RecordUnreadable | None, StoredObservation | RecordUnreadable | None]:
        intent_raw = await self.kube.get(CONFIGMAPS, intent_name(owner.uid), owner.namespace)
        obs_raw = await self.kube.get(CONFIGMAPS, observation_name(owner.uid), owner.namespace)
        intent = decode_intent(intent_raw, owner=owner) if intent_raw is not None else None
        obs = decode_observation(obs_raw, owner=owner) if obs_raw is not None else None
        return intent, obs

    async def _write(
        self, owner: Owner, obj: Mapping[str, Any], expected: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        name = name_of(obj)
        result = await self.owned.sync(
            RECORDS, [obj], owner=owner, stored={name: dict(expected) if expected else None}
        )
        if result.failures:
            raise result.failures[0]
        written = result.written.get(name)
        if written is None:
            raise RuntimeError(f"ConfigMap {name}: the write returned nothing")
        return written

    async def _write_intent(
        self, owner: Owner, obj: Mapping[str, Any], expected: StoredIntent | None
    ) -> StoredIntent:
        written = await self._write(owner, obj, expected.raw if expected else None)
        decoded = decode_intent(written, owner=owner)
        if not isinstance(decoded, StoredIntent):
            raise RuntimeError(f"the intent record as written does not read: {decoded.problem}")
        return decoded

    async def _write_observation(
        self,
        owner: Owner,
        decision: Decision,
        stored: StoredObservation | None,
    ) -> StoredObservation | None:
        obj = decision.observation_configmap(owner)
        if obj is None:
            return stored
        written = await self._write(owner, obj, stored.raw if stored else None)
        decoded = decode_observation(written, owner=owner)
        return decoded if isinstance(decoded, StoredObservation) else stored

    async def _delete_intent(self, owner: Owner, expected: StoredIntent) -> None:
        planned = plan_record_delete(ELASTIC_RECORD_POLICY, expected.raw, owner=owner)
        if isinstance(planned, OwnedConflict):
            raise planned
        await self.owned.delete_record(RECORDS, owner.namespace, planned)

    # ---- facts ------------------------------------------------------------------------------

    async def _nodes(self, names: set[str]) -> dict[str, dict[str, Any] | None] | Unread:
        """The named Nodes, read live (``None``: not found)."""
        out: dict[str, dict[str, Any] | None] = {}
        for name in sorted(names):
            try:
                out[name] = await self.kube.get(NODES, name)
            except Exception as exc:
                return Unread(f"Node {name} could not be read: {exc}")
        return out

    async def _ray(
        self,
        head: ObservedPod | None,
        by_uid: Mapping[str, Mapping[str, Any]],
        nodes: Mapping[str, Mapping[str, Any] | None] | Unread,
    ) -> Any:
        what = "the Ray head's state API"
        if head is None:
            return Unread("no single Ray head Pod stands")
        if not isinstance(nodes, Unread) and simulated_node(nodes.get(head.node_name)):
            return no_process(what, head.name, head.node_name)
        ip = _pod_ip(by_uid.get(head.uid))
        if not ip or head.phase != "Running":
            return Unread(f"the Ray head Pod {head.name} is not running with an IP yet")
        url = f"http://{ip}:{RAY_DASHBOARD_PORT}{RAY_NODES_PATH}"
        try:
            async with (
                self.session() as session,
                session.get(
                    url,
                    allow_redirects=False,
                    timeout=aiohttp.ClientTimeout(total=calls.PROBE_TIMEOUT_SECONDS),
                ) as answer,
            ):
                return read_ray_nodes(answer.status, await answer.read())
        except (aiohttp.ClientError, TimeoutError) as exc:
            return Unread(f"{what} at {ip}:{RAY_DASHBOARD_PORT} did not answer: {exc!r}")

    def _engine_url(
        self,
        master: ObservedPod | None,
        by_uid: Mapping[str, Mapping[str, Any]],
        nodes: Mapping[str, Mapping[str, Any] | None] | Unread | None,
    ) -> str | Unread:
        if master is None:
            return Unread("no single live master")
        if (
            nodes is not None
            and not isinstance(nodes, Unread)
            and simulated_node(nodes.get(master.node_name))
        ):
            return no_process("the engine", master.name, master.node_name)
        raw = by_uid.get(master.uid)
        ip = _pod_ip(raw)
        annotations = jsonview.strings(
            jsonview.view(jsonview.view(raw).get("metadata")).get("annotations")
        )
        port = annotations.get(ENGINE_PORT_ANNOTATION, "")
        if not ip or not port.isdigit():
            return Unread(f"the master Pod {master.name} has no IP or engine port yet")
        return f"http://{ip}:{port}"

    async def _ask_engine(
        self,
        md: ModelDeployment,
        master: ObservedPod | None,
        by_uid: Mapping[str, Mapping[str, Any]],
        nodes: Mapping[str, Mapping[str, Any] | None] | Unread,
    ) -> calls.EngineAnswers | Unread:
        base = self._engine_url(master, by_uid, nodes)
        if isinstance(base, Unread):
            return base
        assert master is not None
        model = calls.served_model(by_uid.get(master.uid), md.spec.model.name)
        try:
            return await asyncio.wait_for(
                self._probe(base, master.uid, model), timeout=calls.PASS_BUDGET_SECONDS
            )
        except TimeoutError:
            return Unread(f"the engine at {base} did not answer within the pass's budget")

    async def _probe(self, base: str, master_uid: str, model: str) -> calls.EngineAnswers:
        async with self.session() as session:

            async def send(request: calls.EngineRequest) -> tuple[int | None, bytes]:
                try:
                    async with session.request(
                        request.method,
                        base + request.path,
                        json=request.body,
                        headers=request.headers,
                        allow_redirects=False,
                        timeout=aiohttp.ClientTimeout(total=request.timeout_seconds),
                    ) as answer:
                        return answer.status, await answer.read()
                except (aiohttp.ClientError, TimeoutError) as exc:
                    return None, repr(exc).encode()

            scaling, problem = calls.read_is_scaling(*await send(calls.is_scaling_request()))
            if scaling is not False:
                return calls.EngineAnswers(master_uid, scaling, scaling_problem=problem)
            before, bound_problem = calls.read_bound(
                *await send(calls.completion_request(-1, model))
            )
            if before is None:
                return calls.EngineAnswers(master_uid, False, bound_problem=bound_problem)
            forwards = tuple(
                [
                    calls.read_forward(*await send(calls.completion_request(rank, model)))
                    for rank in range(before)
                ]
            )
            after, bound_problem = calls.read_bound(
                *await send(calls.completion_request(-1, model))
            )
            return calls.EngineAnswers(
                master_uid,
                False,
                bound_before=before,
                bound_after=after,
                bound_problem=bound_problem,
                forwards=forwards,
            )

    async def _scale(
        self, master: ObservedPod | None, by_uid: Mapping[str, Mapping[str, Any]], target: int
    ) -> calls.ScaleAnswer:
        base = self._engine_url(master, by_uid, None)
        if isinstance(base, Unread):
            return calls.classify_scale(None, transport_error=base.reason)
        request = calls.scale_request(target)
        try:
            async with (
                self.session() as session,
                session.post(
                    base + request.path,
                    json=request.body,
                    allow_redirects=False,
                    timeout=aiohttp.ClientTimeout(total=request.timeout_seconds),
                ) as answer,
            ):
                return calls.classify_scale(answer.status, await answer.read())
        except (aiohttp.ClientError, TimeoutError) as exc:
            return calls.classify_scale(None, transport_error=repr(exc))


def _session() -> aiohttp.ClientSession:
    return aiohttp.ClientSession()


def _pod_ip(pod: Mapping[str, Any] | None) -> str:
    return str(jsonview.view(jsonview.view(pod).get("status")).get("podIP") or "")


def _allocatable(
    nodes: Mapping[str, Mapping[str, Any] | None] | Unread, resource: str
) -> Mapping[str, int] | Unread:
    if isinstance(nodes, Unread):
        return nodes
    return {name: node_allocatable(node, resource) for name, node in nodes.items() if node}
