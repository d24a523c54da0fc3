"""The router's objects around its Pods (D26; docs/routers.md): its ServiceAccount, the Role and
RoleBinding granting exactly what discovery reads, the ConfigMap of its files, its Service, the
Deployment wrapping a Pod template, and the optional InferencePool.

Every object carries the router's labels (:func:`~gpustack_render.core.labels.router_labels`:
``app.kubernetes.io/name: model-deployment-router``, never the engines' value, and no Kueue
label: the router holds no accelerator) and the controller owner reference to the deployment
(none without a uid, D18).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from gpustack_render.core.labels import router_labels, router_selector

#: The API groups and versions of the router's kinds.
RBAC_API_VERSION: Final = "rbac.authorization.k8s.io/v1"
DEPLOYMENT_API_VERSION: Final = "apps/v1"
INFERENCE_POOL_API_VERSION: Final = "inference.networking.k8s.io/v1"
#: What the routers' Kubernetes discovery reads: the Pods of the deployment's namespace (the
#: PyPI routers list and watch; llm-d-router's picker also gets each; observed in the API
#: server's audit log, docs/decisions.md).
DISCOVERY_RULES: Final = (
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
)


def metadata(
    name: str, *, namespace: str, deployment: str, owner_references: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """The metadata every router object carries."""
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "labels": router_labels(deployment),
    }
    if owner_references:
        meta["ownerReferences"] = [dict(ref) for ref in owner_references]
    return meta


def service_account(meta: Mapping[str, Any]) -> dict[str, Any]:
    """The identity the router's discovery authenticates as."""
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": dict(meta)}


def role(meta: Mapping[str, Any]) -> dict[str, Any]:
    """Pods get, list and watch in the deployment's namespace: nothing more."""
    return {
        "apiVersion": RBAC_API_VERSION,
        "kind": "Role",
        "metadata": dict(meta),
        "rules": [dict(rule) for rule in DISCOVERY_RULES],
    }


def role_binding(meta: Mapping[str, Any], *, name: str, namespace: str) -> dict[str, Any]:
    """The Role granted to the router's ServiceAccount."""
    return {
        "apiVersion": RBAC_API_VERSION,
        "kind": "RoleBinding",
        "metadata": dict(meta),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
    }


def config_map(meta: Mapping[str, Any], data: Mapping[str, str]) -> dict[str, Any]:
    """The router's configuration files (llm-d-router only)."""
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": dict(meta), "data": dict(data)}


def service(
    meta: Mapping[str, Any], *, deployment: str, ports: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """``<md>-router``: ClusterIP over the router's Pods."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": dict(meta),
        "spec": {
            "type": "ClusterIP",
            "selector": router_selector(deployment),
            "ports": [dict(p) for p in ports],
        },
    }


def deployment_object(
    meta: Mapping[str, Any], *, deployment: str, replicas: int, template: Mapping[str, Any]
) -> dict[str, Any]:
    """``<md>-router``: ``spec.router.replicas`` Pods of ``template``."""
    return {
        "apiVersion": DEPLOYMENT_API_VERSION,
        "kind": "Deployment",
        "metadata": dict(meta),
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": router_selector(deployment)},
            "template": dict(template),
        },
    }


def inference_pool(
    meta: Mapping[str, Any],
    *,
    serving: Mapping[str, str],
    target_port: int,
    picker_service: str,
    picker_port: int,
) -> dict[str, Any]:
    """The deployment's serving Pods as an InferencePool whose endpoint picker is the router's
    (a Gateway API Inference Extension gateway asks it, as the router's own proxy does)."""
    return {
        "apiVersion": INFERENCE_POOL_API_VERSION,
        "kind": "InferencePool",
        "metadata": dict(meta),
        "spec": {
            "selector": {"matchLabels": dict(serving)},
            "targetPorts": [{"number": target_port}],
            "endpointPickerRef": {
                "kind": "Service",
                "name": picker_service,
                "port": {"number": picker_port},
                "failureMode": "FailClose",
            },
        },
    }
