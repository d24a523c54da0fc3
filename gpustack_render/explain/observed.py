"""Explain against observed state: the next pass, the timeline to completion, and why each
replica that is not serving is held (docs/explain.md, "Observed state").

INTERFACE SKELETON (integration scaffolding, replaced by the real module before it lands):
the names and signatures below are the contract between ``gpustack_render.explain.report``
(which calls them) and this module (which implements them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpustack_render.api import ModelDeployment
from gpustack_render.core.settings import Settings
from gpustack_render.rendering.renderer import Rendering


@dataclass(frozen=True, slots=True)
class ObservedState:
    """What ``--observed`` gave: the raw objects of a ``kubectl get … -o yaml`` List, sorted by
    kind (Pods, Kueue Workloads, Services, ClusterQueues, LocalQueues); anything else ignored."""

    pods: tuple[Mapping[str, Any], ...] = ()
    workloads: tuple[Mapping[str, Any], ...] = ()
    services: tuple[Mapping[str, Any], ...] = ()
    cluster_queues: tuple[Mapping[str, Any], ...] = ()
    local_queues: tuple[Mapping[str, Any], ...] = ()
    #: Objects of other kinds, by "kind/name", reported and otherwise ignored.
    ignored: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ObservedReport:
    """The observed-state part of an explanation (fields defined by the implementation)."""

    #: How many replicas the passes to completion replace (for ``--max-replaced``).
    replaced: int = 0
    #: Whether any replica rolls (for ``--fail-on roll``).
    rolls: bool = False
    details: Mapping[str, Any] = field(default_factory=dict)


def split_observed(documents: Sequence[Mapping[str, Any]]) -> ObservedState:
    """Sort a List's items (or a stream of documents) by kind."""
    raise NotImplementedError


def explain_observed(
    md: ModelDeployment,
    rendering: Rendering,
    observed: ObservedState,
    *,
    settings: Settings,
) -> ObservedReport:
    """Run the real planner on the observed Pods and Workloads: next pass, timeline, reasons,
    upgrade impact."""
    raise NotImplementedError


def observed_to_json(report: ObservedReport) -> dict[str, Any]:
    """The ``observed`` key of ``explain -o json`` (schema: ``OBSERVED_JSON_SCHEMA``)."""
    raise NotImplementedError


def observed_text(report: ObservedReport) -> list[str]:
    """The lines ``explain -o text`` prints for the observed state (compact tables)."""
    raise NotImplementedError


#: JSON Schema (draft 2020-12) of ``observed_to_json``'s output, embedded by the explain schema.
OBSERVED_JSON_SCHEMA: dict[str, Any] = {"type": "object"}
