"""Fixtures for tests against the simulated GPU cluster (real components, envtest style).

The cluster is started once per test session, on first use, by :func:`cluster`
(:mod:`.cluster`): etcd, kube-apiserver, kube-controller-manager, kube-scheduler, KWOK with fake
GPU Nodes, and Kueue with its webhooks, all on loopback.

* binaries: ``$GPUSTACK_ENVTEST_BIN_DIR`` or, when that is unset, whatever
  ``hack/envtest/build.sh`` prints (it builds into
  ``${GPUSTACK_ENVTEST_CACHE:-~/.cache/gpustack-render/envtest}`` once, then reuses it). Missing
  binaries that cannot be built make every integration test *error*, never skip.
* CRDs: every YAML file in ``deploy/crds/`` plus all of Kueue's, with Kueue's conversion webhooks
  served by the running Kueue, all Established before the first test runs.
* identity: the admin client certificate (O=system:masters); RBAC authorization is on.

Fixtures (see each docstring):

* ``cluster`` (session) -> :class:`cluster.Cluster`
* ``autoscaling_cluster`` (module) -> a second :class:`cluster.Cluster` with the autoscaling
  option (metrics-server over KWOK's emulated metrics, the real HPA); only modules that ask pay
* ``control_plane`` (session) -> :class:`controlplane.ControlPlane` (the cluster's)
* ``kubeconfig_path`` (session) -> ``Path`` of a kubeconfig that ``kubernetes_asyncio`` loads
* ``envtest_ca`` (session) -> :class:`controlplane.CertificateAuthority`
* ``k8s_client`` (async, per test) -> ``kubernetes_asyncio.client.ApiClient``
* ``kube`` (async, per test) -> the project's ``gpustack_controller.kube.Kube``
* ``webhook_ssl_context`` (per test) -> server ``ssl.SSLContext`` for 127.0.0.1 signed by the CA
* ``install_webhooks`` (per test) -> ``(configuration, port) -> created object``; removed after
  the test

Async tests here must run in the session event loop (the client fixtures live there): put
``pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]`` at the top
of each test module.
"""

from __future__ import annotations

import signal
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
import pytest_asyncio
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio import config as k8s_config

from gpustack_controller.kube import Kube

from .cluster import Cluster, ClusterBinaries, default_nodes, locate_cluster_binaries
from .controller_fixtures import ENTRANCE
from .controlplane import (
    APIError,
    CertificateAuthority,
    ControlPlane,
    ControlPlaneError,
    point_webhooks_at,
    webhook_configuration_path,
)

_HERE = Path(__file__).resolve().parent

InstallWebhooks = Callable[[Mapping[str, Any], int], dict[str, Any]]


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test under tests/integration/ carries the ``integration`` marker."""
    for item in items:
        if _HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.integration)


def _raise_keyboard_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


@pytest.fixture(scope="session")
def envtest_binaries() -> ClusterBinaries:
    """Every component's executable and Kueue's manifests (built when needed)."""
    try:
        return locate_cluster_binaries()
    except ControlPlaneError as exc:
        pytest.fail(f"simulated cluster unavailable: {exc}", pytrace=False)


@pytest.fixture(scope="session")
def cluster(envtest_binaries: ClusterBinaries) -> Iterator[Cluster]:
    """The running simulated cluster (Kueue, scheduler, garbage collector, KWOK Nodes)."""
    # SIGTERM would otherwise end the run without finalizers; turn it into an interrupt so the
    # processes are stopped and the temp dir removed (they also die with this process anyway).
    previous = signal.getsignal(signal.SIGTERM)
    if previous == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
    sim = Cluster(envtest_binaries)
    try:
        sim.start()
        # The entrance the controller tests' shared InstanceType publishes.
        sim.ensure_cluster_queue(ENTRANCE)
    except BaseException:
        sim.stop()
        raise
    try:
        yield sim
    finally:
        sim.stop()
        if previous == signal.SIG_DFL:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)


@pytest.fixture(scope="module")
def autoscaling_cluster(envtest_binaries: ClusterBinaries) -> Iterator[Cluster]:
    """A simulated cluster of its own with the autoscaling option on (see
    tests/integration/autoscaling.py): the aggregation layer, metrics-server scraping KWOK's
    emulated kubelet metrics, and the HPA, Deployment and ReplicaSet controllers."""
    with Cluster(envtest_binaries, nodes=default_nodes(2), autoscaling=True) as sim:
        yield sim


@pytest.fixture(scope="session")
def control_plane(cluster: Cluster) -> ControlPlane:
    """The cluster's etcd + kube-apiserver, with the project's and Kueue's CRDs Established."""
    return cluster.control_plane


@pytest.fixture(scope="session")
def kubeconfig_path(control_plane: ControlPlane) -> Path:
    """An admin kubeconfig for ``kubernetes_asyncio.config.load_kube_config(config_file=...)``."""
    return control_plane.kubeconfig


@pytest.fixture(scope="session")
def envtest_ca(control_plane: ControlPlane) -> CertificateAuthority:
    """The test CA: trusted by the API server; issues webhook serving certificates."""
    return control_plane.ca


@pytest_asyncio.fixture(loop_scope="session")
async def k8s_client(kubeconfig_path: Path) -> AsyncIterator[k8s.ApiClient]:
    """A fresh ``kubernetes_asyncio`` ApiClient logged in as the admin; closed after the test."""
    api = await k8s_config.new_client_from_config(config_file=str(kubeconfig_path))
    try:
        yield api
    finally:
        await api.close()


@pytest_asyncio.fixture(loop_scope="session")
async def kube(kubeconfig_path: Path) -> AsyncIterator[Kube]:
    """The project's own client (``gpustack_controller.kube.Kube``) logged in as the admin;
    closed after the test. A module may override it (e.g. to seed an InstanceType first)."""
    client = await Kube.connect(kubeconfig=str(kubeconfig_path))
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture
def webhook_ssl_context(envtest_ca: CertificateAuthority, tmp_path: Path) -> Any:
    """A server ``ssl.SSLContext`` for 127.0.0.1/localhost, signed by the test CA."""
    return envtest_ca.server_ssl_context(tmp_path / "webhook-tls")


@pytest.fixture
def install_webhooks(control_plane: ControlPlane) -> Iterator[InstallWebhooks]:
    """Install webhook configurations that call a local server by URL.

    ``install(configuration, port)`` rewrites every webhook of a
    ``admissionregistration.k8s.io/v1`` Mutating/ValidatingWebhookConfiguration to
    ``https://127.0.0.1:<port>/<service path>`` with the test CA as ``caBundle``, creates (or
    replaces) it, waits until it is readable and returns the stored object. Everything installed
    is deleted when the test ends.
    """
    installed: list[str] = []

    def install(configuration: Mapping[str, Any], port: int) -> dict[str, Any]:
        body = point_webhooks_at(configuration, port, control_plane.ca.ca_bundle)
        path = webhook_configuration_path(body)
        body.get("metadata", {}).pop("resourceVersion", None)
        control_plane.request(
            "PATCH",
            path,
            body,
            query={"fieldManager": "gpustack-envtest", "force": "true"},
            content_type="application/apply-patch+yaml",
        )
        installed.append(path)
        deadline = time.monotonic() + 10
        while True:
            try:
                _, stored = control_plane.request("GET", path)
                return dict(stored)
            except APIError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    yield install
    for path in reversed(installed):
        try:
            control_plane.request("DELETE", path)
        except APIError as exc:
            if exc.status != 404:
                raise
