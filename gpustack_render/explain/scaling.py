"""``explain --replicas ROLE=N``: what N replicas of a role (N units of a ratio group) would need
from the queue, and whether the scaler would take that count (D27, docs/autoscaling.md,
docs/explain.md).

The answer is read off the renderer like every other figure of ``explain``: one replica of each
role requests what its Pods request; the deployment at the asked count holds, per entrance
(the ClusterQueue of the same name), the sum over its roles. The count the deployment runs now
is the one the controller would apply (``reconcile/scaling.resolve_scaling``: the stored
status's count for an autoscaled role).

Given the ClusterQueues as they stand (live mode reads them; ``--observed`` may hold them), each
answer also says whether what the asked count needs beyond the deployment now fits what the
entrance's ClusterQueue has free (:mod:`gpustack_render.explain.queuefit`). Without them it says
nothing about free quota.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from gpustack_render.api.modeldeployment import ModelDeployment
from gpustack_render.deployment.scaling import scale_targets, targets_by_role
from gpustack_render.explain.create import entrance_loads, entrance_totals
from gpustack_render.explain.model import QueueFit, ScaledRole, ScaleQuestion
from gpustack_render.explain.queuefit import extra_needed, held_quota, queue_fit
from gpustack_render.explain.resourcetotals import Amounts
from gpustack_render.reconcile.quotashortfall import cluster_queue_of
from gpustack_render.rendering.renderer import Rendering


def _asked_counts(
    md: ModelDeployment, target: str, replicas: int
) -> tuple[ScaleQuestion, dict[str, int]]:
    """The question's frame (scaler, bounds, refusal) and the role counts the ask means."""
    deployment = md.metadata.name
    group = next((t for t in scale_targets(md) if t.group and t.name == target), None)
    if group is not None:
        frame = ScaleQuestion(
            target,
            True,
            replicas,
            scaler=group.scaler_name(deployment),
            bounds=(group.min_replicas, group.max_replicas),
        )
        return frame, group.counts(replicas)
    roles = {r.name: r for r in md.spec.roles}
    if target not in roles:
        names = ", ".join([*roles, *(t.name for t in scale_targets(md) if t.group)])
        return ScaleQuestion(
            target, False, replicas, refused=f"no role or scaling group {target!r} ({names})"
        ), {}
    scaled = targets_by_role(md).get(target)
    if scaled is not None and scaled.group:
        return ScaleQuestion(
            target,
            False,
            replicas,
            scaler=scaled.scaler_name(deployment),
            refused=f"role {target!r} moves with scaling group {scaled.name!r}, "
            f"{scaled.per_unit(target)} replica(s) per unit: ask for units, "
            f"--replicas {scaled.name}=N",
        ), {}
    if scaled is None:
        return ScaleQuestion(target, False, replicas), {target: replicas}
    return ScaleQuestion(
        target,
        False,
        replicas,
        scaler=scaled.scaler_name(deployment),
        bounds=(scaled.min_replicas, scaled.max_replicas),
    ), {target: replicas}


def _refusal(frame: ScaleQuestion) -> str:
    """Why the scaler (or the schema, for a role the deployment scales) would refuse."""
    n = frame.replicas
    if frame.bounds is None:
        if n < 1:
            return (
                f"role {frame.target!r} counts its replicas itself (roles[].replicas, at least "
                "1): scale to zero needs scaling.mode External with minReplicas 0"
            )
        return ""
    low, high = frame.bounds
    noun = "units" if frame.group else "replicas"
    if n == 0 and low > 0:
        return (
            f"the scaler {frame.scaler} refuses 0: scale to zero is not allowed (its minimum is "
            f"{low}; set it to 0 in the deployment to allow it)"
        )
    if not low <= n <= high:
        return f"the scaler {frame.scaler} refuses {n} {noun}: outside its bounds {low}..{high}"
    return ""


def explain_scaling(
    md: ModelDeployment,
    rendering: Rendering,
    asked: Iterable[tuple[str, int]],
    *,
    probe: Rendering,
    cluster_queues: Mapping[str, Mapping[str, Any]] | None = None,
    workloads: Sequence[Mapping[str, Any]] = (),
) -> tuple[ScaleQuestion, ...]:
    """One answer per asked (target, count), in the order asked.

    ``rendering`` is the deployment at the counts it runs; ``probe`` the same deployment with
    at least one replica of every role (what one replica requests is read off it).
    ``cluster_queues`` are the ClusterQueues as they stand now, by name (``None``: not read,
    nothing is said about free quota); ``workloads`` the deployment's Workloads as observed
    (what it holds reserved now)."""
    now = {r.name: r.replicas for r in rendering.roles}
    out = []
    for target, replicas in asked:
        frame, counts = _asked_counts(md, target, replicas)
        refused = frame.refused or _refusal(frame)
        if refused:
            out.append(replace(frame, refused=refused))
            continue
        after = {**now, **counts}
        roles = tuple(
            ScaledRole(r.name, now[r.name], after[r.name], r.queue)
            for r in rendering.roles
            if r.name in counts
        )
        before = entrance_totals(probe, counts=now)
        later = entrance_totals(probe, counts=after)
        loads = entrance_loads(probe, before=before, after=later)
        queues = (
            _fits(probe, later, cluster_queues, workloads) if cluster_queues is not None else ()
        )
        out.append(replace(frame, roles=roles, entrances=loads, queues=queues))
    return tuple(out)


def _fits(
    probe: Rendering,
    after: Mapping[str, Amounts],
    cluster_queues: Mapping[str, Mapping[str, Any]],
    workloads: Sequence[Mapping[str, Any]],
) -> tuple[QueueFit, ...]:
    """Per entrance, whether its ClusterQueue has free what the asked count needs beyond what
    the deployment's Workloads hold reserved there now; an entrance whose ClusterQueue was not
    read is left out (the live reader warns of it)."""
    out = []
    for entrance in sorted(after):
        name = cluster_queue_of(probe, entrance)
        queue = cluster_queues.get(name)
        if queue is None:
            continue
        needed = extra_needed(held_quota(workloads, name), after.get(entrance, {}))
        out.append(queue_fit(name, queue, needed=needed))
    return tuple(out)
