"""Whether what ``explain --replicas`` asks for fits what a ClusterQueue has free now (issue 37,
docs/explain.md "Asking before scaling").

A Kueue v0.17 ClusterQueue publishes what it holds: ``spec.resourceGroups[].flavors[].resources[]
.nominalQuota`` per flavor and resource, and in its status ``flavorsReservation[].resources[]
.total``, the quota the Workloads that reserved it hold (``apis/kueue/v1beta2/
clusterqueue_types.go``; ``flavorsUsage`` is the part of it admitted Workloads use). Free is the
nominal quota less the reservation, per resource, summed over the queue's flavors. What the
asked count needs more of is what the deployment would hold at that count less what its own
Workloads hold reserved there now (``status.admission.podSetAssignments[].resourceUsage``): a
replica that waits for quota now holds nothing, so the ask counts it too. The count fits when,
for every resource it needs more of, that much is free.

What is not counted, and the answer says so in docs/explain.md: quota the queue could borrow
from its cohort, a flavor the Pods could not be placed on, and room on the nodes (a queue with
free quota on a topology-aware flavor still waits for a node with room; status then reads
``NodesFull``). Pure: the caller reads the ClusterQueue (``cli/live.py``, a ``GET``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

from gpustack_render.core import jsonview
from gpustack_render.core.quantity import QuantityError, parse_quantity
from gpustack_render.explain.model import QueueFit
from gpustack_render.explain.resourcetotals import Amounts, formatted
from gpustack_render.reconcile.observed import observe_workload


def _quantity(value: object) -> Fraction | None:
    if not isinstance(value, str | int):
        return None
    try:
        return parse_quantity(value)
    except QuantityError:
        return None


def _per_resource(flavors: object, field: str) -> Amounts:
    """``flavors[].resources[].<field>`` per resource name, summed over the flavors."""
    out: Amounts = {}
    for flavor in jsonview.items(flavors):
        for resource in jsonview.items(jsonview.view(flavor).get("resources")):
            entry = jsonview.view(resource)
            amount = _quantity(entry.get(field))
            name = entry.get("name")
            if isinstance(name, str) and amount is not None:
                out[name] = out.get(name, Fraction(0)) + amount
    return out


def nominal_quota(cluster_queue: Mapping[str, Any]) -> Amounts:
    """``nominalQuota`` per resource, summed over every flavor of every resource group."""
    out: Amounts = {}
    for group in jsonview.items(jsonview.view(cluster_queue.get("spec")).get("resourceGroups")):
        for name, amount in _per_resource(
            jsonview.view(group).get("flavors"), "nominalQuota"
        ).items():
            out[name] = out.get(name, Fraction(0)) + amount
    return out


def reserved_quota(cluster_queue: Mapping[str, Any]) -> Amounts:
    """``status.flavorsReservation[].resources[].total`` per resource, summed over flavors."""
    status = jsonview.view(cluster_queue.get("status"))
    return _per_resource(status.get("flavorsReservation"), "total")


def held_quota(workloads: Iterable[Mapping[str, Any]], cluster_queue: str) -> Amounts:
    """What the Workloads given (a deployment's) hold reserved on ``cluster_queue`` now: the
    ``status.admission.podSetAssignments[].resourceUsage`` of each one that holds a reservation
    there (``QuotaReserved=True``), per resource."""
    out: Amounts = {}
    for obj in workloads:
        admission = jsonview.view(jsonview.view(obj.get("status")).get("admission"))
        if (
            admission.get("clusterQueue") != cluster_queue
            or not observe_workload(obj).quota_reserved
        ):
            continue
        for assignment in jsonview.items(admission.get("podSetAssignments")):
            usage = jsonview.view(jsonview.view(assignment).get("resourceUsage"))
            for name, value in usage.items():
                amount = _quantity(value)
                if isinstance(name, str) and amount is not None:
                    out[name] = out.get(name, Fraction(0)) + amount
    return out


def extra_needed(before: Mapping[str, Fraction], after: Mapping[str, Fraction]) -> Amounts:
    """What ``after`` needs beyond ``before``: the resources it needs more of, and how much."""
    out: Amounts = {}
    for name, amount in after.items():
        more = amount - before.get(name, Fraction(0))
        if more > 0:
            out[name] = more
    return out


def queue_fit(name: str, cluster_queue: Mapping[str, Any], *, needed: Amounts) -> QueueFit:
    """Whether ``needed`` (what an asked count needs beyond what the deployment holds now) fits
    ClusterQueue ``name`` (its object as read, raw) as it stands."""
    nominal = nominal_quota(cluster_queue)
    reserved = reserved_quota(cluster_queue)
    free: Amounts = {}
    short: Amounts = {}
    uncovered: list[str] = []
    for resource, amount in needed.items():
        if resource not in nominal:
            uncovered.append(resource)
            continue
        have = max(Fraction(0), nominal[resource] - reserved.get(resource, Fraction(0)))
        free[resource] = have
        if amount > have:
            short[resource] = amount - have
    return QueueFit(
        cluster_queue=name,
        fits=not short and not uncovered,
        needed=formatted(needed),
        free=formatted(free),
        short=formatted(short),
        uncovered=tuple(sorted(uncovered)),
    )


def fit_text(fit: QueueFit) -> str:
    """One line: fits or not, by how much, which resource."""

    def amounts(values: Mapping[str, str]) -> str:
        return " ".join(f"{k}={v}" for k, v in values.items())

    where = f"ClusterQueue {fit.cluster_queue}"
    if not fit.needed:
        return f"{where}: fits: the asked count needs no more quota than the deployment holds"
    if fit.fits:
        return f"{where}: fits: needs {amounts(fit.needed)} more, has {amounts(fit.free)} free now"
    parts = [
        f"{resource} short by {amount} (needs {fit.needed[resource]} more, has "
        f"{fit.free.get(resource, '0')} free)"
        for resource, amount in fit.short.items()
    ]
    parts += [f"{resource} is not covered by it" for resource in fit.uncovered]
    return (
        f"{where}: does not fit now: {'; '.join(parts)}; the extra replicas would wait for quota "
        "until it has room"
    )
