"""The self-managed certificates' Secret, shipped empty by the manifests, through the lifecycle of
the real installers against the simulated cluster's API server.

The webhook server runs as a local process authenticated as the installed ServiceAccount (a
TokenRequest token), whose Role grants ``get`` and ``update`` on that one Secret and no
``create``; the Deployments are scaled to zero (KWOK runs no containers), as
tests/integration/test_install.py does.

* helm (the real binary, ``--kubeconfig`` of the test API server): ``helm install`` ships the
  Secret empty; with the Secret gone (an install that ships none) the server stays alive and not
  ready (``/healthz`` 200, ``/readyz`` 503 on the probe port), logging each pass the Secret, its
  namespace and what to do, and never crashes; ``helm upgrade`` puts the Secret back and the
  server fills it and serves; a ``helm upgrade`` with a changed value keeps the Secret's data
  byte for byte (same CA and certificate, nothing re-issued); ``helm uninstall`` deletes it.
* an install whose server created the Secret itself (before the manifests shipped it): helm
  refuses to take it over until it is labelled and annotated for the release (as
  docs/operations.md says), then keeps its type and data;
* kubectl: the rendered ``deploy/webhook`` (its ServiceAccount, RBAC and Secret) applied
  client-side, filled by the server, applied again client-side and then ``--server-side``
  (without forcing conflicts): the data the server wrote stays; ``kubectl delete`` of the same
  objects deletes the Secret; a ``kubectl replace`` of the shipped Secret in between empties it,
  and the server issues a new CA into it and serves the new certificate.
"""

from __future__ import annotations

import base64
import json
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gpustack_webhook.rotation import SECRET_LABELS

from .cluster import Cluster, ClusterBinaries
from .controlplane import APIError, ControlPlane, free_port
from .manifests import Objects, run, yaml_stream
from .test_chart import CHART, NAMESPACE
from .test_install import container_args, replace_flag
from .webhook_fixtures import WebhookProcess, delete_if_present, token_kubeconfig, wait_for

REPO_ROOT = Path(__file__).resolve().parents[2]
SECRET = "gpustack-webhook-tls"
SECRET_PATH = f"/api/v1/namespaces/{NAMESPACE}/secrets/{SECRET}"
RELEASE = "gpustack-render"
#: The chart without its CRDs (the suite installed them) and with nothing to schedule.
CHART_ARGS = (
    "--set", "crds.install=false",
    "--set", "controller.replicas=0",
    "--set", "webhook.replicas=0",
)  # fmt: skip
#: The kinds of deploy/webhook the server's identity and its Secret are made of.
IDENTITY_KINDS = {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
#: The keys the server writes.
FILLED_KEYS = ("ca.crt", "ca.key", "tls.crt", "tls.key")


def secret(cp: ControlPlane) -> dict[str, Any] | None:
    try:
        return dict(cp.request("GET", SECRET_PATH)[1])
    except APIError as exc:
        if exc.status == 404:
            return None
        raise


def filled(cp: ControlPlane) -> dict[str, Any]:
    """The Secret, once the server wrote its four keys."""
    stored = secret(cp)
    assert stored is not None, "the Secret is gone"
    assert set(stored.get("data") or {}) == set(FILLED_KEYS), stored
    assert stored["type"] == "Opaque"  # the shipped type, kept
    return stored


def _filled_or_none(cp: ControlPlane) -> dict[str, Any] | None:
    stored = secret(cp)
    return stored if stored and set(stored.get("data") or {}) == set(FILLED_KEYS) else None


def _verifies(port: int, ca_pem: str) -> bool:
    """Whether the server on ``port`` presents a certificate that ``ca_pem`` signed."""
    context = ssl.create_default_context(cadata=ca_pem)
    context.check_hostname = False  # the certificate names the Service, not this address
    try:
        with (
            socket.create_connection(("127.0.0.1", port), timeout=2) as raw,
            context.wrap_socket(raw),
        ):
            return True
    except (ssl.SSLError, OSError):
        return False


def http_status(url: str) -> int | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return None


def records(server: WebhookProcess) -> list[dict[str, Any]]:
    """The server's structured log lines."""
    out = []
    for line in server.log_lines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            out.append(record)
    return out


def warnings(server: WebhookProcess) -> list[dict[str, Any]]:
    return [r for r in records(server) if r.get("level") == "warning"]


def count(server: WebhookProcess, message: str) -> int:
    return sum(1 for r in records(server) if r.get("msg") == message)


def local_server(
    cp: ControlPlane, args: list[str], tmp_path: Path, name: str
) -> tuple[WebhookProcess, int]:
    """The webhook server with the manifests' arguments (ports of this host, a short interval)
    as the installed ServiceAccount; and its probe port."""
    probe_port = free_port()
    port = free_port()
    args = replace_flag(replace_flag(args, "--port", str(port)), "--probe-port", str(probe_port))
    server = WebhookProcess(
        kubeconfig=token_kubeconfig(cp, NAMESPACE, "gpustack-webhook", tmp_path / f"{name}.kc"),
        ca=cp.ca,
        namespace=NAMESPACE,
        workdir=tmp_path / name,
        port=port,
        tls_secret=SECRET,
        extra_args=[
            *(a for a in args if not a.startswith("--tls-secret=")),
            "--cert-reload-interval=0.5",
        ],
    )
    return server, probe_port


@dataclass(frozen=True)
class Helm:
    """The real ``helm`` against the test API server, in the release namespace."""

    argv: tuple[str, ...]

    def __call__(self, *args: str) -> str:
        """Run it; its stdout (a failure fails the test)."""
        return run(*self.argv, *args)

    def refused(self, *args: str) -> str:
        """Run what must fail; its stderr."""
        result = subprocess.run(
            [*self.argv, *args], capture_output=True, text=True, timeout=120, check=False
        )
        assert result.returncode != 0, result.stdout
        return result.stderr


@pytest.fixture
def helm(cluster: Cluster, envtest_binaries: ClusterBinaries) -> Iterator[Helm]:
    """Helm; the release uninstalled afterwards (gone already when the test passed: its webhook
    configurations must not outlive it)."""
    kubeconfig = str(cluster.control_plane.kubeconfig)
    binary = str(envtest_binaries.path("helm"))
    helm = Helm((binary, "--kubeconfig", kubeconfig, "--namespace", NAMESPACE))
    try:
        yield helm
    finally:
        subprocess.run(
            [*helm.argv, "uninstall", RELEASE], capture_output=True, timeout=120, check=False
        )
        delete_if_present(cluster.control_plane, SECRET_PATH)


def test_helm_ships_the_secret_keeps_its_certificate_on_upgrade_and_deletes_it(
    cluster: Cluster, helm: Helm, tmp_path: Path
) -> None:
    cp = cluster.control_plane
    helm("install", RELEASE, str(CHART), "--create-namespace", *CHART_ARGS)
    shipped = secret(cp)
    assert shipped is not None and not shipped.get("data") and shipped["type"] == "Opaque"
    objects = yaml_stream(helm("get", "manifest", RELEASE))
    server, probe_port = local_server(
        cp, container_args(objects, "gpustack-webhook"), tmp_path, "webhook"
    )
    try:
        # No Secret and no right to create one: alive, not ready, saying why every pass.
        delete_if_present(cp, SECRET_PATH)
        server.launch()
        probes = f"http://127.0.0.1:{probe_port}"
        wait_for("alive", lambda: http_status(f"{probes}/healthz") == 200)
        wait_for("a warning per pass", lambda: len(warnings(server)) >= 3)
        assert http_status(f"{probes}/readyz") == 503
        assert not server.ready()
        for record in warnings(server):
            assert record["msg"] == "no serving certificate yet; retrying", record
            assert (record["namespace"], record["secret"]) == (NAMESPACE, SECRET)
            assert f"the Secret {NAMESPACE}/{SECRET} does not exist" in record["error"]
            assert "403" in record["error"]
            assert "apply the empty Secret the manifests ship" in record["error"]

        # An upgrade puts the shipped Secret back; the server fills it and serves.
        helm("upgrade", RELEASE, str(CHART), *CHART_ARGS)
        server.wait_ready()
        assert http_status(f"{probes}/readyz") == 200
        first = filled(cp)
        assert first["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm"

        # An upgrade with a changed value reaches the objects and leaves the Secret's data.
        helm("upgrade", RELEASE, str(CHART), *CHART_ARGS,
             "--set", "webhook.connectionLimits.maxConnections=1000")  # fmt: skip
        upgraded = yaml_stream(helm("get", "manifest", RELEASE))
        assert "--max-connections=1000" in container_args(upgraded, "gpustack-webhook")
        time.sleep(1.5)  # a few of the server's passes
        after = filled(cp)
        assert after["data"] == first["data"]
        assert after["metadata"]["uid"] == first["metadata"]["uid"]  # patched, never replaced
        assert count(server, "wrote the certificate Secret") == 1
        assert server.ready(), server.log_tail()
    finally:
        server.close()

    helm("uninstall", RELEASE, "--wait")
    assert secret(cp) is None


def test_helm_takes_over_a_secret_the_server_created_once_it_is_marked_for_the_release(
    cluster: Cluster, helm: Helm
) -> None:
    cp = cluster.control_plane
    cluster.kubectl("create", "namespace", NAMESPACE, check=False)
    # What a server that created its own Secret left: its labels, kubernetes.io/tls, data.
    data = {k: base64.b64encode(f"{k} bytes".encode()).decode() for k in FILLED_KEYS}
    cp.request(
        "POST",
        SECRET_PATH.rsplit("/", 1)[0],
        {
            "metadata": {"name": SECRET, "labels": dict(SECRET_LABELS)},
            "type": "kubernetes.io/tls",
            "data": data,
        },
    )
    refused = helm.refused("install", RELEASE, str(CHART), *CHART_ARGS)
    assert SECRET in refused and "ownership" in refused, refused
    namespaced = ("-n", NAMESPACE, "secret", SECRET)
    cluster.kubectl("label", *namespaced, "app.kubernetes.io/managed-by=Helm", "--overwrite")
    cluster.kubectl(
        "annotate", *namespaced, f"meta.helm.sh/release-name={RELEASE}",
        f"meta.helm.sh/release-namespace={NAMESPACE}",
    )  # fmt: skip
    helm("install", RELEASE, str(CHART), *CHART_ARGS)
    stored = secret(cp)
    assert stored is not None
    assert (stored["type"], stored["data"]) == ("kubernetes.io/tls", data)
    helm("uninstall", RELEASE, "--wait")
    assert secret(cp) is None


def kubectl_apply(cluster: Cluster, objects: Objects, *flags: str) -> None:
    stream = "\n".join(json.dumps(o) for o in objects)
    result = cluster.kubectl("apply", *flags, "-f", "-", input=stream, check=False)
    assert result.returncode == 0, result.stderr


def test_kubectl_apply_client_and_server_side_keeps_the_data_the_server_wrote(
    cluster: Cluster, envtest_binaries: ClusterBinaries, tmp_path: Path
) -> None:
    cp = cluster.control_plane
    rendered = yaml_stream(
        run(envtest_binaries.kubectl, "kustomize", REPO_ROOT / "deploy" / "webhook")
    )
    applied = [
        o for o in rendered if o["kind"] in IDENTITY_KINDS or (o["kind"], o["metadata"]["name"])
        == ("Secret", SECRET)
    ]  # fmt: skip
    assert [o for o in applied if o["kind"] == "Secret"], "deploy/webhook ships no Secret"
    cluster.kubectl("create", "namespace", NAMESPACE, check=False)
    kubectl_apply(cluster, applied)
    server, _ = local_server(cp, container_args(rendered, "gpustack-webhook"), tmp_path, "wh")
    try:
        server.start()
        first = filled(cp)
        for flags in ((), ("--server-side",), ("--server-side",), ()):
            kubectl_apply(cluster, applied, *flags)
            assert filled(cp)["data"] == first["data"], flags
        time.sleep(1.5)  # the server's next passes find nothing to write
        assert filled(cp)["data"] == first["data"]
        assert count(server, "wrote the certificate Secret") == 1

        # A replace (kubectl replace, helm upgrade --force) empties the Secret: the server issues a
        # new CA and certificate into it within an interval, keeps the shipped type, and serves
        # the new certificate.
        shipped = next(o for o in applied if o["kind"] == "Secret")
        replaced = cluster.kubectl("replace", "-f", "-", input=json.dumps(shipped), check=False)
        assert replaced.returncode == 0, replaced.stderr
        again = wait_for("the replaced Secret to be filled", lambda: _filled_or_none(cp))
        assert again["type"] == "Opaque"
        assert again["data"]["ca.crt"] != first["data"]["ca.crt"]
        new_ca = base64.b64decode(again["data"]["ca.crt"]).decode()
        wait_for("the server to serve the new certificate", lambda: _verifies(server.port, new_ca))
        assert not _verifies(server.port, base64.b64decode(first["data"]["ca.crt"]).decode())
        assert count(server, "wrote the certificate Secret") == 2
    finally:
        server.close()
        result = cluster.kubectl(
            "delete", "--ignore-not-found", "-f", "-",
            input="\n".join(json.dumps(o) for o in applied), check=False,
        )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert secret(cp) is None  # deleting the manifests deletes the Secret
