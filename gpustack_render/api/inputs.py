"""The input kinds this project reads but does not own (``docs/contract/api-notes.md`` §11).

Only the fields the library reads are modelled; every other field is kept as given, and the
shipped CRDs preserve them too (D1).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from gpustack_render.api.common import (
    API_VERSION,
    Condition,
    Int32,
    ObjectMeta,
    OpenModel,
    list_map,
)

Manufacturer = Literal[
    "nvidia", "amd", "ascend", "cambricon", "hygon", "iluvatar", "metax", "mthreads", "thead"
]
BackendProtocol = Literal["Auto", "TCP", "RDMA", "EFA", "CANN", "ROCM", "MUSA", "MACA"]
Phase = Literal["Provisioning", "Ready", "Degraded", "Error", "Deleting"]

PRESERVE: dict[str, Any] = {"x-kubernetes-preserve-unknown-fields": True}


class InputObject(OpenModel):
    """Common envelope of the read kinds."""

    api_version: Annotated[str, Field(alias="apiVersion")] = API_VERSION
    kind: str = ""
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def deleting(self) -> bool:
        return self.metadata.deletion_timestamp is not None


# --- InstanceType (cluster-scoped) ----------------------------------------------------------


class UnitResources(OpenModel):
    cpu: str | None = None
    ram: str | None = None
    ephemeral_storage: str | None = None


class InstanceTypeSpec(OpenModel):
    acceleratable: bool = False
    unit_resources: UnitResources | None = None
    local_storage: str | None = None


class LogicalSlicing(OpenModel):
    count: Int32 = 0


class PartitionProfile(OpenModel):
    name: str
    memory_mi_b: Annotated[int | None, Field(alias="memoryMiB")] = None
    count: Int32 | None = None


class PhysicalSlicing(OpenModel):
    profiles: list[PartitionProfile] | None = None


class SlicedDetail(OpenModel):
    logical: LogicalSlicing | None = None
    physical: PhysicalSlicing | None = None


class InstanceTypeDetail(OpenModel):
    manufacturer: str | None = None
    memory: str | None = None
    sliced_detail: SlicedDetail | None = None
    accelerator_group: str | None = None


class AcceleratorCapacity(OpenModel):
    capacity: int | None = None


class InstanceTypeStatus(OpenModel):
    entrance: str | None = None
    detail: InstanceTypeDetail | None = None
    accelerator: AcceleratorCapacity | None = None


class InstanceType(InputObject):
    """A node shape: per-unit resources, accelerator detail and its Kueue entrance."""

    kind: Literal["InstanceType"] = "InstanceType"
    spec: InstanceTypeSpec = Field(default_factory=InstanceTypeSpec)
    status: InstanceTypeStatus = Field(default_factory=InstanceTypeStatus)


# --- KVCachePoolBinding (namespaced) --------------------------------------------------------


#: CRD-only rules of the Binding's identity fields (the API server enforces them on every write;
#: the library reads stored objects as they are, and refuses a bad domain itself, K3).
DNS1123_LABEL_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
DNS1123_SUBDOMAIN_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"


def immutable(field: str) -> dict[str, Any]:
    """A CEL transition rule: once set, ``field`` keeps its value."""
    return {
        "x-kubernetes-validations": [
            {"rule": "self == oldSelf", "message": f"{field} is immutable"}
        ]
    }


class BindingDomain(OpenModel):
    name: Annotated[
        str | None,
        Field(
            max_length=63,
            json_schema_extra={
                "pattern": DNS1123_LABEL_PATTERN,
                **immutable("spec.domain.name"),
            },
        ),
    ] = None
    block_size: Int32
    dtype: Annotated[str, Field(max_length=32)]


class PoolReference(OpenModel):
    name: Annotated[
        str,
        Field(
            json_schema_extra={
                "maxLength": 253,
                "pattern": DNS1123_SUBDOMAIN_PATTERN,
                **immutable("spec.poolRef.name"),
            }
        ),
    ]


class KVCachePoolBindingSpec(OpenModel):
    pool_ref: PoolReference
    domain: Annotated[
        BindingDomain,
        # A transition rule on the name alone skips adding or removing it: the domain holds.
        Field(
            json_schema_extra={
                "x-kubernetes-validations": [
                    {
                        "rule": "has(self.name) == has(oldSelf.name)",
                        "message": "spec.domain.name is immutable",
                    }
                ]
            }
        ),
    ]
    quota_ceiling: int | str | None = None


class UsedBy(OpenModel):
    kind: str
    namespace: str = ""
    name: str


class KVCachePoolBindingStatus(OpenModel):
    phase: Phase | None = None
    conditions: Annotated[list[Condition] | None, Field(json_schema_extra=list_map("type"))] = None
    used_by: Annotated[
        list[UsedBy] | None, Field(json_schema_extra=list_map("kind", "namespace", "name"))
    ] = None


class KVCachePoolBinding(InputObject):
    """A namespace's grant to a pool, carrying the reuse domain (tenant), block size and dtype."""

    kind: Literal["KVCachePoolBinding"] = "KVCachePoolBinding"
    spec: KVCachePoolBindingSpec
    status: KVCachePoolBindingStatus = Field(default_factory=KVCachePoolBindingStatus)

    @property
    def domain_name(self) -> str:
        """The reuse domain; ``default`` when omitted."""
        return self.spec.domain.name or "default"


# --- KVCachePool (cluster-scoped) -----------------------------------------------------------


class KVCachePoolSpec(OpenModel):
    backends: Annotated[list[str], Field(min_length=1, max_length=1)]


class KVCachePoolStatus(OpenModel):
    client_endpoint: Annotated[str | None, Field(max_length=259)] = None
    conditions: Annotated[list[Condition] | None, Field(json_schema_extra=list_map("type"))] = None
    phase: Phase | None = None


class KVCachePool(InputObject):
    """A shared KV-cache store and its master endpoint."""

    kind: Literal["KVCachePool"] = "KVCachePool"
    spec: KVCachePoolSpec
    status: KVCachePoolStatus = Field(default_factory=KVCachePoolStatus)

    def condition(self, type_: str) -> Condition | None:
        for cond in self.status.conditions or ():
            if cond.type == type_:
                return cond
        return None


# --- KVCacheBackend (cluster-scoped) --------------------------------------------------------


class Transport(OpenModel):
    protocol: BackendProtocol | None = None


class BackendTransport(OpenModel):
    """The backend-wide transport (default ``Auto``)."""

    protocol: BackendProtocol = "Auto"


class ManagedMember(OpenModel):
    transport: Transport | None = None


class ManagedLeader(OpenModel):
    multi_tenancy: bool | None = None


class ManagedConnection(OpenModel):
    leader: ManagedLeader | None = None
    members: list[ManagedMember] | None = None


class Connection(OpenModel):
    managed: ManagedConnection | None = None
    external: dict[str, Any] | None = None


class KVCacheBackendSpec(OpenModel):
    transport: BackendTransport = Field(default_factory=BackendTransport)
    connection: Connection | None = None


class KVCacheBackend(InputObject):
    """The store behind a pool: its transports and tenancy."""

    kind: Literal["KVCacheBackend"] = "KVCacheBackend"
    spec: KVCacheBackendSpec = Field(default_factory=KVCacheBackendSpec)


# --- ModelArtifact (namespaced) -------------------------------------------------------------


class ModelArtifact(InputObject):
    """Weights delivery; only the CRD ships while ``model.artifactRef`` is refused (D8)."""

    kind: Literal["ModelArtifact"] = "ModelArtifact"
    spec: dict[str, Any] = Field(default_factory=dict)
    status: dict[str, Any] = Field(default_factory=dict)
