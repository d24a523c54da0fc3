"""Every label and annotation key the renderer writes, and the values it computes for them.

Each key is declared once here, with who writes it and who reads it (docs/contract/render.md §4, §5,
the seed's "Pod labels and annotations" table, D4, D12, D16). Per-seat values (the group name, the
ordinal, the member index, the pod-spec-hash) are stamped onto a role's template by
``rendering/renderer.py``.
"""

from __future__ import annotations

from gpustack_render.core.vocabulary import RoleKind

# --- Labels --------------------------------------------------------------------------------

#: Written on every replica Pod and Service; a selector term ("model-deployment").
NAME = "app.kubernetes.io/name"
#: Written on every replica Pod and Service; a selector term (the deployment's name).
INSTANCE = "app.kubernetes.io/instance"
#: The role's name; a selector term, and what ``status.roles[]`` is attributed by.
COMPONENT = "app.kubernetes.io/component"
#: Written on every replica Pod; read by nobody in this project (informational).
PART_OF = "app.kubernetes.io/part-of"
#: Written on LocalQueues the renderer emits; several deployments share one (D16).
MANAGED_BY = "app.kubernetes.io/managed-by"
#: Resource note on Pods and Services (docs/contract/render.md §4, key inferred).
RESOURCE_TYPE = "resource.gpustack.ai/type"
#: Kueue reads it: the LocalQueue a replica's group is admitted through (InstanceType entrance).
QUEUE_NAME = "kueue.x-k8s.io/queue-name"
#: Kueue reads it: the replica's pod group (naming.group_name); one group per replica.
POD_GROUP_NAME = "kueue.x-k8s.io/pod-group-name"
#: Routers and users read it: the role's effective kind in lowercase (server/prefill/decode).
ROLE_KIND = "modeldeployment.gpustack.ai/role-kind"
#: The controller reads it: the replica's slot within its role (0..replicas-1).
POD_ORDINAL = "modeldeployment.gpustack.ai/pod-ordinal"
#: The controller, Services and the container (downward API) read it: the member index.
MEMBER_INDEX = "modeldeployment.gpustack.ai/member-index"

# --- Annotations ---------------------------------------------------------------------------

#: Resource note naming the role on Pods and role Services (docs/contract/render.md §5, key
#: inferred).
NOTE_ROLE = "note.gpustack.ai/role"
#: Kueue reads it: how many Pods the group waits for (the role's size).
POD_GROUP_TOTAL_COUNT = "kueue.x-k8s.io/pod-group-total-count"
#: Kueue reads it: the PodSet name; status joins Workloads to roles by it (the role's name).
ROLE_HASH = "kueue.x-k8s.io/role-hash"
#: Kueue reads it: a serving group never finishes, so its quota is not reclaimed.
POD_GROUP_SERVING = "kueue.x-k8s.io/pod-group-serving"
#: Kueue reads it: fit the replica's PodSet in one domain at this topology level.
PODSET_REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-required-topology"
#: Kueue reads it on a group of more than one Pod: the label holding each Pod's rank, which
#: Kueue's webhook copies into ``kueue.x-k8s.io/pod-group-pod-index`` so topology-aware placement
#: orders the ranks (the member index).
POD_GROUP_POD_INDEX_LABEL = "kueue.x-k8s.io/pod-group-pod-index-label"
#: Never written (per seed): it mis-composes a group the day an instance grows a member.
POD_GROUP_FAST_ADMISSION = "kueue.x-k8s.io/pod-group-fast-admission"
#: The vLLM-family store-client document (docs/contract/render.md §17.1). Written by the renderer
#: and by Pod injection; the engine reads it through a downwardAPI projection; the injection UPDATE
#: guard freezes it on a live Pod and refuses it at CREATE.
KV_CLIENT_CONFIG = "kvcache.gpustack.ai/client-config"
#: Pod injection's opt-in label, set by a Pod's author (``"true"`` opts in; the webhook's
#: objectSelector reads it, and it is frozen on a live Pod); generated Pods never carry it
#: (docs/contract/render.md §2).
KV_INJECT = "kvcache.gpustack.ai/inject"
#: Routers read it on an SGLang direct-leg prefill Pod: its bootstrap port.
SGLANG_BOOTSTRAP_PORT = "sglang.ai/bootstrap-port"
#: vllm-router reads it on a prefill Pod it discovers: the prefiller's bootstrap port (the name
#: is fixed in the router; written on a native-vLLM direct-leg prefill Pod behind vllm-router).
VLLM_BOOTSTRAP_PORT = "vllm.ai/bootstrap-port"
#: Prometheus scrape configuration (managed roles only).
PROMETHEUS_SCRAPE = "prometheus.io/scrape"
PROMETHEUS_PATH = "prometheus.io/path"
PROMETHEUS_PORT = "prometheus.io/port"
PROMETHEUS_SCHEME = "prometheus.io/scheme"
#: The device plugin reads these on a sliced or partitioned request (D12).
SLICED_MEMORY_PERCENTAGE = "devices.gpustack.ai/sliced-memory-percentage"
SLICED_CORES_PERCENTAGE = "devices.gpustack.ai/sliced-cores-percentage"
PARTITIONED_PROFILE = "devices.gpustack.ai/partitioned-profile"
#: The controller reads it: SHA-256 of the seat's inputs (D4, D10; hashing.py).
POD_SPEC_HASH = "modeldeployment.gpustack.ai/pod-spec-hash"
#: The controller reads it: the rendering baseline that built the Pod (D4; hashing.py).
RENDER_VERSION = "modeldeployment.gpustack.ai/render-version"
#: On the router's Pod template: a digest of the router's configuration files, so an edit of
#: them rolls the router's Pods (which read their files once at start).
ROUTER_CONFIG_HASH = "modeldeployment.gpustack.ai/router-config-hash"
#: Users write it on the ModelDeployment: the per-deployment render-version floor (D4).
MIN_RENDER_VERSION = "modeldeployment.gpustack.ai/min-render-version"

# --- Values --------------------------------------------------------------------------------

#: Value of ``app.kubernetes.io/name`` on everything a deployment renders.
NAME_VALUE = "model-deployment"
#: Value of ``app.kubernetes.io/part-of``.
PART_OF_VALUE = "gpustack-operator-worker"
#: Value of ``resource.gpustack.ai/type``.
RESOURCE_TYPE_VALUE = "modeldeployments"
#: Value of ``app.kubernetes.io/managed-by`` on LocalQueues (D16).
MANAGED_BY_VALUE = "gpustack-controller"
#: Value of ``app.kubernetes.io/name`` on the router's objects and Pods (D26): distinct from the
#: engines' so no engine selector, no router discovery and no engine watch ever matches them.
ROUTER_NAME_VALUE = "model-deployment-router"
#: Value of ``app.kubernetes.io/component`` on the router's objects and Pods.
ROUTER_COMPONENT_VALUE = "router"


def deployment_selector(deployment: str) -> dict[str, str]:
    """The labels every object of one deployment carries: name and instance."""
    return {NAME: NAME_VALUE, INSTANCE: deployment}


def role_selector(deployment: str, role: str) -> dict[str, str]:
    """The role's selector labels: name, instance and component (docs/contract/render.md §4)."""
    return {NAME: NAME_VALUE, INSTANCE: deployment, COMPONENT: role}


def serving_selector(deployment: str, *, master_only: bool = False) -> dict[str, str]:
    """The labels of the deployment's serving Pods, the ones a router sends requests to: every
    Pod at size 1 and the leader (member ``0``) of a larger instance, never a worker member;
    with ``master_only`` (an Elastic EP deployment) only ordinal 0, the master, the one member
    serving HTTP."""
    out = {NAME: NAME_VALUE, INSTANCE: deployment, MEMBER_INDEX: "0"}
    if master_only:
        out[POD_ORDINAL] = "0"
    return out


def router_selector(deployment: str) -> dict[str, str]:
    """The labels selecting the router's own Pods (its Deployment's and Service's selector)."""
    return {NAME: ROUTER_NAME_VALUE, INSTANCE: deployment}


def router_labels(deployment: str) -> dict[str, str]:
    """Every label of the router's objects and Pods: no Kueue label (the router holds no
    accelerator)."""
    return {
        **router_selector(deployment),
        COMPONENT: ROUTER_COMPONENT_VALUE,
        PART_OF: PART_OF_VALUE,
        RESOURCE_TYPE: RESOURCE_TYPE_VALUE,
    }


def pod_labels(
    deployment: str,
    role: str,
    *,
    kind: RoleKind,
    queue: str,
    group: str,
    ordinal: int,
    member: int,
) -> dict[str, str]:
    """Every label of one replica Pod, in the order docs/contract/render.md §4 lists them."""
    return {
        NAME: NAME_VALUE,
        INSTANCE: deployment,
        COMPONENT: role,
        PART_OF: PART_OF_VALUE,
        RESOURCE_TYPE: RESOURCE_TYPE_VALUE,
        QUEUE_NAME: queue,
        ROLE_KIND: kind.value,  # the lowercase spelling written on Pods (D1)
        POD_GROUP_NAME: group,
        POD_ORDINAL: str(ordinal),
        MEMBER_INDEX: str(member),
    }


def group_annotations(role: str, *, size: int, required_topology: str | None) -> dict[str, str]:
    """The Kueue group annotations of one replica Pod (docs/contract/render.md §5): the role note,
    the declared total, the PodSet name, serving, the rank label of a group of more than one
    Pod, and the required topology when non-empty. ``pod-group-fast-admission`` is never among
    them (per seed)."""
    out = {
        NOTE_ROLE: role,
        POD_GROUP_TOTAL_COUNT: str(size),
        ROLE_HASH: role,
        POD_GROUP_SERVING: "true",
    }
    if size > 1:
        out[POD_GROUP_POD_INDEX_LABEL] = MEMBER_INDEX
    if required_topology:
        out[PODSET_REQUIRED_TOPOLOGY] = required_topology
    return out


def prometheus_annotations(*, port: int, https: bool) -> dict[str, str]:
    """Scrape annotations of a managed role's Pod: the engine's own listener and scheme."""
    return {
        PROMETHEUS_SCRAPE: "true",
        PROMETHEUS_PATH: "/metrics",
        PROMETHEUS_PORT: str(port),
        PROMETHEUS_SCHEME: "https" if https else "http",
    }


def member_index_field_path() -> str:
    """The downward-API path a container reads its own member index from."""
    return f"metadata.labels['{MEMBER_INDEX}']"
