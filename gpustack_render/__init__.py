"""gpustack_render: ModelDeployments into Pods, Services, LocalQueues and admission verdicts.

A pure library: no network, environment, clock, randomness or logging. The command line
(``gpustack-render``), the controller and the webhook server are thin shells over it.

Importing the package is cheap: each public name is imported from its module on first use
(PEP 562), so the command line pays only for the layers a verb needs.

``__version__`` is the installed distribution's version (``pyproject.toml`` is the one place it
is written), read from the package metadata on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpustack_render.admission import (
        mutate_deployment,
        review_deployment,
        validate_deployment,
    )
    from gpustack_render.api import (
        InstanceType,
        KVCacheBackend,
        KVCachePool,
        KVCachePoolBinding,
        ModelArtifact,
        ModelDeployment,
    )
    from gpustack_render.core.errors import (
        ErrorList,
        ErrorType,
        FieldError,
        RenderError,
        Verdict,
        VerdictKind,
    )
    from gpustack_render.core.naming import group_name
    from gpustack_render.core.paths import FieldPath
    from gpustack_render.core.review import AdmissionRequest
    from gpustack_render.core.settings import Settings, settings_from_data
    from gpustack_render.explain.model import Explanation
    from gpustack_render.explain.report import explain_deployment, explanation_json
    from gpustack_render.explain.schema import EXPLAIN_JSON_SCHEMA
    from gpustack_render.explain.text import explanation_text
    from gpustack_render.injection import InjectionRecord, freeze_pod, inject_pod, review_pod
    from gpustack_render.reconcile.events import Event, departure_events, render_failed
    from gpustack_render.reconcile.observed import (
        ObservedPod,
        ObservedWorkload,
        observe_pod,
        observe_workload,
    )
    from gpustack_render.reconcile.rollout import Desired, DesiredRole, RolloutStep, plan
    from gpustack_render.reconcile.rolloutinputs import desired_from_rendering
    from gpustack_render.reconcile.status import (
        deleting_status,
        deployment_status,
        render_failed_status,
        weights_held_status,
    )
    from gpustack_render.rendering.hashing import (
        CURRENT_RENDER_VERSION,
        MIN_SUPPORTED_RENDER_VERSION,
        effective_floor,
        is_outdated,
        pod_render_version,
    )
    from gpustack_render.rendering.renderer import Rendering, RoleRendering, SeatRendering, render
    from gpustack_render.rendering.router import RouterRendering
    from gpustack_render.schema.crd import all_crds
    from gpustack_render.schema.decoding import decode_deployment, decode_model
    from gpustack_render.schema.lookups import LookupFailed, Lookups, StaticLookups
    from gpustack_render.weights.delivery import WeightsBlock, WeightsPlan, weights_of
    from gpustack_render.weights.manifest import (
        InvalidManifest,
        Manifest,
        ManifestEntry,
        build_manifest,
    )

#: Where each public name lives.
_HOME: dict[str, str] = {
    "mutate_deployment": "gpustack_render.admission",
    "review_deployment": "gpustack_render.admission",
    "validate_deployment": "gpustack_render.admission",
    "InstanceType": "gpustack_render.api",
    "KVCacheBackend": "gpustack_render.api",
    "KVCachePool": "gpustack_render.api",
    "KVCachePoolBinding": "gpustack_render.api",
    "ModelArtifact": "gpustack_render.api",
    "ModelDeployment": "gpustack_render.api",
    "ErrorList": "gpustack_render.core.errors",
    "ErrorType": "gpustack_render.core.errors",
    "FieldError": "gpustack_render.core.errors",
    "RenderError": "gpustack_render.core.errors",
    "Verdict": "gpustack_render.core.errors",
    "VerdictKind": "gpustack_render.core.errors",
    "group_name": "gpustack_render.core.naming",
    "FieldPath": "gpustack_render.core.paths",
    "AdmissionRequest": "gpustack_render.core.review",
    "Settings": "gpustack_render.core.settings",
    "settings_from_data": "gpustack_render.core.settings",
    "Explanation": "gpustack_render.explain.model",
    "explain_deployment": "gpustack_render.explain.report",
    "explanation_json": "gpustack_render.explain.report",
    "EXPLAIN_JSON_SCHEMA": "gpustack_render.explain.schema",
    "explanation_text": "gpustack_render.explain.text",
    "InjectionRecord": "gpustack_render.injection",
    "freeze_pod": "gpustack_render.injection",
    "inject_pod": "gpustack_render.injection",
    "review_pod": "gpustack_render.injection",
    "Event": "gpustack_render.reconcile.events",
    "departure_events": "gpustack_render.reconcile.events",
    "render_failed": "gpustack_render.reconcile.events",
    "ObservedPod": "gpustack_render.reconcile.observed",
    "ObservedWorkload": "gpustack_render.reconcile.observed",
    "observe_pod": "gpustack_render.reconcile.observed",
    "observe_workload": "gpustack_render.reconcile.observed",
    "Desired": "gpustack_render.reconcile.rollout",
    "DesiredRole": "gpustack_render.reconcile.rollout",
    "RolloutStep": "gpustack_render.reconcile.rollout",
    "plan": "gpustack_render.reconcile.rollout",
    "desired_from_rendering": "gpustack_render.reconcile.rolloutinputs",
    "deleting_status": "gpustack_render.reconcile.status",
    "deployment_status": "gpustack_render.reconcile.status",
    "render_failed_status": "gpustack_render.reconcile.status",
    "weights_held_status": "gpustack_render.reconcile.status",
    "WeightsBlock": "gpustack_render.weights.delivery",
    "WeightsPlan": "gpustack_render.weights.delivery",
    "weights_of": "gpustack_render.weights.delivery",
    "InvalidManifest": "gpustack_render.weights.manifest",
    "Manifest": "gpustack_render.weights.manifest",
    "ManifestEntry": "gpustack_render.weights.manifest",
    "build_manifest": "gpustack_render.weights.manifest",
    "CURRENT_RENDER_VERSION": "gpustack_render.rendering.hashing",
    "MIN_SUPPORTED_RENDER_VERSION": "gpustack_render.rendering.hashing",
    "effective_floor": "gpustack_render.rendering.hashing",
    "is_outdated": "gpustack_render.rendering.hashing",
    "pod_render_version": "gpustack_render.rendering.hashing",
    "Rendering": "gpustack_render.rendering.renderer",
    "RoleRendering": "gpustack_render.rendering.renderer",
    "SeatRendering": "gpustack_render.rendering.renderer",
    "render": "gpustack_render.rendering.renderer",
    "RouterRendering": "gpustack_render.rendering.router",
    "all_crds": "gpustack_render.schema.crd",
    "decode_deployment": "gpustack_render.schema.decoding",
    "decode_model": "gpustack_render.schema.decoding",
    "LookupFailed": "gpustack_render.schema.lookups",
    "Lookups": "gpustack_render.schema.lookups",
    "StaticLookups": "gpustack_render.schema.lookups",
}

__all__ = [
    "CURRENT_RENDER_VERSION",
    "EXPLAIN_JSON_SCHEMA",
    "MIN_SUPPORTED_RENDER_VERSION",
    "AdmissionRequest",
    "Desired",
    "DesiredRole",
    "ErrorList",
    "ErrorType",
    "Event",
    "Explanation",
    "FieldError",
    "FieldPath",
    "InjectionRecord",
    "InstanceType",
    "InvalidManifest",
    "KVCacheBackend",
    "KVCachePool",
    "KVCachePoolBinding",
    "LookupFailed",
    "Lookups",
    "Manifest",
    "ManifestEntry",
    "ModelArtifact",
    "ModelDeployment",
    "ObservedPod",
    "ObservedWorkload",
    "RenderError",
    "Rendering",
    "RoleRendering",
    "RolloutStep",
    "RouterRendering",
    "SeatRendering",
    "Settings",
    "StaticLookups",
    "Verdict",
    "VerdictKind",
    "WeightsBlock",
    "WeightsPlan",
    "all_crds",
    "build_manifest",
    "decode_deployment",
    "decode_model",
    "deleting_status",
    "departure_events",
    "deployment_status",
    "desired_from_rendering",
    "effective_floor",
    "explain_deployment",
    "explanation_json",
    "explanation_text",
    "freeze_pod",
    "group_name",
    "inject_pod",
    "is_outdated",
    "mutate_deployment",
    "observe_pod",
    "observe_workload",
    "plan",
    "pod_render_version",
    "render",
    "render_failed",
    "render_failed_status",
    "review_deployment",
    "review_pod",
    "settings_from_data",
    "validate_deployment",
    "weights_held_status",
    "weights_of",
]


#: The distribution this package belongs to (``[project] name`` in ``pyproject.toml``).
_DISTRIBUTION = "gpustack-render"


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(_DISTRIBUTION)
    except PackageNotFoundError:  # pragma: no cover - imported from a tree never installed
        return "0+unknown"


def __getattr__(name: str) -> Any:
    if name == "__version__":
        value: Any = _version()
        globals()[name] = value
        return value
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
