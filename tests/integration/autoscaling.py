"""The simulated cluster's autoscaling option: the real HPA reading emulated Pod metrics.

``Cluster(binaries, autoscaling=True)`` (or an :class:`Autoscaling` with other periods) adds to
the cluster of :mod:`.cluster`:

* the aggregation layer on kube-apiserver (:meth:`controlplane.ControlPlane._aggregation_args`);
* KWOK emulating the kubelet's resource metrics: its own ``Metric`` serving
  ``/metrics/nodes/{nodeName}/metrics/resource`` (every Node carries the
  ``metrics.k8s.io/resource-metrics-path`` annotation metrics-server follows), over TLS with a
  certificate from the cluster's CA, each Node's InternalIP being 127.0.0.1 (KWOK's
  ``--node-ip``, also the Pods' hostIP) and its kubelet port KWOK's server port; a Pod's
  emulated usage comes from a ``ResourceUsage`` named after it (:func:`resource_usage`,
  :meth:`cluster.Cluster.set_pod_usage`), else from the default ``ClusterResourceUsage``
  (KWOK's ``usage-from-annotation``: the Pod annotations ``kwok.x-k8s.io/usage-cpu`` and
  ``kwok.x-k8s.io/usage-memory``, 1m and 1Mi without them);
* metrics-server, built from its Go module, as a local process behind the APIService
  ``v1beta1.metrics.k8s.io`` (an ExternalName Service naming 127.0.0.1);
* in kube-controller-manager the HPA controller with short periods, and the Deployment and
  ReplicaSet controllers.

Only the standard library is used here, like the rest of the harness.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Where the APIService sends ``metrics.k8s.io``: an ExternalName Service of this name.
METRICS_SERVER_NAMESPACE = "kube-system"
METRICS_SERVER_NAME = "metrics-server"
METRICS_API_SERVICE = "v1beta1.metrics.k8s.io"
#: The Node annotation metrics-server reads for the path of a Node's resource metrics.
RESOURCE_METRICS_PATH_ANNOTATION = "metrics.k8s.io/resource-metrics-path"
#: The Nodes' InternalIP with the option on: where KWOK's server, their emulated kubelet,
#: listens (without the option the Nodes' address, 10.0.0.2, is never dialled).
KUBELET_ADDRESS = "127.0.0.1"
#: The controllers the option adds to kube-controller-manager's list. The HPA controller's
#: canonical name; ``horizontalpodautoscaling`` is its alias.
CONTROLLERS = (
    "horizontal-pod-autoscaler-controller",
    "deployment-controller",
    "replicaset-controller",
)
#: The KWOK kinds served from the cluster (CRDs), so tests can change usage while it runs.
KWOK_USAGE_KINDS = ("ResourceUsage", "ClusterResourceUsage")


@dataclass(frozen=True)
class Autoscaling:
    """Periods of the autoscaling option (Go durations). The defaults keep a test short: the HPA
    looks every ``hpa_sync_period``, scales down once its recommendations stayed low for
    ``downscale_stabilization``, and metrics-server scrapes every ``metric_resolution`` (10s
    is metrics-server's minimum)."""

    hpa_sync_period: str = "5s"
    downscale_stabilization: str = "15s"
    metric_resolution: str = "10s"
    kubelet_request_timeout: str = "5s"

    def controller_manager_args(self) -> list[str]:
        return [
            f"--horizontal-pod-autoscaler-sync-period={self.hpa_sync_period}",
            f"--horizontal-pod-autoscaler-downscale-stabilization={self.downscale_stabilization}",
        ]


def node_metrics_path(node_name: str) -> str:
    """The path of KWOK's emulated resource metrics of one Node (its ``Metric``'s path)."""
    return f"/metrics/nodes/{node_name}/metrics/resource"


def with_kubelet_metrics(node: dict[str, Any]) -> dict[str, Any]:
    """A fake Node manifest with the annotation that points metrics-server at the Node's own
    path on KWOK's server."""
    name = str(node["metadata"]["name"])
    node["metadata"]["annotations"][RESOURCE_METRICS_PATH_ANNOTATION] = node_metrics_path(name)
    return node


def kwok_args(*, kwok_port: int, cert: Path, key: Path) -> list[str]:
    """KWOK's extra flags: its server over TLS, the Nodes' kubelet port, the usage CRDs, and
    errors only in its log."""
    return [
        f"--tls-cert-file={cert}",
        f"--tls-private-key-file={key}",
        f"--node-port={kwok_port}",
        f"--enable-crds={','.join(KWOK_USAGE_KINDS)}",
        # Every scrape of a Node without Pods logs five "pods not found" warnings.
        "--v=ERROR",
    ]


def metrics_server_argv(
    binary: Path,
    *,
    port: int,
    kubeconfig: Path,
    cert: Path,
    key: Path,
    kubelet_ca: Path,
    options: Autoscaling,
) -> list[str]:
    """metrics-server as a local process: serving on 127.0.0.1:``port`` with a certificate the
    APIService's ``caBundle`` verifies; scraping each Node at its InternalIP and the kubelet
    port of its status (KWOK's server), verifying KWOK's certificate with the cluster's CA."""
    return [
        str(binary),
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        f"--tls-cert-file={cert}",
        f"--tls-private-key-file={key}",
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--kubelet-preferred-address-types=InternalIP",
        "--kubelet-use-node-status-port",
        f"--kubelet-certificate-authority={kubelet_ca}",
        f"--metric-resolution={options.metric_resolution}",
        # It must stay under 90% of the resolution (the default, 10s, refuses a 10s resolution).
        f"--kubelet-request-timeout={options.kubelet_request_timeout}",
    ]


def metrics_api_objects(port: int, ca_pem: bytes) -> list[dict[str, Any]]:
    """The Service and APIService that route ``metrics.k8s.io`` to metrics-server on loopback.

    An APIService names a Service; without endpoint routing the API server resolves an
    ExternalName Service to ``externalName:port`` (the APIService's port) and verifies the
    server as ``<service>.<namespace>.svc`` against ``caBundle``.
    """
    return [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": METRICS_SERVER_NAME, "namespace": METRICS_SERVER_NAMESPACE},
            "spec": {"type": "ExternalName", "externalName": KUBELET_ADDRESS},
        },
        {
            "apiVersion": "apiregistration.k8s.io/v1",
            "kind": "APIService",
            "metadata": {"name": METRICS_API_SERVICE},
            "spec": {
                "group": "metrics.k8s.io",
                "version": "v1beta1",
                "service": {
                    "name": METRICS_SERVER_NAME,
                    "namespace": METRICS_SERVER_NAMESPACE,
                    "port": port,
                },
                "caBundle": base64.b64encode(ca_pem).decode("ascii"),
                "groupPriorityMinimum": 100,
                "versionPriority": 100,
            },
        },
    ]


def metrics_server_hosts() -> tuple[str, ...]:
    """The names metrics-server's serving certificate covers (the API server dials the
    Service's DNS name as TLS server name)."""
    return (
        KUBELET_ADDRESS,
        "localhost",
        f"{METRICS_SERVER_NAME}.{METRICS_SERVER_NAMESPACE}.svc",
    )


def resource_usage(
    namespace: str, pod: str, *, cpu: str, memory: str, pod_uid: str | None = None
) -> dict[str, Any]:
    """A KWOK ``ResourceUsage`` giving every container of the Pod ``pod`` this usage (it wins
    over any ClusterResourceUsage). Both resources are set: metrics-server drops a Pod whose
    CPU or memory reads zero. With ``pod_uid`` the Pod owns it, so it goes with the Pod."""
    metadata: dict[str, Any] = {"name": pod, "namespace": namespace}
    if pod_uid:
        metadata["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Pod", "name": pod, "uid": pod_uid}
        ]
    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "ResourceUsage",
        "metadata": metadata,
        "spec": {"usages": [{"usage": {"cpu": {"value": cpu}, "memory": {"value": memory}}}]},
    }


__all__ = [
    "CONTROLLERS",
    "METRICS_API_SERVICE",
    "Autoscaling",
    "metrics_api_objects",
    "metrics_server_argv",
    "resource_usage",
    "with_kubelet_metrics",
]


def cpu_hpa(
    namespace: str,
    name: str,
    target: dict[str, str],
    *,
    max_replicas: int,
    utilization: int,
    min_replicas: int = 1,
) -> dict[str, Any]:
    """An ``autoscaling/v2`` HorizontalPodAutoscaler on the average CPU utilization (percent of
    the Pods' requests) of ``target`` (``apiVersion``, ``kind``, ``name``)."""
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "scaleTargetRef": target,
            "minReplicas": min_replicas,
            "maxReplicas": max_replicas,
            "metrics": [
                {
                    "type": "Resource",
                    "resource": {
                        "name": "cpu",
                        "target": {"type": "Utilization", "averageUtilization": utilization},
                    },
                }
            ],
        },
    }
