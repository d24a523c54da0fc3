"""A simulated GPU cluster on loopback: the real control plane, scheduler, garbage collector,
Kueue and KWOK, with fake GPU Nodes.

:class:`Cluster` grows :class:`controlplane.ControlPlane` (etcd + kube-apiserver) into a cluster
whose components are the released code, built from pinned Go modules by
``hack/envtest/build.sh``:

* ``kube-controller-manager`` runs the garbage collector, the namespace, EndpointSlice, node
  lifecycle, taint eviction, Pod GC and disruption controllers, and the PV binder with the
  claim and volume protection controllers (no cloud);
* ``kube-scheduler`` binds Pods to Nodes;
* ``kwok`` keeps the fake Nodes Ready (Lease heartbeats) and plays the Pod lifecycle with its own
  "fast" Stages: a bound Pod turns Running and Ready, a deleted Pod goes once its finalizers are
  gone. Nothing in the tests writes Pod status;
* ``kueue`` (the manager) with the ``pod`` integration listed explicitly, its webhooks and CRD
  conversion served on loopback with a certificate from the cluster's CA (its internal
  certificate management is off), leader election off; ``waitForPodsReady`` is selectable.

With ``autoscaling=True`` (:mod:`.autoscaling`, off by default) the API server gains the
aggregation layer, KWOK emulates the kubelet's resource metrics, metrics-server serves
``metrics.k8s.io`` and kube-controller-manager runs the HPA, Deployment and ReplicaSet
controllers. ``deployments=True`` runs only the last two (a router's Deployment gets Pods). The
InferencePool CRD of the Gateway API Inference Extension is always installed (a router may
render a pool). A :class:`FakeNode` with a loopback ``pod_cidr`` gives its Pods loopback IPs
that a local process can dial.

Everything runs in a private temporary directory and stops with :meth:`Cluster.stop` (or when
the owning process dies). The module is synchronous and needs only the standard library plus
``cryptography`` and ``ruamel.yaml``, so the pytest fixtures and ``hack/cluster.py`` (behind
``make cluster``) share it.

Kueue v0.17.0 reads its metrics serving certificate from the fixed path
``/etc/kueue/metrics/certs`` whenever its internal certificate management is off
(``cmd/kueue/main.go``); the harness writes a self-signed pair there when none is present (the
metrics endpoint itself is disabled, so the pair only has to load).
"""

from __future__ import annotations

import contextlib
import copy
import datetime
import json
import os
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from . import autoscaling
from .autoscaling import Autoscaling
from .controlplane import (
    DEFAULT_SERVICE_CIDR,
    APIError,
    ControlPlane,
    ControlPlaneError,
    ManagedProcess,
    Supervisor,
    free_port,
    load_yaml_documents,
    locate_bin_dir,
    project_crd_files,
    start_process,
    wait_until_ready,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
#: The Kueue objects an administrator creates, shared with docs/operations.md: the harness
#: applies exactly these files (ClusterQueues are stamped per entrance from the template).
KUEUE_SETUP_DIR = REPO_ROOT / "deploy" / "kueue"

#: The project's KWOK Stages (what a kubelet does that KWOK's own fast stages leave out).
KWOK_STAGE_DIR = Path(__file__).resolve().parent / "kwok"
#: Where Kueue v0.17.0 looks for its metrics certificate (hard-coded in cmd/kueue/main.go).
KUEUE_METRICS_CERT_DIR = Path("/etc/kueue/metrics/certs")
KUEUE_NAMESPACE = "kueue-system"
#: The resource flavor every harness ClusterQueue uses.
DEFAULT_FLAVOR = "default-flavor"
#: Topology label keys on the fake Nodes (blocks hold racks, racks hold Nodes).
BLOCK_LABEL = "topology.gpustack.ai/block"
RACK_LABEL = "topology.gpustack.ai/rack"
#: Every resource the renderer can request; a ClusterQueue must cover each one a Pod asks for.
COVERED_RESOURCES: tuple[str, ...] = (
    "cpu",
    "memory",
    "ephemeral-storage",
    "nvidia.com/gpu",
    "nvidia.com/gpu.sliced",
    "nvidia.com/gpu.partitioned",
    "huawei.com/npu",
    "vpc.amazonaws.com/efa",
    "device.gpustack.ai/rdma",
    "device.gpustack.ai/rdma.shared",
)
#: Kueue's API client budget and reconcile concurrency in its release manifests (v0.17.0,
#: config/components/manager/controller_manager_config.yaml; the Helm chart's values agree).
KUEUE_CLIENT_CONNECTION: Mapping[str, int] = {"qps": 50, "burst": 100}
KUEUE_CONCURRENCY: Mapping[str, int] = {
    "Pod": 5,
    "Workload.kueue.x-k8s.io": 5,
    "LocalQueue.kueue.x-k8s.io": 1,
    "Cohort.kueue.x-k8s.io": 1,
    "ClusterQueue.kueue.x-k8s.io": 1,
    "ResourceFlavor.kueue.x-k8s.io": 1,
}
#: The KWOK annotation that marks a Node as one KWOK manages.
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"

_CONTROLLERS = (
    "garbage-collector-controller",
    "namespace-controller",
    "endpointslice-controller",
    "node-lifecycle-controller",
    "taint-eviction-controller",
    "pod-garbage-collector-controller",
    "disruption-controller",
    "serviceaccount-controller",
    "clusterrole-aggregation-controller",
    # Claims bind for real (weights from a claim, D28), and a claim or volume in use is kept.
    "persistentvolume-binder-controller",
    "persistentvolume-protection-controller",
    "persistentvolumeclaim-protection-controller",
)


#: The controllers that give a Deployment its ReplicaSet and Pods.
DEPLOYMENT_CONTROLLERS = ("deployment-controller", "replicaset-controller")


class ClusterError(ControlPlaneError):
    """The simulated cluster could not be built or started."""


# --------------------------------------------------------------------------------------------
# Binaries
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClusterBinaries:
    """Every executable of the simulated cluster, and the manifests that come with them."""

    bin_dir: Path

    def path(self, name: str) -> Path:
        return self.bin_dir / name

    @property
    def kube_apiserver(self) -> Path:
        return self.path("kube-apiserver")

    @property
    def etcd(self) -> Path:
        return self.path("etcd")

    @property
    def kube_scheduler(self) -> Path:
        return self.path("kube-scheduler")

    @property
    def kube_controller_manager(self) -> Path:
        return self.path("kube-controller-manager")

    @property
    def kubectl(self) -> Path:
        return self.path("kubectl")

    @property
    def kueue(self) -> Path:
        return self.path("kueue")

    @property
    def kwok(self) -> Path:
        return self.path("kwok")

    @property
    def kueue_crd_dir(self) -> Path:
        return self.path("kueue-crds")

    @property
    def kueue_webhook_manifests(self) -> Path:
        return self.path("kueue-webhook") / "manifests.yaml"

    @property
    def kwok_stage_dir(self) -> Path:
        return self.path("kwok-stages")

    @property
    def metrics_server(self) -> Path:
        return self.path("metrics-server")

    @property
    def kwok_metrics_dir(self) -> Path:
        """KWOK's ``metrics-resource.yaml`` (its Metric) and ``usage-from-annotation.yaml``."""
        return self.path("kwok-metrics")

    @property
    def kwok_crd_dir(self) -> Path:
        """KWOK's ResourceUsage and ClusterResourceUsage CRDs."""
        return self.path("kwok-crds")

    @property
    def inference_pool_crd(self) -> Path:
        """The InferencePool CRD (``inference.networking.k8s.io/v1``) of the Gateway API
        Inference Extension (hack/envtest/build.sh copies it from its Go module)."""
        return self.path("gie-crds") / "inference.networking.k8s.io_inferencepools.yaml"

    @property
    def keda_crd_dir(self) -> Path:
        """KEDA's CRDs (``keda.sh_scaledobjects.yaml`` …), for schema checks; KEDA is not run."""
        return self.path("keda-crds")

    def check_autoscaling(self) -> None:
        """What the autoscaling option needs beyond :meth:`check`."""
        missing = [] if os.access(self.metrics_server, os.X_OK) else [str(self.metrics_server)]
        missing += [str(p) for p in (self.kwok_metrics_dir, self.kwok_crd_dir) if not p.exists()]
        if missing:
            raise ClusterError(
                f"autoscaling components missing under {self.bin_dir}: {', '.join(missing)}"
                f" (run hack/envtest/build.sh)"
            )

    def check(self) -> None:
        names = (
            "kube-apiserver",
            "etcd",
            "kube-scheduler",
            "kube-controller-manager",
            "kubectl",
            "kueue",
            "kwok",
        )
        missing = [n for n in names if not os.access(self.path(n), os.X_OK)]
        missing += [
            str(p)
            for p in (
                self.kueue_crd_dir,
                self.kueue_webhook_manifests,
                self.kwok_stage_dir,
                self.inference_pool_crd,
            )
            if not p.exists()
        ]
        if missing:
            raise ClusterError(
                f"simulated-cluster components missing under {self.bin_dir}: {', '.join(missing)}"
                f" (run hack/envtest/build.sh)"
            )


def locate_cluster_binaries(*, build: bool = True) -> ClusterBinaries:
    """Find (or build) every component. ``$GPUSTACK_ENVTEST_BIN_DIR`` wins when set."""
    binaries = ClusterBinaries(locate_bin_dir(build=build, what="the cluster", error=ClusterError))
    binaries.check()
    return binaries


# --------------------------------------------------------------------------------------------
# Nodes and queues
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FakeNode:
    """A Node that KWOK keeps Ready; its allocatable resources are what the scheduler sees."""

    name: str
    gpus: int = 8
    cpu: str = "256"
    memory: str = "2Ti"
    ephemeral_storage: str = "8Ti"
    pods: int = 110
    #: The accelerator resource key the Node offers ``gpus`` of.
    accelerator: str = "nvidia.com/gpu"
    extra_resources: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    #: The Node's ``spec.podCIDR``, which KWOK takes a bound Pod's IP from before its own
    #: ``--cidr``. A loopback range (``127.244.0.0/24``) makes every Pod IP on the Node dialable
    #: on this machine: a real router discovering the Pods can reach them (tests/integration/
    #: test_router_discovery.py). ``None``: KWOK's range, never dialled.
    pod_cidr: str | None = None

    def manifest(self) -> dict[str, Any]:
        resources = {
            "cpu": self.cpu,
            "memory": self.memory,
            "ephemeral-storage": self.ephemeral_storage,
            "pods": str(self.pods),
            self.accelerator: str(self.gpus),
            **self.extra_resources,
        }
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": self.name,
                "annotations": {KWOK_NODE_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"},
                "labels": {
                    "kubernetes.io/hostname": self.name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    "type": "kwok",
                    # What the harness's ResourceFlavor selects (deploy/kueue).
                    "gpustack.ai/worker": "true",
                    **self.labels,
                },
            },
            "spec": {"podCIDR": self.pod_cidr, "podCIDRs": [self.pod_cidr]}
            if self.pod_cidr
            else {},
            "status": {"allocatable": dict(resources), "capacity": dict(resources)},
        }


def default_nodes(count: int = 8, gpus: int = 8) -> list[FakeNode]:
    """``count`` Nodes of ``gpus`` ``nvidia.com/gpu`` each, in two blocks of two racks. Every
    Node offers the shared RDMA device; the Nodes of the first block also offer eight exclusive
    RDMA interfaces."""
    nodes = []
    for i in range(count):
        block = i * 2 // count
        rack = i * 4 // count
        extra = {"device.gpustack.ai/rdma.shared": "1"}
        if block == 0:
            extra["device.gpustack.ai/rdma"] = "8"
        nodes.append(
            FakeNode(
                name=f"gpu-node-{i}",
                gpus=gpus,
                extra_resources=extra,
                labels={BLOCK_LABEL: f"block-{block}", RACK_LABEL: f"rack-{rack}"},
            )
        )
    return nodes


def _yaml_documents(path: Path) -> list[dict[str, Any]]:
    return load_yaml_documents(path)


def cluster_queue(
    name: str,
    *,
    quota: Mapping[str, str | int] | None = None,
    admission_check: str | None = "gpustack-model-deployment-joint",
    flavor: str = DEFAULT_FLAVOR,
) -> dict[str, Any]:
    """A ClusterQueue named ``name`` (an InstanceType entrance), stamped from
    ``deploy/kueue/clusterqueue.yaml``: ``quota`` overrides nominal quotas per resource (every
    resource of :data:`COVERED_RESOURCES` is covered; unlisted ones keep the template's)."""
    template = _yaml_documents(KUEUE_SETUP_DIR / "clusterqueue.yaml")[0]
    body = copy.deepcopy(template)
    body["metadata"] = {"name": name}
    group = body["spec"]["resourceGroups"][0]
    flavor_entry = group["flavors"][0]
    flavor_entry["name"] = flavor
    if quota:
        known = {r["name"]: r for r in flavor_entry["resources"]}
        for resource, value in quota.items():
            if resource not in known:
                raise ValueError(f"{resource} is not covered by the ClusterQueue template")
            known[resource]["nominalQuota"] = value
    if admission_check is None:
        body["spec"].pop("admissionChecksStrategy", None)
    else:
        body["spec"]["admissionChecksStrategy"] = {"admissionChecks": [{"name": admission_check}]}
    return body


# --------------------------------------------------------------------------------------------
# Kueue's manifests
# --------------------------------------------------------------------------------------------


def _conversion_crds(crd_dir: Path) -> set[str]:
    """The CRD names Kueue's kustomization gives a conversion webhook (its active patches)."""
    kustomization = _yaml_documents(crd_dir / "kustomization.yaml")[0]
    names: set[str] = set()
    for patch in kustomization.get("patches") or ():
        path = patch.get("path") if isinstance(patch, Mapping) else None
        if not path or "webhook_in_" not in str(path):
            continue
        for doc in _yaml_documents(crd_dir / str(path)):
            names.add(str(doc["metadata"]["name"]))
    return names


def kueue_crds(crd_dir: Path, *, webhook_url: str, ca_bundle: str) -> list[dict[str, Any]]:
    """Kueue's CRDs, the conversion webhook pointed at ``webhook_url`` where Kueue asks for it."""
    converting = _conversion_crds(crd_dir)
    crds = []
    for path in sorted((crd_dir / "bases").glob("*.yaml")):
        for doc in _yaml_documents(path):
            if doc.get("kind") != "CustomResourceDefinition":
                continue
            if doc["metadata"]["name"] in converting:
                doc["spec"]["conversion"] = {
                    "strategy": "Webhook",
                    "webhook": {
                        "clientConfig": {"url": f"{webhook_url}/convert", "caBundle": ca_bundle},
                        "conversionReviewVersions": ["v1"],
                    },
                }
            crds.append(doc)
    return crds


def kueue_webhook_configurations(
    manifests: Path, *, webhook_url: str, ca_bundle: str
) -> list[dict[str, Any]]:
    """Kueue's admission webhooks for the kinds this cluster serves (core Pods and Kueue's own
    kinds), each calling ``webhook_url`` + its path. Webhooks of integrations that are not
    enabled (Jobs, Deployments, …) are left out: their kinds have no handler here."""
    configurations = []
    for doc in _yaml_documents(manifests):
        hooks = []
        for hook in doc.get("webhooks") or ():
            groups = {g for rule in hook.get("rules") or () for g in rule.get("apiGroups") or ()}
            resources = {r for rule in hook.get("rules") or () for r in rule.get("resources") or ()}
            if groups == {""} and resources != {"pods"}:
                continue
            if groups not in ({""}, {"kueue.x-k8s.io"}):
                continue
            client = hook.setdefault("clientConfig", {})
            service = client.pop("service", {}) or {}
            client["url"] = f"{webhook_url}{service.get('path', '')}"
            client["caBundle"] = ca_bundle
            if resources == {"pods"}:
                # Kueue's own install limits the Pod webhooks to managed namespaces.
                hook["namespaceSelector"] = {
                    "matchExpressions": [
                        {
                            "key": "kubernetes.io/metadata.name",
                            "operator": "NotIn",
                            "values": ["kube-system", KUEUE_NAMESPACE],
                        }
                    ]
                }
            hooks.append(hook)
        doc["webhooks"] = hooks
        doc["metadata"] = {"name": f"kueue-{doc['metadata']['name']}"}
        configurations.append(doc)
    return configurations


def kueue_configuration(
    *,
    webhook_port: int,
    health_port: int,
    cert_dir: Path,
    wait_for_pods_ready: bool,
    pods_ready_timeout: str = "5m",
) -> dict[str, Any]:
    """Kueue's manager configuration: ``deploy/kueue/kueue-config.yaml`` with this process's
    loopback ports and certificate directory; ``waitForPodsReady`` on when asked."""
    config = _yaml_documents(KUEUE_SETUP_DIR / "kueue-config.yaml")[0]
    config["namespace"] = KUEUE_NAMESPACE
    # The rest of an install's configuration as Kueue's own release manifests set it
    # (config/components/manager/controller_manager_config.yaml): without it Kueue's client
    # keeps its built-in 20 requests/s, and that, not the cluster, bounds how fast it admits.
    config.setdefault("clientConnection", dict(KUEUE_CLIENT_CONNECTION))
    config.setdefault("controller", {"groupKindConcurrency": dict(KUEUE_CONCURRENCY)})
    config["health"] = {"healthProbeBindAddress": f"127.0.0.1:{health_port}"}
    # The metrics endpoint stays off; Kueue still loads its certificate (see module doc).
    config["metrics"] = {"bindAddress": "0"}
    config["webhook"] = {"port": webhook_port, "host": "127.0.0.1", "certDir": str(cert_dir)}
    config["leaderElection"] = {"leaderElect": False}
    config["internalCertManagement"] = {"enable": False}
    if wait_for_pods_ready:
        config["waitForPodsReady"] = {
            "timeout": pods_ready_timeout,
            "blockAdmission": False,
            "requeuingStrategy": {"timestamp": "Eviction", "backoffBaseSeconds": 5},
        }
    else:
        config.pop("waitForPodsReady", None)
    return config


def ensure_kueue_metrics_certificate(directory: Path = KUEUE_METRICS_CERT_DIR) -> None:
    """Write a self-signed ``tls.crt``/``tls.key`` where Kueue reads them, unless they exist."""
    crt, key = directory / "tls.crt", directory / "tls.key"
    if crt.is_file() and key.is_file():
        return
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ClusterError(
            f"Kueue reads its metrics certificate from {directory} (fixed in its main.go) and "
            f"this user cannot create it ({exc}); create the directory writable once, e.g. "
            f"`sudo install -d -m 0777 {directory}`"
        ) from exc
    now = datetime.datetime.now(datetime.UTC)
    private = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kueue-metrics-loopback")])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(private.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=3650))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .sign(private, hashes.SHA256())
    )
    key_pem = private.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    # Write beside, then rename: a concurrent reader never sees half a file.
    for target, data in ((key, key_pem), (crt, cert.public_bytes(serialization.Encoding.PEM))):
        tmp = target.with_name(f".{target.name}.{os.getpid()}")
        tmp.write_bytes(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)


# --------------------------------------------------------------------------------------------
# The cluster
# --------------------------------------------------------------------------------------------


def _https_ok(url: str) -> bool:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(url, timeout=2, context=context) as resp:
            return int(resp.status) == 200
    except (OSError, ValueError):
        return False


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return int(resp.status) == 200
    except (OSError, ValueError, urllib.error.URLError):
        return False


@dataclass
class Cluster(Supervisor):
    """The simulated GPU cluster. Use as a context manager or call :meth:`start`/:meth:`stop`.

    ``nodes``: the fake Nodes (default :func:`default_nodes`); ``wait_for_pods_ready``: start
    Kueue with ``waitForPodsReady`` (see :meth:`restart_kueue` to switch later);
    ``root``: a directory to run in (default a fresh temporary one, removed on stop);
    ``autoscaling``: ``True`` or an :class:`autoscaling.Autoscaling` adds the aggregation layer,
    metrics-server over KWOK's emulated kubelet metrics and the HPA controller (see
    :mod:`.autoscaling`); off by default, so a cluster that does not ask does not pay for it.
    """

    binaries: ClusterBinaries
    nodes: Sequence[FakeNode] = field(default_factory=default_nodes)
    wait_for_pods_ready: bool = False
    root: Path | None = None
    startup_timeout: float = 120.0
    autoscaling: Autoscaling | bool = False
    #: Run the Deployment and ReplicaSet controllers (the autoscaling option runs them too): a
    #: router's Deployment gets Pods, which KWOK makes Ready.
    deployments: bool = False
    #: The API server's Service range (default a /12, as large as a real cluster's).
    service_cidr: str = DEFAULT_SERVICE_CIDR
    control_plane: ControlPlane = field(init=False)
    startup_seconds: float = field(init=False, default=0.0)
    kueue_webhook_port: int = field(init=False, default=0)
    #: Kueue's kubeconfig when it is not the admin's (:meth:`restart_kueue`).
    kueue_kubeconfig: Path | None = field(init=False, default=None)
    _kueue: ManagedProcess | None = field(init=False, default=None)
    _processes: list[ManagedProcess] = field(init=False, default_factory=list)
    _stopped: bool = field(init=False, default=False)

    @property
    def kubeconfig(self) -> Path:
        return self.control_plane.kubeconfig

    @property
    def dir(self) -> Path:
        return self.control_plane.root

    @property
    def autoscaling_options(self) -> Autoscaling | None:
        """The autoscaling option's periods, or None when it is off."""
        if isinstance(self.autoscaling, Autoscaling):
            return self.autoscaling
        return Autoscaling() if self.autoscaling else None

    # ---- lifecycle -------------------------------------------------------------------------

    def _prepare(self) -> None:
        if self.autoscaling_options is not None:
            self.binaries.check_autoscaling()
        self.control_plane = ControlPlane(
            self.binaries,
            root_dir=self.root,
            aggregation=self.autoscaling_options is not None,
            service_cidr=self.service_cidr,
        )
        self.control_plane.start()

    def _stop(self) -> None:
        """Stop every component (reverse start order), then the control plane."""
        if self._kueue is not None:
            with contextlib.suppress(Exception):
                self._kueue.stop()
        for proc in reversed(self._processes):
            with contextlib.suppress(Exception):
                proc.stop()
        with contextlib.suppress(Exception):
            self.control_plane.stop()

    def pids(self) -> list[int]:
        """Process ids of every running component (the control plane's included)."""
        procs = [*self.control_plane.processes, *self._processes]
        if self._kueue is not None:
            procs.append(self._kueue)
        return [p.popen.pid for p in procs if p.popen.poll() is None]

    def _start(self, started: float) -> None:
        cp = self.control_plane
        scaling = self.autoscaling_options
        cp.install_crd_files(project_crd_files())
        # The Gateway API Inference Extension's InferencePool (a router may render one).
        cp.install_crd_files([self.binaries.inference_pool_crd])
        self._install_kueue_crds()
        if scaling is not None:
            cp.install_crd_files(sorted(self.binaries.kwok_crd_dir.glob("*.yaml")))
        kubeconfig = str(cp.kubeconfig)
        controllers: tuple[str, ...] = _CONTROLLERS
        kcm_extra: list[str] = []
        if scaling is not None:
            controllers += autoscaling.CONTROLLERS
            kcm_extra = scaling.controller_manager_args()
        elif self.deployments:
            controllers += DEPLOYMENT_CONTROLLERS

        kcm_port = free_port()
        kcm = start_process(
            "kube-controller-manager",
            [
                str(self.binaries.kube_controller_manager),
                f"--kubeconfig={kubeconfig}",
                "--bind-address=127.0.0.1",
                f"--secure-port={kcm_port}",
                f"--cert-dir={cp.root / 'kcm-certs'}",
                "--leader-elect=false",
                f"--controllers={','.join(controllers)}",
                "--use-service-account-credentials=false",
                f"--root-ca-file={cp.root / 'pki' / 'ca.crt'}",
                "--cluster-name=gpustack-sim",
                "--node-monitor-grace-period=60s",
                "--concurrent-gc-syncs=5",
                *kcm_extra,
                "-v=1",
            ],
            cp.root / "kube-controller-manager.log",
        )
        self._processes.append(kcm)
        sched_port = free_port()
        scheduler = start_process(
            "kube-scheduler",
            [
                str(self.binaries.kube_scheduler),
                f"--kubeconfig={kubeconfig}",
                "--bind-address=127.0.0.1",
                f"--secure-port={sched_port}",
                f"--cert-dir={cp.root / 'scheduler-certs'}",
                "--leader-elect=false",
                "-v=1",
            ],
            cp.root / "kube-scheduler.log",
        )
        self._processes.append(scheduler)

        for node in self.nodes:
            self.apply(self.node_manifest(node))
        kwok_config = cp.root / "kwok.yaml"
        # KWOK's own stages, with the project's (tests/integration/kwok/) standing in for the
        # kubelet where KWOK's leave something out; a project stage replaces KWOK's of its name.
        ours = [
            doc for path in sorted(KWOK_STAGE_DIR.glob("*.yaml")) for doc in _yaml_documents(path)
        ]
        replaced = {doc["metadata"]["name"] for doc in ours}
        stage_docs = [
            doc
            for path in sorted(self.binaries.kwok_stage_dir.glob("*.yaml"))
            for doc in _yaml_documents(path)
            if doc["metadata"]["name"] not in replaced
        ] + ours
        kwok_port = free_port()
        kwok_extra: list[str] = []
        node_ip = "10.0.0.2"
        if scaling is not None:
            # KWOK's own Metric: the kubelet's resource metrics, per Node, on its server.
            stage_docs += _yaml_documents(self.binaries.kwok_metrics_dir / "metrics-resource.yaml")
            cert, key = cp.ca.issue_serving((autoscaling.KUBELET_ADDRESS, "localhost")).write(
                cp.root / "kwok-certs", "tls"
            )
            kwok_extra = autoscaling.kwok_args(kwok_port=kwok_port, cert=cert, key=key)
            node_ip = autoscaling.KUBELET_ADDRESS
        kwok_config.write_text("\n---\n".join(json.dumps(doc) for doc in stage_docs) + "\n")
        kwok = start_process(
            "kwok",
            [
                str(self.binaries.kwok),
                f"--kubeconfig={kubeconfig}",
                f"--config={kwok_config}",
                "--manage-all-nodes=false",
                f"--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}=fake",
                "--cidr=10.244.0.0/16",
                f"--node-ip={node_ip}",
                "--node-lease-duration-seconds=40",
                f"--server-address=127.0.0.1:{kwok_port}",
                *kwok_extra,
            ],
            cp.root / "kwok.log",
        )
        self._processes.append(kwok)

        self._wait(kcm, lambda: _https_ok(f"https://127.0.0.1:{kcm_port}/healthz"), started)
        self._wait(scheduler, lambda: _https_ok(f"https://127.0.0.1:{sched_port}/healthz"), started)
        self._wait(kwok, self._nodes_ready, started)
        if scaling is not None:
            self._start_metrics_server(scaling, started)
        self._start_kueue(started, install=True)

    def node_manifest(self, node: FakeNode) -> dict[str, Any]:
        """The manifest of a fake Node in this cluster (with the autoscaling option, the
        annotation that makes metrics-server scrape it)."""
        manifest = node.manifest()
        if self.autoscaling_options is not None:
            manifest = autoscaling.with_kubelet_metrics(manifest)
        return manifest

    def _start_metrics_server(self, scaling: Autoscaling, started: float) -> None:
        """KWOK's default usage for every Pod, metrics-server on loopback and the APIService
        routing ``metrics.k8s.io`` to it; returns once the APIService is Available."""
        cp = self.control_plane
        for doc in _yaml_documents(self.binaries.kwok_metrics_dir / "usage-from-annotation.yaml"):
            self.apply(doc)
        port = free_port()
        cert, key = cp.ca.issue_serving(autoscaling.metrics_server_hosts()).write(
            cp.root / "metrics-server-certs", "tls"
        )
        proc = start_process(
            "metrics-server",
            autoscaling.metrics_server_argv(
                self.binaries.metrics_server,
                port=port,
                kubeconfig=cp.kubeconfig,
                cert=cert,
                key=key,
                kubelet_ca=cp.root / "pki" / "ca.crt",
                options=scaling,
            ),
            cp.root / "metrics-server.log",
        )
        self._processes.append(proc)
        self._wait(proc, lambda: _https_ok(f"https://127.0.0.1:{port}/livez"), started)
        for obj in autoscaling.metrics_api_objects(port, cp.ca.cert_pem):
            self.apply(obj)
        self._wait(proc, self._metrics_api_available, started)

    def _metrics_api_available(self) -> bool:
        try:
            _, service = self.control_plane.request(
                "GET",
                f"/apis/apiregistration.k8s.io/v1/apiservices/{autoscaling.METRICS_API_SERVICE}",
            )
        except (OSError, APIError):
            return False
        return any(
            c.get("type") == "Available" and c.get("status") == "True"
            for c in (service.get("status") or {}).get("conditions") or ()
        )

    def set_pod_usage(self, namespace: str, pod: str, *, cpu: str, memory: str = "64Mi") -> None:
        """Set the emulated usage of every container of a Pod (a KWOK ResourceUsage the Pod
        owns); metrics-server reports it after its next scrapes. Needs the autoscaling option."""
        _, body = self.control_plane.request("GET", f"/api/v1/namespaces/{namespace}/pods/{pod}")
        uid = str(body["metadata"]["uid"])
        self.apply(autoscaling.resource_usage(namespace, pod, cpu=cpu, memory=memory, pod_uid=uid))

    def _wait(self, proc: ManagedProcess, probe: Any, started: float) -> None:
        timeout = self.startup_timeout
        wait_until_ready(proc, probe, started + timeout, timeout, ClusterError)

    def _nodes_ready(self) -> bool:
        try:
            _, nodes = self.control_plane.request("GET", "/api/v1/nodes")
        except (OSError, APIError):
            return False
        ready = {
            n["metadata"]["name"]
            for n in nodes.get("items") or ()
            if any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in (n.get("status") or {}).get("conditions") or ()
            )
        }
        return all(node.name in ready for node in self.nodes)

    # ---- Kueue -----------------------------------------------------------------------------

    def _install_kueue_crds(self) -> None:
        """Kueue's CRDs (conversion served by the Kueue started later on a port chosen now), its
        namespace and serving certificate. Installed before the controller manager starts, so
        the namespace controller and the garbage collector discover Kueue's kinds at once."""
        cp = self.control_plane
        self.kueue_webhook_port = free_port()
        cp.ca.issue_serving(("127.0.0.1", "localhost")).write(
            cp.root / "kueue-webhook-certs", "tls"
        )
        self.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": KUEUE_NAMESPACE}})
        url = f"https://127.0.0.1:{self.kueue_webhook_port}"
        cp.install_crds(
            kueue_crds(self.binaries.kueue_crd_dir, webhook_url=url, ca_bundle=cp.ca.ca_bundle)
        )

    def _start_kueue(self, started: float, *, install: bool) -> None:
        cp = self.control_plane
        ensure_kueue_metrics_certificate()
        health_port = free_port()
        config_path = cp.root / "kueue-config.yaml"
        config_path.write_text(
            json.dumps(
                kueue_configuration(
                    webhook_port=self.kueue_webhook_port,
                    health_port=health_port,
                    cert_dir=cp.root / "kueue-webhook-certs",
                    wait_for_pods_ready=self.wait_for_pods_ready,
                ),
                indent=2,
            )
        )
        self._kueue = start_process(
            "kueue",
            [
                str(self.binaries.kueue),
                f"--config={config_path}",
                f"--kubeconfig={self.kueue_kubeconfig or cp.kubeconfig}",
                "--feature-gates=VisibilityOnDemand=false",
                "--zap-log-level=info",
            ],
            cp.root / "kueue.log",
            append=not install,
        )
        self._wait(self._kueue, lambda: _http_ok(f"http://127.0.0.1:{health_port}/readyz"), started)
        if install:
            url = f"https://127.0.0.1:{self.kueue_webhook_port}"
            for configuration in kueue_webhook_configurations(
                self.binaries.kueue_webhook_manifests, webhook_url=url, ca_bundle=cp.ca.ca_bundle
            ):
                self.apply(configuration)
            for path in ("resourceflavor.yaml", "priorityclasses.yaml"):
                for doc in _yaml_documents(KUEUE_SETUP_DIR / path):
                    self.apply(doc)

    def restart_kueue(
        self, *, wait_for_pods_ready: bool | None = None, kubeconfig: Path | None = None
    ) -> None:
        """Restart Kueue (optionally switching ``waitForPodsReady``, or pointing it at another
        API server of the cluster with ``kubeconfig``); its state is in the API."""
        if wait_for_pods_ready is not None:
            self.wait_for_pods_ready = wait_for_pods_ready
        if kubeconfig is not None:
            self.kueue_kubeconfig = kubeconfig
        if self._kueue is not None:
            self._kueue.stop()
        self._start_kueue(time.monotonic(), install=False)

    # ---- objects ---------------------------------------------------------------------------

    def apply(self, body: Mapping[str, Any], *, manager: str = "gpustack-cluster") -> Any:
        """Server-side apply one object (cluster-scoped or namespaced) as the admin."""
        path = _object_path(body)
        _, stored = self.control_plane.request(
            "PATCH",
            path,
            dict(body),
            query={"fieldManager": manager, "force": "true"},
            content_type="application/apply-patch+yaml",
        )
        return stored

    def ensure_cluster_queue(
        self, name: str, *, quota: Mapping[str, str | int] | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        """Apply a ClusterQueue for the entrance ``name`` (see :func:`cluster_queue`)."""
        return dict(self.apply(cluster_queue(name, quota=quota, **kwargs)))

    def kubectl(
        self, *args: str, check: bool = True, timeout: float = 120, input: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run the real ``kubectl`` against this cluster as the admin."""
        return subprocess.run(
            [str(self.binaries.kubectl), f"--kubeconfig={self.kubeconfig}", *args],
            check=check,
            capture_output=True,
            text=True,
            timeout=timeout,
            input=input,
        )


_CLUSTER_SCOPED = {
    "Namespace",
    "Node",
    "CustomResourceDefinition",
    "ClusterQueue",
    "ResourceFlavor",
    "AdmissionCheck",
    "WorkloadPriorityClass",
    "Topology",
    "Cohort",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
    "ClusterRole",
    "ClusterRoleBinding",
    "PriorityClass",
    "InstanceType",
    "KVCachePool",
    "KVCacheBackend",
    "APIService",
    "ClusterResourceUsage",
}


def _plural(kind: str) -> str:
    lower = kind.lower()
    if lower.endswith("y") and not lower.endswith("ey"):
        return lower[:-1] + "ies"
    if lower.endswith("s"):
        return lower + "es"
    return lower + "s"


def _object_path(body: Mapping[str, Any]) -> str:
    api_version = str(body["apiVersion"])
    kind = str(body["kind"])
    name = str(body["metadata"]["name"])
    base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    if kind not in _CLUSTER_SCOPED:
        namespace = body["metadata"].get("namespace") or "default"
        base += f"/namespaces/{namespace}"
    return f"{base}/{_plural(kind)}/{name}"


@contextlib.contextmanager
def started_cluster(binaries: ClusterBinaries | None = None, **options: Any) -> Iterator[Cluster]:
    """Start a simulated cluster (building components when needed); stop it on exit."""
    with Cluster(binaries or locate_cluster_binaries(), **options) as cluster:
        yield cluster


__all__ = [
    "COVERED_RESOURCES",
    "DEFAULT_FLAVOR",
    "KUEUE_NAMESPACE",
    "Autoscaling",
    "Cluster",
    "ClusterBinaries",
    "ClusterError",
    "FakeNode",
    "cluster_queue",
    "default_nodes",
    "locate_cluster_binaries",
    "started_cluster",
]
