"""The KV-cache conditions: ``DomainRegistered`` from the Binding's registration and
``CacheAttached`` (docs/contract/controller.md §4 step 1, §14)."""

from __future__ import annotations

from collections.abc import Sequence

from gpustack_render.api.modeldeployment import ModelDeployment
from gpustack_render.core.vocabulary import ConditionStatus
from gpustack_render.reconcile.conditions.common import NOT_APPLICABLE, ConditionVerdict
from gpustack_render.rendering.roleplan import (
    BINDING_DELETING,
    BINDING_NOT_FOUND,
    REGISTERED,
    CacheResolution,
)


def domain_registered(md: ModelDeployment, cache: CacheResolution | None) -> ConditionVerdict:
    """``DomainRegistered`` from the Binding's registration (docs/contract/controller.md §4 step
    1, §14)."""
    if md.spec.kv_cache is None or cache is None:
        return ConditionVerdict(
            ConditionStatus.TRUE, NOT_APPLICABLE, "the deployment names no KV cache pool"
        )
    ns = md.metadata.namespace
    name = cache.binding_name
    if cache.registration == REGISTERED:
        return ConditionVerdict(
            ConditionStatus.TRUE, REGISTERED, f"KVCachePoolBinding {ns}/{name} is Ready"
        )
    if cache.registration == BINDING_NOT_FOUND:
        return ConditionVerdict(
            ConditionStatus.FALSE,
            BINDING_NOT_FOUND,
            f"KVCachePoolBinding {ns}/{name} does not exist; an administrator creates it to "
            "grant this namespace access to a pool",
        )
    if cache.registration == BINDING_DELETING:
        return ConditionVerdict(
            ConditionStatus.FALSE,
            BINDING_DELETING,
            f"KVCachePoolBinding {ns}/{name} is being deleted",
        )
    binding = cache.binding
    phase = binding.status.phase if binding is not None else None
    extra = (binding.status.model_extra or {}) if binding is not None else {}
    phase_message = str(extra.get("phaseMessage") or "")
    said = f"its phase is {phase}" if phase else "no phase is observed yet"
    granted = ""
    if phase == "Ready":
        granted = " but QuotaGranted is not True"
    tail = f": {phase_message}" if phase_message else ""
    return ConditionVerdict(
        ConditionStatus.FALSE,
        cache.registration,
        f"KVCachePoolBinding {ns}/{name} is not ready: {said}{granted}{tail}",
    )


def cache_attached(
    md: ModelDeployment, *, unmanaged_roles: Sequence[str], any_ready: bool
) -> ConditionVerdict:
    """``CacheAttached`` (docs/contract/controller.md §14; no observation source in this
    release)."""
    if md.spec.kv_cache is None:
        return ConditionVerdict(
            ConditionStatus.TRUE, NOT_APPLICABLE, "the deployment names no KV cache pool"
        )
    if unmanaged_roles:
        return ConditionVerdict(
            ConditionStatus.UNKNOWN,
            "Unmanaged",
            f"role(s) {', '.join(unmanaged_roles)} run a take-over command: the operator "
            "cannot tell whether it attaches the cache",
        )
    if not any_ready:
        return ConditionVerdict(
            ConditionStatus.UNKNOWN, "NoReplicaReady", "no replica is ready yet"
        )
    return ConditionVerdict(
        ConditionStatus.UNKNOWN,
        "NoObservationAvailable",
        "this release has no source that observes cache operations",
    )
