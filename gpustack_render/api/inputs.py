"""The input kinds this project reads but does not own (``docs/contract/api-notes.md`` §11).

Only the fields the library reads are modelled; every other field is kept as given, and the
shipped CRDs preserve them too (D1).
"""

# Annotations are objects, not strings: see the note in common.py.

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
    """The resources of one unit of the type."""

    cpu: Annotated[str | None, Field(description='CPU cores per unit, e.g. "16".')] = None
    ram: Annotated[str | None, Field(description='Memory per unit, e.g. "64Gi".')] = None
    ephemeral_storage: Annotated[str | None, Field(description="Ephemeral storage per unit.")] = (
        None
    )


class InstanceTypeSpec(OpenModel):
    """The shape of the type's nodes."""

    acceleratable: Annotated[
        bool,
        Field(
            description="Pods are sized by accelerator cards, slices or partitions rather than "
            "by one unit; defaults roles[].resources.accelerator to 1."
        ),
    ] = False
    unit_resources: Annotated[
        UnitResources | None, Field(description="CPU, memory and storage per unit.")
    ] = None
    local_storage: Annotated[
        str | None, Field(description='Local storage of a node, e.g. "512Gi"; caps the default.')
    ] = None


class LogicalSlicing(OpenModel):
    """Logical slicing of a card."""

    count: Annotated[Int32, Field(description="Slices per card; above 0: sliceable.")] = 0


class PartitionProfile(OpenModel):
    """One partition profile a card offers."""

    name: Annotated[str, Field(description="The profile, e.g. 3g.40gb.")]
    memory_mi_b: Annotated[
        int | None, Field(alias="memoryMiB", description="Memory of one partition, MiB.")
    ] = None
    count: Annotated[Int32 | None, Field(description="Partitions of this profile per card.")] = None


class PhysicalSlicing(OpenModel):
    """Physical partitioning of a card."""

    profiles: Annotated[
        list[PartitionProfile] | None, Field(description="The partition profiles offered.")
    ] = None


class SlicedDetail(OpenModel):
    """How a card can be shared."""

    logical: Annotated[LogicalSlicing | None, Field(description="Logical slicing.")] = None
    physical: Annotated[
        PhysicalSlicing | None, Field(description="Physical partitioning and its profiles.")
    ] = None


class InstanceTypeDetail(OpenModel):
    """The accelerator of the type, as computed by its operator."""

    manufacturer: Annotated[
        str | None,
        Field(
            description="nvidia, amd, ascend, cambricon, hygon, iluvatar, metax, mthreads or "
            "thead: the accelerator resource key; empty: not computed yet."
        ),
    ] = None
    memory: Annotated[str | None, Field(description='Card memory, e.g. "80Gi".')] = None
    sliced_detail: Annotated[
        SlicedDetail | None, Field(description="Slicing and partitioning on offer.")
    ] = None
    accelerator_group: Annotated[
        str | None, Field(description="The group a Prefill/Decode pair shares slices within.")
    ] = None


class AcceleratorCapacity(OpenModel):
    """The accelerators behind the type."""

    capacity: Annotated[
        int | None, Field(description="Whole accelerators across the type's pool.")
    ] = None


class InstanceTypeStatus(OpenModel):
    """What the type's operator computed."""

    entrance: Annotated[
        str | None,
        Field(
            description="The Kueue queue of the type (gpustack-fnv64-<16 hex>): the LocalQueue "
            "and ClusterQueue name; empty: the type cannot be rendered yet."
        ),
    ] = None
    detail: Annotated[InstanceTypeDetail | None, Field(description="The accelerator detail.")] = (
        None
    )
    accelerator: Annotated[
        AcceleratorCapacity | None, Field(description="The accelerator capacity.")
    ] = None


class InstanceType(InputObject):
    """A node shape: per-unit resources, accelerator detail and its Kueue entrance."""

    kind: Literal["InstanceType"] = "InstanceType"
    spec: Annotated[
        InstanceTypeSpec, Field(default_factory=InstanceTypeSpec, description="The node shape.")
    ]
    status: Annotated[
        InstanceTypeStatus,
        Field(
            default_factory=InstanceTypeStatus,
            description="The entrance and accelerator detail the type's operator computed.",
        ),
    ]


# --- KVCachePoolBinding (namespaced) --------------------------------------------------------


#: CRD-only rules of the Binding's identity fields (the API server enforces them on every write;
#: the library reads stored objects as they are, and refuses a bad domain itself,
#: ``inject.domain-annotation``).
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
    """The reuse domain of the namespace's cache blocks."""

    name: Annotated[
        str | None,
        Field(
            max_length=63,
            description="The reuse domain (the store's tenant); default when omitted.",
            json_schema_extra={
                "pattern": DNS1123_LABEL_PATTERN,
                **immutable("spec.domain.name"),
            },
        ),
    ] = None
    block_size: Annotated[Int32, Field(description="Tokens per cache block.")]
    dtype: Annotated[
        str,
        Field(max_length=32, description="The KV-cache dtype, as the engine spells it."),
    ]


class PoolReference(OpenModel):
    """A cluster-scoped KVCachePool."""

    name: Annotated[
        str,
        Field(
            description="The KVCachePool's name.",
            json_schema_extra={
                "maxLength": 253,
                "pattern": DNS1123_SUBDOMAIN_PATTERN,
                **immutable("spec.poolRef.name"),
            },
        ),
    ]


class KVCachePoolBindingSpec(OpenModel):
    """The grant: which pool, in which domain."""

    pool_ref: Annotated[PoolReference, Field(description="The pool this namespace may use.")]
    domain: Annotated[
        BindingDomain,
        # A transition rule on the name alone skips adding or removing it: the domain holds.
        Field(
            description="The domain, block size and dtype.",
            json_schema_extra={
                "x-kubernetes-validations": [
                    {
                        "rule": "has(self.name) == has(oldSelf.name)",
                        "message": "spec.domain.name is immutable",
                    }
                ]
            },
        ),
    ]
    quota_ceiling: Annotated[
        int | str | None, Field(description="The namespace's quota in the pool; not read.")
    ] = None


class UsedBy(OpenModel):
    """One object holding a claim on the Binding."""

    kind: Annotated[str, Field(description="The claimant's kind (ModelDeployment).")]
    namespace: Annotated[
        str, Field(description="The claimant's namespace; empty: the Binding's own.")
    ] = ""
    name: Annotated[str, Field(description="The claimant's name.")]


class KVCachePoolBindingStatus(OpenModel):
    """The Binding's registration, as its operator reports it, and who uses it."""

    phase: Annotated[
        Phase | None,
        Field(description="Provisioning, Ready, Degraded, Error or Deleting (DomainRegistered)."),
    ] = None
    conditions: Annotated[
        list[Condition] | None,
        Field(json_schema_extra=list_map("type"), description="QuotaGranted is read."),
    ] = None
    used_by: Annotated[
        list[UsedBy] | None,
        Field(
            json_schema_extra=list_map("kind", "namespace", "name"),
            description="The deployments using the Binding (written by the controller).",
        ),
    ] = None


class KVCachePoolBinding(InputObject):
    """A namespace's grant to a pool, carrying the reuse domain (tenant), block size and dtype."""

    kind: Literal["KVCachePoolBinding"] = "KVCachePoolBinding"
    spec: Annotated[KVCachePoolBindingSpec, Field(description="The grant.")]
    status: Annotated[
        KVCachePoolBindingStatus,
        Field(
            default_factory=KVCachePoolBindingStatus,
            description="Its registration and its users.",
        ),
    ]

    @property
    def domain_name(self) -> str:
        """The reuse domain; ``default`` when omitted."""
        return self.spec.domain.name or "default"


# --- KVCachePool (cluster-scoped) -----------------------------------------------------------


class KVCachePoolSpec(OpenModel):
    """The pool's store."""

    backends: Annotated[
        list[str],
        Field(min_length=1, max_length=1, description="The KVCacheBackend, exactly one."),
    ]


class KVCachePoolStatus(OpenModel):
    """The pool's master, as its operator reports it."""

    client_endpoint: Annotated[
        str | None,
        Field(
            max_length=259,
            description="The master's host:port written into every client; empty: no connector.",
        ),
    ] = None
    conditions: Annotated[
        list[Condition] | None,
        Field(
            json_schema_extra=list_map("type"),
            description="QuotaLedgerAvailable is read (the store's tenancy).",
        ),
    ] = None
    phase: Annotated[
        Phase | None, Field(description="Provisioning, Ready, Degraded, Error or Deleting.")
    ] = None


class KVCachePool(InputObject):
    """A shared KV-cache store and its master endpoint."""

    kind: Literal["KVCachePool"] = "KVCachePool"
    spec: Annotated[KVCachePoolSpec, Field(description="The pool's store.")]
    status: Annotated[
        KVCachePoolStatus,
        Field(default_factory=KVCachePoolStatus, description="The pool's master endpoint."),
    ]

    def condition(self, type_: str) -> Condition | None:
        for cond in self.status.conditions or ():
            if cond.type == type_:
                return cond
        return None


# --- KVCacheBackend (cluster-scoped) --------------------------------------------------------


class Transport(OpenModel):
    """A member group's transport."""

    protocol: Annotated[
        BackendProtocol | None,
        Field(description="Overrides the backend-wide protocol; absent: the backend's."),
    ] = None


class BackendTransport(OpenModel):
    """The backend-wide transport (default ``Auto``)."""

    protocol: Annotated[
        BackendProtocol, Field(description="Auto, TCP, RDMA, EFA, CANN, ROCM, MUSA or MACA.")
    ] = "Auto"


class ManagedMember(OpenModel):
    """One member group of a managed store."""

    transport: Annotated[Transport | None, Field(description="The group's transport.")] = None


class ManagedLeader(OpenModel):
    """The managed store's leader."""

    multi_tenancy: Annotated[
        bool | None,
        Field(description="Whether the store separates tenants, when the pool does not say."),
    ] = None


class ManagedConnection(OpenModel):
    """A store the backend's operator runs."""

    leader: Annotated[ManagedLeader | None, Field(description="The store's leader.")] = None
    members: Annotated[
        list[ManagedMember] | None,
        Field(description="Member groups, in order: one transport offer each."),
    ] = None


class Connection(OpenModel):
    """How the store is reached."""

    managed: Annotated[
        ManagedConnection | None, Field(description="A store the operator runs.")
    ] = None
    external: Annotated[dict[str, Any] | None, Field(description="Present: an external store.")] = (
        None
    )


class KVCacheBackendSpec(OpenModel):
    """The store's transports and connection."""

    transport: Annotated[
        BackendTransport,
        Field(default_factory=BackendTransport, description="The backend-wide transport."),
    ]
    connection: Annotated[
        Connection | None, Field(description="Managed member groups or an external store.")
    ] = None


class KVCacheBackend(InputObject):
    """The store behind a pool: its transports and tenancy."""

    kind: Literal["KVCacheBackend"] = "KVCacheBackend"
    spec: Annotated[
        KVCacheBackendSpec,
        Field(default_factory=KVCacheBackendSpec, description="Its transports and connection."),
    ]
