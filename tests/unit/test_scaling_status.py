"""What the deployment's status says when an autoscaler asks for more than the ClusterQueue holds
(D27, docs/autoscaling.md, "What status tells"): per role desired, admitted, ready and
quota-pending, where the count comes from, and a QuotaReserved message naming the ClusterQueue
and the resource it lacks, in Kueue's own words."""

from __future__ import annotations

import copy

from admission_support import default_objects, deployment, pd, role
from scaling_support import pod

from gpustack_render.core.settings import Settings
from gpustack_render.reconcile.observed import ObservedPod, ObservedWorkload
from gpustack_render.reconcile.quotashortfall import missing_resources
from gpustack_render.reconcile.replicas import ReplicaIndex
from gpustack_render.reconcile.scaling import ObservedScaler, resolve_scaling
from gpustack_render.reconcile.status import deployment_status
from gpustack_render.rendering.renderer import render
from gpustack_render.schema.decoding import decode_deployment
from gpustack_render.schema.lookups import StaticLookups

KUEUE_SAYS = (
    "couldn't assign flavors to pod set decode: insufficient unused quota for nvidia.com/gpu in "
    "flavor default-flavor, 1 more needed"
)


def wl(p: ObservedPod, *, admitted: bool = True) -> ObservedWorkload:
    return ObservedWorkload(
        name=f"wl-{p.name}",
        owner_pods=frozenset({p.uid}),
        quota_reserved=admitted,
        admitted=admitted,
        ever_admitted=admitted,
        quota_reason="" if admitted else "Pending",
        quota_message="" if admitted else KUEUE_SAYS,
    )


def test_a_scale_up_beyond_quota_is_reported_per_role_and_names_the_queue() -> None:
    obj = copy.deepcopy(
        pd(
            roles=[
                role("prefill", kind="Prefill"),
                role("decode", kind="Decode", replicas=2, scaling={"mode": "External"}),
            ]
        )
    )
    obj["metadata"]["uid"] = "md-uid"
    md, errs = decode_deployment(obj)
    assert md is not None, errs
    scaling = resolve_scaling(
        md, scalers={"qwen-decode": ObservedScaler("qwen-decode", "s", 4, owned=True)}
    )
    rendering = render(
        md,
        lookups=StaticLookups.of(default_objects()),
        settings=Settings(),
        counts=scaling.counts(),
    )
    ready = [pod("prefill", 0), pod("decode", 0), pod("decode", 1)]
    queued = [pod("decode", 2, ready=False, gated=True), pod("decode", 3, ready=False, gated=True)]
    index = ReplicaIndex.of(
        ready + queued, [wl(p) for p in ready] + [wl(p, admitted=False) for p in queued]
    )
    status = deployment_status(
        md,
        rendering=rendering,
        index=index,
        plan=None,
        system_namespace="gpustack-system",
        now="2026-01-01T00:00:00Z",
        scaling=scaling,
    )
    assert status.roles is not None
    prefill, decode = status.roles
    assert (decode.desired, decode.ready, decode.admitted, decode.quota_pending) == (4, 2, 2, 2)
    assert decode.scaling is not None and decode.scaling.scaler == "qwen-decode"
    assert (prefill.desired, prefill.admitted, prefill.quota_pending) == (1, 1, 0)
    assert prefill.scaling is None
    quota = next(c for c in status.conditions or () if c.type == "QuotaReserved")
    assert (quota.status, quota.reason) == ("False", "Pending")
    assert "2 of 5 replicas wait for quota" in quota.message
    assert (
        "ClusterQueue gpustack-fnv64-0123456789abcdef cannot hold 2 replica(s) "
        "(decode 2, decode 3): it lacks nvidia.com/gpu in flavor default-flavor" in quota.message
    )
    assert KUEUE_SAYS in quota.message


def test_every_short_resource_is_named_once() -> None:
    assert missing_resources(
        [
            "couldn't assign flavors to pod set decode: insufficient quota for cpu in flavor "
            "default-flavor, previously considered podsets requests (0) + current podset "
            "request (8) > maximum capacity (4), insufficient unused quota for nvidia.com/gpu "
            "in flavor a100, 2 more needed",
            KUEUE_SAYS,
        ]
    ) == [
        "cpu in flavor default-flavor",
        "nvidia.com/gpu in flavor a100",
        "nvidia.com/gpu in flavor default-flavor",
    ]
    assert missing_resources(["ClusterQueue gpu is inactive"]) == []


def test_a_deployment_every_scaler_takes_to_zero_is_ready_at_zero() -> None:
    """KEDA took the only role to zero: nothing is declared, nothing holds quota, and the
    deployment reads Ready (ScaledToZero) rather than Reconciling for ever."""
    obj = copy.deepcopy(
        deployment(role(replicas=1, scaling={"mode": "External", "minReplicas": 0}))
    )
    obj["metadata"]["uid"] = "md-uid"
    md, errs = decode_deployment(obj)
    assert md is not None, errs
    scaling = resolve_scaling(
        md, scalers={"qwen-server": ObservedScaler("qwen-server", "s", 0, owned=True)}
    )
    rendering = render(
        md,
        lookups=StaticLookups.of(default_objects()),
        settings=Settings(),
        counts=scaling.counts(),
    )
    status = deployment_status(
        md,
        rendering=rendering,
        index=ReplicaIndex.of([], []),
        plan=None,
        system_namespace="gpustack-system",
        now="2026-01-01T00:00:00Z",
        scaling=scaling,
    )
    by_type = {c.type: c for c in status.conditions or ()}
    assert (by_type["Ready"].status, by_type["Ready"].reason) == ("True", "ScaledToZero")
    assert (by_type["Reconciling"].status, by_type["Stalled"].status) == ("False", "False")
    quota = by_type["QuotaReserved"]
    assert (quota.status, quota.reason) == ("True", "ScaledToZero")
    assert status.roles is not None and status.roles[0].desired == 0
