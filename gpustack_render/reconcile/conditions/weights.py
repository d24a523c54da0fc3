"""``WeightsReady`` and ``status.model``: whether the Pods have the artifact's weights
(docs/weights.md, "What status says").

Read from the Pods, never from events: a Pod whose weights arrive by a mount (claim, node
plugin, image) has them once the kubelet reports ``PodReadyToStartContainers=True``; an
Engine-delivered Pod has them once its ``main`` container is ready (the engine downloads before
it serves). A deployment without ``spec.model.artifactRef`` is ``True NotApplicable``. The
blocking reasons (nothing new can be created) come from
:func:`gpustack_render.weights.delivery.weights_of` and are written by the held status
(``reconcile/status.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from gpustack_render.api.modeldeployment import ModelStatus
from gpustack_render.core.vocabulary import ConditionStatus
from gpustack_render.reconcile.conditions.common import ConditionVerdict, few
from gpustack_render.reconcile.observed import ObservedPod
from gpustack_render.weights import delivery as weights
from gpustack_render.weights import nodes as node_stores
from gpustack_render.weights.delivery import WeightsBlock, WeightsPlan

#: ``ReplicasUpToDate`` while nothing can be created for the weights.
ROLLOUT_HELD_BY_WEIGHTS: Final = "RolloutHeldByWeights"
#: The blocking reasons that need someone to act (``Stalled``); ``ArtifactNotResolved`` waits
#: for the artifact's own controller (``Reconciling``).
STALLING_REASONS: Final = frozenset(weights.BLOCKING_REASONS) - {weights.ARTIFACT_NOT_RESOLVED}


def model_status(plan: WeightsPlan | None) -> ModelStatus | None:
    """``status.model``: the artifact, its commit and digest (hub sources only) and the
    delivery; ``None`` without an artifact."""
    if plan is None:
        return None
    hub = bool(plan.hub_kind)
    return ModelStatus(
        artifact=plan.artifact.name,
        revision=plan.revision if hub else None,
        manifest_digest=plan.manifest_digest if hub else None,
        delivery=plan.delivery,
    )


def weights_ready(plan: WeightsPlan | None, pods: Sequence[ObservedPod]) -> ConditionVerdict:
    """``WeightsReady`` of a deployment that renders: ``NotApplicable`` without an artifact,
    else whether every live Pod of the deployment has its weights."""
    if plan is None:
        return ConditionVerdict(
            ConditionStatus.TRUE, weights.NOT_APPLICABLE, "the deployment names no ModelArtifact"
        )
    live = [p for p in pods if not p.terminating and not p.failed]
    what = f"ModelArtifact {plan.artifact.name} ({plan.delivery} delivery)"
    if plan.delivery == "Engine":
        waiting = [p.name for p in live if not p.takeover and not p.main_ready]
        if waiting:
            return ConditionVerdict(
                ConditionStatus.FALSE,
                weights.DOWNLOADING,
                f"{len(waiting)} Pod(s) are downloading the weights of {what} or not yet "
                f"serving: {few(sorted(waiting))}",
            )
        return ConditionVerdict(
            ConditionStatus.TRUE,
            weights.DOWNLOADED,
            f"every engine Pod has downloaded the weights of {what}",
        )
    waiting = [p.name for p in live if not p.volumes_ready]
    if waiting and plan.delivery == "Node":
        materializing = node_verdict(plan, [p for p in live if not p.volumes_ready], what)
        if materializing is not None:
            return materializing
    if waiting:
        return ConditionVerdict(
            ConditionStatus.FALSE,
            weights.WEIGHTS_NOT_MOUNTED,
            f"{len(waiting)} Pod(s) have not mounted the weights of {what} yet: "
            f"{few(sorted(waiting))}",
        )
    return ConditionVerdict(
        ConditionStatus.TRUE, weights.MOUNTED, f"every Pod has mounted the weights of {what}"
    )


def node_verdict(
    plan: WeightsPlan, waiting: Sequence[ObservedPod], what: str
) -> ConditionVerdict | None:
    """``Materializing`` / ``MaterializationFailed``: Node-delivered Pods not mounted yet whose
    node lists the digest ``Downloading`` or ``Failed`` (the message names each node's state,
    with its reason and retry time). A failure wins over a download: it needs someone to look.
    ``None`` when no waiting Pod's node lists the digest in either state."""
    failed: list[tuple[str, str]] = []
    downloading: list[tuple[str, str]] = []
    for pod in waiting:
        record = node_stores.pod_store_state(plan.node_records, pod.node_name)
        if record is None:
            continue
        if record.entry.state == "Failed":
            failed.append((pod.name, record.describe()))
        elif record.entry.state == "Downloading":
            downloading.append((pod.name, record.describe()))
    if failed:
        return ConditionVerdict(
            ConditionStatus.FALSE,
            weights.MATERIALIZATION_FAILED,
            f"{len(failed)} Pod(s) wait for the weights of {what}, which their node failed to "
            f"download: {_per_node(failed)}",
        )
    if downloading:
        return ConditionVerdict(
            ConditionStatus.FALSE,
            weights.MATERIALIZING,
            f"{len(downloading)} Pod(s) wait while their node downloads the weights of {what}: "
            f"{_per_node(downloading)}",
        )
    return None


def _per_node(items: Sequence[tuple[str, str]]) -> str:
    """``<pod> (<its node's state>)`` in Pod name order, at most a few."""
    return few(f"{pod} ({state})" for pod, state in sorted(items))


def blocked_verdict(block: WeightsBlock) -> ConditionVerdict:
    """``WeightsReady=False`` with the block's reason and message."""
    return ConditionVerdict(ConditionStatus.FALSE, block.reason, block.message)


def rollout_held(block: WeightsBlock) -> ConditionVerdict:
    """``ReplicasUpToDate=False RolloutHeldByWeights`` while ``block`` holds."""
    return ConditionVerdict(
        ConditionStatus.FALSE,
        ROLLOUT_HELD_BY_WEIGHTS,
        f"no replica is created, replaced or deleted while the weights cannot be delivered "
        f"({block.reason}); the running replicas keep serving: see condition WeightsReady",
    )
