"""The serving certificate: from mounted files or from memory, replaced without a restart.

The listening socket keeps one *base* :class:`ssl.SSLContext` for its whole life. Its server-name
callback, which OpenSSL runs for every handshake (with or without SNI; the API server sends none
when it calls an IP address), hands each new connection the context built from the newest
certificate. A background task polls the files' identity (inode, size, modification time,
following symlinks so a Secret volume's atomic ``..data`` swap is seen) and builds a fresh context
when they change. A pair that does not load (a half-written rotation, a key that does not match)
is reported and the previous certificate stays in service.

With self-managed certificates (:mod:`gpustack_webhook.rotation`) there are no files:
:class:`MemoryCertificate` serves PEM bytes read from the Secret, loaded through an anonymous
in-memory file (the root file system may be read-only, and the key never touches a disk).
"""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path

from gpustack_webhook.logs import LOGGER_NAME, fields
from gpustack_webhook.metrics import RELOAD_FAILED, RELOAD_LOADED, Metrics

log = logging.getLogger(f"{LOGGER_NAME}.tls")

_Stamp = tuple[tuple[int, int, int], ...]


def _server_context() -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    # The API server speaks HTTP/1.1 to webhooks unless h2 is offered; aiohttp serves HTTP/1.1.
    context.set_alpn_protocols(["http/1.1"])
    return context


@dataclass(frozen=True)
class CertificateFiles:
    """Paths of a PEM certificate chain and its private key."""

    cert_file: Path
    key_file: Path

    def stamp(self) -> _Stamp:
        """The files' identity; changes whenever either file is replaced or rewritten."""
        out = []
        for path in (self.cert_file, self.key_file):
            st = os.stat(path)
            out.append((st.st_ino, st.st_size, st.st_mtime_ns))
        return tuple(out)

    def load(self) -> ssl.SSLContext:
        """A new server context holding this pair; raises ``OSError``/``ssl.SSLError``."""
        context = _server_context()
        context.load_cert_chain(self.cert_file, self.key_file)
        return context


def load_pem(cert_pem: bytes, key_pem: bytes) -> ssl.SSLContext:
    """A new server context holding a PEM chain and key given as bytes; raises
    ``OSError``/``ssl.SSLError`` when they do not load or do not match."""
    context = _server_context()
    combined = key_pem.rstrip(b"\n") + b"\n" + cert_pem
    memfd_create = getattr(os, "memfd_create", None)
    if memfd_create is not None:
        fd = memfd_create("gpustack-webhook-tls", getattr(os, "MFD_CLOEXEC", 0))
        try:
            view = memoryview(combined)
            while view:
                view = view[os.write(fd, view) :]
            context.load_cert_chain(f"/proc/self/fd/{fd}")
        finally:
            os.close(fd)
        return context
    with tempfile.TemporaryDirectory(prefix="gpustack-webhook-tls-") as directory:
        path = Path(directory) / "tls.pem"
        path.write_bytes(combined)
        path.chmod(0o600)
        context.load_cert_chain(path)
    return context


class _Switching:
    """The base context's server-name callback hands each handshake ``_current``; a new
    context replaces it (and is counted) through :meth:`_switch`."""

    def __init__(
        self, initial: ssl.SSLContext, base: ssl.SSLContext, metrics: Metrics | None
    ) -> None:
        self._metrics = metrics
        self._current = initial
        self.context = base
        self.context.sni_callback = self._select
        self.generation = 1

    def _select(
        self,
        connection: ssl.SSLObject | ssl.SSLSocket,
        server_name: str | None,
        base: ssl.SSLContext,
    ) -> None:
        connection.context = self._current

    def _count(self, result: str) -> None:
        if self._metrics is not None:
            self._metrics.cert_reloads.labels(result).inc()

    def _switch(self, context: ssl.SSLContext) -> None:
        self._current = context
        self.generation += 1
        self._count(RELOAD_LOADED)


class MemoryCertificate(_Switching):
    """A server SSL context serving the newest PEM pair it was given."""

    def __init__(self, cert_pem: bytes, key_pem: bytes, *, metrics: Metrics | None = None) -> None:
        super().__init__(load_pem(cert_pem, key_pem), load_pem(cert_pem, key_pem), metrics)
        self._pair = (cert_pem, key_pem)

    def install(self, cert_pem: bytes, key_pem: bytes) -> bool:
        """Serve this pair from the next handshake on, unless it is the one in service;
        returns whether it changed. Raises ``OSError``/``ssl.SSLError`` when it does not load
        (the previous pair stays in service)."""
        if (cert_pem, key_pem) == self._pair:
            return False
        try:
            context = load_pem(cert_pem, key_pem)
        except (OSError, ssl.SSLError):
            self._count(RELOAD_FAILED)
            raise
        self._pair = (cert_pem, key_pem)
        self._switch(context)
        return True


class ReloadingCertificate(_Switching):
    """A server SSL context whose certificate follows the files on disk."""

    def __init__(self, files: CertificateFiles, *, metrics: Metrics | None = None) -> None:
        self.files = files
        self._stamp = files.stamp()
        # Fails loudly at startup: a server without a certificate must not report ready.
        super().__init__(files.load(), files.load(), metrics)

    def check(self) -> bool:
        """Reload when the files changed; returns whether a new certificate is in service."""
        try:
            stamp = self.files.stamp()
        except OSError as exc:
            log.warning(
                "certificate files unreadable; keeping the current certificate",
                extra=fields(error=str(exc)),
            )
            return False
        if stamp == self._stamp:
            return False
        try:
            context = self.files.load()
        except (OSError, ssl.SSLError) as exc:
            # Leave the stamp alone so the next poll tries again (a rotation may be mid-way).
            log.warning(
                "certificate change did not load; keeping the current certificate",
                extra=fields(error=str(exc), cert_file=str(self.files.cert_file)),
            )
            self._count(RELOAD_FAILED)
            return False
        self._stamp = stamp
        self._switch(context)
        log.info(
            "serving certificate reloaded",
            extra=fields(cert_file=str(self.files.cert_file), generation=self.generation),
        )
        return True

    async def watch(self, interval: float) -> None:
        """Poll the files every ``interval`` seconds until cancelled."""
        while True:
            await asyncio.sleep(interval)
            self.check()
