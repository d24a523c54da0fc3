"""The ``ModelDeployment`` kind (group ``worker.gpustack.ai``, version ``v1``).

Field names, bounds, enums and defaults follow ``reference/api.md`` §1–§9. Defaults given here
are schema defaults (the API server applies them before any webhook sees the object); values the
renderer merely *renders* when a field is unset (``shmSize`` → 16Gi, a 30 s grace period, the
``tcp`` transfer protocol) are not defaults and stay unset in the stored object.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field

from gpustack_render.api.common import (
    ATOMIC,
    Condition,
    Int32,
    Int64,
    LocalObjectReference,
    ObjectMeta,
    OpenModel,
    Quantity,
    SpecModel,
    list_map,
)

KIND = "ModelDeployment"
PLURAL = "modeldeployments"

EngineName = Literal["vLLM", "SGLang"]
RoleKind = Literal["Server", "Prefill", "Decode", "Encode"]
TransferProtocol = Literal["Auto", "TCP", "RDMA", "EFA", "CANN", "ROCM"]
RouterName = Literal["llm-d-router", "vllm-router", "sglang-gateway"]
PullPolicy = Literal["Always", "IfNotPresent", "Never"]
PortProtocol = Literal["TCP", "UDP", "SCTP"]

ROLE_NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
MAX_ROLES = 10


class ModelSpec(SpecModel):
    """What the engine serves."""

    name: Annotated[str, Field(min_length=1, max_length=253, description="Served model id.")]
    artifact_ref: Annotated[
        LocalObjectReference | None,
        Field(description="A ModelArtifact in this namespace; refused in this release."),
    ] = None


class EngineSpec(SpecModel):
    """The inference engine and the runner image every role uses unless it names its own."""

    name: Annotated[EngineName, Field(description="vLLM or SGLang.")]
    image: Annotated[str, Field(min_length=1, max_length=512, description="Runner image.")]


class KVCacheSpec(SpecModel):
    """A shared KV-cache pool, reached through a KVCachePoolBinding in this namespace."""

    pool_ref: Annotated[
        LocalObjectReference,
        Field(description="Names a KVCachePoolBinding in the deployment's namespace."),
    ]
    connector: Literal["Mooncake"] = "Mooncake"


class RouterSpec(SpecModel):
    """A request router in front of the engine roles (its own objects are not rendered yet)."""

    name: RouterName
    replicas: Annotated[Int32, Field(ge=1)] = 1
    image: Annotated[str | None, Field(max_length=512)] = None
    extra_args: Annotated[list[str] | None, Field(json_schema_extra=ATOMIC)] = None
    image_pull_policy: PullPolicy | None = None
    image_pull_secrets: Annotated[
        list[LocalObjectReference] | None, Field(max_length=32, json_schema_extra=ATOMIC)
    ] = None
    request_timeout_seconds: Annotated[Int32 | None, Field(ge=1)] = None
    disaggregation_threshold_tokens: Annotated[Int32 | None, Field(ge=0)] = None


class KVTransferSpec(SpecModel):
    """The direct prefill/decode transfer leg."""

    protocol: TransferProtocol | None = None


class RoleResources(SpecModel):
    """The accelerator request of one Pod; CPU, memory and storage are derived."""

    accelerator: Quantity | None = None
    accelerator_sliced_memory_percentage: Annotated[Int32 | None, Field(ge=0, le=100)] = None
    accelerator_sliced_cores_percentage: Annotated[Int32 | None, Field(ge=0, le=100)] = None
    accelerator_partitioned_profile: Annotated[str | None, Field(max_length=64)] = None
    interface: Quantity | None = None


class HostPathSource(SpecModel):
    path: str
    type: str | None = None


class AdditionalVolume(SpecModel):
    """An extra volume mounted into ``main``; exactly one source is set (webhook)."""

    mount_path: Annotated[str, Field(max_length=1024, pattern=r"^(/[^/]+)+$")]
    read_only: bool | None = None
    sub_path: Annotated[str | None, Field(max_length=1024, pattern=r"^[^/].*$")] = None
    config_map: LocalObjectReference | None = None
    secret: LocalObjectReference | None = None
    host_path: HostPathSource | None = None


class RolePort(SpecModel):
    port: Annotated[Int32, Field(ge=1, le=65535)]
    protocol: PortProtocol = "TCP"


class EnvVar(SpecModel):
    name: Annotated[str, Field(min_length=1)]
    value: str | None = None


class TopologySpec(SpecModel):
    required_level: Annotated[str | None, Field(max_length=317)] = None


class ElasticEPSpec(SpecModel):
    width: Annotated[Int32, Field(ge=2, le=64)]


class RoleSpec(SpecModel):
    """One engine role: ``replicas`` instances of ``size`` Pods each."""

    name: Annotated[str, Field(min_length=1, max_length=63, pattern=ROLE_NAME_PATTERN)]
    kind: RoleKind = "Server"
    replicas: Annotated[Int32, Field(ge=1, le=1024)] = 1
    size: Annotated[Int32, Field(ge=1, le=64)] = 1
    instance_type: Annotated[str, Field(min_length=1, max_length=253)]
    resources: RoleResources | None = None
    image: Annotated[str | None, Field(max_length=512)] = None
    image_pull_policy: PullPolicy | None = None
    image_pull_secrets: Annotated[
        list[LocalObjectReference] | None, Field(max_length=32, json_schema_extra=ATOMIC)
    ] = None
    privileged: bool = False
    ports: Annotated[
        list[RolePort] | None, Field(json_schema_extra=list_map("port", "protocol"))
    ] = None
    additional_volumes: Annotated[
        list[AdditionalVolume] | None, Field(json_schema_extra=ATOMIC)
    ] = None
    shm_size: Quantity | None = None
    command: Annotated[list[str] | None, Field(json_schema_extra=ATOMIC)] = None
    extra_args: Annotated[list[str] | None, Field(json_schema_extra=ATOMIC)] = None
    env: Annotated[list[EnvVar] | None, Field(json_schema_extra=list_map("name"))] = None
    topology: TopologySpec | None = None
    termination_grace_period_seconds: Annotated[Int64 | None, Field(ge=15, le=3600)] = None
    startup_timeout_seconds: Annotated[Int32, Field(ge=10, le=86400)] = 1800
    elastic_ep: ElasticEPSpec | None = None

    @property
    def managed(self) -> bool:
        """False for a take-over role (a non-empty ``command`` owns the whole argv)."""
        return not self.command


class ModelDeploymentSpec(SpecModel):
    model: ModelSpec
    engine: EngineSpec
    kv_cache: KVCacheSpec | None = None
    router: RouterSpec | None = None
    kv_transfer: KVTransferSpec | None = None
    roles: Annotated[list[RoleSpec], Field(min_length=1, json_schema_extra=list_map("name"))]


# --- status -------------------------------------------------------------------------------


class StatusModel(OpenModel):
    """Status parts: written by the controller, read leniently."""

    model_config = ConfigDict(extra="ignore", frozen=True)


class ParallelDegrees(StatusModel):
    tensor_parallel: Int32 | None = None
    pipeline_parallel: Int32 | None = None
    data_parallel: Int32 | None = None
    data_parallel_local: Int32 | None = None
    prefill_context_parallel: Int32 | None = None
    decode_context_parallel: Int32 | None = None
    expert_parallel: Int32 | None = None
    attention_context_parallel: Int32 | None = None
    moe_dp_size: Int32 | None = None
    dwdp_size: Int32 | None = None


class ParallelSource(StatusModel):
    kind: Literal["ExtraArgs", "Command", "UnmanagedCommand", "Unknown"] | None = None
    complete: bool | None = None
    unreadable_reason: str | None = None


class RoleParallelism(StatusModel):
    declared: ParallelDegrees | None = None
    modes: dict[str, str] | None = None
    load_balance: Literal["Internal", "External", "Hybrid", "MultiPort", "Unknown"] | None = None
    source: ParallelSource | None = None


class ServingEndpoints(StatusModel):
    state: Literal["Confirmed", "NotConverged", "Unknown", "NotConfigured"] | None = None
    value: str | None = None


class RoleEndpoints(StatusModel):
    eligible: Int32 | None = None
    serving: ServingEndpoints | None = None


class RoleStatus(StatusModel):
    name: str
    kind: str | None = None
    desired: Int32 | None = None
    ready: Int32 | None = None
    quota_reserved: Int32 | None = None
    unmanaged: bool | None = None
    assigned_flavors: list[str] | None = None
    replacing: Int32 | None = None
    parallelism: RoleParallelism | None = None
    endpoints: RoleEndpoints | None = None


class DomainStatus(StatusModel):
    name: Annotated[str | None, Field(max_length=63)] = None
    block_size: Int32 | None = None
    dtype: str | None = None


class KVCacheStatus(StatusModel):
    binding: str | None = None
    pool: str | None = None
    domain: DomainStatus | None = None


class RouterKVEvents(StatusModel):
    endpoint: str | None = None
    replay_endpoint: str | None = None
    topic: str | None = None


class RouterRoleStatus(StatusModel):
    name: str
    kind: str | None = None
    selector: dict[str, str] | None = None
    endpoint: str | None = None
    kv_events: RouterKVEvents | None = None


class RouterMetrics(StatusModel):
    port: Int32 | None = None
    queued_requests: str | None = None
    running_requests: str | None = None
    kv_cache_utilization: str | None = None


class RouterStatus(StatusModel):
    name: str | None = None
    endpoint: str | None = None
    pool_endpoint: str | None = None
    roles: Annotated[list[RouterRoleStatus] | None, Field(json_schema_extra=list_map("name"))] = (
        None
    )
    metrics: RouterMetrics | None = None


class ModelStatus(StatusModel):
    artifact: str | None = None
    revision: str | None = None
    manifest_digest: str | None = None
    delivery: Literal["PVC", "Engine", "Node", "Image"] | None = None


class RetirementStatus(StatusModel):
    state: (
        Literal[
            "Admitted",
            "Disqualified",
            "Withdrawing",
            "Draining",
            "Deleting",
            "Settling",
            "Aborted",
            "Completed",
        ]
        | None
    ) = None


class ModelDeploymentStatus(StatusModel):
    phase: Literal["Starting", "Ready", "Degraded", "Deleting"] | None = None
    phase_message: str | None = None
    conditions: Annotated[list[Condition] | None, Field(json_schema_extra=list_map("type"))] = None
    endpoint: Annotated[str | None, Field(max_length=512)] = None
    roles: Annotated[list[RoleStatus] | None, Field(json_schema_extra=list_map("name"))] = None
    kv_cache: KVCacheStatus | None = None
    router: RouterStatus | None = None
    role_summary: str | None = None
    model: ModelStatus | None = None
    retirement: RetirementStatus | None = None
    observed_generation: Int64 | None = None


class ModelDeployment(SpecModel):
    """A deployment of one model: the object users write and the controller renders."""

    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True, frozen=True)

    api_version: Annotated[Literal["worker.gpustack.ai/v1"], Field(alias="apiVersion")] = (
        "worker.gpustack.ai/v1"
    )
    kind: Literal["ModelDeployment"] = "ModelDeployment"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ModelDeploymentSpec
    status: ModelDeploymentStatus | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data with wire names; unset optional fields are left out."""
        data = self.model_dump(mode="json", by_alias=True, exclude_none=True)
        data["metadata"] = self.metadata.model_dump(mode="json", by_alias=True, exclude_unset=True)
        return data
