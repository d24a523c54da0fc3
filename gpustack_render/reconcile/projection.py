"""What a watch-fed cache keeps of each object: the fields reconciling reads, nothing more.

A cache holds every watched object for as long as the process runs, so whatever it keeps is
multiplied by the cluster's size. Measured at scale (docs/design/0006-control-plane-at-scale.md),
the biggest parts of a stored object are the ones no decision reads: ``metadata.managedFields``
(every writer's field set, on every object) and a Pod's or a Workload's spec (the containers,
the Workload's copy of the Pod template). Two rules, each a pure function of one object:

- :func:`strip_managed_fields`, for every kind: the ``managedFields`` entries are dropped
  except those of the managers named (the controller keeps its own apply entries, which
  :func:`~gpustack_render.reconcile.applied.apply_aligned` reads to tell whether an apply
  would change anything);
- a projection per kind, naming what its readers read: :func:`project_pod`
  (:func:`~gpustack_render.reconcile.observed.observe_pod`, the owner references the event
  mapping and the joint check follow, and the addresses a router reads),
  :func:`project_workload` (:func:`~gpustack_render.reconcile.observed.observe_workload`; of
  ``spec.podSets`` only each entry's name and count, never its Pod template). A
  ModelDeployment is kept whole but for the foreign ``managedFields``: a pass reads its
  deployment, status included, from the cache (``gpustack_controller/deployments.py``).

Each returns a new dict sharing the kept values with its input (never a copy of them); an
object of the wrong shape passes through with only what is missing left out, so a projection
never raises. ``tests/unit/test_reconcile_projection.py`` checks that each reader answers the
same on the projection as on the whole object.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, Final

#: The Pod fields kept: spec and status members, by name.
POD_SPEC: Final = ("nodeName", "schedulingGates")
POD_STATUS: Final = (
    "phase",
    "reason",
    "conditions",
    "containerStatuses",
    "podIP",
    "podIPs",
    "hostIP",
    "startTime",
)
#: The Workload fields kept (the Pod template copies in ``spec.podSets`` are dropped).
WORKLOAD_SPEC: Final = ("active", "queueName", "priority", "priorityClassName")
WORKLOAD_STATUS: Final = ("conditions", "requeueState", "admissionChecks", "admission")


def strip_managed_fields(obj: Mapping[str, Any], keep: Collection[str] = ()) -> dict[str, Any]:
    """``obj`` without the ``managedFields`` entries of every manager not in ``keep``."""
    out = dict(obj)
    meta = out.get("metadata")
    if not isinstance(meta, Mapping) or "managedFields" not in meta:
        return out
    meta = dict(meta)
    entries = meta.pop("managedFields")
    kept = [
        e
        for e in (entries if isinstance(entries, list) else ())
        if isinstance(e, Mapping) and e.get("manager") in keep
    ]
    if kept:
        meta["managedFields"] = kept
    out["metadata"] = meta
    return out


def _pick(value: Any, names: Collection[str]) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        return {}
    return {k: value[k] for k in names if k in value}


def project(
    obj: Mapping[str, Any],
    *,
    spec: Collection[str] | None,
    status: Collection[str] | None,
    keep_managers: Collection[str] = (),
) -> dict[str, Any]:
    """``obj`` with only the named ``spec`` and ``status`` members (``None``: all of it; an
    empty collection: none), its metadata without foreign ``managedFields``."""
    out = strip_managed_fields(obj, keep_managers)
    for part, names in (("spec", spec), ("status", status)):
        if names is not None and part in out:
            picked = _pick(out[part], names)
            if picked:
                out[part] = picked
            else:
                del out[part]
    return out


def project_pod(obj: Mapping[str, Any], keep_managers: Collection[str] = ()) -> dict[str, Any]:
    """A Pod as the controller's readers read it."""
    return project(obj, spec=POD_SPEC, status=POD_STATUS, keep_managers=keep_managers)


#: What is kept of each ``spec.podSets[]`` entry (the Elastic EP admitted layer reads them; the
#: Pod template, the big part, is dropped).
WORKLOAD_POD_SET: Final = ("name", "count")


def project_workload(obj: Mapping[str, Any], keep_managers: Collection[str] = ()) -> dict[str, Any]:
    """A Kueue Workload as the controller's readers read it: ``spec.podSets[]`` keeps only each
    entry's name and count."""
    out = project(obj, spec=WORKLOAD_SPEC, status=WORKLOAD_STATUS, keep_managers=keep_managers)
    spec = obj.get("spec")
    pod_sets = spec.get("podSets") if isinstance(spec, Mapping) else None
    if isinstance(pod_sets, list):
        kept = out.get("spec")
        out["spec"] = {
            **(kept if isinstance(kept, Mapping) else {}),
            "podSets": [
                {k: entry[k] for k in WORKLOAD_POD_SET if k in entry}
                if isinstance(entry, Mapping)
                else entry
                for entry in pod_sets
            ],
        }
    return out
