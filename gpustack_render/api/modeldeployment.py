"""The ``ModelDeployment`` kind (group ``worker.gpustack.ai``, version ``v1``).

Field names, bounds, enums and defaults follow ``docs/contract/api-notes.md`` §1–§9. Defaults given
here are schema defaults (the API server applies them before any webhook sees the object); values
the renderer merely *renders* when a field is unset (``shmSize`` → 16Gi, a 30 s grace period, the
``tcp`` transfer protocol) are not defaults and stay unset in the stored object.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field

from gpustack_render.api.common import (
    ATOMIC,
    FREE,
    FROZEN,
    ROLLS,
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
#: The startup budget of a role that names none, seconds (per seed).
DEFAULT_STARTUP_TIMEOUT_SECONDS = 1800
MAX_ROLES = 10


class ModelSpec(SpecModel):
    """What the engine serves."""

    name: Annotated[
        str,
        Field(
            min_length=1,
            max_length=253,
            description="Served model id: the vLLM positional model argument or SGLang "
            "--model-path, and the rendered --served-model-name.",
        ),
    ]
    artifact_ref: Annotated[
        LocalObjectReference | None,
        Field(description="A ModelArtifact in this namespace; refused in this release."),
    ] = None


class EngineSpec(SpecModel):
    """The inference engine and the runner image every role uses unless it names its own."""

    name: Annotated[
        EngineName,
        FROZEN,
        Field(description="vLLM or SGLang; vLLM on an ascend InstanceType renders vLLM-Ascend."),
    ]
    image: Annotated[
        str,
        ROLLS,
        Field(
            min_length=1,
            max_length=512,
            description="Runner image of every role without its own image; used as written.",
        ),
    ]


class KVCacheSpec(SpecModel):
    """A shared KV-cache pool, reached through a KVCachePoolBinding in this namespace."""

    pool_ref: Annotated[
        LocalObjectReference,
        Field(description="Names a KVCachePoolBinding in the deployment's namespace."),
    ]
    connector: Annotated[
        Literal["Mooncake"], Field(description="The cache connector; Mooncake is the only one.")
    ] = "Mooncake"


class RouterSpec(SpecModel):
    """A request router in front of the engine roles (its own objects are not rendered yet)."""

    name: Annotated[
        RouterName,
        FROZEN,
        Field(
            description="The router; pairs with the engine (llm-d-router, vllm-router, "
            "sglang-gateway)."
        ),
    ]
    replicas: Annotated[Int32, Field(ge=1, description="Router replicas.")] = 1
    image: Annotated[str | None, Field(max_length=512, description="Router image.")] = None
    extra_args: Annotated[
        list[str] | None,
        Field(json_schema_extra=ATOMIC, description="Arguments appended to the router's own."),
    ] = None
    image_pull_policy: Annotated[
        PullPolicy | None, Field(description="Pull policy of the router image.")
    ] = None
    image_pull_secrets: Annotated[
        list[LocalObjectReference] | None,
        Field(max_length=32, json_schema_extra=ATOMIC, description="Pull secrets of the router."),
    ] = None
    request_timeout_seconds: Annotated[
        Int32 | None, Field(ge=1, description="Request timeout; unset renders nothing.")
    ] = None
    disaggregation_threshold_tokens: Annotated[
        Int32 | None,
        Field(ge=0, description="Prompt length from which llm-d-router disaggregates; 0 disables."),
    ] = None


class KVTransferSpec(SpecModel):
    """The direct prefill/decode transfer leg."""

    protocol: Annotated[
        TransferProtocol | None,
        Field(description="Transport of the direct prefill/decode leg; unset renders tcp."),
    ] = None


class RoleResources(SpecModel):
    """The accelerator request of one Pod; CPU, memory and storage are derived."""

    accelerator: Annotated[
        Quantity | None,
        Field(
            description="Whole accelerator cards per Pod; defaulted to 1 on an acceleratable "
            "InstanceType; an explicit 0 is kept."
        ),
    ] = None
    accelerator_sliced_memory_percentage: Annotated[
        Int32 | None, Field(ge=0, le=100, description="Memory slice of one card; 0 = no slicing.")
    ] = None
    accelerator_sliced_cores_percentage: Annotated[
        Int32 | None, Field(ge=0, le=100, description="Core slice of one card; 0 = no slicing.")
    ] = None
    accelerator_partitioned_profile: Annotated[
        str | None,
        Field(
            max_length=64,
            description="A partition profile such as 3g.40gb; exclusive with slicing.",
        ),
    ] = None
    interface: Annotated[
        Quantity | None,
        Field(description="Fabric (RDMA/EFA) interfaces per engine Pod; unset or 0 adds none."),
    ] = None


class HostPathSource(SpecModel):
    """A node path, copied verbatim into the Pod."""

    path: Annotated[str, Field(description="Path on the node.")]
    type: Annotated[str | None, Field(description="hostPath type, as in a Pod volume.")] = None


class AdditionalVolume(SpecModel):
    """An extra volume mounted into main; exactly one source is set (webhook)."""

    mount_path: Annotated[
        str,
        Field(max_length=1024, pattern=r"^(/[^/]+)+$", description="Absolute path in main."),
    ]
    read_only: Annotated[bool | None, Field(description="Mount read-only.")] = None
    sub_path: Annotated[
        str | None,
        Field(max_length=1024, pattern=r"^[^/].*$", description="Relative path in the volume."),
    ] = None
    config_map: Annotated[
        LocalObjectReference | None, Field(description="A ConfigMap in this namespace.")
    ] = None
    secret: Annotated[
        LocalObjectReference | None, Field(description="A Secret in this namespace.")
    ] = None
    host_path: Annotated[
        HostPathSource | None,
        Field(description="A node path; gated by instance-host-path-volume-allowed."),
    ] = None


class RolePort(SpecModel):
    """A port the engine serves on."""

    port: Annotated[Int32, Field(ge=1, le=65535, description="Container and Service port.")]
    protocol: Annotated[PortProtocol, Field(description="Port protocol.")] = "TCP"


class EnvVar(SpecModel):
    """A variable appended after the operator's own."""

    name: Annotated[str, Field(min_length=1, description="Variable name; owned names refused.")]
    value: Annotated[str | None, Field(description="Literal value.")] = None


class TopologySpec(SpecModel):
    """Placement of an instance's Pods."""

    required_level: Annotated[
        str | None,
        Field(
            max_length=317,
            description="A node label key every Pod of an instance shares; "
            "not kubernetes.io/hostname.",
        ),
    ] = None


class ElasticEPSpec(SpecModel):
    """Elastic expert parallelism; refused in this release."""

    width: Annotated[Int32, Field(ge=2, le=64, description="Expert-parallel width.")]


class RoleSpec(SpecModel):
    """One engine role: replicas instances of size Pods each."""

    name: Annotated[
        str,
        FROZEN,
        Field(
            min_length=1,
            max_length=63,
            pattern=ROLE_NAME_PATTERN,
            description="Role name; also the Kueue PodSet name and part of every child's name.",
        ),
    ]
    kind: Annotated[
        RoleKind,
        FROZEN,
        Field(description="Server, Prefill or Decode (Encode is refused)."),
    ] = "Server"
    replicas: Annotated[
        Int32,
        FREE,
        Field(ge=1, le=1024, description="Independent serving instances; scaling replaces none."),
    ] = 1
    size: Annotated[
        Int32, Field(ge=1, le=64, description="Pods per instance; member 0 is the leader.")
    ] = 1
    instance_type: Annotated[
        str,
        Field(min_length=1, max_length=253, description="Cluster-scoped InstanceType name."),
    ]
    resources: Annotated[
        RoleResources | None, Field(description="The accelerator request of one Pod.")
    ] = None
    image: Annotated[
        str | None, Field(max_length=512, description="Overrides spec.engine.image.")
    ] = None
    image_pull_policy: Annotated[PullPolicy | None, Field(description="Pull policy of main.")] = (
        None
    )
    image_pull_secrets: Annotated[
        list[LocalObjectReference] | None,
        Field(max_length=32, json_schema_extra=ATOMIC, description="Pull secrets of the Pods."),
    ] = None
    privileged: Annotated[
        bool, Field(description="Run main privileged; gated by instance-privileged-allowed.")
    ] = False
    ports: Annotated[
        list[RolePort] | None,
        Field(
            json_schema_extra=list_map("port", "protocol"),
            description="Served ports; none means 8000.",
        ),
    ] = None
    additional_volumes: Annotated[
        list[AdditionalVolume] | None,
        Field(json_schema_extra=ATOMIC, description="Extra volumes mounted into main."),
    ] = None
    shm_size: Annotated[
        Quantity | None, Field(description="Size of /dev/shm; unset renders 16Gi.")
    ] = None
    command: Annotated[
        list[str] | None,
        Field(
            json_schema_extra=ATOMIC,
            description="Take-over: the whole argv; nothing is synthesized.",
        ),
    ] = None
    extra_args: Annotated[
        list[str] | None,
        Field(
            json_schema_extra=ATOMIC,
            description="Appended after every synthesized argument; inert beside command.",
        ),
    ] = None
    env: Annotated[
        list[EnvVar] | None,
        Field(
            json_schema_extra=list_map("name"), description="Variables after the operator's own."
        ),
    ] = None
    topology: Annotated[TopologySpec | None, Field(description="Required placement level.")] = None
    termination_grace_period_seconds: Annotated[
        Int64 | None,
        Field(ge=15, le=3600, description="Drain budget; a managed role renders 30."),
    ] = None
    startup_timeout_seconds: Annotated[
        Int32,
        Field(
            ge=10,
            le=86400,
            description="Startup budget; the startup probe allows ceil(value / 10) failures.",
        ),
    ] = DEFAULT_STARTUP_TIMEOUT_SECONDS
    elastic_ep: Annotated[
        ElasticEPSpec | None,
        Field(description="Elastic expert parallelism; refused in this release."),
    ] = None

    @property
    def managed(self) -> bool:
        """False for a take-over role (a non-empty ``command`` owns the whole argv)."""
        return not self.command


class ModelDeploymentSpec(SpecModel):
    """The desired deployment."""

    model: Annotated[ModelSpec, FROZEN, Field(description="What the engine serves.")]
    engine: Annotated[EngineSpec, Field(description="The engine and its runner image.")]
    kv_cache: Annotated[
        KVCacheSpec | None, FROZEN, Field(description="A shared KV-cache pool; absent = none.")
    ] = None
    router: Annotated[
        RouterSpec | None,
        FREE,
        Field(description="A router in front of the roles; adding or removing it rolls."),
    ] = None
    kv_transfer: Annotated[
        KVTransferSpec | None, ROLLS, Field(description="The direct prefill/decode leg.")
    ] = None
    roles: Annotated[
        list[RoleSpec],
        ROLLS,
        Field(
            min_length=1,
            json_schema_extra=list_map("name"),
            description="1 to 10 engine roles; the set of roles is frozen.",
        ),
    ]


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
    role_readiness: Annotated[
        str | None,
        Field(
            description="Per role, in spec order: its name, ready of desired instances and the "
            "kind it serves, e.g. `prefill 1/1 Prefill, decode 0/2 Decode` (the ROLES column)."
        ),
    ] = None
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
