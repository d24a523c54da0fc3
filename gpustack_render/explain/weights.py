"""What ``explain`` says about a deployment's weights (docs/weights.md, docs/explain.md): which
artifact each role gets and how, and, when the weights cannot be delivered, that the controller
holds every replica. The rules are :mod:`gpustack_render.weights.delivery`'s; this module only
words them."""

from __future__ import annotations

from fractions import Fraction

from gpustack_render.core.quantity import format_memory
from gpustack_render.weights.delivery import WeightsBlock, WeightsPlan

#: The note's rule id, as the other explain notes carry theirs.
HELD_BY_WEIGHTS = "explain.held-by-weights"
WEIGHTS = "explain.weights"


def weights_note(plan: WeightsPlan) -> str:
    """One line: the artifact, what it pins, and what its delivery does for each Pod."""
    name = plan.artifact.name
    pinned = ""
    if plan.hub_kind:
        repository = plan.source.hub.repository if plan.source.hub is not None else ""
        commit = (plan.revision or "")[:12]
        digest = plan.manifest_digest or ""
        pinned = f" {plan.hub_kind} {repository}" + (f" at {commit}" if commit else "")
        pinned += f", manifest {digest[:19]}…" if digest else ""
    size = plan.size_bytes
    how = {
        "Engine": "each Pod's engine downloads the pinned commit into its own cache"
        + (f" ({format_memory(Fraction(size))})" if size else "")
        + "; a replacement downloads it again",
        "Node": "the node plugin mounts the verified tree, downloaded once per node"
        + _holding(plan),
        "PVC": "each Pod mounts the claim read-only",
        "Image": "each Pod mounts the image read-only",
    }[plan.delivery]
    return (
        f"weights: ModelArtifact {name}{pinned}; {plan.delivery} delivery: {how}; "
        f"status.model names it and WeightsReady says when every Pod has it [{WEIGHTS}]"
    )


def _holding(plan: WeightsPlan) -> str:
    """Which nodes a node-delivered Pod prefers (outside the pod-spec-hash)."""
    nodes = plan.holding_nodes
    if not nodes:
        return "; no node store lists it Ready yet, so the Pods go wherever they fit"
    shown = ", ".join(nodes[:5]) + (f" and {len(nodes) - 5} more" if len(nodes) > 5 else "")
    return (
        f"; the Pods prefer the {len(nodes)} node(s) already holding it with room ({shown}), "
        "a preference the pod-spec-hash leaves out"
    )


def held_note(block: WeightsBlock) -> str:
    """Why nothing of the deployment moves while ``block`` holds."""
    return (
        f"held: the weights cannot be delivered ({block.reason}), so the controller creates, "
        "replaces and deletes no replica: the ones already running keep serving, and "
        f"WeightsReady is False with reason {block.reason} until it clears [{HELD_BY_WEIGHTS}]"
    )
