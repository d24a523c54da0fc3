"""Fixtures for tests against a real kube-apiserver + etcd (envtest style).

The control plane is started once per test session, on first use, by :func:`control_plane`:

* binaries: ``$GPUSTACK_ENVTEST_BIN_DIR`` (holding ``kube-apiserver`` and ``etcd``) or, when that
  is unset, whatever ``hack/envtest/build.sh`` prints (it builds into
  ``${GPUSTACK_ENVTEST_CACHE:-~/.cache/gpustack-render/envtest}`` once, then reuses it). Missing
  binaries that cannot be built make every integration test *error*, never skip.
* CRDs: every YAML file in ``deploy/crds/`` plus Kueue's Workload, LocalQueue, ClusterQueue and
  AdmissionCheck (pinned Kueue release, see ``controlplane.KUEUE_VERSION``), all Established
  before the first test runs.
* identity: the admin client certificate (O=system:masters); RBAC authorization is on.

Fixtures (see each docstring):

* ``control_plane`` (session) -> :class:`controlplane.ControlPlane`
* ``kubeconfig_path`` (session) -> ``Path`` of a kubeconfig that ``kubernetes_asyncio`` loads
* ``envtest_ca`` (session) -> :class:`controlplane.CertificateAuthority`
* ``k8s_client`` (async, per test) -> ``kubernetes_asyncio.client.ApiClient``
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

from .controlplane import (
    APIError,
    Binaries,
    CertificateAuthority,
    ControlPlane,
    ControlPlaneError,
    kueue_crd_files,
    locate_binaries,
    point_webhooks_at,
    project_crd_files,
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
def envtest_binaries() -> Binaries:
    """The kube-apiserver/etcd executables and Kueue CRD directory (built when needed)."""
    try:
        return locate_binaries()
    except ControlPlaneError as exc:
        pytest.fail(f"envtest control plane unavailable: {exc}", pytrace=False)


@pytest.fixture(scope="session")
def control_plane(envtest_binaries: Binaries) -> Iterator[ControlPlane]:
    """A running etcd + kube-apiserver with the project's and Kueue's CRDs Established."""
    # SIGTERM would otherwise end the run without finalizers; turn it into an interrupt so the
    # processes are stopped and the temp dir removed (they also die with this process anyway).
    previous = signal.getsignal(signal.SIGTERM)
    if previous == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
    cp = ControlPlane(envtest_binaries)
    try:
        cp.start()
        cp.install_crd_files([*project_crd_files(), *kueue_crd_files(envtest_binaries)])
    except BaseException:
        cp.stop()
        raise
    try:
        yield cp
    finally:
        cp.stop()
        if previous == signal.SIG_DFL:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)


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
