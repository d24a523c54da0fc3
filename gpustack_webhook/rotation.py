"""Self-managed certificates at run time: the Secret, the webhook configurations' caBundle, and
the certificate in service, kept in step by one pass run at start and then periodically.

A pass (:meth:`SelfManagedCertificates.reconcile`):

1. reads the Secret; when :func:`~gpustack_webhook.certificates.decide` finds it missing,
   empty, invalid, not naming the Service's DNS names or near expiry, issues new data and
   updates the Secret with the ``resourceVersion`` it read (the manifests ship it empty), or
   creates it when it does not exist and the server may (a refused create is one warning per
   pass naming the Secret and the way out; the server keeps retrying). Two replicas starting
   together both try; the API server accepts one write, the other gets a conflict, reads the
   Secret again and uses the winner's certificate: they agree through the Secret;
2. writes the Secret's CA bundle into the ``caBundle`` of every webhook of the named
   configurations that calls this server (a conditional patch; nothing when already there).
   Before a write it reads the Secret again: when another replica rotated the CA since step 1,
   the pass goes on with that replica's data instead of writing the older bundle back;
3. serves the Secret's certificate from the next TLS handshake on (after step 2, so the API
   server trusts a certificate before any replica presents it).

Every replica runs the pass every ``--cert-reload-interval`` seconds, so a rotation written by
one replica reaches the others within an interval, and a caBundle someone removed is restored.
Failures are logged and retried; the certificate in service stays.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import ssl
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from gpustack_webhook.certificates import (
    CA_CERT,
    SECRET_TYPE,
    TLS_CERT,
    TLS_KEY,
    Action,
    Policy,
    Target,
    ca_bundle_patch,
    decide,
    decode_secret,
    issue,
    secret_data,
)
from gpustack_webhook.logs import LOGGER_NAME, fields
from gpustack_webhook.lookups import ReadError
from gpustack_webhook.metrics import Metrics
from gpustack_webhook.tls import MemoryCertificate

log = logging.getLogger(f"{LOGGER_NAME}.certificates")

MUTATING = "MutatingWebhookConfiguration"
VALIDATING = "ValidatingWebhookConfiguration"

#: Labels of a Secret the server creates.
SECRET_LABELS = {
    "app.kubernetes.io/name": "gpustack-webhook",
    "app.kubernetes.io/component": "webhook",
    "app.kubernetes.io/managed-by": "gpustack-webhook",
}

#: Conflicting writes retried within one pass before it gives up (the next pass tries again).
MAX_ATTEMPTS = 5


class ConflictError(Exception):
    """The object was written by someone else since it was read (HTTP 409)."""


class WriteError(Exception):
    """A write the API server refused or did not answer (the message names the status)."""


class ForbiddenError(WriteError):
    """A write the server's identity is not allowed to make (HTTP 403)."""


class CertificateStore(Protocol):
    """The reads and writes a pass makes (:class:`gpustack_webhook.kube.KubeReader`)."""

    async def get_secret(self, namespace: str, name: str) -> dict[str, Any] | None: ...

    async def create_secret(self, namespace: str, body: Mapping[str, Any]) -> None: ...

    async def update_secret(self, namespace: str, name: str, body: Mapping[str, Any]) -> None: ...

    async def get_webhook_configuration(self, kind: str, name: str) -> dict[str, Any] | None: ...

    async def patch_webhook_configuration(
        self, kind: str, name: str, patch: Mapping[str, Any]
    ) -> None: ...


@dataclass(frozen=True)
class Setup:
    """Where the certificates live and what they must cover."""

    namespace: str
    secret_name: str
    policy: Policy
    target: Target
    #: (kind, name) of the webhook configurations whose caBundle the server writes.
    configurations: Sequence[tuple[str, str]]


def _utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


class SelfManagedCertificates:
    """The Secret-backed serving certificate of one server process."""

    def __init__(
        self,
        store: CertificateStore,
        setup: Setup,
        *,
        metrics: Metrics | None = None,
        clock: Callable[[], datetime.datetime] = _utcnow,
    ) -> None:
        self.store = store
        self.setup = setup
        self._metrics = metrics
        self._clock = clock
        self.certificate: MemoryCertificate | None = None
        #: What the last pass did to the Secret ("reuse", "issue-serving", "issue-ca").
        self.last_action: Action | None = None
        self._missing_reported: set[tuple[str, str]] = set()

    async def _settle_secret(self) -> tuple[dict[str, bytes], Action]:
        """The Secret's data once it holds a usable certificate (written here if needed), and
        what was done to it."""
        setup = self.setup
        for _ in range(MAX_ATTEMPTS):
            secret = await self.store.get_secret(setup.namespace, setup.secret_name)
            data = None if secret is None else (decode_secret(secret) or {})
            decision = decide(data, policy=setup.policy, now=self._clock())
            if decision.action is Action.REUSE:
                assert data is not None
                return data, decision.action
            new = issue(data, decision.action, policy=setup.policy, now=self._clock())
            try:
                if secret is None:
                    await self._create_secret(new)
                else:
                    # The resourceVersion read makes the update conditional; the type is kept
                    # (immutable), every other key of the Secret is replaced.
                    body = {**secret, "data": secret_data(new)}
                    body.pop("stringData", None)
                    await self.store.update_secret(setup.namespace, setup.secret_name, body)
            except ConflictError:
                log.info(
                    "another replica wrote the certificate Secret first; using its certificate",
                    extra=fields(secret=setup.secret_name),
                )
                continue
            log.info(
                "wrote the certificate Secret",
                extra=fields(
                    secret=setup.secret_name, action=decision.action.value, reason=decision.reason
                ),
            )
            return new, decision.action
        raise WriteError(f"the Secret {setup.secret_name} changed under {MAX_ATTEMPTS} writes")

    async def _create_secret(self, data: Mapping[str, bytes]) -> None:
        """Create the Secret holding ``data``; a refusal for want of ``create`` (the manifests
        ship the Secret and grant none) is a WriteError saying what to do."""
        setup = self.setup
        try:
            await self.store.create_secret(
                setup.namespace,
                {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "metadata": {
                        "name": setup.secret_name,
                        "namespace": setup.namespace,
                        "labels": dict(SECRET_LABELS),
                    },
                    "type": SECRET_TYPE,
                    "data": secret_data(data),
                },
            )
        except ForbiddenError as exc:
            raise WriteError(
                f"the Secret {setup.namespace}/{setup.secret_name} does not exist and this "
                f"server may not create it ({exc}): apply the empty Secret the manifests ship "
                "(deploy/webhook/secret.yaml; the chart renders it with "
                "certificates.mode=selfManaged), or grant this service account create on "
                f"Secrets in {setup.namespace}"
            ) from None

    async def _publish(self, data: dict[str, bytes]) -> dict[str, bytes]:
        """Write the CA bundle of ``data`` into the webhooks that call this server; returns the
        data whose bundle is published.

        A configuration whose bundle differs from ours may have been written by a replica that
        rotated the CA after this pass read the Secret. So before any write the Secret is read
        again, after the configuration: the API server's reads are current, so that read holds
        the Secret the configuration's bundle came from, or a newer one. When its bundle is
        not ours, ours is stale: every configuration is looked at again with the new data,
        which is also what the caller serves. A bundle is therefore never written over one
        from a newer Secret.
        """
        for _ in range(MAX_ATTEMPTS):
            newer = await self._publish_each(data)
            if newer is None:
                return data
            log.info(
                "the certificate Secret changed during the pass; using the newer one",
                extra=fields(secret=self.setup.secret_name),
            )
            data = newer
        raise WriteError(f"the Secret {self.setup.secret_name} changed under {MAX_ATTEMPTS} reads")

    async def _publish_each(self, data: dict[str, bytes]) -> dict[str, bytes] | None:
        """One look at each configuration; the Secret's newer data, when a re-read finds ours
        stale (nothing more is written then)."""
        ca_bundle = data[CA_CERT]
        for kind, name in self.setup.configurations:
            for _ in range(MAX_ATTEMPTS):
                configuration = await self.store.get_webhook_configuration(kind, name)
                if configuration is None:
                    if (kind, name) not in self._missing_reported:
                        self._missing_reported.add((kind, name))
                        log.warning(
                            "webhook configuration not found; its caBundle is written once it "
                            "exists",
                            extra=fields(kind=kind, name=name),
                        )
                    break
                self._missing_reported.discard((kind, name))
                patch = ca_bundle_patch(configuration, ca_bundle, target=self.setup.target)
                if patch is None:
                    break
                current, action = await self._settle_secret()
                if action is not Action.REUSE:
                    self.last_action = action
                if current[CA_CERT] != ca_bundle:
                    return current
                try:
                    await self.store.patch_webhook_configuration(kind, name, patch)
                except ConflictError:
                    continue
                log.info(
                    "wrote the caBundle",
                    extra=fields(kind=kind, name=name, webhooks=len(patch["webhooks"])),
                )
                break
        return None

    def _serve(self, data: Mapping[str, bytes]) -> None:
        cert, key = data[TLS_CERT], data[TLS_KEY]
        if self.certificate is None:
            self.certificate = MemoryCertificate(cert, key, metrics=self._metrics)
        elif self.certificate.install(cert, key):
            log.info(
                "serving certificate replaced",
                extra=fields(secret=self.setup.secret_name, generation=self.certificate.generation),
            )

    async def reconcile(self) -> None:
        """One pass; raises ReadError/WriteError when the Secret cannot be read or written
        (then nothing changed here). A caBundle that cannot be written is logged, not raised:
        the certificate is valid either way."""
        data, self.last_action = await self._settle_secret()
        try:
            data = await self._publish(data)
        except (ReadError, WriteError) as exc:
            log.warning("cannot write the caBundle", extra=fields(error=str(exc)))
        try:
            self._serve(data)
        except (OSError, ssl.SSLError) as exc:
            log.error(
                "the Secret's certificate does not load; keeping the current one",
                extra=fields(secret=self.setup.secret_name, error=str(exc)),
            )
            if self.certificate is None:
                raise WriteError(
                    f"the certificate of {self.setup.secret_name} does not load"
                ) from exc

    async def start(self, *, retry_max: float = 30.0) -> ssl.SSLContext:
        """Reconcile until a certificate is in service (retrying with backoff up to
        ``retry_max`` seconds; one warning per failed pass); its context."""
        delay = min(0.5, retry_max)
        while True:
            try:
                await self.reconcile()
            except (ReadError, WriteError) as exc:
                log.warning(
                    "no serving certificate yet; retrying",
                    extra=fields(
                        namespace=self.setup.namespace,
                        secret=self.setup.secret_name,
                        error=str(exc),
                        retry_in=delay,
                    ),
                )
            if self.certificate is not None:
                return self.certificate.context
            await asyncio.sleep(delay)
            delay = min(delay * 2, retry_max)

    async def watch(self, interval: float) -> None:
        """A pass every ``interval`` seconds until cancelled."""
        while True:
            await asyncio.sleep(interval)
            try:
                await self.reconcile()
            except (ReadError, WriteError) as exc:
                log.warning(
                    "certificate check failed; keeping the current certificate",
                    extra=fields(
                        namespace=self.setup.namespace,
                        secret=self.setup.secret_name,
                        error=str(exc),
                    ),
                )
