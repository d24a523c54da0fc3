"""Self-managed serving certificates: what the Secret must hold, and what to do when it does not.

The webhook server can keep its own private CA and serving certificate in one Secret of its
namespace (``--tls-secret``), the way Kueue's internal certificate management does. This module
holds the decisions, as functions of their inputs (the Secret's data, the wanted names, the
lifetimes and the current time), so they are tested without a server; the loop that reads and
writes the objects is :mod:`gpustack_webhook.rotation`.

The Secret (type ``kubernetes.io/tls``) holds:

``tls.crt`` / ``tls.key``
    the serving certificate and its key (ECDSA P-256), signed by the current CA;
``ca.crt``
    the CA bundle the webhook configurations carry as ``caBundle``: the current CA first, then
    the previous one while it is still valid (so a replica still serving a certificate of the
    old CA is trusted while it reloads after a CA rotation);
``ca.key``
    the current CA's key (the serving certificate is renewed without changing the CA).

:func:`decide` says whether the data can be reused, needs a new serving certificate from the
same CA, or needs a new CA (missing, unreadable, not a CA, key mismatch, near expiry).
A certificate is renewed once less than a third of its configured lifetime, or
``renew_before`` (90 days by default), whichever is shorter, remains. :func:`issue` builds the
new data; :func:`ca_bundle_patch` computes the strategic merge patch that writes the bundle into the
webhooks of one configuration that call this server.
"""

from __future__ import annotations

import base64
import datetime
import enum
import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

#: Keys of the Secret's data (the first two are the ``kubernetes.io/tls`` type's own).
TLS_CERT, TLS_KEY, CA_CERT, CA_KEY = "tls.crt", "tls.key", "ca.crt", "ca.key"
#: The type a Secret created by the server gets (an existing Secret keeps its own type: the
#: field is immutable).
SECRET_TYPE = "kubernetes.io/tls"

#: Defaults of the lifetimes (the server's flags): CA 10 years, serving certificate 1 year,
#: renewed at most 90 days before expiry.
DEFAULT_CA_LIFETIME = datetime.timedelta(days=3650)
DEFAULT_CERT_LIFETIME = datetime.timedelta(days=365)
DEFAULT_RENEW_BEFORE = datetime.timedelta(days=90)

#: Certificates start this long before they are issued: a replica whose clock is a little behind
#: the issuer's must not find them "not yet valid".
BACKDATE = datetime.timedelta(minutes=5)

#: The Common Name of the self-managed CA.
CA_COMMON_NAME = "gpustack-webhook-ca"


class Action(enum.Enum):
    """What the Secret needs."""

    REUSE = "reuse"
    ISSUE_SERVING = "issue-serving"
    ISSUE_CA = "issue-ca"


@dataclass(frozen=True)
class Policy:
    """The names a serving certificate must cover and how long certificates live."""

    hosts: tuple[str, ...]
    ca_lifetime: datetime.timedelta = DEFAULT_CA_LIFETIME
    cert_lifetime: datetime.timedelta = DEFAULT_CERT_LIFETIME
    renew_before: datetime.timedelta = DEFAULT_RENEW_BEFORE

    def renewal_window(self, lifetime: datetime.timedelta) -> datetime.timedelta:
        """How long before expiry a certificate of ``lifetime`` is renewed."""
        return min(lifetime / 3, self.renew_before)


@dataclass(frozen=True)
class Decision:
    action: Action
    #: Why (for the log): which check failed, or "valid until …".
    reason: str


def service_hosts(service: str, namespace: str) -> tuple[str, ...]:
    """The DNS names the API server may use for ``service`` in ``namespace``."""
    return (
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
    )


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _san_hosts(cert: x509.Certificate) -> set[str]:
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return set()
    names = set(san.get_values_for_type(x509.DNSName))
    names |= {str(ip) for ip in san.get_values_for_type(x509.IPAddress)}
    return names


def _is_ca(cert: x509.Certificate) -> bool:
    try:
        return bool(cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca)
    except x509.ExtensionNotFound:
        return False


def _matches(key: Any, cert: x509.Certificate) -> bool:
    spki = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    return bool(key.public_key().public_bytes(*spki) == cert.public_key().public_bytes(*spki))


def _signed_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


@dataclass(frozen=True)
class _Parsed:
    cas: list[x509.Certificate]
    ca_key: Any
    cert: x509.Certificate | None
    key: Any


def _parse(data: Mapping[str, bytes]) -> tuple[_Parsed | None, str]:
    """The Secret's certificates and keys, or None and what is wrong with the CA."""
    for name in (CA_CERT, CA_KEY):
        if not data.get(name):
            return None, f"no {name}"
    try:
        cas = x509.load_pem_x509_certificates(data[CA_CERT])
        ca_key = serialization.load_pem_private_key(data[CA_KEY], password=None)
    except (ValueError, TypeError) as exc:
        return None, f"the CA does not load ({exc})"
    cert = key = None
    try:
        if data.get(TLS_CERT) and data.get(TLS_KEY):
            cert = x509.load_pem_x509_certificates(data[TLS_CERT])[0]
            key = serialization.load_pem_private_key(data[TLS_KEY], password=None)
    except (ValueError, TypeError):
        cert = key = None
    return _Parsed(cas, ca_key, cert, key), ""


def _remaining(cert: x509.Certificate, now: datetime.datetime) -> datetime.timedelta:
    return cert.not_valid_after_utc - now


def decide(data: Mapping[str, bytes] | None, *, policy: Policy, now: datetime.datetime) -> Decision:
    """Whether the Secret's data (None: no Secret) can be served as it is."""
    if data is None:
        return Decision(Action.ISSUE_CA, "the Secret does not exist")
    parsed, problem = _parse(data)
    if parsed is None:
        return Decision(Action.ISSUE_CA, problem)
    ca = parsed.cas[0]
    if not _is_ca(ca):
        return Decision(Action.ISSUE_CA, "ca.crt is not a CA certificate")
    if not _matches(parsed.ca_key, ca):
        return Decision(Action.ISSUE_CA, "ca.key does not match ca.crt")
    # The configured lifetimes set the windows (a certificate's own span includes BACKDATE).
    if _remaining(ca, now) < policy.renewal_window(policy.ca_lifetime):
        return Decision(Action.ISSUE_CA, f"the CA expires at {ca.not_valid_after_utc:%FT%TZ}")
    cert = parsed.cert
    if cert is None or parsed.key is None:
        return Decision(Action.ISSUE_SERVING, "no readable tls.crt and tls.key")
    if not _matches(parsed.key, cert):
        return Decision(Action.ISSUE_SERVING, "tls.key does not match tls.crt")
    if not _signed_by(cert, ca):
        return Decision(Action.ISSUE_SERVING, "tls.crt is not signed by the current CA")
    missing = sorted(set(policy.hosts) - _san_hosts(cert))
    if missing:
        return Decision(Action.ISSUE_SERVING, f"tls.crt does not name {', '.join(missing)}")
    if _remaining(cert, now) < policy.renewal_window(policy.cert_lifetime):
        return Decision(
            Action.ISSUE_SERVING, f"tls.crt expires at {cert.not_valid_after_utc:%FT%TZ}"
        )
    return Decision(Action.REUSE, f"valid until {cert.not_valid_after_utc:%FT%TZ}")


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _key_pem(key: Any) -> bytes:
    return bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )


def _key_usage(*, ca: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=not ca,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=ca,
        crl_sign=ca,
        encipher_only=False,
        decipher_only=False,
    )


def _new_ca(
    now: datetime.datetime, lifetime: datetime.timedelta
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, CA_COMMON_NAME)])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + lifetime)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(ca=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def _new_serving(
    ca: x509.Certificate,
    ca_key: Any,
    *,
    hosts: Sequence[str],
    now: datetime.datetime,
    lifetime: datetime.timedelta,
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = [
        x509.IPAddress(ipaddress.ip_address(h)) if _is_ip(h) else x509.DNSName(h) for h in hosts
    ]
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        # Never outlives its CA.
        .not_valid_after(min(now + lifetime, ca.not_valid_after_utc))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(ca=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return cert, key


def issue(
    data: Mapping[str, bytes] | None,
    action: Action,
    *,
    policy: Policy,
    now: datetime.datetime,
) -> dict[str, bytes]:
    """The Secret's new data for ``action`` (ISSUE_SERVING keeps the CA of ``data``; ISSUE_CA
    keeps the previous CA in the bundle while it is valid). REUSE returns ``data`` unchanged."""
    if action is Action.REUSE:
        assert data is not None
        return dict(data)
    previous: list[x509.Certificate] = []
    parsed = _parse(data)[0] if data is not None else None
    if action is Action.ISSUE_SERVING:
        if parsed is None:
            raise ValueError("a serving certificate needs the Secret's CA")
        ca, ca_key, bundle = parsed.cas[0], parsed.ca_key, data[CA_CERT]  # type: ignore[index]
    else:
        if parsed is not None:
            previous = [c for c in parsed.cas[:1] if _is_ca(c) and c.not_valid_after_utc > now]
        ca, ca_key = _new_ca(now, policy.ca_lifetime)
        bundle = b"".join(_pem(c) for c in (ca, *previous))
    cert, key = _new_serving(ca, ca_key, hosts=policy.hosts, now=now, lifetime=policy.cert_lifetime)
    return {
        TLS_CERT: _pem(cert),
        TLS_KEY: _key_pem(key),
        CA_CERT: bundle,
        CA_KEY: _key_pem(ca_key),
    }


def secret_data(data: Mapping[str, bytes]) -> dict[str, str]:
    """``data`` as a Secret's ``data`` field (base64)."""
    return {k: base64.b64encode(v).decode() for k, v in sorted(data.items())}


def decode_secret(secret: Mapping[str, Any]) -> dict[str, bytes] | None:
    """A Secret object's data, decoded; None when it is not a map of base64 strings."""
    raw = secret.get("data") or {}
    if not isinstance(raw, dict):
        return None
    out: dict[str, bytes] = {}
    for key, value in raw.items():
        if not isinstance(value, str):
            return None
        try:
            out[str(key)] = base64.b64decode(value, validate=True)
        except ValueError:
            return None
    return out


@dataclass(frozen=True)
class Target:
    """Which webhooks call this server: through its Service, or by a URL naming one of its
    certificate's hosts (a server outside the cluster, as the tests run it)."""

    service_namespace: str
    service_name: str
    hosts: tuple[str, ...]

    def calls_us(self, hook: Mapping[str, Any]) -> bool:
        client = hook.get("clientConfig")
        if not isinstance(client, dict):
            return False
        service = client.get("service")
        if isinstance(service, dict):
            return (
                service.get("namespace") == self.service_namespace
                and service.get("name") == self.service_name
            )
        url = client.get("url")
        if isinstance(url, str):
            try:
                host = urlsplit(url).hostname
            except ValueError:
                return False
            return host is not None and host in self.hosts
        return False


def ca_bundle_patch(
    configuration: Mapping[str, Any], ca_bundle: bytes, *, target: Target
) -> dict[str, Any] | None:
    """The strategic merge patch setting ``caBundle`` on the configuration's webhooks that call
    ``target`` (the ``resourceVersion`` read makes it conditional); None when every one of them
    already carries it. Webhooks that call something else are left alone."""
    wanted = base64.b64encode(ca_bundle).decode()
    hooks = configuration.get("webhooks") or []
    changes = [
        {"name": hook["name"], "clientConfig": {"caBundle": wanted}}
        for hook in hooks
        if isinstance(hook, dict)
        and isinstance(hook.get("name"), str)
        and target.calls_us(hook)
        and hook["clientConfig"].get("caBundle") != wanted
    ]
    if not changes:
        return None
    metadata = configuration.get("metadata") or {}
    return {
        "metadata": {"resourceVersion": metadata.get("resourceVersion")},
        "webhooks": changes,
    }
