"""gpustack_render: ModelDeployments into Pods, Services, LocalQueues and admission verdicts.

A pure library: no network, environment, clock, randomness or logging. The command line
(``gpustack-render``), the controller and the webhook server are thin shells over it.

``__version__`` is the installed distribution's version (``pyproject.toml`` is the one place it
is written); it is read once, from the package metadata, when the package is imported.
"""

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _distribution_version

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
from gpustack_render.injection import InjectionRecord, freeze_pod, inject_pod, review_pod
from gpustack_render.reconcile.events import Event, departure_events, render_failed
from gpustack_render.reconcile.observed import (
    ObservedPod,
    ObservedWorkload,
    observe_pod,
    observe_workload,
)
from gpustack_render.reconcile.rollout import Desired, DesiredRole, Plan, plan
from gpustack_render.reconcile.status import (
    deleting_status,
    deployment_status,
    desired_from_rendering,
)
from gpustack_render.rendering.hashing import (
    CURRENT_RENDER_VERSION,
    MIN_SUPPORTED_RENDER_VERSION,
    effective_floor,
    is_outdated,
    pod_render_version,
)
from gpustack_render.rendering.renderer import Rendering, RoleRendering, SeatRendering, render
from gpustack_render.schema.crd import all_crds
from gpustack_render.schema.decoding import decode_deployment, decode_model
from gpustack_render.schema.lookups import LookupFailed, Lookups, StaticLookups

#: The distribution this package belongs to (``[project] name`` in ``pyproject.toml``).
_DISTRIBUTION = "gpustack-render"

try:
    __version__: str = _distribution_version(_DISTRIBUTION)
except PackageNotFoundError:  # pragma: no cover - imported from a tree that was never installed
    __version__ = "0+unknown"

__all__ = [
    "CURRENT_RENDER_VERSION",
    "MIN_SUPPORTED_RENDER_VERSION",
    "AdmissionRequest",
    "Desired",
    "DesiredRole",
    "ErrorList",
    "ErrorType",
    "Event",
    "FieldError",
    "FieldPath",
    "InjectionRecord",
    "InstanceType",
    "KVCacheBackend",
    "KVCachePool",
    "KVCachePoolBinding",
    "LookupFailed",
    "Lookups",
    "ModelArtifact",
    "ModelDeployment",
    "ObservedPod",
    "ObservedWorkload",
    "Plan",
    "RenderError",
    "Rendering",
    "RoleRendering",
    "SeatRendering",
    "Settings",
    "StaticLookups",
    "Verdict",
    "VerdictKind",
    "all_crds",
    "decode_deployment",
    "decode_model",
    "deleting_status",
    "departure_events",
    "deployment_status",
    "desired_from_rendering",
    "effective_floor",
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
    "review_deployment",
    "review_pod",
    "settings_from_data",
    "validate_deployment",
]
