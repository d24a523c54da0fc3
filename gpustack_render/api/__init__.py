"""Typed models of every kind the project serves or reads (group ``worker.gpustack.ai/v1``)."""

from gpustack_render.api.artifact import ModelArtifact
from gpustack_render.api.common import API_VERSION, GROUP, VERSION, Condition, ObjectMeta
from gpustack_render.api.inputs import (
    InstanceType,
    KVCacheBackend,
    KVCachePool,
    KVCachePoolBinding,
)
from gpustack_render.api.modeldeployment import (
    AdditionalVolume,
    EngineSpec,
    EnvVar,
    KVCacheSpec,
    KVTransferSpec,
    ModelDeployment,
    ModelDeploymentSpec,
    ModelDeploymentStatus,
    ModelSpec,
    RoleResources,
    RoleSpec,
    RoleStatus,
    RouterSpec,
)

__all__ = [
    "API_VERSION",
    "GROUP",
    "VERSION",
    "AdditionalVolume",
    "Condition",
    "EngineSpec",
    "EnvVar",
    "InstanceType",
    "KVCacheBackend",
    "KVCachePool",
    "KVCachePoolBinding",
    "KVCacheSpec",
    "KVTransferSpec",
    "ModelArtifact",
    "ModelDeployment",
    "ModelDeploymentSpec",
    "ModelDeploymentStatus",
    "ModelSpec",
    "ObjectMeta",
    "RoleResources",
    "RoleSpec",
    "RoleStatus",
    "RouterSpec",
]
