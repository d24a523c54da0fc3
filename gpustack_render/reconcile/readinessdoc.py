"""The readiness section of the API reference (``docs/api.md``): how ``Ready``, ``Reconciling``
and ``Stalled`` follow from the eight conditions, written from the tables
:func:`~gpustack_render.reconcile.conditions.readiness.readiness` reads, so the reference cannot
drift from the code."""

from __future__ import annotations

from gpustack_render.reconcile.conditions.common import (
    CACHE_ATTACHED,
    CONDITION_TYPES,
    READY,
    RECONCILING,
    ROUTER_READY,
    SCALED_TO_ZERO,
    STALLED,
)
from gpustack_render.reconcile.conditions.readiness import (
    BEFORE_PLACEMENT,
    DELETING,
    NODES_FULL,
    READY_NEEDS,
    REPLICAS_NOT_READY,
    STALLING,
)
from gpustack_render.reconcile.conditions.router import RENDER_FAILED


def _stalling_text() -> str:
    by_type: dict[str, list[str]] = {}
    for type_, reason in sorted(STALLING, key=lambda p: (CONDITION_TYPES.index(p[0]), p[1])):
        by_type.setdefault(type_, []).append(f"`{reason}`")
    return "; ".join(f"`{t}` {' or '.join(reasons)}" for t, reasons in by_type.items())


def readiness_reference() -> list[str]:
    """Markdown lines of the section (after the ModelDeployment field table)."""
    needs = ", ".join(f"`{t}`" for t in READY_NEEDS)
    before = ", ".join(f"`{t}`" for t in BEFORE_PLACEMENT)
    informational = ", ".join(
        f"`{t}`" for t in CONDITION_TYPES if t not in READY_NEEDS and t != CACHE_ATTACHED
    )
    return [
        f"### Readiness: `{READY}`, `{RECONCILING}`, `{STALLED}`",
        "",
        "Computed by the controller on every status write from the eight conditions above, for "
        "tools that read kstatus conventions (`kubectl wait --for=condition=Ready`, Argo CD, "
        f"Flux): `{READY}` is normal-true, `{RECONCILING}` and `{STALLED}` abnormal-true, and "
        "exactly one of the three is `True`. They come first in `status.conditions`. Every "
        "condition and `status.observedGeneration` carry the `metadata.generation` the "
        "controller computed them from, so a tool ignores a `Ready` that predates the last spec "
        "edit (`kubectl wait` does). The first matching row wins:",
        "",
        f"| `{READY}` | `{RECONCILING}` | `{STALLED}` | Reason | When |",
        "|---|---|---|---|---|",
        f"| False | True | False | `{DELETING}` | the deployment is being deleted (the other "
        "conditions are left as they were) |",
        f"| False | False | True | `{RENDER_FAILED}` | the deployment's generation cannot be "
        "rendered: the message names the generation, gives the renderer's own message (the "
        "field or the object at fault) and the way out. Nothing is created, replaced or deleted; "
        "the replicas already running keep serving and are counted again, the other conditions "
        "keep the generation they were computed from |",
        "| False | False | True | the condition's reason | someone has to act, as the condition's "
        f"message says: {_stalling_text()} |",
        f"| True | False | False | `{SCALED_TO_ZERO}` | every role's count comes from a "
        "ModelDeploymentScaler and each asks for zero (docs/autoscaling.md): nothing is declared, "
        "so nothing is to be ready |",
        f"| False | True | False | the condition's reason | the first of {before} that is not "
        "`True` |",
        f"| False | True | False | `{NODES_FULL}` | fewer ready replicas than declared, and "
        "replicas that hold quota have a Pod the scheduler cannot place (`PodScheduled=False`, "
        "`Unschedulable`): how many, the first few, the scheduler's words for one Pod, the ways "
        "out |",
        f"| False | True | False | the condition's reason | the first of {needs} that is not "
        f"`True`, or `{CACHE_ATTACHED}` `False` |",
        f"| False | True | False | `{REPLICAS_NOT_READY}` | fewer ready replicas than declared |",
        f"| True | False | False | `{READY}` | otherwise: every declared replica is ready and up "
        "to date |",
        "",
        f"`{READY}`'s reason is the reason of the row; the two `False` summary conditions give the "
        f"name of the `True` one as their reason, and `{READY}`'s message (or the `True` "
        "condition's) names the condition that decided, followed by its message, or by its brief "
        "form when the message carries detail (a list of waiting replicas, Kueue's words): the "
        "detail is said once, in that condition, and the summary refers to it. "
        f"`{CACHE_ATTACHED}` is `Unknown` in this release (nothing observes cache traffic) and "
        f"holds readiness back only when `False`; {informational} reports configuration (D9) "
        f"and never does. `{ROUTER_READY}` holds readiness back until a declared router has a "
        "ready Pod: the deployment is served through it (D26).",
        "",
    ]
