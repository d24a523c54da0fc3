"""REST coordinates of every kind the project reads or writes, and the one REST path builder.

A path is ``/api/<version>`` (the core group) or ``/apis/<group>/<version>``, then
``/namespaces/<namespace>`` for a namespaced kind, the plural, the name and a subresource. A
namespace and a name are each one path segment, percent-encoded whole (``/`` included), so no
value can reach another path. The project's kinds take their plural and scope from
:data:`~gpustack_render.schema.kinds.BY_KIND`, Kueue's from
:data:`~gpustack_render.schema.kinds.KUEUE_KINDS`; the Kubernetes kinds the shells and the
command line's live mode touch are listed here, once.

Pure: the client (``gpustack_kube``) and ``gpustack_render.cli.live`` send these paths.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final
from urllib.parse import quote

from gpustack_render.api.common import GROUP, VERSION
from gpustack_render.schema.kinds import BY_KIND, KUEUE_KINDS


@dataclass(frozen=True, slots=True)
class Resource:
    """REST coordinates of a kind: ``group`` is ``""`` for the core API."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None, sub: str = "") -> str:
        """The object's path (``name``), else its collection's: in ``namespace`` for a
        namespaced kind (across every namespace without one); ``sub`` names a subresource."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{_segment(namespace)}"
        base += f"/{self.plural}"
        if name:
            base += f"/{_segment(name)}"
        if sub:
            base += f"/{sub}"
        return base


def _segment(value: str) -> str:
    return quote(value, safe="")


def project_resource(kind: str) -> Resource:
    """The coordinates of a worker.gpustack.ai kind (a key of ``BY_KIND``)."""
    info = BY_KIND[kind]
    return Resource(GROUP, VERSION, info.plural, info.kind, namespaced=info.namespaced)


def kueue_resource(kind: str) -> Resource:
    """The coordinates of a Kueue kind (a key of ``KUEUE_KINDS``), at the one Kueue version the
    project speaks."""
    info = KUEUE_KINDS[kind]
    group, version = info.api_version.split("/")
    return Resource(group, version, info.plural, info.kind, namespaced=info.namespaced)


#: Each worker.gpustack.ai kind's coordinates, by kind name.
PROJECT_RESOURCES: Final[dict[str, Resource]] = {kind: project_resource(kind) for kind in BY_KIND}

MODEL_DEPLOYMENTS: Final = PROJECT_RESOURCES["ModelDeployment"]
SCALERS: Final = PROJECT_RESOURCES["ModelDeploymentScaler"]
BINDINGS: Final = PROJECT_RESOURCES["KVCachePoolBinding"]
POOLS: Final = PROJECT_RESOURCES["KVCachePool"]
BACKENDS: Final = PROJECT_RESOURCES["KVCacheBackend"]
INSTANCE_TYPES: Final = PROJECT_RESOURCES["InstanceType"]
MODEL_ARTIFACTS: Final = PROJECT_RESOURCES["ModelArtifact"]
NODE_MODEL_STORES: Final = PROJECT_RESOURCES["NodeModelStore"]

#: Kueue kinds are read, watched and written at Kueue's storage version only.
WORKLOADS: Final = kueue_resource("Workload")
LOCAL_QUEUES: Final = kueue_resource("LocalQueue")
CLUSTER_QUEUES: Final = kueue_resource("ClusterQueue")
ADMISSION_CHECKS: Final = kueue_resource("AdmissionCheck")

PODS: Final = Resource("", "v1", "pods", "Pod")
SERVICES: Final = Resource("", "v1", "services", "Service")
EVENTS: Final = Resource("", "v1", "events", "Event")
CONFIGMAPS: Final = Resource("", "v1", "configmaps", "ConfigMap")
SECRETS: Final = Resource("", "v1", "secrets", "Secret")
NODES: Final = Resource("", "v1", "nodes", "Node", namespaced=False)
#: The storage kinds weight delivery reads (D28).
PERSISTENT_VOLUME_CLAIMS: Final = Resource(
    "", "v1", "persistentvolumeclaims", "PersistentVolumeClaim"
)
PERSISTENT_VOLUMES: Final = Resource(
    "", "v1", "persistentvolumes", "PersistentVolume", namespaced=False
)
STORAGE_CLASSES: Final = Resource(
    "storage.k8s.io", "v1", "storageclasses", "StorageClass", namespaced=False
)
CSI_DRIVERS: Final = Resource("storage.k8s.io", "v1", "csidrivers", "CSIDriver", namespaced=False)
#: Where each kind a render reads lives, by kind name: the project's kinds and the storage kinds
#: weight delivery reads (the controller's and live ``explain``'s reads of the input graph).
READ_RESOURCES: Final[dict[str, Resource]] = {
    **PROJECT_RESOURCES,
    **{
        r.kind: r
        for r in (PERSISTENT_VOLUME_CLAIMS, PERSISTENT_VOLUMES, STORAGE_CLASSES, CSI_DRIVERS)
    },
}
LEASES: Final = Resource("coordination.k8s.io", "v1", "leases", "Lease")
MUTATING_WEBHOOK_CONFIGURATIONS: Final = Resource(
    "admissionregistration.k8s.io",
    "v1",
    "mutatingwebhookconfigurations",
    "MutatingWebhookConfiguration",
    namespaced=False,
)
VALIDATING_WEBHOOK_CONFIGURATIONS: Final = Resource(
    "admissionregistration.k8s.io",
    "v1",
    "validatingwebhookconfigurations",
    "ValidatingWebhookConfiguration",
    namespaced=False,
)

#: The router's kinds (D26; ``rendering/router/``), by kind name.
DEPLOYMENTS: Final = Resource("apps", "v1", "deployments", "Deployment")
SERVICE_ACCOUNTS: Final = Resource("", "v1", "serviceaccounts", "ServiceAccount")
ROLES: Final = Resource("rbac.authorization.k8s.io", "v1", "roles", "Role")
ROLE_BINDINGS: Final = Resource("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding")
INFERENCE_POOLS: Final = Resource(
    "inference.networking.k8s.io", "v1", "inferencepools", "InferencePool"
)
ROUTER_RESOURCES: Final[dict[str, Resource]] = {
    r.kind: r
    for r in (
        SERVICE_ACCOUNTS,
        ROLES,
        ROLE_BINDINGS,
        CONFIGMAPS,
        SERVICES,
        DEPLOYMENTS,
        INFERENCE_POOLS,
    )
}
