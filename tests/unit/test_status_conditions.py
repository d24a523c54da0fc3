"""Table-driven tests of ``ModelDeployment.status`` (docs/contract/controller.md §13–§15)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from property.strategies import ROUTER_IMAGES

from gpustack_render.api.inputs import (
    InstanceType,
    KVCacheBackend,
    KVCachePool,
    KVCachePoolBinding,
)
from gpustack_render.api.modeldeployment import ModelDeployment, ModelDeploymentStatus
from gpustack_render.core.errors import RenderError
from gpustack_render.core.settings import Settings
from gpustack_render.core.vocabulary import ConditionStatus
from gpustack_render.reconcile import status as st
from gpustack_render.reconcile.conditions import common as cond
from gpustack_render.reconcile.conditions.kvcache import domain_registered
from gpustack_render.reconcile.conditions.readiness import readiness
from gpustack_render.reconcile.observed import (
    CheckState,
    ObservedPod,
    ObservedWorkload,
    observe_pod,
)
from gpustack_render.reconcile.replicas import ReplicaIndex
from gpustack_render.reconcile.rollout import RoleStep, RolloutStep
from gpustack_render.reconcile.rolloutinputs import cache_hold, with_replacing
from gpustack_render.reconcile.routerstate import RouterObservation
from gpustack_render.reconcile.statusfields import PHASE_STARTING
from gpustack_render.rendering.renderer import Rendering, render
from gpustack_render.rendering.roleplan import CacheResolution
from gpustack_render.schema.decoding import decode_deployment, decode_model
from gpustack_render.schema.lookups import StaticLookups

NOW = "2026-01-01T00:10:00Z"
EARLIER = "2026-01-01T00:00:00Z"
ENTRANCE = "gpustack-fnv64-0123456789abcdef"
UID = "md-uid-1"

INSTANCE_TYPE: dict[str, Any] = {
    "apiVersion": "worker.gpustack.ai/v1",
    "kind": "InstanceType",
    "metadata": {"name": "a10g"},
    "spec": {"acceleratable": True, "unitResources": {"cpu": "8", "ram": "32Gi"}},
    "status": {
        "entrance": ENTRANCE,
        "detail": {"manufacturer": "nvidia", "memory": "24Gi"},
        "accelerator": {"capacity": 16},
    },
}
BINDING: dict[str, Any] = {
    "apiVersion": "worker.gpustack.ai/v1",
    "kind": "KVCachePoolBinding",
    "metadata": {"name": "cache", "namespace": "team-a"},
    "spec": {"poolRef": {"name": "pool"}, "domain": {"blockSize": 16, "dtype": "bfloat16"}},
    "status": {"phase": "Ready", "conditions": [{"type": "QuotaGranted", "status": "True"}]},
}
POOL: dict[str, Any] = {
    "apiVersion": "worker.gpustack.ai/v1",
    "kind": "KVCachePool",
    "metadata": {"name": "pool"},
    "spec": {"backends": ["backend"]},
    "status": {
        "clientEndpoint": "pool-master.gpustack-system.svc:50051",
        "conditions": [{"type": "QuotaLedgerAvailable", "status": "True"}],
    },
}
BACKEND: dict[str, Any] = {
    "apiVersion": "worker.gpustack.ai/v1",
    "kind": "KVCacheBackend",
    "metadata": {"name": "backend"},
    "spec": {"transport": {"protocol": "TCP"}},
}


def role(name: str = "server", **fields: Any) -> dict[str, Any]:
    return {"name": name, "instanceType": "a10g", **fields}


def deployment(
    *roles: dict[str, Any],
    namespace: str = "team-a",
    engine: str = "vLLM",
    router: str | None = None,
    cache: bool = False,
    status: dict[str, Any] | None = None,
    annotations: dict[str, str] | None = None,
) -> ModelDeployment:
    spec: dict[str, Any] = {
        "model": {"name": "Qwen/Qwen3-8B"},
        "engine": {"name": engine, "image": "vllm/vllm-openai:v0.25.1"},
        "roles": list(roles) or [role(replicas=2)],
    }
    if router:
        spec["router"] = {"name": router, "image": ROUTER_IMAGES[router]}
    if cache:
        spec["kvCache"] = {"poolRef": {"name": "cache"}}
    meta: dict[str, Any] = {"name": "qwen", "namespace": namespace, "uid": UID, "generation": 3}
    if annotations:
        meta["annotations"] = annotations
    data: dict[str, Any] = {
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "ModelDeployment",
        "metadata": meta,
        "spec": spec,
    }
    if status is not None:
        data["status"] = status
    md, errs = decode_deployment(data)
    assert md is not None, errs
    return md


def lookups(*, binding: dict[str, Any] | None = None, pool: bool = True) -> StaticLookups:
    objects: list[Any] = [decode_model(InstanceType, INSTANCE_TYPE)[0]]
    if binding is not None:
        objects.append(decode_model(KVCachePoolBinding, binding)[0])
    if pool:
        objects += [decode_model(KVCachePool, POOL)[0], decode_model(KVCacheBackend, BACKEND)[0]]
    return StaticLookups.of(objects)


def rendered(
    md: ModelDeployment,
    *,
    binding: dict[str, Any] | None = BINDING,
    settings: Settings | None = None,
) -> Rendering:
    return render(md, lookups=lookups(binding=binding), settings=settings or Settings())


def pods_of(rendering: Rendering, **overrides: Any) -> list[ObservedPod]:
    """The rendered Pods as the API server would hold them: named, with a uid, Ready."""
    out = []
    for seat in rendering.iter_seats():
        obj = copy.deepcopy(seat.pod)
        obj["metadata"]["name"] = seat.name or f"qwen-{seat.role}-{seat.ordinal}{seat.member}x"
        obj["metadata"]["uid"] = f"uid-{seat.role}-{seat.ordinal}-{seat.member}"
        obj["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
        out.append(replace(observe_pod(obj, owner_uid=UID), **overrides))
    return out


def workloads_of(pods: list[ObservedPod], **fields: Any) -> list[ObservedWorkload]:
    groups: dict[str | None, list[ObservedPod]] = {}
    for p in pods:
        groups.setdefault(p.group, []).append(p)
    base = {"quota_reserved": True, "admitted": True, "ever_admitted": True, **fields}
    return [
        ObservedWorkload(name=str(g), owner_pods=frozenset(p.uid for p in members), **base)
        for g, members in groups.items()
    ]


def compute(
    md: ModelDeployment,
    rendering: Rendering,
    pods: list[ObservedPod],
    workloads: list[ObservedWorkload],
    *,
    plan: RolloutStep | None = None,
    system_namespace: str = "gpustack-system",
    router: RouterObservation | None = None,
) -> ModelDeploymentStatus:
    return st.deployment_status(
        md,
        rendering=rendering,
        pods=pods,
        workloads=workloads,
        plan=plan,
        system_namespace=system_namespace,
        now=NOW,
        router=router,
    )


def condition(status: ModelDeploymentStatus, type_: str) -> tuple[str, str]:
    for c in status.conditions or ():
        if c.type == type_:
            return c.status, c.reason
    raise AssertionError(f"no {type_} condition")


def message(status: ModelDeploymentStatus, type_: str) -> str:
    return next(c.message for c in status.conditions or () if c.type == type_)


# ---- QuotaReserved ------------------------------------------------------------------------

Scenario = Callable[[list[ObservedPod]], tuple[list[ObservedPod], list[ObservedWorkload]]]


def _no_pods(pods: list[ObservedPod]) -> tuple[list[ObservedPod], list[ObservedWorkload]]:
    return [], []


def _terminating(pods: list[ObservedPod]) -> tuple[list[ObservedPod], list[ObservedWorkload]]:
    return [replace(p, terminating=True) for p in pods], []


def _no_workloads(pods: list[ObservedPod]) -> tuple[list[ObservedPod], list[ObservedWorkload]]:
    return pods, []


def _reserved(pods: list[ObservedPod]) -> tuple[list[ObservedPod], list[ObservedWorkload]]:
    return pods, workloads_of(pods)


def _waiting(pods: list[ObservedPod]) -> tuple[list[ObservedPod], list[ObservedWorkload]]:
    wls = workloads_of(pods, quota_reserved=False, admitted=False, ever_admitted=False)
    wls[0] = replace(
        wls[0],
        checks={"gpustack-model-deployment-joint": CheckState("Pending", "waiting for decode")},
    )
    return pods, wls


def _preempted_in_part(
    pods: list[ObservedPod],
) -> tuple[list[ObservedPod], list[ObservedWorkload]]:
    wls = workloads_of(pods)
    wls[0] = replace(wls[0], admitted=False, quota_reserved=False, preempted=True, evicted=True)
    return pods, wls


def _parked(pods: list[ObservedPod]) -> tuple[list[ObservedPod], list[ObservedWorkload]]:
    wls = workloads_of(pods, admitted=False, quota_reserved=False)
    wls = [
        replace(
            w,
            active=False,
            checks={"gpustack-model-deployment-joint": CheckState("Pending", "parked")},
        )
        for w in wls
    ]
    return pods, wls


@pytest.mark.parametrize(
    ("scenario", "expected", "names"),
    [
        pytest.param(_no_pods, ("Unknown", "NoReplicas"), [], id="no-replicas"),
        pytest.param(_terminating, ("Unknown", "AllReplicasTerminating"), ["2"], id="terminating"),
        pytest.param(_no_workloads, ("Unknown", "AdmissionInFlight"), ["2"], id="in-flight"),
        pytest.param(_reserved, ("True", "Reserved"), ["2 of 2", ENTRANCE], id="reserved"),
        pytest.param(
            _waiting,
            ("False", "Pending"),
            ["2 of 2", ENTRANCE, "waiting for decode", "replica 0"],
            id="pending-with-check-message",
        ),
        pytest.param(_preempted_in_part, ("False", "PreemptedInPart"), ["1"], id="preempted"),
        pytest.param(_parked, ("False", "Parked"), ["reactivate"], id="parked"),
    ],
)
def test_quota_reserved(scenario: Scenario, expected: tuple[str, str], names: list[str]) -> None:
    md = deployment()
    rendering = rendered(md)
    pods, workloads = scenario(pods_of(rendering))
    status = compute(md, rendering, pods, workloads)
    assert condition(status, cond.QUOTA_RESERVED) == expected
    for name in names:
        assert name in message(status, cond.QUOTA_RESERVED)


def test_quota_reserved_pod_group_incomplete_names_have_want_role_and_queue() -> None:
    md = deployment(role(replicas=1, size=2))
    rendering = rendered(md)
    pods = pods_of(rendering)[:1]
    status = compute(md, rendering, pods, [])
    assert condition(status, cond.QUOTA_RESERVED) == ("False", "PodGroupIncomplete")
    text = message(status, cond.QUOTA_RESERVED)
    assert "1 of 2" in text and "server" in text and ENTRANCE in text


def test_quota_reserved_in_the_reserved_namespace() -> None:
    md = deployment(namespace="gpustack-system")
    rendering = rendered(md)
    pods = pods_of(rendering)
    status = compute(md, rendering, pods, [], system_namespace="gpustack-system")
    assert condition(status, cond.QUOTA_RESERVED) == ("False", "NoQueueInReservedNamespace")
    assert rendering.local_queues == ()


def test_quota_reserved_multi_role_names_the_waiting_roles() -> None:
    md = deployment(role("prefill", kind="Prefill"), role("decode", kind="Decode"))
    rendering = rendered(md)
    pods = pods_of(rendering)
    wls = workloads_of(pods)
    wls = [
        w
        if "prefill" in next(iter(w.owner_pods))
        else replace(w, quota_reserved=False, admitted=False)
        for w in wls
    ]
    status = compute(md, rendering, pods, wls)
    assert condition(status, cond.QUOTA_RESERVED) == ("False", "Pending")
    assert "roles decode" in message(status, cond.QUOTA_RESERVED)


def test_messages_naming_every_waiting_replica_stay_short_whatever_the_count() -> None:
    """A message about waiting replicas names how many and the first few, and quotes a
    downstream check's words once, cut at 400 characters: it stays short whatever the replica
    count (issue 37; it used to name every replica's check, up to Kubernetes' 32768-character
    bound). The summary conditions and phaseMessage refer to QuotaReserved briefly."""
    md = deployment(
        role("prefill", kind="Prefill", replicas=8), role("decode", kind="Decode", replicas=8)
    )
    rendering = rendered(md)
    pods = pods_of(rendering, ready=False)
    long = CheckState(state="Pending", message="waiting for a provisioning request " * 300)
    wls = [
        replace(w, admitted=False, checks={"provisioning": long})
        if "prefill" in next(iter(w.owner_pods))
        else replace(w, quota_reserved=False, admitted=False, ever_admitted=False)
        for w in workloads_of(pods)
    ]
    status = compute(md, rendering, pods, wls)
    assert condition(status, cond.QUOTA_RESERVED) == ("False", "Pending")
    quota = message(status, cond.QUOTA_RESERVED)
    assert quota.startswith("8 of 16 replicas wait for quota")
    assert len(quota) < 1200, quota
    assert (
        "admission checks hold 8 replica(s) (prefill 0, prefill 1, prefill 2 … (+5 more))" in quota
    )
    assert quota.count("waiting for a provisioning request") < 13
    for type_ in (cond.READY, cond.RECONCILING):
        text = message(status, type_)
        assert len(text) < 300 and "condition QuotaReserved has the detail" in text, text
        assert "provisioning" not in text
    assert status.phase == PHASE_STARTING
    assert status.phase_message is not None and len(status.phase_message) < 300
    assert "provisioning" not in status.phase_message


def test_a_preemption_note_is_appended_on_the_other_branches() -> None:
    """docs/contract/controller.md §14: "A preemption note is appended on other branches" (Parked
    and Reserved included)."""
    md = deployment()
    rendering = rendered(md)
    pods = pods_of(rendering)
    # A third Workload of an owned Pod (a departed group's) records a preemption.
    stale = ObservedWorkload(
        name="qwen-server-old", owner_pods=frozenset({pods[0].uid}), preempted=True
    )
    status = compute(md, rendering, pods, [*workloads_of(pods), stale])
    assert condition(status, cond.QUOTA_RESERVED) == ("False", "PreemptedInPart")
    reserved = [replace(w, admitted=False) for w in workloads_of(pods)]
    status = compute(md, rendering, pods, [*reserved, stale])
    assert condition(status, cond.QUOTA_RESERVED) == ("True", "Reserved")
    assert "preempted" in message(status, cond.QUOTA_RESERVED)
    assert "qwen-server-old" in message(status, cond.QUOTA_RESERVED)
    _, parked = _parked(pods)
    status = compute(md, rendering, pods, [*parked, stale])
    assert condition(status, cond.QUOTA_RESERVED) == ("False", "Parked")
    assert "qwen-server-old" in message(status, cond.QUOTA_RESERVED)


# ---- ReplicasUpToDate ---------------------------------------------------------------------


def _plan(*steps: RoleStep) -> RolloutStep:
    return RolloutStep(
        replacing={s.role: s.replacing for s in steps},
        persist_first=False,
        delete_pods=(),
        delete_workloads=(),
        create=(),
        requeue=False,
        roles=steps,
    )


def test_replicas_up_to_date_rows() -> None:
    md = deployment()
    rendering = rendered(md)
    pods = pods_of(rendering)
    workloads = workloads_of(pods)

    status = compute(md, rendering, [], [])
    assert condition(status, cond.REPLICAS_UP_TO_DATE) == ("Unknown", "RolloutNotObserved")

    status = compute(md, rendering, pods, workloads)
    assert condition(status, cond.REPLICAS_UP_TO_DATE) == ("True", "UpToDate")

    old = [replace(pods[0], pod_spec_hash="stale"), pods[1]]
    status = compute(md, rendering, old, workloads)
    assert condition(status, cond.REPLICAS_UP_TO_DATE) == ("False", "RolloutInProgress")
    assert "1 replica" in message(status, cond.REPLICAS_UP_TO_DATE)

    held = _plan(RoleStep("server", None, outdated=1, held_by_cache=True))
    status = compute(md, rendering, old, workloads, plan=held)
    assert condition(status, cond.REPLICAS_UP_TO_DATE) == ("False", "RolloutHeldByCache")
    # §14 names the held and the outdated counts (and the held role).
    assert "1 replica(s) held of 1 outdated" in message(status, cond.REPLICAS_UP_TO_DATE)
    assert "server" in message(status, cond.REPLICAS_UP_TO_DATE)

    # The last outdated replica was deleted and is being recreated: still RolloutInProgress.
    rolling = deployment(
        status={
            "conditions": [
                {"type": "ReplicasUpToDate", "status": "False", "reason": "RolloutInProgress"}
            ]
        }
    )
    status = compute(rolling, rendering, pods[:1], workloads[:1])
    assert condition(status, cond.REPLICAS_UP_TO_DATE) == ("False", "RolloutInProgress")

    # A replica of a role that already has a Workload is missing (a departure).
    status = compute(md, rendering, pods[:1], workloads[:1])
    assert condition(status, cond.REPLICAS_UP_TO_DATE) == ("False", "ReplacementInProgress")
    assert "replica(s) 1" in message(status, cond.REPLICAS_UP_TO_DATE)


def test_an_older_compatible_render_version_is_counted_not_outdated() -> None:
    md = deployment()
    rendering = rendered(md)
    pods = pods_of(rendering)  # rendered at the current version (2)
    rendering = replace(rendering, render_version=3, floor=1)
    status = compute(md, rendering, pods, workloads_of(pods))
    assert condition(status, cond.REPLICAS_UP_TO_DATE) == ("True", "UpToDate")
    assert "older" in message(status, cond.REPLICAS_UP_TO_DATE)


def test_a_replica_below_the_floor_is_outdated() -> None:
    md = deployment()
    pods = pods_of(rendered(md))  # rendered at the current version (2)
    rendering = replace(rendered(md), render_version=3, floor=3)
    status = compute(md, rendering, pods, workloads_of(pods))
    assert condition(status, cond.REPLICAS_UP_TO_DATE) == ("False", "RolloutInProgress")


# ---- RoleKindsReady, CacheAttached, KVEventsPublishing, RouterReady -----------------------


def test_role_kinds_ready() -> None:
    md = deployment(role("prefill", kind="Prefill"), role("decode", kind="Decode"))
    rendering = rendered(md)
    pods = pods_of(rendering)
    not_ready = [replace(p, ready=False) if p.role == "decode" else p for p in pods]
    status = compute(md, rendering, not_ready, workloads_of(pods))
    assert condition(status, cond.ROLE_KINDS_READY) == ("False", "KindsNotReady")
    # The kind in its API spelling (as roles[].kind), and the role carrying it.
    assert "Decode" in message(status, cond.ROLE_KINDS_READY)
    assert "Prefill" not in message(status, cond.ROLE_KINDS_READY)
    assert "role(s) decode" in message(status, cond.ROLE_KINDS_READY)
    assert status.role_summary == "1P0D"
    status = compute(md, rendering, pods, workloads_of(pods))
    assert condition(status, cond.ROLE_KINDS_READY) == ("True", "AllKindsReady")
    assert status.role_summary == "1P1D"


@pytest.mark.parametrize(
    ("cache", "command", "ready", "expected"),
    [
        pytest.param(False, None, True, ("True", "NotApplicable"), id="no-cache"),
        pytest.param(True, ["/bin/launch"], True, ("Unknown", "Unmanaged"), id="take-over"),
        pytest.param(True, None, False, ("Unknown", "NoReplicaReady"), id="none-ready"),
        pytest.param(True, None, True, ("Unknown", "NoObservationAvailable"), id="no-source"),
    ],
)
def test_cache_attached(
    cache: bool, command: list[str] | None, ready: bool, expected: tuple[str, str]
) -> None:
    fields: dict[str, Any] = {"command": command} if command else {}
    md = deployment(role(replicas=1, **fields), cache=cache)
    rendering = rendered(md)
    pods = pods_of(rendering, ready=ready)
    status = compute(md, rendering, pods, workloads_of(pods))
    assert condition(status, cond.CACHE_ATTACHED) == expected
    assert status.roles is not None and status.roles[0].unmanaged is bool(command)


def test_unmanaged_reads_the_deployed_pods_not_the_spec() -> None:
    """§13 ``roles[].unmanaged`` and §14 ``CacheAttached=Unknown/Unmanaged`` name a *deployed*
    take-over replica: status claims what is deployed (seed, "Changed role configuration")."""
    md = deployment(role(replicas=1, command=["/bin/launch"]), cache=True)
    rendering = rendered(md)
    status = compute(md, rendering, [], [])
    assert status.roles is not None and status.roles[0].unmanaged is False
    assert condition(status, cond.CACHE_ATTACHED) == ("Unknown", "NoReplicaReady")
    # Mid-way through a command edit the old managed replica still serves: managed.
    managed = deployment(role(replicas=1), cache=True)
    old_pods = pods_of(rendered(managed))
    status = compute(md, rendering, old_pods, workloads_of(old_pods))
    assert status.roles is not None and status.roles[0].unmanaged is False
    assert condition(status, cond.CACHE_ATTACHED) == ("Unknown", "NoObservationAvailable")
    # The other way round: a deployed take-over replica of a role now managed again.
    status = compute(managed, rendered(managed), pods_of(rendering), [])
    assert status.roles is not None and status.roles[0].unmanaged is True
    assert condition(status, cond.CACHE_ATTACHED) == ("Unknown", "Unmanaged")


@pytest.mark.parametrize(
    ("engine", "router", "roles", "expected"),
    [
        pytest.param("vLLM", None, None, ("True", "NotApplicable"), id="no-router"),
        # D9 amended: a router that reads no KV events reports no False condition about them.
        pytest.param("vLLM", "vllm-router", None, ("True", "NotApplicable"), id="vllm-router"),
        pytest.param(
            "SGLang", "sglang-gateway", None, ("True", "NotApplicable"), id="sglang-gateway"
        ),
        pytest.param("SGLang", "llm-d-router", None, ("False", "PublisherDisabled"), id="sglang"),
        pytest.param("vLLM", "llm-d-router", None, ("True", "Publishing"), id="publishing"),
        pytest.param(
            "vLLM",
            "llm-d-router",
            [role(command=["/bin/serve"])],
            ("Unknown", "RoleUnmanaged"),
            id="taken-over",
        ),
        pytest.param(
            "SGLang",
            "llm-d-router",
            [role(command=["/bin/serve"])],
            ("False", "PublisherDisabled"),
            id="sglang-taken-over",
        ),
    ],
)
def test_kv_events_publishing(
    engine: str, router: str | None, roles: list[dict[str, Any]] | None, expected: tuple[str, str]
) -> None:
    md = deployment(*(roles or []), engine=engine, router=router)
    rendering = rendered(md)
    status = compute(md, rendering, [], [])
    assert condition(status, cond.KV_EVENTS_PUBLISHING) == expected
    if router is not None and router != "llm-d-router":
        assert f"router {router} reads no KV events" in message(status, cond.KV_EVENTS_PUBLISHING)
    if router is None:
        assert condition(status, cond.ROUTER_READY) == ("True", "NotApplicable")
        assert status.router is None
    else:
        # Nothing observed of the router's Deployment yet (D26).
        assert condition(status, cond.ROUTER_READY) == ("False", "NotDeployed")
        assert status.router is not None and status.router.name == router


ROUTER_DEPLOYMENT = "Deployment team-a/qwen-router"


@pytest.mark.parametrize(
    ("observed", "image", "expected", "summary"),
    [
        pytest.param(None, True, ("False", "NotDeployed"), "0R2S", id="not-observed"),
        pytest.param(
            RouterObservation(deployed=False),
            True,
            ("False", "NotDeployed"),
            "0R2S",
            id="absent",
        ),
        pytest.param(
            RouterObservation(deployed=False, conflict=f"{ROUTER_DEPLOYMENT} exists and is not "),
            True,
            ("False", "NotDeployed"),
            "0R2S",
            id="held-by-another-owner",
        ),
        pytest.param(
            RouterObservation(deployed=True, ready=0),
            True,
            ("False", "NoReadyReplicas"),
            "0R2S",
            id="no-ready-pod",
        ),
        pytest.param(
            RouterObservation(deployed=True, ready=2), True, ("True", "Ready"), "2R2S", id="ready"
        ),
        pytest.param(
            RouterObservation(deployed=True, ready=2),
            False,
            ("False", "RenderFailed"),
            "2R2S",
            id="no-image-and-the-setting-emptied",
        ),
    ],
)
def test_router_ready_phase_summary_and_endpoint(
    observed: RouterObservation | None, image: bool, expected: tuple[str, str], summary: str
) -> None:
    md = deployment(role(replicas=2), router="vllm-router")
    if not image:
        assert md.spec.router is not None
        md = md.model_copy(
            update={
                "spec": md.spec.model_copy(
                    update={"router": md.spec.router.model_copy(update={"image": None})}
                )
            }
        )
    # Without an image the router's default applies, unless the administrator emptied it.
    rendering = rendered(md, settings=None if image else Settings(router_image_vllm_router=""))
    pods = pods_of(rendering)
    status = compute(md, rendering, pods, workloads_of(pods), router=observed)
    assert condition(status, cond.ROUTER_READY) == expected
    assert status.role_summary == summary
    assert status.router is not None
    if expected[1] == "Ready":
        # Every replica and the router ready: the deployment is served through the router.
        assert status.phase == "Ready" and status.phase_message == ""
        assert status.endpoint == "http://qwen-router.team-a.svc:8000"
        assert status.router.endpoint == status.endpoint
        assert condition(status, cond.READY) == ("True", "Ready")
    else:
        # Every replica is ready but the router is not: Degraded, the plain Service's endpoint.
        assert status.phase == "Degraded"
        message = next(c.message for c in status.conditions or () if c.type == cond.ROUTER_READY)
        assert status.phase_message == message
        assert status.endpoint == "http://qwen.team-a.svc:8000"
        assert status.router.endpoint is None
        ready = next(c for c in status.conditions or () if c.type == cond.READY)
        assert (ready.status, ready.reason) == ("False", expected[1])
    if expected[1] == "RenderFailed":
        assert status.router.metrics is None
        assert condition(status, cond.STALLED) == ("True", "RenderFailed")
    else:
        assert status.router.metrics is not None and status.router.metrics.port == 29000


def test_router_status_publishes_kv_event_endpoints() -> None:
    md = deployment(engine="vLLM", router="llm-d-router")
    rendering = rendered(md)
    status = compute(md, rendering, [], [])
    assert status.router is not None and status.router.roles is not None
    (r,) = status.router.roles
    assert r.kv_events is not None
    assert r.kv_events.endpoint == "tcp://qwen-server.team-a.svc:5557"
    assert r.kv_events.replay_endpoint == "tcp://qwen-server.team-a.svc:5558"
    assert r.kv_events.topic == "kv@"


# ---- DomainRegistered ---------------------------------------------------------------------


def _binding(**status: Any) -> dict[str, Any]:
    b = copy.deepcopy(BINDING)
    b["status"] = status
    return b


@pytest.mark.parametrize(
    ("binding", "expected", "names"),
    [
        pytest.param(BINDING, ("True", "Registered"), ["team-a/cache"], id="registered"),
        pytest.param(None, ("False", "BindingNotFound"), ["team-a/cache"], id="not-found"),
        pytest.param(
            _binding(phase="Provisioning", phaseMessage="allocating members"),
            ("False", "BindingNotReady"),
            ["Provisioning", "allocating members"],
            id="provisioning",
        ),
        pytest.param(
            _binding(), ("False", "BindingNotReady"), ["no phase is observed"], id="no-phase"
        ),
        pytest.param(
            _binding(phase="Ready"), ("False", "BindingNotReady"), ["QuotaGranted"], id="no-grant"
        ),
    ],
)
def test_domain_registered(
    binding: dict[str, Any] | None, expected: tuple[str, str], names: list[str]
) -> None:
    md = deployment(cache=True)
    rendering = rendered(md, binding=binding)
    status = compute(md, rendering, [], [])
    assert condition(status, cond.DOMAIN_REGISTERED) == expected
    for name in names:
        assert name in message(status, cond.DOMAIN_REGISTERED)


def test_domain_registered_not_applicable_and_deleting() -> None:
    md = deployment()
    assert domain_registered(md, None) == cond.ConditionVerdict(
        ConditionStatus.TRUE, "NotApplicable", "the deployment names no KV cache pool"
    )
    cached = deployment(cache=True)
    verdict = domain_registered(cached, CacheResolution("cache", "BindingDeleting"))
    assert (verdict.status, verdict.reason) == ("False", "BindingDeleting")


def test_kv_cache_status_is_absent_until_resolved_then_kept() -> None:
    md = deployment(cache=True)
    assert compute(md, rendered(md, binding=None), [], []).kv_cache is None
    status = compute(md, rendered(md), [], [])
    assert status.kv_cache is not None
    assert status.kv_cache.binding == "cache" and status.kv_cache.pool == "pool"
    assert status.kv_cache.domain is not None and status.kv_cache.domain.name == "default"
    resolved = deployment(cache=True, status=st.status_to_json(status))
    kept = compute(resolved, rendered(resolved, binding=None), [], [])
    assert kept.kv_cache == status.kv_cache
    assert cache_hold(resolved, rendered(resolved, binding=None).cache)
    assert not cache_hold(resolved, rendered(resolved).cache)
    assert not cache_hold(md, rendered(md, binding=None).cache)


# ---- times, generation ------------------------------------------------------------------


def test_last_transition_time_moves_only_when_status_changes() -> None:
    md = deployment(
        status={
            "conditions": [
                {
                    "type": "QuotaReserved",
                    "status": "Unknown",
                    "reason": "AdmissionInFlight",
                    "lastTransitionTime": EARLIER,
                },
                {
                    "type": "RouterReady",
                    "status": "False",
                    "reason": "NotRendered",
                    "lastTransitionTime": EARLIER,
                },
            ]
        }
    )
    rendering = rendered(md)
    status = compute(md, rendering, [], [])  # QuotaReserved: Unknown NoReplicas
    times = {c.type: c.last_transition_time for c in status.conditions or ()}
    assert times["QuotaReserved"] == EARLIER  # same status, new reason
    assert times["RouterReady"] == NOW  # False → True
    assert all(c.observed_generation == 3 for c in status.conditions or ())
    assert [c.type for c in status.conditions or ()] == list(cond.ALL_CONDITION_TYPES)


# ---- phase, summary, endpoint, roles ----------------------------------------------------


def test_phase_ready_degraded_starting() -> None:
    md = deployment()
    rendering = rendered(md)
    pods = pods_of(rendering)
    workloads = workloads_of(pods)
    status = compute(md, rendering, pods, workloads)
    assert (status.phase, status.phase_message) == ("Ready", "")
    status = compute(md, rendering, [pods[0], replace(pods[1], ready=False)], workloads)
    assert (status.phase, status.phase_message) == ("Degraded", "1 of 2 replicas ready")
    status = compute(md, rendering, [], [])
    assert status.phase == "Starting"
    assert status.phase_message == message(status, cond.QUOTA_RESERVED)


def test_phase_message_notes_an_eviction() -> None:
    md = deployment()
    rendering = rendered(md)
    pods = pods_of(rendering)
    evicted = [replace(pods[0], phase="Failed", reason="Evicted", ready=False), pods[1]]
    status = compute(md, rendering, evicted, workloads_of(pods))
    assert status.phase == "Degraded"
    assert status.phase_message is not None and "evicted" in status.phase_message


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        pytest.param({}, "http://qwen.team-a.svc:8000", id="default"),
        pytest.param({"ports": [{"port": 9000}]}, "http://qwen.team-a.svc:9000", id="port"),
        pytest.param(
            {"extraArgs": ["--ssl-certfile", "/tls/crt"]},
            "https://qwen.team-a.svc:8000",
            id="https",
        ),
    ],
)
def test_endpoint(fields: dict[str, Any], expected: str) -> None:
    md = deployment(role(**fields))
    assert compute(md, rendered(md), [], []).endpoint == expected


def test_role_statuses() -> None:
    md = deployment(role(replicas=3))
    rendering = rendered(md)
    pods = pods_of(rendering)
    workloads = workloads_of(pods)
    workloads[0] = replace(workloads[0], flavors={"server": ("a10g-spot", "a10g")})
    workloads[1] = replace(workloads[1], flavors={"server": ("a10g",), "other": ("x",)})
    workloads[2] = replace(workloads[2], quota_reserved=False, admitted=False)
    plan = _plan(RoleStep("server", 2))
    status = compute(md, rendering, pods, workloads, plan=plan)
    assert status.roles is not None
    (rs,) = status.roles
    assert (rs.name, rs.kind, rs.desired, rs.ready, rs.quota_reserved) == (
        "server",
        "Server",
        3,
        3,
        2,
    )
    assert rs.assigned_flavors == ["a10g", "a10g-spot"]
    assert rs.replacing == 2
    assert rs.unmanaged is False
    assert status.role_summary == "3S"
    assert status.observed_generation == 3


def test_role_parallelism_from_the_parser() -> None:
    md = deployment(role(extraArgs=["--tensor-parallel-size", "2"], resources={"accelerator": 2}))
    status = compute(md, rendered(md), [], [])
    assert status.roles is not None
    (rs,) = status.roles
    assert rs.parallelism is not None and rs.parallelism.declared is not None
    assert rs.parallelism.declared.tensor_parallel == 2
    assert rs.parallelism.source is not None and rs.parallelism.source.kind == "ExtraArgs"


def test_wire_form_is_camel_case_and_round_trips() -> None:
    md = deployment()
    rendering = rendered(md)
    pods = pods_of(rendering)
    data = st.status_to_json(compute(md, rendering, pods, workloads_of(pods)))
    assert {"phase", "conditions", "endpoint", "roles", "roleSummary"} <= set(data)
    assert "lastTransitionTime" in data["conditions"][0]
    again = deployment(status=data)
    assert again.status is not None and st.status_to_json(again.status) == data


def test_deleting_status_keeps_everything_but_the_phase() -> None:
    md = deployment()
    rendering = rendered(md)
    pods = pods_of(rendering)
    before = compute(md, rendering, pods, workloads_of(pods))
    stored = deployment(status=st.status_to_json(before))
    after = st.deleting_status(stored, remaining=2, now=NOW)
    assert after.phase == "Deleting" and "2" in (after.phase_message or "")
    seven = [c for c in after.conditions or () if c.type in cond.CONDITION_TYPES]
    assert seven == [c for c in before.conditions or () if c.type in cond.CONDITION_TYPES]
    assert condition(after, "Ready") == ("False", "Deleting")
    assert condition(after, "Reconciling") == ("True", "Deleting")
    assert condition(after, "Stalled") == ("False", "Reconciling")
    assert after.model_copy(update={"phase": None, "phase_message": None, "conditions": None}) == (
        before.model_copy(update={"phase": None, "phase_message": None, "conditions": None})
    )


def test_with_replacing_sets_only_the_memory() -> None:
    md = deployment(role("prefill", kind="Prefill"), role("decode", kind="Decode"))
    out = with_replacing(md, {"prefill": 1, "decode": None})
    assert [(r.name, r.replacing) for r in out.roles or ()] == [("prefill", 1), ("decode", None)]


# ---- readiness for tools: Ready, Reconciling, Stalled (docs/decisions.md) ----------------------

T, F, U = ConditionStatus.TRUE, ConditionStatus.FALSE, ConditionStatus.UNKNOWN
V = cond.ConditionVerdict
#: The seven conditions of a deployment that serves everything it declares.
HEALTHY: dict[str, cond.ConditionVerdict] = {
    cond.DOMAIN_REGISTERED: V(T, "NotApplicable"),
    cond.QUOTA_RESERVED: V(T, "Reserved"),
    cond.REPLICAS_UP_TO_DATE: V(T, "UpToDate"),
    cond.ROLE_KINDS_READY: V(T, "AllKindsReady"),
    cond.CACHE_ATTACHED: V(T, "NotApplicable"),
    cond.KV_EVENTS_PUBLISHING: V(T, "NotApplicable"),
    cond.ROUTER_READY: V(T, "NotApplicable"),
}


@pytest.mark.parametrize(
    ("changed", "ready", "expected"),
    [
        pytest.param({}, 2, (cond.READY, "Ready"), id="all-true-all-ready"),
        pytest.param({}, 1, (cond.RECONCILING, "ReplicasNotReady"), id="one-replica-not-ready"),
        pytest.param(
            {cond.DOMAIN_REGISTERED: V(F, "BindingNotFound", "an administrator creates it")},
            0,
            (cond.STALLED, "BindingNotFound"),
            id="binding-not-found-stalls",
        ),
        pytest.param(
            {cond.DOMAIN_REGISTERED: V(F, "BindingDeleting")},
            2,
            (cond.STALLED, "BindingDeleting"),
            id="binding-deleting-stalls",
        ),
        pytest.param(
            {cond.DOMAIN_REGISTERED: V(F, "BindingNotReady")},
            0,
            (cond.RECONCILING, "BindingNotReady"),
            id="binding-not-ready-reconciles",
        ),
        pytest.param(
            {cond.QUOTA_RESERVED: V(F, "Parked", "reactivate them")},
            0,
            (cond.STALLED, "Parked"),
            id="parked-stalls",
        ),
        pytest.param(
            {cond.QUOTA_RESERVED: V(F, "NoQueueInReservedNamespace")},
            0,
            (cond.STALLED, "NoQueueInReservedNamespace"),
            id="reserved-namespace-stalls",
        ),
        pytest.param(
            {cond.QUOTA_RESERVED: V(F, "Pending")},
            0,
            (cond.RECONCILING, "Pending"),
            id="quota-pending",
        ),
        pytest.param(
            {cond.QUOTA_RESERVED: V(U, "NoReplicas")},
            0,
            (cond.RECONCILING, "NoReplicas"),
            id="no-replica-yet",
        ),
        pytest.param(
            {cond.QUOTA_RESERVED: V(F, "PreemptedInPart")},
            1,
            (cond.RECONCILING, "PreemptedInPart"),
            id="preempted-in-part",
        ),
        pytest.param(
            {cond.REPLICAS_UP_TO_DATE: V(F, "RolloutInProgress")},
            2,
            (cond.RECONCILING, "RolloutInProgress"),
            id="rollout-of-ready-replicas",
        ),
        pytest.param(
            {cond.REPLICAS_UP_TO_DATE: V(F, "RolloutHeldByCache")},
            2,
            (cond.RECONCILING, "RolloutHeldByCache"),
            id="rollout-held-by-cache",
        ),
        pytest.param(
            {cond.ROLE_KINDS_READY: V(F, "KindsNotReady")},
            1,
            (cond.RECONCILING, "KindsNotReady"),
            id="a-kind-without-ready-instance",
        ),
        pytest.param(
            {cond.CACHE_ATTACHED: V(F, "CacheOperationsFailing")},
            2,
            (cond.RECONCILING, "CacheOperationsFailing"),
            id="cache-false-holds-readiness",
        ),
        pytest.param(
            {cond.CACHE_ATTACHED: V(U, "NoObservationAvailable")},
            2,
            (cond.READY, "Ready"),
            id="cache-unknown-does-not",
        ),
        pytest.param(
            {cond.KV_EVENTS_PUBLISHING: V(F, "PublisherDisabled")},
            2,
            (cond.READY, "Ready"),
            id="no-publisher-does-not",
        ),
        pytest.param(
            {cond.ROUTER_READY: V(F, "NoReadyReplicas")},
            2,
            (cond.RECONCILING, "NoReadyReplicas"),
            id="router-not-ready-holds-readiness",
        ),
        pytest.param(
            {cond.ROUTER_READY: V(F, "NotDeployed")},
            2,
            (cond.RECONCILING, "NotDeployed"),
            id="router-not-deployed-reconciles",
        ),
        pytest.param(
            {cond.ROUTER_READY: V(F, "RenderFailed", "set spec.router.image")},
            2,
            (cond.STALLED, "RenderFailed"),
            id="router-not-renderable-stalls",
        ),
        pytest.param(
            {
                cond.QUOTA_RESERVED: V(F, "Pending"),
                cond.DOMAIN_REGISTERED: V(F, "BindingNotFound"),
            },
            0,
            (cond.STALLED, "BindingNotFound"),
            id="stalled-wins-over-reconciling",
        ),
        pytest.param(
            {cond.QUOTA_RESERVED: V(F, "Pending"), cond.ROLE_KINDS_READY: V(F, "KindsNotReady")},
            0,
            (cond.RECONCILING, "Pending"),
            id="first-unmet-condition-is-reported",
        ),
    ],
)
def test_readiness_table(
    changed: dict[str, cond.ConditionVerdict], ready: int, expected: tuple[str, str]
) -> None:
    verdicts = {**HEALTHY, **changed}
    out = readiness(verdicts, ready=ready, desired=2)
    true_type, reason = expected
    assert set(out) == set(cond.SUMMARY_CONDITION_TYPES)
    # Exactly one of the three is True: Ready == not Reconciling and not Stalled (kstatus).
    assert [t for t, v in out.items() if v.status == T] == [true_type]
    assert out[true_type].reason == reason
    assert out[cond.READY].reason == reason
    for other in set(cond.SUMMARY_CONDITION_TYPES) - {true_type, cond.READY}:
        assert (out[other].status, out[other].reason) == (F, true_type)
    blocking = [t for t, v in changed.items() if v.reason == reason]
    if blocking:
        # The message names the condition that holds readiness back, then its own message.
        assert out[true_type].message == f"{blocking[0]}: {changed[blocking[0]].message}"


def test_a_deployment_without_replicas_declared_is_not_ready() -> None:
    out = readiness(HEALTHY, ready=0, desired=0)
    assert (out[cond.RECONCILING].status, out[cond.RECONCILING].reason) == (T, "ReplicasNotReady")


def test_ready_through_the_status_and_its_generation() -> None:
    md = deployment()
    rendering = rendered(md)
    pods = pods_of(rendering)
    status = compute(md, rendering, pods, workloads_of(pods))
    assert condition(status, cond.READY) == ("True", "Ready")
    assert condition(status, cond.RECONCILING) == ("False", "Ready")
    assert condition(status, cond.STALLED) == ("False", "Ready")
    assert status.observed_generation == 3
    assert all(c.observed_generation == 3 for c in status.conditions or ())
    assert [c.type for c in status.conditions or ()][:3] == ["Ready", "Reconciling", "Stalled"]


def test_ready_turns_false_during_a_rollout_and_moves_its_transition_time() -> None:
    md = deployment()
    rendering = rendered(md)
    pods = pods_of(rendering)
    before = compute(md, rendering, pods, workloads_of(pods))
    stored = deployment(status=st.status_to_json(before))
    old = [replace(pods[0], pod_spec_hash="stale"), pods[1]]
    later = "2026-01-01T00:20:00Z"
    after = st.deployment_status(
        stored,
        rendering=rendering,
        pods=old,
        workloads=workloads_of(old),
        plan=None,
        system_namespace="gpustack-system",
        now=later,
    )
    assert condition(after, cond.READY) == ("False", "RolloutInProgress")
    assert condition(after, cond.RECONCILING) == ("True", "RolloutInProgress")
    times = {c.type: c.last_transition_time for c in after.conditions or ()}
    assert times[cond.READY] == later and times[cond.RECONCILING] == later
    assert times[cond.STALLED] == NOW  # False before and after
    assert after.phase == "Ready"  # every replica still serves: phase is not readiness


def test_a_parked_deployment_is_stalled() -> None:
    md = deployment()
    rendering = rendered(md)
    status = compute(md, rendering, *_parked(pods_of(rendering, ready=False)))
    assert condition(status, cond.STALLED) == ("True", "Parked")
    assert condition(status, cond.RECONCILING) == ("False", "Stalled")
    assert condition(status, cond.READY) == ("False", "Parked")


def test_role_readiness_names_each_role_its_counts_and_kind() -> None:
    md = deployment(role("prefill", kind="Prefill"), role("decode", kind="Decode", replicas=2))
    rendering = rendered(md)
    pods = pods_of(rendering)
    not_ready = [replace(p, ready=False) if p.role == "decode" else p for p in pods]
    status = compute(md, rendering, not_ready, workloads_of(pods))
    assert status.role_readiness == "prefill 1/1 Prefill, decode 0/2 Decode"
    assert st.status_to_json(status)["roleReadiness"] == status.role_readiness


# ---- a generation that cannot be rendered (issue 37) ------------------------------------

LATER = "2026-01-01T00:30:00Z"
#: The InstanceType of the edit, its status not filled in yet.
UNCONVERGED: dict[str, Any] = {
    **INSTANCE_TYPE,
    "metadata": {"name": "a10g-new"},
    "status": {"entrance": ENTRANCE},
}


def _render_error(md: ModelDeployment) -> RenderError:
    """What the renderer says of ``md`` moved onto :data:`UNCONVERGED`."""
    edited = md.model_copy(
        update={
            "spec": md.spec.model_copy(
                update={
                    "roles": [
                        r.model_copy(update={"instance_type": "a10g-new"}) for r in md.spec.roles
                    ]
                }
            )
        }
    )
    fresh, errs = decode_model(InstanceType, UNCONVERGED)
    assert fresh is not None, errs
    with pytest.raises(RenderError) as info:
        render(edited, lookups=StaticLookups.of([fresh]), settings=Settings())
    return info.value


def _next_generation(md: ModelDeployment, status: ModelDeploymentStatus) -> ModelDeployment:
    """``md`` with ``status`` stored and its generation moved by an edit."""
    meta = md.metadata.model_copy(update={"generation": (md.metadata.generation or 0) + 1})
    return md.model_copy(update={"metadata": meta, "status": status})


def _serving(md: ModelDeployment) -> tuple[list[ObservedPod], ModelDeploymentStatus]:
    """Every replica of ``md`` serving, and the status the pass that saw it wrote."""
    rendering = rendered(md)
    pods = pods_of(rendering)
    return pods, compute(md, rendering, pods, workloads_of(pods))


def _failed(
    md: ModelDeployment, pods: list[ObservedPod], *, now: str = LATER
) -> ModelDeploymentStatus:
    return st.render_failed_status(
        md, _render_error(md), index=ReplicaIndex.of(pods, workloads_of(pods)), now=now
    )


def test_a_generation_that_cannot_render_is_stalled_at_its_generation() -> None:
    md = deployment(role(replicas=2))
    pods, ready = _serving(md)
    edited = _next_generation(md, ready)
    status = _failed(edited, pods)
    assert status.observed_generation == 4
    assert condition(status, cond.READY) == ("False", "RenderFailed")
    assert condition(status, cond.STALLED) == ("True", "RenderFailed")
    assert condition(status, cond.RECONCILING) == ("False", "Stalled")
    for type_ in (cond.READY, cond.STALLED):
        text = message(status, type_)
        # The generation, the renderer's own message (the field of the object), the way out.
        assert "generation 4 cannot be rendered" in text
        assert "InstanceType 'a10g-new'" in text and "status.detail.manufacturer" in text
        assert "keep serving" in text and "correct what the message names" in text
    summary = {c.type: c for c in status.conditions or () if c.type in cond.SUMMARY_CONDITION_TYPES}
    assert {c.observed_generation for c in summary.values()} == {4}
    assert summary[cond.READY].last_transition_time == LATER  # True before
    assert summary[cond.RECONCILING].last_transition_time == NOW  # False before and after
    # The seven describe the replicas the last rendered generation left running: kept as
    # computed, at the generation they were computed from.
    kept = [c for c in status.conditions or () if c.type in cond.CONDITION_TYPES]
    assert kept == [c for c in ready.conditions or () if c.type in cond.CONDITION_TYPES]
    assert {c.observed_generation for c in kept} == {3}
    # What runs: counted, and still there; the phase is not Ready.
    assert (status.phase, status.role_summary, status.role_readiness) == (
        "Degraded",
        "2S",
        "server 2/2 Server",
    )
    assert status.phase_message is not None
    assert status.phase_message.startswith("generation 4 cannot be rendered")
    assert "2 of 2 replicas" in status.phase_message
    assert status.endpoint == ready.endpoint == "http://qwen.team-a.svc:8000"
    assert status.roles is not None and status.roles[0].ready == 2


def test_a_failed_render_is_written_once_and_recovers_with_new_transition_times() -> None:
    md = deployment(role(replicas=2))
    pods, ready = _serving(md)
    edited = _next_generation(md, ready)
    failed = _failed(edited, pods)
    assert st.status_changed(ready, failed)
    # The retry of the same failure computes the same status: nothing to write, no loop.
    again = _failed(edited.model_copy(update={"status": failed}), pods, now="2026-01-01T01:00:00Z")
    assert not st.status_changed(failed, again)
    # Once it renders, the deployment converges and the summary moves back.
    stored = edited.model_copy(update={"status": failed})
    fixed = st.deployment_status(
        stored,
        rendering=rendered(stored),
        pods=pods,
        workloads=workloads_of(pods),
        plan=None,
        system_namespace="gpustack-system",
        now="2026-01-01T02:00:00Z",
    )
    assert condition(fixed, cond.READY) == ("True", "Ready")
    assert condition(fixed, cond.STALLED) == ("False", "Ready")
    times = {c.type: c.last_transition_time for c in fixed.conditions or ()}
    assert times[cond.READY] == times[cond.STALLED] == "2026-01-01T02:00:00Z"
    assert times[cond.QUOTA_RESERVED] == NOW
    assert fixed.phase == "Ready" and fixed.observed_generation == 4


def test_a_failed_render_counts_the_replicas_that_run_now() -> None:
    """A replica that leaves while the render fails is counted out (nothing replaces it)."""
    md = deployment(role("prefill", kind="Prefill"), role("decode", kind="Decode", replicas=2))
    pods, ready = _serving(md)
    edited = _next_generation(md, ready)
    left = [p for p in pods if not (p.role == "decode" and p.ordinal == 1)]
    status = _failed(edited, left)
    assert status.role_readiness == "prefill 1/1 Prefill, decode 1/2 Decode"
    assert status.role_summary == "1P1D"
    assert status.roles is not None
    assert [(r.name, r.desired, r.ready, r.admitted) for r in status.roles] == [
        ("prefill", 1, 1, 1),
        ("decode", 2, 1, 1),
    ]
    assert status.phase == "Degraded" and "2 of 3 replicas" in (status.phase_message or "")
    # None left: Starting, the failure first.
    status = _failed(edited, [])
    assert status.phase == "Starting"
    assert (status.phase_message or "").startswith("generation 4 cannot be rendered")
    assert status.role_summary == "0P0D"


def test_a_failed_render_keeps_the_routers_count_in_the_summary() -> None:
    md = deployment(role(replicas=2), router="vllm-router")
    rendering = rendered(md)
    pods = pods_of(rendering)
    ready = compute(
        md, rendering, pods, workloads_of(pods), router=RouterObservation(deployed=True, ready=1)
    )
    assert ready.role_summary == "1R2S"
    status = _failed(_next_generation(md, ready), pods[:1])
    assert status.role_summary == "1R1S"
    assert status.router == ready.router and status.endpoint == ready.endpoint


def test_a_first_generation_that_cannot_render_says_so() -> None:
    """CREATE: no status yet; the summary conditions, the phase and the generation only."""
    md = deployment(role(replicas=2))
    status = _failed(md, [])
    assert status.observed_generation == 3
    assert [c.type for c in status.conditions or ()] == list(cond.SUMMARY_CONDITION_TYPES)
    assert condition(status, cond.STALLED) == ("True", "RenderFailed")
    assert "generation 3 cannot be rendered" in message(status, cond.READY)
    assert status.phase == "Starting"
    assert status.roles is None and status.role_summary is None and status.endpoint is None
