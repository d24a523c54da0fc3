"""The registry of the project's kinds (group ``worker.gpustack.ai``, version ``v1``): each
kind's model, plural, scope and CRD presentation; and the Kueue kinds the project reads and
writes, at the one Kueue version it speaks.

Decoding, the CRDs, the API reference, the command line and both shells' API clients read
kinds here, so a kind's plural, scope or version is written once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Literal

from pydantic import BaseModel

from gpustack_render.api.artifact import ModelArtifact
from gpustack_render.api.common import GROUP, VERSION
from gpustack_render.api.inputs import (
    InputObject,
    InstanceType,
    KVCacheBackend,
    KVCachePool,
    KVCachePoolBinding,
)
from gpustack_render.api.modeldeployment import ModelDeployment
from gpustack_render.api.nodestore import NodeModelStore
from gpustack_render.api.scaler import ModelDeploymentScaler
from gpustack_render.api.storage import (
    CSIDriver,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
)

Schema = dict[str, Any]


@dataclass(frozen=True)
class KindInfo:
    """How one kind is served."""

    model: type[BaseModel]
    kind: str
    plural: str
    scope: Literal["Namespaced", "Cluster"]
    short_names: tuple[str, ...] = ()
    printer_columns: tuple[Schema, ...] = ()
    #: The project owns the kind (every field is its own, the base install ships its CRD); the
    #: input kinds are only read and keep the fields they do not model.
    owned: bool = False
    #: The ``scale`` subresource (``specReplicasPath`` …), for a kind autoscalers target.
    scale: Schema | None = None

    @property
    def namespaced(self) -> bool:
        return self.scope == "Namespaced"

    @property
    def api_version(self) -> str:
        return f"{GROUP}/{VERSION}"


_AGE: Schema = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}


def _column(name: str, json_path: str, description: str, *, type_: str = "string") -> Schema:
    """A printer column (``kubectl get``)."""
    return {"name": name, "type": type_, "description": description, "jsonPath": json_path}


KINDS: tuple[KindInfo, ...] = (
    KindInfo(
        ModelDeployment,
        "ModelDeployment",
        "modeldeployments",
        "Namespaced",
        ("md",),
        (
            {"name": "Engine", "type": "string", "jsonPath": ".spec.engine.name"},
            {
                "name": "Roles",
                "type": "string",
                "description": "Per role: ready of desired instances and the kind it serves.",
                "jsonPath": ".status.roleReadiness",
            },
            {
                "name": "Ready",
                "type": "string",
                "description": "The Ready condition (kstatus).",
                "jsonPath": '.status.conditions[?(@.type=="Ready")].status',
            },
            {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
            {"name": "Endpoint", "type": "string", "jsonPath": ".status.endpoint"},
            _AGE,
        ),
        owned=True,
    ),
    KindInfo(
        ModelDeploymentScaler,
        "ModelDeploymentScaler",
        "modeldeploymentscalers",
        "Namespaced",
        ("mdscaler",),
        (
            _column("Deployment", ".spec.modelDeployment", "The ModelDeployment scaled."),
            _column("Role", ".spec.role", "The External role scaled."),
            _column("Group", ".spec.scalingGroup", "The ratio group scaled (units)."),
            _column("Desired", ".spec.replicas", "The desired count.", type_="integer"),
            _column("Min", ".spec.minReplicas", "The fewest accepted.", type_="integer"),
            _column("Max", ".spec.maxReplicas", "The most accepted.", type_="integer"),
            _column("Ready", ".status.ready", "Ready replicas (units).", type_="integer"),
            _column("Admitted", ".status.admitted", "Replicas (units) admitted.", type_="integer"),
            _column(
                "Pending",
                ".status.quotaPending",
                "Replicas (units) waiting for quota.",
                type_="integer",
            ),
            _AGE,
        ),
        owned=True,
        scale={
            "specReplicasPath": ".spec.replicas",
            "statusReplicasPath": ".status.replicas",
            "labelSelectorPath": ".status.selector",
        },
    ),
    KindInfo(
        InstanceType,
        "InstanceType",
        "instancetypes",
        "Cluster",
        ("instype",),
        (
            _column("Entrance", ".status.entrance", "The Kueue queue of the type."),
            _column("Manufacturer", ".status.detail.manufacturer", "The accelerator's maker."),
            _column(
                "Acceleratable", ".spec.acceleratable", "Sized by accelerators.", type_="boolean"
            ),
            _AGE,
        ),
    ),
    KindInfo(
        KVCachePoolBinding,
        "KVCachePoolBinding",
        "kvcachepoolbindings",
        "Namespaced",
        ("kvcpb",),
        (
            _column("Pool", ".spec.poolRef.name", "The KVCachePool granted."),
            _column("Domain", ".spec.domain.name", "The reuse domain (empty: default)."),
            _column("Phase", ".status.phase", "The Binding's registration."),
            _AGE,
        ),
    ),
    KindInfo(
        KVCachePool,
        "KVCachePool",
        "kvcachepools",
        "Cluster",
        ("kvcp",),
        (
            _column("Backend", ".spec.backends[0]", "The KVCacheBackend."),
            _column("Endpoint", ".status.clientEndpoint", "The master's host:port."),
            _column("Phase", ".status.phase", "The pool's phase."),
            _AGE,
        ),
    ),
    KindInfo(
        KVCacheBackend,
        "KVCacheBackend",
        "kvcachebackends",
        "Cluster",
        ("kvcb",),
        (_column("Protocol", ".spec.transport.protocol", "The backend-wide transport."), _AGE),
    ),
    KindInfo(
        ModelArtifact,
        "ModelArtifact",
        "modelartifacts",
        "Namespaced",
        ("mart",),
        (
            _column("Revision", ".status.resolved.revision", "The resolved commit."),
            _column(
                "Size", ".status.resolved.sizeBytes", "Bytes in the manifest.", type_="integer"
            ),
            _column("Resolved", '.status.conditions[?(@.type=="Resolved")].status', "Resolved."),
            _column("Ready", ".status.nodes.ready", "Nodes holding the weights.", type_="integer"),
            _AGE,
        ),
        owned=True,
    ),
    KindInfo(
        NodeModelStore,
        "NodeModelStore",
        "nodemodelstores",
        "Cluster",
        ("nms",),
        (
            _column("Used", ".status.capacity.usedPercent", "Store use, percent.", type_="integer"),
            _column("Ready", '.status.conditions[?(@.type=="Ready")].status', "Plugin ready."),
            _AGE,
        ),
        owned=True,
    ),
)


#: Each kind's model, by kind name.
MODELS: Final[dict[str, type[BaseModel]]] = {info.kind: info.model for info in KINDS}
#: The kinds rules read through Lookups (every kind but ModelDeployment), by kind name.
INPUT_MODELS: Final[dict[str, type[InputObject]]] = {
    info.kind: info.model
    for info in KINDS
    if isinstance(info.model, type) and issubclass(info.model, InputObject)
}
#: The kinds this project owns (their CRDs are in the base install), by kind name.
OWNED_KINDS: Final[frozenset[str]] = frozenset(info.kind for info in KINDS if info.owned)
#: Each kind's registry entry, by kind name.
BY_KIND: Final[dict[str, KindInfo]] = {info.kind: info for info in KINDS}


#: The Kubernetes kinds weight delivery reads (D28), by (apiVersion, kind). They are core
#: kinds, not the project's: no CRD is generated for them and they are not in :data:`KINDS`;
#: the command line reads them from its input files, the shells from the cluster.
STORAGE_MODELS: Final[dict[tuple[str, str], type[InputObject]]] = {
    ("v1", "PersistentVolumeClaim"): PersistentVolumeClaim,
    ("v1", "PersistentVolume"): PersistentVolume,
    ("storage.k8s.io/v1", "StorageClass"): StorageClass,
    ("storage.k8s.io/v1", "CSIDriver"): CSIDriver,
}
#: The namespaced ones among them.
STORAGE_NAMESPACED: Final[frozenset[str]] = frozenset({"PersistentVolumeClaim"})


#: Kueue's API group.
KUEUE_GROUP: Final = "kueue.x-k8s.io"
#: The one Kueue version the project reads, watches and writes: Kueue v0.17.0 stores every kind
#: at v1beta2; v1beta1 is deprecated (every request at it draws a deprecation warning) and
#: dropped by later releases (docs/contract/kubernetes-notes.md §4).
KUEUE_VERSION: Final = "v1beta2"
KUEUE_API_VERSION: Final = f"{KUEUE_GROUP}/{KUEUE_VERSION}"


@dataclass(frozen=True)
class KueueKind:
    """One Kueue kind the project touches."""

    kind: str
    plural: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return KUEUE_API_VERSION


#: The Kueue kinds the project reads or writes, by kind name.
KUEUE_KINDS: Final[dict[str, KueueKind]] = {
    k.kind: k
    for k in (
        KueueKind("Workload", "workloads", namespaced=True),
        KueueKind("LocalQueue", "localqueues", namespaced=True),
        KueueKind("ClusterQueue", "clusterqueues", namespaced=False),
        KueueKind("AdmissionCheck", "admissionchecks", namespaced=False),
    )
}
