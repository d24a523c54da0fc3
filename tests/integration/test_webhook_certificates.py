"""Self-managed certificates end to end: the webhook server, run as a process with
``--tls-secret``, against the simulated cluster's API server, which calls it by URL.

The webhook configurations are created *without* a caBundle; the server must write it. Then:

* first start: the Secret is created (CA, serving certificate for the Service's names and
  127.0.0.1), every webhook that calls the server carries its CA, and the API server admits a
  ModelDeployment (defaulted by the mutating half) and refuses a bad one (the validating half);
* restart: the same certificate is served, and neither the Secret nor a configuration is written;
* rotation: with a serving lifetime of seconds the server presents a new certificate from the
  same CA every few seconds while requests through the API server keep succeeding;
* CA rotation: with a CA lifetime of seconds a new CA joins the bundle (the previous one stays
  while it is valid) and requests succeed afterwards;
* two replicas started at once agree on one Secret and both serve its certificate; each
  configuration calls a different replica, so every admitted request went through both.
"""

from __future__ import annotations

import base64
import json
import ssl
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from . import webhook_fixtures as fixtures
from .controlplane import ControlPlane, free_port, webhook_configuration_path
from .webhook_fixtures import (
    SCOPE_LABEL,
    SETTLE_SECONDS,
    WebhookProcess,
    calling_without_ca_bundle,
    create_inputs,
    create_namespace,
    delete_if_present,
    delete_inputs,
    deployment,
    dry_run_create,
    scoped_configurations,
    wait_for,
)

SECRET = "gpustack-webhook-tls"


@dataclass
class Scope:
    """One test's namespaces, inputs and webhook configurations (none with a caBundle)."""

    cp: ControlPlane
    scope: str
    system: str
    tenant: str
    instance_type: str
    configurations: list[dict[str, Any]]

    @property
    def names(self) -> dict[str, str]:
        return {c["kind"]: c["metadata"]["name"] for c in self.configurations}

    def server_args(self, *extra: str) -> list[str]:
        return [
            f"--mutating-webhook-configuration={self.names['MutatingWebhookConfiguration']}",
            f"--validating-webhook-configuration={self.names['ValidatingWebhookConfiguration']}",
            "--cert-reload-interval=0.5",
            *extra,
        ]

    def install(self, ports: dict[str, int]) -> None:
        """Create the configurations, each kind calling ``ports[kind]`` by URL, no caBundle."""
        for configuration in self.configurations:
            body = calling_without_ca_bundle(configuration, ports[configuration["kind"]])
            self.cp.request(
                "PATCH",
                webhook_configuration_path(body),
                body,
                query={"fieldManager": "gpustack-certificates-test", "force": "true"},
                content_type="application/apply-patch+yaml",
            )

    def stored(self) -> list[dict[str, Any]]:
        return [
            dict(self.cp.request("GET", webhook_configuration_path(c))[1])
            for c in self.configurations
        ]

    def bundles(self) -> set[str]:
        """Every webhook's caBundle (decoded)."""
        return {
            base64.b64decode(hook["clientConfig"].get("caBundle", "")).decode()
            for configuration in self.stored()
            for hook in configuration["webhooks"]
        }

    def secret(self) -> dict[str, Any]:
        _, secret = self.cp.request("GET", f"/api/v1/namespaces/{self.system}/secrets/{SECRET}")
        return dict(secret)

    def secret_data(self) -> dict[str, bytes]:
        return {k: base64.b64decode(v) for k, v in self.secret()["data"].items()}

    def server(self, tmp_path: Path, name: str, kubeconfig: Path, *extra: str) -> WebhookProcess:
        return WebhookProcess(
            kubeconfig=kubeconfig,
            ca=self.cp.ca,
            namespace=self.system,
            workdir=tmp_path / name,
            port=free_port(),
            tls_secret=SECRET,
            extra_args=self.server_args(*extra),
        )


@pytest.fixture
def scope(control_plane: ControlPlane) -> Iterator[Scope]:
    cp = control_plane
    scope = uuid.uuid4().hex[:8]
    system, tenant = f"certs-{scope}", f"wh-{scope}"
    create_namespace(cp, system, {})
    create_namespace(cp, tenant, {SCOPE_LABEL: scope})
    instance_type, _, _ = create_inputs(cp, scope, tenant)
    configurations = scoped_configurations(scope)
    yield Scope(cp, scope, system, tenant, instance_type, configurations)
    for configuration in configurations:
        delete_if_present(cp, webhook_configuration_path(configuration))
    delete_inputs(cp, scope)


def admits_and_refuses(s: Scope, *, settle: float = SETTLE_SECONDS) -> None:
    """Through the API server: a good deployment is admitted and defaulted, a bad one refused
    by the validating webhook (retrying while the API server picks up a new caBundle)."""
    good = deployment(f"md-{s.scope}", s.tenant, s.instance_type)
    bad = deployment(
        f"bad-{s.scope}",
        s.tenant,
        s.instance_type,
        env=[{"name": "GPUSTACK_REPLICA_SIZE", "value": "1"}],
    )
    fixtures.admits_and_refuses(s.cp, good, bad, settle=settle)


def served_certificate(port: int) -> bytes:
    """The DER certificate the server on ``port`` presents."""
    return ssl.PEM_cert_to_DER_cert(ssl.get_server_certificate(("127.0.0.1", port), timeout=5))


def der(pem: bytes) -> bytes:
    """The first certificate of a PEM bundle, DER-encoded."""
    return x509.load_pem_x509_certificates(pem)[0].public_bytes(Encoding.DER)


def test_first_start_then_a_restart_reuses_the_certificate(
    scope: Scope, kubeconfig_path: Path, tmp_path: Path
) -> None:
    s = scope
    server = s.server(tmp_path, "first", kubeconfig_path)
    s.install(dict.fromkeys(s.names, server.port))
    assert s.bundles() == {""}
    with server:
        data = s.secret_data()
        assert {"tls.crt", "tls.key", "ca.crt", "ca.key"} <= set(data)
        assert s.secret()["type"] == "kubernetes.io/tls"
        cert = x509.load_pem_x509_certificate(data["tls.crt"])
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert f"gpustack-webhook.{s.system}.svc" in san.get_values_for_type(x509.DNSName)
        assert served_certificate(server.port) == der(data["tls.crt"])
        # Every webhook of both configurations carries the Secret's CA.
        assert s.bundles() == {data["ca.crt"].decode()}
        admits_and_refuses(s)
        secret_version = s.secret()["metadata"]["resourceVersion"]
        versions = [c["metadata"]["resourceVersion"] for c in s.stored()]

    restarted = s.server(tmp_path, "restarted", kubeconfig_path)
    restarted.port = server.port  # the configurations call this port
    with restarted:
        time.sleep(2)  # a few passes of --cert-reload-interval=0.5
        assert served_certificate(restarted.port) == der(data["tls.crt"])
        assert s.secret()["metadata"]["resourceVersion"] == secret_version
        assert [c["metadata"]["resourceVersion"] for c in s.stored()] == versions
        admits_and_refuses(s)
    assert not [line for line in restarted.log_lines() if "wrote the" in line]


def test_rotation_serves_new_certificates_while_requests_succeed(
    scope: Scope, kubeconfig_path: Path, tmp_path: Path
) -> None:
    s = scope
    # Renewed once less than a third of 6 s remains: a new certificate every ~4 s.
    server = s.server(tmp_path, "rotating", kubeconfig_path, "--cert-lifetime=6s")
    s.install(dict.fromkeys(s.names, server.port))
    with server:
        ca = s.secret_data()["ca.crt"]
        admits_and_refuses(s)
        seen = {served_certificate(server.port)}
        deadline = time.monotonic() + 14
        requests = 0
        while time.monotonic() < deadline:
            # No retry: every request must go through while certificates change.
            stored = dry_run_create(s.cp, deployment(f"md-{s.scope}", s.tenant, s.instance_type))
            assert str(stored["spec"]["roles"][0]["resources"]["accelerator"]) == "1"
            requests += 1
            seen.add(served_certificate(server.port))
            time.sleep(0.1)
        assert len(seen) >= 3, f"{len(seen)} certificates in 14 s"
        assert requests > 20
        assert s.secret_data()["ca.crt"] == ca  # same CA: the caBundle stayed valid
        assert s.bundles() == {ca.decode()}
        assert served_certificate(server.port) == der(s.secret_data()["tls.crt"])


def test_ca_rotation_keeps_the_previous_ca_in_the_bundle(
    scope: Scope, kubeconfig_path: Path, tmp_path: Path
) -> None:
    s = scope
    # The CA is renewed once less than a third of 9 s remains (every ~6 s).
    server = s.server(tmp_path, "ca", kubeconfig_path, "--ca-lifetime=9s", "--cert-lifetime=9s")
    s.install(dict.fromkeys(s.names, server.port))
    with server:
        first = x509.load_pem_x509_certificates(s.secret_data()["ca.crt"])[0]
        admits_and_refuses(s)

        def rotated() -> list[x509.Certificate] | None:
            cas = x509.load_pem_x509_certificates(s.secret_data()["ca.crt"])
            return cas if cas[0] != first else None

        cas = wait_for("a new CA", rotated)
        assert cas[1:] == [first]  # the previous CA stays while it is valid
        bundle = s.secret_data()["ca.crt"].decode()
        wait_for("the new bundle", lambda: s.bundles() == {bundle})
        admits_and_refuses(s, settle=5)


def test_two_replicas_agree_on_one_secret(
    scope: Scope, kubeconfig_path: Path, tmp_path: Path
) -> None:
    s = scope
    first = s.server(tmp_path, "a", kubeconfig_path)
    second = s.server(tmp_path, "b", kubeconfig_path)
    # The mutating configuration calls one replica, the validating one the other.
    s.install(
        {
            "MutatingWebhookConfiguration": first.port,
            "ValidatingWebhookConfiguration": second.port,
        }
    )
    try:
        first.launch()
        second.launch()
        first.wait_ready()
        second.wait_ready()
        data = s.secret_data()
        time.sleep(1.5)  # a few passes: nobody rewrites the agreed Secret
        assert s.secret_data() == data
        for server in (first, second):
            assert served_certificate(server.port) == der(data["tls.crt"])
        assert s.bundles() == {data["ca.crt"].decode()}
        admits_and_refuses(s)
    finally:
        first.close()
        second.close()
    # One write won; a replica that lost the race says so in another line ("another replica
    # wrote the certificate Secret first"), which is not a write.
    writes = [
        line
        for server in (first, second)
        for line in server.log_lines()
        if _message(line) == "wrote the certificate Secret"
    ]
    assert len(writes) == 1, writes


def _message(line: str) -> str | None:
    """The ``msg`` of one structured log line (``None`` for a line that is not one)."""
    try:
        record = json.loads(line)
    except ValueError:
        return None
    return record.get("msg") if isinstance(record, dict) else None
