"""gpustack_render: ModelDeployments into Pods, Services, LocalQueues and admission verdicts.

A pure library: no network, environment, clock, randomness or logging. The command line
(``gpustack-render``), the controller and the webhook server are thin shells over it.
"""

from gpustack_render.api import (
    InstanceType,
    KVCacheBackend,
    KVCachePool,
    KVCachePoolBinding,
    ModelArtifact,
    ModelDeployment,
)
from gpustack_render.crd import all_crds
from gpustack_render.decoding import decode_deployment, decode_model
from gpustack_render.errors import (
    ErrorList,
    ErrorType,
    FieldError,
    RenderError,
    Verdict,
    VerdictKind,
)
from gpustack_render.lookups import LookupFailed, Lookups, StaticLookups
from gpustack_render.paths import FieldPath
from gpustack_render.review import AdmissionRequest
from gpustack_render.settings import Settings, settings_from_data

__all__ = [
    "AdmissionRequest",
    "ErrorList",
    "ErrorType",
    "FieldError",
    "FieldPath",
    "InstanceType",
    "KVCacheBackend",
    "KVCachePool",
    "KVCachePoolBinding",
    "LookupFailed",
    "Lookups",
    "ModelArtifact",
    "ModelDeployment",
    "RenderError",
    "Settings",
    "StaticLookups",
    "Verdict",
    "VerdictKind",
    "all_crds",
    "decode_deployment",
    "decode_model",
    "settings_from_data",
]
