"""Serving certificate reload and the server's TLS lifecycle (start, probes, graceful stop)."""

from __future__ import annotations

import asyncio
import datetime
import os
import ssl
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from gpustack_render.api.inputs import InputObject, KVCachePoolBinding
from gpustack_render.core.errors import Verdict
from gpustack_render.core.review import AdmissionRequest
from gpustack_render.core.settings import Settings
from gpustack_render.schema.lookups import Lookups
from gpustack_webhook.lookups import ReadKey, StaticSources
from gpustack_webhook.metrics import Metrics
from gpustack_webhook.server import Webhook, WebhookServer
from gpustack_webhook.tls import CertificateFiles, ReloadingCertificate


def write_pair(directory: Path, common_name: str) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key, written as tls.crt / tls.key."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .sign(key, hashes.SHA256())
    )
    directory.mkdir(parents=True, exist_ok=True)
    cert_path, key_path = directory / "tls.crt", directory / "tls.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


def secret_volume(root: Path, common_name: str) -> None:
    """Lay out ``root`` the way the kubelet writes a Secret volume, or rotate it atomically:
    ``tls.crt -> ..data/tls.crt`` and ``..data -> ..<timestamp>``."""
    version = root / f"..{uuid.uuid4().hex}"
    write_pair(version, common_name)
    tmp_link = root / "..data_tmp"
    tmp_link.symlink_to(version.name)
    os.replace(tmp_link, root / "..data")
    for name in ("tls.crt", "tls.key"):
        if not (root / name).is_symlink():
            (root / name).symlink_to(f"..data/{name}")


async def served_name(port: int, *, sni: str | None = None) -> str:
    """The common name of the certificate the server presents."""
    client = ssl.create_default_context()
    client.check_hostname = False
    client.verify_mode = ssl.CERT_NONE
    _, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=client, server_hostname=sni or ""
    )
    try:
        der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    finally:
        writer.close()
    cert = x509.load_der_x509_certificate(der)
    return str(cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value)


async def _echo_server(context: ssl.SSLContext) -> tuple[asyncio.Server, int]:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=context)
    return server, int(server.sockets[0].getsockname()[1])


async def test_rotated_secret_volume_is_served_without_a_restart(tmp_path: Path) -> None:
    root = tmp_path / "tls"
    root.mkdir()
    secret_volume(root, "first")
    metrics = Metrics()
    cert = ReloadingCertificate(
        CertificateFiles(root / "tls.crt", root / "tls.key"), metrics=metrics
    )
    server, port = await _echo_server(cert.context)
    try:
        assert await served_name(port) == "first"
        assert cert.check() is False  # nothing changed
        secret_volume(root, "second")
        assert cert.check() is True
        # Without SNI (the API server calling an IP address) and with it.
        assert await served_name(port) == "second"
        assert await served_name(port, sni="localhost") == "second"
        assert cert.generation == 2
        assert (
            metrics.registry.get_sample_value(
                "gpustack_webhook_certificate_reloads_total", {"result": "loaded"}
            )
            == 1.0
        )
    finally:
        server.close()
        await server.wait_closed()


async def test_a_pair_that_does_not_load_keeps_the_current_certificate(tmp_path: Path) -> None:
    cert_path, key_path = write_pair(tmp_path, "good")
    cert = ReloadingCertificate(CertificateFiles(cert_path, key_path))
    server, port = await _echo_server(cert.context)
    try:
        # A rotation caught half-way: the new certificate beside the old key.
        other_cert, _ = write_pair(tmp_path / "other", "other")
        cert_path.write_bytes(other_cert.read_bytes())
        os.utime(cert_path, ns=(time.time_ns(), time.time_ns() + 1_000_000))
        assert cert.check() is False
        assert await served_name(port) == "good"
        # Files gone for a moment: keep serving.
        cert_path.unlink()
        assert cert.check() is False
        assert await served_name(port) == "good"
    finally:
        server.close()
        await server.wait_closed()


def test_a_missing_certificate_fails_at_startup(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        ReloadingCertificate(CertificateFiles(tmp_path / "tls.crt", tmp_path / "tls.key"))


async def test_watch_polls_the_files(tmp_path: Path) -> None:
    root = tmp_path / "tls"
    root.mkdir()
    secret_volume(root, "first")
    cert = ReloadingCertificate(CertificateFiles(root / "tls.crt", root / "tls.key"))
    task = asyncio.create_task(cert.watch(0.02))
    try:
        secret_volume(root, "second")
        deadline = time.monotonic() + 5
        while cert.generation < 2:
            assert time.monotonic() < deadline, "the watcher never reloaded"
            await asyncio.sleep(0.02)
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


class SlowSources(StaticSources):
    """Every read takes half a second (a review in flight while the server stops)."""

    async def read(self, key: ReadKey, *, since: float | None = None) -> InputObject | None:
        await asyncio.sleep(0.5)
        return None


def _slow(request: AdmissionRequest, *, lookups: Lookups, settings: Settings) -> Verdict:
    lookups.get(KVCachePoolBinding, "team-a", "chat")
    return Verdict.allow()


def _review() -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u-slow",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "operation": "CREATE",
            "namespace": "team-a",
            "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}},
        },
    }


async def test_probes_answer_before_the_certificate_alive_and_not_ready(tmp_path: Path) -> None:
    """While a self-managed server waits for its Secret the kubelet sees it alive (no restart)
    and not ready (no endpoint); once the certificate is in service the same port says ready."""
    server = WebhookServer(StaticSources())
    await server.start_probes(host="127.0.0.1", port=0)
    plain = f"http://127.0.0.1:{server.probe_port}"
    probe_port = server.probe_port
    try:
        async with aiohttp.ClientSession() as session:
            assert (await session.get(f"{plain}/healthz")).status == 200
            assert (await session.get(f"{plain}/readyz")).status == 503
            assert (await session.get(f"{plain}/metrics")).status == 200
            cert_path, key_path = write_pair(tmp_path, "webhook")
            context = ReloadingCertificate(CertificateFiles(cert_path, key_path)).context
            await server.start(host="127.0.0.1", port=0, ssl_context=context, probe_port=0)
            assert server.probe_port == probe_port  # the listener already bound is kept
            assert (await session.get(f"{plain}/readyz")).status == 200
    finally:
        await server.stop()


async def test_server_lifecycle_tls_probes_and_graceful_stop(tmp_path: Path) -> None:
    cert_path, key_path = write_pair(tmp_path, "webhook")
    cert = ReloadingCertificate(CertificateFiles(cert_path, key_path))
    server = WebhookServer(
        SlowSources(), webhooks=[Webhook("slow", "/slow", "", "v1", "Pod", _slow)]
    )
    assert not server.ready
    await server.start(host="127.0.0.1", port=0, ssl_context=cert.context, probe_port=0)
    assert server.ready and server.port and server.probe_port
    insecure = ssl.create_default_context()
    insecure.check_hostname = False
    insecure.verify_mode = ssl.CERT_NONE
    https = f"https://127.0.0.1:{server.port}"
    plain = f"http://127.0.0.1:{server.probe_port}"
    async with aiohttp.ClientSession() as session:
        assert (await session.get(f"{plain}/readyz")).status == 200
        assert (await session.get(f"{https}/healthz", ssl=insecure)).status == 200
        # The plain listener serves no webhook.
        assert (await session.post(f"{plain}/slow", json=_review())).status == 404
        in_flight = asyncio.create_task(session.post(f"{https}/slow", json=_review(), ssl=insecure))
        await asyncio.sleep(0.2)  # the review is now waiting for its read
        stopping = asyncio.create_task(server.stop(drain_delay=0.1))
        await asyncio.sleep(0.05)
        # Draining: not ready, still answering.
        assert (await session.get(f"{plain}/readyz")).status == 503
        await stopping
        resp = await in_flight
        assert resp.status == 200
        assert (await resp.json())["response"] == {"uid": "u-slow", "allowed": True, "warnings": []}
        with pytest.raises(aiohttp.ClientConnectionError):
            await session.get(f"{https}/healthz", ssl=insecure)
