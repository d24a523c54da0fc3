"""The webhook server as a process beside the envtest control plane (tests and the benchmark).

:class:`WebhookProcess` runs ``python -m gpustack_webhook`` exactly as the Deployment does (TLS
from certificate files issued by the test CA, live reads through a kubeconfig, SIGTERM to stop),
on a free loopback port. :func:`scoped_configurations` turns ``deploy/webhook/webhooks.yaml`` into
configurations that only reach namespaces carrying a label (so the registrations a test installs
can never touch another test's objects) and :class:`InstalledWebhooks` creates them pointing at
the process by URL and removes them again.

Standard library only (plus the control-plane helpers), so a plain script can use it too.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import re
import signal
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .controlplane import (
    APIError,
    CertificateAuthority,
    ControlPlane,
    free_port,
    load_yaml_documents,
    point_webhooks_at,
    webhook_configuration_path,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
WEBHOOK_MANIFESTS = REPO_ROOT / "deploy" / "webhook" / "webhooks.yaml"

#: Namespace label that scopes the test registrations (value: the scope id).
SCOPE_LABEL = "webhook-test.gpustack.ai/scope"

GROUP = "worker.gpustack.ai"
VERSION = "v1"
#: The Pod opt-in label (docs/contract/injection-notes.md §1).
INJECT_LABEL = "kvcache.gpustack.ai/inject"
#: How long the API server may take to pick up a new registration or RBAC change.
SETTLE_SECONDS = 20.0


def _die_with_parent() -> None:
    with contextlib.suppress(Exception):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG


class WebhookProcess:
    """``python -m gpustack_webhook`` on 127.0.0.1 with a serving certificate from ``ca``, or,
    with ``tls_secret``, with the self-managed certificate it keeps in that Secret (then
    ``/readyz`` is polled without verifying the certificate: the test does not know its CA)."""

    def __init__(
        self,
        *,
        kubeconfig: Path,
        ca: CertificateAuthority,
        namespace: str,
        workdir: Path | None = None,
        extra_args: Sequence[str] = (),
        port: int | None = None,
        tls_secret: str | None = None,
    ) -> None:
        self.kubeconfig = kubeconfig
        self.tls_secret = tls_secret
        self.ca = ca
        self.namespace = namespace
        self.extra_args = list(extra_args)
        self.port = port or free_port()
        self._own_workdir = workdir is None
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="gpustack-webhook-"))
        self.log_path = self.workdir / "webhook.log"
        self._popen: subprocess.Popen[bytes] | None = None
        self._client_ssl = ssl.create_default_context(cadata=ca.cert_pem.decode())
        if tls_secret is not None:
            self._client_ssl.check_hostname = False
            self._client_ssl.verify_mode = ssl.CERT_NONE

    @property
    def pid(self) -> int:
        """The server process's id (0 before it started)."""
        return self._popen.pid if self._popen is not None else 0

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> None:
        """Start the process and wait (bounded) until ``/readyz`` answers over TLS."""
        self.launch()
        self.wait_ready(timeout)

    def launch(self) -> None:
        """Start the process without waiting for it."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        if self.tls_secret is not None:
            certificate = [f"--tls-secret={self.tls_secret}", "--cert-host=127.0.0.1"]
        else:
            tls = self.workdir / "tls"
            cert, key = self.ca.issue_serving(("127.0.0.1", "localhost")).write(tls, "tls")
            certificate = [f"--cert-file={cert}", f"--key-file={key}"]
        argv = [
            sys.executable,
            "-m",
            "gpustack_webhook",
            *certificate,
            "--host=127.0.0.1",
            f"--port={self.port}",
            f"--namespace={self.namespace}",
            f"--kubeconfig={self.kubeconfig}",
            "--shutdown-delay=0",
            "--shutdown-timeout=5",
            *self.extra_args,
        ]
        log = self.log_path.open("ab")
        try:
            self._popen = subprocess.Popen(
                argv,
                cwd=REPO_ROOT,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
                preexec_fn=_die_with_parent,
            )
        finally:
            log.close()

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Wait (bounded) until ``/readyz`` answers over TLS."""
        assert self._popen is not None
        deadline = time.monotonic() + timeout
        while not self.ready():
            if self._popen.poll() is not None:
                raise RuntimeError(
                    f"webhook server exited with {self._popen.returncode}:\n{self.log_tail()}"
                )
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"webhook server not ready after {timeout:g}s")
            time.sleep(0.05)

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(
                f"{self.url}/readyz", context=self._client_ssl, timeout=2
            ) as resp:
                return int(resp.status) == 200
        except (OSError, urllib.error.URLError):
            return False

    def get(self, path: str) -> str:
        """A GET on the server (for ``/metrics``)."""
        with urllib.request.urlopen(
            f"{self.url}{path}", context=self._client_ssl, timeout=5
        ) as resp:
            return str(resp.read().decode())

    def stop(self, timeout: float = 15.0) -> int | None:
        """SIGTERM, wait (bounded), SIGKILL as a last resort; returns the exit code."""
        popen = self._popen
        code: int | None = None
        if popen is not None:
            if popen.poll() is None:
                popen.send_signal(signal.SIGTERM)
                try:
                    popen.wait(timeout)
                except subprocess.TimeoutExpired:
                    popen.kill()
                    popen.wait(timeout)
            code = popen.returncode
            self._popen = None
        return code

    def close(self) -> None:
        """Stop the process and remove the working directory this object created."""
        self.stop()
        if self._own_workdir:
            import shutil

            shutil.rmtree(self.workdir, ignore_errors=True)

    def log_tail(self, lines: int = 60) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def log_lines(self) -> list[str]:
        try:
            return self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return []

    def __enter__(self) -> WebhookProcess:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def shipped_configurations() -> list[dict[str, Any]]:
    """The Mutating/ValidatingWebhookConfigurations of deploy/webhook, as shipped."""
    return [
        doc
        for doc in load_yaml_documents(WEBHOOK_MANIFESTS)
        if doc.get("kind") in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
    ]


def scoped_configurations(scope: str) -> list[dict[str, Any]]:
    """The shipped configurations, renamed ``<name>-<scope>`` and limited to namespaces labelled
    ``SCOPE_LABEL=<scope>``; rules, selectors and policies stay as shipped."""
    out = []
    for configuration in shipped_configurations():
        doc = copy.deepcopy(configuration)
        doc["metadata"]["name"] = f"{doc['metadata']['name']}-{scope}"
        doc["metadata"].pop("annotations", None)
        for hook in doc["webhooks"]:
            hook["namespaceSelector"] = {"matchLabels": {SCOPE_LABEL: scope}}
        out.append(doc)
    return out


class InstalledWebhooks:
    """Webhook configurations created on the control plane, calling ``port`` by URL."""

    def __init__(
        self, control_plane: ControlPlane, configurations: Sequence[Mapping[str, Any]], port: int
    ) -> None:
        self.control_plane = control_plane
        self.paths: list[str] = []
        self.stored: list[dict[str, Any]] = []
        for configuration in configurations:
            body = point_webhooks_at(configuration, port, control_plane.ca.ca_bundle)
            path = webhook_configuration_path(body)
            control_plane.request(
                "PATCH",
                path,
                body,
                query={"fieldManager": "gpustack-webhook-test", "force": "true"},
                content_type="application/apply-patch+yaml",
            )
            self.paths.append(path)
            _, stored = control_plane.request("GET", path)
            self.stored.append(dict(stored))

    def remove(self) -> None:
        for path in reversed(self.paths):
            try:
                self.control_plane.request("DELETE", path)
            except APIError as exc:
                if exc.status != 404:
                    raise
        self.paths.clear()

    def __enter__(self) -> InstalledWebhooks:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()


def create_namespace(control_plane: ControlPlane, name: str, labels: Mapping[str, str]) -> None:
    """Create (or keep) a namespace with ``labels``."""
    body = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": dict(labels)},
    }
    try:
        control_plane.request("POST", "/api/v1/namespaces", body)
    except APIError as exc:
        if exc.status != 409:
            raise


# ---- objects -------------------------------------------------------------------------------


def deployment(name: str, namespace: str, instance_type: str, **role: Any) -> dict[str, Any]:
    """A one-role vLLM ModelDeployment; ``role`` adds fields to the role."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ModelDeployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "model": {"name": "Qwen/Qwen3-8B"},
            "engine": {"name": "vLLM", "image": "vllm/vllm-openai:v0.25.1"},
            "roles": [{"name": "server", "instanceType": instance_type, **role}],
        },
    }


def labelled_pod(name: str, binding: str | None, **annotations: str) -> dict[str, Any]:
    """An opted-in vLLM Pod naming ``binding`` (none when None)."""
    annotations = {"kvcache.gpustack.ai/engine": "vLLM", **annotations}
    if binding is not None:
        annotations["kvcache.gpustack.ai/binding"] = binding
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {INJECT_LABEL: "true"}, "annotations": annotations},
        "spec": {
            "containers": [
                {
                    "name": "server",
                    "image": "vllm/vllm-openai:v0.29.0",
                    "command": ["vllm"],
                    "args": ["serve", "--model", "Qwen/Qwen3-8B"],
                    "env": [{"name": "HF_TOKEN", "value": "hf-secret-never-logged"}],
                }
            ]
        },
    }


def create_cluster_object(cp: ControlPlane, plural: str, body: dict[str, Any]) -> None:
    status = body.pop("status", None)
    name = body["metadata"]["name"]
    cp.request("POST", f"/apis/{GROUP}/{VERSION}/{plural}", body)
    if status is not None:
        cp.request(
            "PATCH",
            f"/apis/{GROUP}/{VERSION}/{plural}/{name}/status",
            {"status": status},
            content_type="application/merge-patch+json",
        )


def create_inputs(cp: ControlPlane, scope: str, namespace: str) -> tuple[str, str, str]:
    """An acceleratable InstanceType (capacity 16) and a ready Binding ``chat`` in ``namespace``
    → pool → TCP backend; returns (instance type, binding, pool) names. Cluster-scoped names
    carry ``scope``; :func:`delete_inputs` removes them."""
    instance_type = f"it-{scope}"
    create_cluster_object(
        cp,
        "instancetypes",
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "InstanceType",
            "metadata": {"name": instance_type},
            "spec": {"acceleratable": True, "unitResources": {"cpu": "8", "ram": "32Gi"}},
            "status": {
                "entrance": instance_type,
                "detail": {"manufacturer": "nvidia", "memory": "24Gi"},
                "accelerator": {"capacity": 16},
            },
        },
    )
    backend, pool, binding = f"be-{scope}", f"pool-{scope}", "chat"
    create_cluster_object(
        cp,
        "kvcachebackends",
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "KVCacheBackend",
            "metadata": {"name": backend},
            "spec": {
                "transport": {"protocol": "TCP"},
                "connection": {"managed": {"leader": {"multiTenancy": True}}},
            },
        },
    )
    create_cluster_object(
        cp,
        "kvcachepools",
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "KVCachePool",
            "metadata": {"name": pool},
            "spec": {"backends": [backend]},
            "status": {
                "clientEndpoint": f"{pool}-master.gpustack-system.svc:50051",
                "conditions": [
                    {
                        "type": "QuotaLedgerAvailable",
                        "status": "True",
                        "reason": "Available",
                        "message": "",
                        "lastTransitionTime": "2026-01-01T00:00:00Z",
                    }
                ],
            },
        },
    )
    cp.request(
        "POST",
        f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/kvcachepoolbindings",
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "KVCachePoolBinding",
            "metadata": {"name": binding, "namespace": namespace},
            "spec": {
                "poolRef": {"name": pool},
                "domain": {"name": "team-a-chat", "blockSize": 16, "dtype": "bfloat16"},
            },
        },
    )
    return instance_type, binding, pool


def delete_inputs(cp: ControlPlane, scope: str) -> None:
    for plural, name in (
        ("instancetypes", f"it-{scope}"),
        ("kvcachepools", f"pool-{scope}"),
        ("kvcachebackends", f"be-{scope}"),
    ):
        try:
            cp.request("DELETE", f"/apis/{GROUP}/{VERSION}/{plural}/{name}")
        except APIError as exc:
            if exc.status != 404:
                raise


def wait_until_called(cp: ControlPlane, namespace: str, instance_type: str) -> None:
    """Poll (bounded) with dry-run creates until both registrations reach the server: one
    refused by the mutating half (a missing InstanceType), one by the validating half (an
    owned env name)."""
    probes = [
        deployment("probe-mutate", namespace, f"missing-{uuid.uuid4().hex[:6]}"),
        deployment(
            "probe-validate",
            namespace,
            instance_type,
            env=[{"name": "GPUSTACK_REPLICA_SIZE", "value": "1"}],
        ),
    ]
    deadline = time.monotonic() + SETTLE_SECONDS
    for probe in probes:
        while True:
            try:
                cp.request(
                    "POST",
                    f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/modeldeployments",
                    probe,
                    query={"dryRun": "All"},
                )
            except APIError as exc:
                if "admission webhook" in exc.body:
                    break
                raise
            if time.monotonic() > deadline:
                raise AssertionError("the webhook registrations never took effect")
            time.sleep(0.1)


def token_kubeconfig(
    cp: ControlPlane, namespace: str, account: str, path: Path, *, expires_in: int = 3600
) -> Path:
    """A kubeconfig authenticating as the ServiceAccount ``namespace/account`` with a token from
    the TokenRequest API (what the kubelet mounts into the account's Pods), valid for
    ``expires_in`` seconds."""
    _, answer = cp.request(
        "POST",
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token",
        {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": expires_in},
        },
    )
    # The control plane's own kubeconfig (its server and CA), the account's token as the user.
    config = cp.kubeconfig_dict(account)
    config["users"] = [{"name": account, "user": {"token": answer["status"]["token"]}}]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config))
    return path


# ---- self-managed certificates ---------------------------------------------------------------


# How the two servers log an API answer of 403: the webhook's reads and writes say "answered 403",
# the controller's ApiError says "HTTP 403", and the Status body names its code and reason.
_FORBIDDEN = re.compile(
    r"\b(?:answered|HTTP) 403\b"
    r"|\b403 Forbidden\b"
    r'|"code\\?":\s*403\b'
    r'|"reason\\?":\s*\\?"Forbidden'
)


def forbidden_answers(lines: Sequence[str]) -> list[str]:
    """The log lines that record the API server refusing a request with 403.

    Lines are searched for a 403 answer as the servers word it, never for the bare digits: a
    JSON record's uid, time and duration are left out first, since their digits may hold "403".
    """
    found = []
    for line in lines:
        searched = line
        with contextlib.suppress(ValueError):
            record = json.loads(line)
            if isinstance(record, dict):
                for volatile in ("uid", "time", "durationMs"):
                    record.pop(volatile, None)
                searched = json.dumps(record)
        if _FORBIDDEN.search(searched):
            found.append(line)
    return found


def wait_for(what: str, check: Any, timeout: float = SETTLE_SECONDS) -> Any:
    """Poll ``check`` until it answers something truthy (that answer); fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def calling_without_ca_bundle(configuration: Mapping[str, Any], port: int) -> dict[str, Any]:
    """A webhook configuration calling ``https://127.0.0.1:port`` by URL with no caBundle (for a
    server that writes its own, ``--tls-secret``)."""
    body = point_webhooks_at(configuration, port, "")
    for hook in body["webhooks"]:
        hook["clientConfig"].pop("caBundle")
    return body


def delete_if_present(cp: ControlPlane, path: str) -> None:
    """DELETE ``path``; one already gone is fine."""
    try:
        cp.request("DELETE", path)
    except APIError as exc:
        if exc.status != 404:
            raise


def dry_run_create(cp: ControlPlane, md: Mapping[str, Any]) -> dict[str, Any]:
    """Create a ModelDeployment with ``dryRun=All`` (through the webhooks); the object the API
    server would store."""
    ns = md["metadata"]["namespace"]
    _, stored = cp.request(
        "POST",
        f"/apis/{GROUP}/{VERSION}/namespaces/{ns}/modeldeployments",
        md,
        query={"dryRun": "All"},
    )
    return dict(stored)


def admits_and_refuses(
    cp: ControlPlane, good: Mapping[str, Any], bad: Mapping[str, Any], *, settle: float
) -> None:
    """Through the API server: ``good`` (its first role without ``resources.accelerator``) is
    admitted and defaulted to one accelerator by the mutating webhook, retrying for ``settle``
    seconds while the API server picks up a new caBundle; ``bad`` is refused (422) by the
    validating webhook."""
    deadline = time.monotonic() + settle
    while True:
        try:
            stored = dry_run_create(cp, good)
            break
        except APIError as exc:
            assert time.monotonic() < deadline, exc.body
            time.sleep(0.2)
    assert str(stored["spec"]["roles"][0]["resources"]["accelerator"]) == "1"
    try:
        dry_run_create(cp, bad)
    except APIError as exc:
        status = json.loads(exc.body)
    else:
        raise AssertionError(f"admitted: {bad['metadata']['name']}")
    assert status["code"] == 422, status
    assert "validate.gpustack-worker-modeldeployment" in status["message"], status
