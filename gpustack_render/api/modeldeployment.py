"""The ``ModelDeployment`` kind (group ``worker.gpustack.ai``, version ``v1``).

Field names, bounds, enums and defaults follow ``docs/contract/api-notes.md`` §1–§9. Defaults given
here are schema defaults (the API server applies them before any webhook sees the object); values
the renderer merely *renders* when a field is unset (``shmSize`` → 16Gi, a 30 s grace period, the
``tcp`` transfer protocol) are not defaults and stay unset in the stored object.
"""

# Annotations are objects, not strings: see the note in common.py.

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

#: An engine as the API spells it; the internal spelling is
#: :class:`~gpustack_render.core.vocabulary.Engine` (``engines.flags.engine_of`` maps it).
EngineName = Literal["vLLM", "SGLang"]
#: A role kind as the API spells it; the internal (label) spelling is
#: :class:`~gpustack_render.core.vocabulary.RoleKind` (``deployment.roles.effective_kind``).
RoleKindName = Literal["Server", "Prefill", "Decode", "Encode"]
TransferProtocol = Literal["Auto", "TCP", "RDMA", "EFA", "CANN", "ROCM"]
RouterName = Literal["llm-d-router", "vllm-router", "sglang-gateway"]
PullPolicy = Literal["Always", "IfNotPresent", "Never"]
PortProtocol = Literal["TCP", "UDP", "SCTP"]
#: Who sets a role's replica count: the deployment (``Replicas``) or an autoscaler through the
#: role's ModelDeploymentScaler (``External``; docs/autoscaling.md).
ScalingMode = Literal["Replicas", "External"]

#: A DNS-1123 label: role and scaling-group names (schema.decoding words it for a refusal).
ROLE_NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
#: An absolute path of one or more segments, no empty one, no trailing '/'.
ABSOLUTE_PATH_PATTERN = r"^(/[^/]+)+$"
#: A relative path: not starting with '/'.
RELATIVE_PATH_PATTERN = r"^[^/].*$"
#: The startup budget of a role that names none, seconds (per seed).
DEFAULT_STARTUP_TIMEOUT_SECONDS = 1800
MAX_ROLES = 10
#: The most replicas a role declares, and the most a scaler may ask for (a role's or a unit's).
MAX_REPLICAS = 1024


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
        Field(
            description="A ModelArtifact in this namespace whose pinned weights every role "
            "gets (docs/weights.md); no Pod is created until it resolves."
        ),
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
    """A request router in front of the engine roles, rendered as its own Deployment, Service,
    ServiceAccount, Role, RoleBinding and (llm-d-router) ConfigMap ``<md>-router`` (D26)."""

    name: Annotated[
        RouterName,
        FROZEN,
        Field(
            description="The router; pairs with the engine (llm-d-router, vllm-router, "
            "sglang-gateway)."
        ),
    ]
    replicas: Annotated[Int32, Field(ge=1, description="Router replicas.")] = 1
    image: Annotated[
        str | None,
        Field(
            max_length=512,
            description="Router image; unset: the router's default image from the Settings.",
        ),
    ] = None
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
        Field(max_length=1024, pattern=ABSOLUTE_PATH_PATTERN, description="Absolute path in main."),
    ]
    read_only: Annotated[bool | None, Field(description="Mount read-only.")] = None
    sub_path: Annotated[
        str | None,
        Field(
            max_length=1024,
            pattern=RELATIVE_PATH_PATTERN,
            description="Relative path in the volume.",
        ),
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
    """Elastic expert parallelism: one vLLM server whose expert-parallel width grows while it
    serves (docs/elastic-ep.md)."""

    width: Annotated[
        Int32,
        FREE,
        Field(
            ge=2,
            le=64,
            description="Expert-parallel width: the members, the master included (2..64).",
        ),
    ]


class RoleScaling(SpecModel):
    """Who sets the role's replica count, and the bounds an autoscaler must keep to."""

    mode: Annotated[
        ScalingMode,
        Field(
            description="Replicas: roles[].replicas is the count. External: the role's "
            "ModelDeploymentScaler <md>-<role> holds the count (its spec.replicas, written by an "
            "HPA, KEDA or kubectl scale) and roles[].replicas is only the starting value."
        ),
    ] = "Replicas"
    min_replicas: Annotated[
        Int32,
        Field(
            ge=0,
            le=MAX_REPLICAS,
            description="The fewest replicas the scaler accepts while External; 0 allows scale "
            "to zero.",
        ),
    ] = 1
    max_replicas: Annotated[
        Int32,
        Field(
            ge=1,
            le=MAX_REPLICAS,
            description="The most replicas the scaler accepts while External.",
        ),
    ] = MAX_REPLICAS


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
        RoleKindName,
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
        Field(
            description=(
                "Elastic expert parallelism: width GPU members in one Ray cluster behind a "
                "CPU-only Ray head; the width may grow, never shrink, and grows without a restart."
            )
        ),
    ] = None
    scaling: Annotated[
        RoleScaling | None,
        FREE,
        Field(
            description="Replicas (the default) or External: an autoscaler sets the count "
            "through the role's ModelDeploymentScaler; never restarts a replica."
        ),
    ] = None

    @property
    def managed(self) -> bool:
        """False for a take-over role (a non-empty ``command`` owns the whole argv)."""
        return not self.command


class ScalingGroupRole(SpecModel):
    """One role of a ratio group and how many of its replicas one unit holds."""

    name: Annotated[
        str,
        Field(
            min_length=1,
            max_length=63,
            pattern=ROLE_NAME_PATTERN,
            description="A role of spec.roles.",
        ),
    ]
    per_unit: Annotated[
        Int32,
        Field(ge=1, le=MAX_REPLICAS, description="Replicas of the role in one unit."),
    ] = 1


class ScalingGroup(SpecModel):
    """Roles scaled together in a fixed ratio, a whole unit at a time, through one
    ModelDeploymentScaler <md>-<group> whose replicas count units."""

    name: Annotated[
        str,
        Field(
            min_length=1,
            max_length=63,
            pattern=ROLE_NAME_PATTERN,
            description="The group's name; its scaler is <md>-<name>. Not a role's name.",
        ),
    ]
    roles: Annotated[
        list[ScalingGroupRole],
        Field(
            min_length=1,
            max_length=MAX_ROLES,
            json_schema_extra=list_map("name"),
            description="The roles of one unit (for example prefill 1, decode 2); each role is "
            "in at most one group and carries no roles[].scaling of its own.",
        ),
    ]
    min_units: Annotated[
        Int32,
        Field(
            ge=0,
            le=MAX_REPLICAS,
            description="The fewest units the scaler accepts; 0 allows scale to zero.",
        ),
    ] = 1
    max_units: Annotated[
        Int32 | None,
        Field(
            ge=1,
            le=MAX_REPLICAS,
            description="The most units the scaler accepts; unset: as many as keep every role "
            f"within {MAX_REPLICAS} replicas.",
        ),
    ] = None


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
    scaling_groups: Annotated[
        list[ScalingGroup] | None,
        FREE,
        Field(
            max_length=MAX_ROLES,
            json_schema_extra=list_map("name"),
            description="Ratio groups: roles an autoscaler scales together, whole units at a "
            "time, through one ModelDeploymentScaler per group; never restarts a replica.",
        ),
    ] = None


# --- status -------------------------------------------------------------------------------


class StatusModel(OpenModel):
    """Status parts: written by the controller, read leniently."""

    model_config = ConfigDict(extra="ignore", frozen=True)


class ParallelDegrees(StatusModel):
    """Parallel degrees a role's engine arguments declare (only those declared are set)."""

    tensor_parallel: Annotated[Int32 | None, Field(description="Tensor-parallel size.")] = None
    pipeline_parallel: Annotated[Int32 | None, Field(description="Pipeline-parallel size.")] = None
    data_parallel: Annotated[
        Int32 | None, Field(description="Data-parallel size (also from VLLM_DP_SIZE).")
    ] = None
    data_parallel_local: Annotated[
        Int32 | None, Field(description="Data-parallel ranks local to one Pod.")
    ] = None
    prefill_context_parallel: Annotated[
        Int32 | None, Field(description="Prefill context-parallel size.")
    ] = None
    decode_context_parallel: Annotated[
        Int32 | None, Field(description="Decode context-parallel size.")
    ] = None
    expert_parallel: Annotated[
        Int32 | None, Field(description="Expert-parallel degree, when above 1.")
    ] = None
    attention_context_parallel: Annotated[
        Int32 | None, Field(description="Attention context-parallel size.")
    ] = None
    moe_dp_size: Annotated[Int32 | None, Field(description="MoE data-parallel size.")] = None
    dwdp_size: Annotated[Int32 | None, Field(description="DWDP size.")] = None


class ParallelSource(StatusModel):
    """Where the parallel degrees were read from."""

    kind: Annotated[
        Literal["ExtraArgs", "Command", "UnmanagedCommand", "Unknown"] | None,
        Field(
            description="ExtraArgs for a managed role, UnmanagedCommand for a take-over role's "
            "command."
        ),
    ] = None
    complete: Annotated[
        bool | None, Field(description="Every argument was read; false when one was not.")
    ] = None
    unreadable_reason: Annotated[
        str | None, Field(description="Why the arguments could not all be read.")
    ] = None


class RoleParallelism(StatusModel):
    """How a role's engine parallelises, as parsed from its arguments."""

    declared: Annotated[
        ParallelDegrees | None, Field(description="The declared degrees; absent when none.")
    ] = None
    modes: Annotated[
        dict[str, str] | None,
        Field(description='Parallel modes switched on (mode name → "true").'),
    ] = None
    load_balance: Annotated[
        Literal["Internal", "External", "Hybrid", "MultiPort", "Unknown"] | None,
        Field(description="The data-parallel load-balancing mode."),
    ] = None
    source: Annotated[
        ParallelSource | None, Field(description="Where the degrees were read from.")
    ] = None


class ServingEndpoints(StatusModel):
    """Serving endpoints of a role (meaning left open; not filled in this release)."""

    state: Annotated[
        Literal["Confirmed", "NotConverged", "Unknown", "NotConfigured"] | None,
        Field(description="Whether the serving endpoints are confirmed."),
    ] = None
    value: Annotated[str | None, Field(description="The endpoints, as text.")] = None


class RoleEndpoints(StatusModel):
    """Endpoint qualification of a role (meaning left open; not filled in this release)."""

    eligible: Annotated[Int32 | None, Field(description="Endpoints eligible to serve.")] = None
    serving: Annotated[
        ServingEndpoints | None, Field(description="The endpoints serving traffic.")
    ] = None


class RoleScalingStatus(StatusModel):
    """Where the role's count comes from when it is not roles[].replicas (docs/autoscaling.md)."""

    source: Annotated[
        Literal["Scaler", "Held"] | None,
        Field(
            description="Scaler: the ModelDeploymentScaler named in scaler sets the count. "
            "Held: External was turned off; the last count is kept until roles[].replicas is "
            "edited."
        ),
    ] = None
    scaler: Annotated[
        str | None, Field(description="The ModelDeploymentScaler setting the count.")
    ] = None
    spec_replicas: Annotated[
        Int32 | None,
        Field(
            description="While Held: roles[].replicas when the hold began; editing it to "
            "another value ends the hold."
        ),
    ] = None


class RoleStatus(StatusModel):
    """One role as observed: instance counts, quota, flavors, the replica being replaced."""

    name: Annotated[str, Field(description="The role's name (spec.roles[].name).")]
    kind: Annotated[str | None, Field(description="The role's effective kind in API spelling.")] = (
        None
    )
    desired: Annotated[
        Int32 | None,
        Field(
            description="Declared instances (replicas, not Pods): roles[].replicas, or the "
            "count a ModelDeploymentScaler sets (status.roles[].scaling)."
        ),
    ] = None
    ready: Annotated[
        Int32 | None, Field(description="Instances all of whose member Pods exist and are Ready.")
    ] = None
    quota_reserved: Annotated[
        Int32 | None, Field(description="Instances whose Kueue Workload has QuotaReserved=True.")
    ] = None
    admitted: Annotated[
        Int32 | None, Field(description="Instances whose Kueue Workload is admitted now.")
    ] = None
    quota_pending: Annotated[
        Int32 | None,
        Field(
            description="Instances whose Kueue Workload waits for quota (QuotaReserved is not "
            "True): the ClusterQueue cannot hold them yet."
        ),
    ] = None
    scaling: Annotated[
        RoleScalingStatus | None,
        Field(description="Where the count comes from; absent when roles[].replicas sets it."),
    ] = None
    unmanaged: Annotated[
        bool | None, Field(description="The role's deployed Pods run a take-over command.")
    ] = None
    assigned_flavors: Annotated[
        list[str] | None,
        Field(
            description="Sorted, de-duplicated ResourceFlavors Kueue assigned to the role's "
            "PodSets; absent when none."
        ),
    ] = None
    replacing: Annotated[
        Int32 | None,
        Field(
            description="The ordinal of the replica being replaced (one per role at a time); "
            "absent when none."
        ),
    ] = None
    parallelism: Annotated[
        RoleParallelism | None, Field(description="Parallelism parsed from the engine arguments.")
    ] = None
    endpoints: Annotated[
        RoleEndpoints | None,
        Field(description="Endpoint qualification; not filled in this release."),
    ] = None


class DomainStatus(StatusModel):
    """The KV-cache reuse domain the deployment's Pods join."""

    name: Annotated[
        str | None, Field(max_length=63, description="The reuse domain (the store's tenant).")
    ] = None
    block_size: Annotated[Int32 | None, Field(description="Tokens per cache block.")] = None
    dtype: Annotated[
        str | None, Field(description="The KV-cache dtype, as the engine spells it.")
    ] = None


class KVCacheStatus(StatusModel):
    """The resolved KV-cache Binding; absent until it resolves once, then kept."""

    binding: Annotated[str | None, Field(description="The KVCachePoolBinding's name.")] = None
    pool: Annotated[str | None, Field(description="The KVCachePool it grants.")] = None
    domain: Annotated[
        DomainStatus | None, Field(description="The Binding's domain, block size and dtype.")
    ] = None


class RouterKVEvents(StatusModel):
    """Where a role publishes its KV-cache events for the router."""

    endpoint: Annotated[
        str | None, Field(description="The event stream, tcp://<md>-<role>.<ns>.svc:5557.")
    ] = None
    replay_endpoint: Annotated[
        str | None, Field(description="The replay endpoint, tcp://<md>-<role>.<ns>.svc:5558.")
    ] = None
    topic: Annotated[str | None, Field(description="The event topic.")] = None


class RouterRoleStatus(StatusModel):
    """What a router needs to reach one role."""

    name: Annotated[str, Field(description="The role's name.")]
    kind: Annotated[str | None, Field(description="The role's effective kind.")] = None
    selector: Annotated[
        dict[str, str] | None, Field(description="Labels selecting the role's Pods.")
    ] = None
    endpoint: Annotated[str | None, Field(description="The role's Service URL.")] = None
    kv_events: Annotated[
        RouterKVEvents | None, Field(description="KV-cache events; only for publishing roles.")
    ] = None


class RouterMetrics(StatusModel):
    """Where the router serves its metrics (only the port is filled)."""

    port: Annotated[Int32 | None, Field(description="The router's metrics port.")] = None
    queued_requests: Annotated[str | None, Field(description="Queued requests metric.")] = None
    running_requests: Annotated[str | None, Field(description="Running requests metric.")] = None
    kv_cache_utilization: Annotated[
        str | None, Field(description="KV-cache utilization metric.")
    ] = None


class RouterStatus(StatusModel):
    """The declared router: its name, its Service once ready, its metrics port and how it reaches
    each role (D26)."""

    name: Annotated[str | None, Field(description="The router (spec.router.name).")] = None
    endpoint: Annotated[
        str | None, Field(description="The router's Service URL, once the router is ready.")
    ] = None
    pool_endpoint: Annotated[
        str | None, Field(description="The router's pool endpoint; not filled in this release.")
    ] = None
    roles: Annotated[
        list[RouterRoleStatus] | None,
        Field(json_schema_extra=list_map("name"), description="Per role, how to reach it."),
    ] = None
    metrics: Annotated[
        RouterMetrics | None, Field(description="Router metrics; the port once rendered.")
    ] = None


class ModelStatus(StatusModel):
    """The ModelArtifact whose weights the Pods get (D28; absent without one)."""

    artifact: Annotated[str | None, Field(description="The ModelArtifact.")] = None
    revision: Annotated[str | None, Field(description="The resolved commit (hub sources).")] = None
    manifest_digest: Annotated[
        str | None, Field(description="The manifest digest (hub sources).")
    ] = None
    delivery: Annotated[
        Literal["PVC", "Engine", "Node", "Image"] | None,
        Field(description="How the weights reach the Pods."),
    ] = None


class RetirementStatus(StatusModel):
    """Retirement of the deployment (meaning left open; not filled in this release)."""

    state: Annotated[
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
        | None,
        Field(description="The retirement state."),
    ] = None


class ModelDeploymentStatus(StatusModel):
    """What the controller observed: rebuilt on every pass from the Pods, Workloads and Binding."""

    phase: Annotated[
        Literal["Starting", "Ready", "Degraded", "Deleting"] | None,
        Field(
            description="Starting (nothing ready), Ready (every replica ready), Degraded (some "
            "ready) or Deleting."
        ),
    ] = None
    phase_message: Annotated[str | None, Field(description="Why the phase holds.")] = None
    conditions: Annotated[
        list[Condition] | None,
        Field(
            json_schema_extra=list_map("type"),
            description="Ready, Reconciling and Stalled (kstatus), then DomainRegistered, "
            "QuotaReserved, ReplicasUpToDate, RoleKindsReady, CacheAttached, KVEventsPublishing "
            "and RouterReady.",
        ),
    ] = None
    endpoint: Annotated[
        str | None,
        Field(
            max_length=512,
            description="The deployment-wide Service URL, <scheme>://<md>.<ns>.svc:<port>.",
        ),
    ] = None
    roles: Annotated[
        list[RoleStatus] | None,
        Field(json_schema_extra=list_map("name"), description="Per role, in spec order."),
    ] = None
    kv_cache: Annotated[
        KVCacheStatus | None,
        Field(description="The resolved Binding; absent until it resolves once, then kept."),
    ] = None
    router: Annotated[
        RouterStatus | None, Field(description="The router; absent without spec.router.")
    ] = None
    role_summary: Annotated[
        str | None,
        Field(
            description="Ready instances per declared kind, every kind listed, e.g. 3P4D or 0S "
            "(S Server, P Prefill, D Decode, E Encode)."
        ),
    ] = None
    role_readiness: Annotated[
        str | None,
        Field(
            description="Per role, in spec order: its name, ready of desired instances and the "
            "kind it serves, e.g. `prefill 1/1 Prefill, decode 0/2 Decode` (the ROLES column)."
        ),
    ] = None
    model: Annotated[
        ModelStatus | None,
        Field(description="The artifact delivered (spec.model.artifactRef); absent without one."),
    ] = None
    retirement: Annotated[
        RetirementStatus | None, Field(description="Retirement; not filled in this release.")
    ] = None
    observed_generation: Annotated[
        Int64 | None,
        Field(description="The metadata.generation this status was computed from."),
    ] = None


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
