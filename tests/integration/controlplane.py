"""A real etcd + kube-apiserver for the integration tests (envtest style).

The binaries are built from pinned Go modules by ``hack/envtest/build.sh`` into a cache outside the
repository. :class:`ControlPlane` starts both on free loopback ports inside a private temporary
directory with a generated CA, serving and client certificates, RBAC authorization, service
account signing keys and an audit log of one test identity (:data:`AUDITED_USER`), writes an
admin kubeconfig (client certificate in ``system:masters``) that
``kubernetes_asyncio`` loads, installs CRDs and waits for them to be Established, and tears
everything down again (processes killed, temporary directory removed).

Everything here is synchronous and uses only the standard library plus ``cryptography`` and
``ruamel.yaml``, so it can be used from a plain script as well as from pytest fixtures.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import ctypes
import datetime
import ipaddress
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from ruamel.yaml import YAML

REPO_ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO_ROOT / "hack" / "envtest" / "build.sh"
CRD_DIR = REPO_ROOT / "deploy" / "crds"

#: Environment variable naming a directory that already holds ``kube-apiserver`` and ``etcd``.
BIN_DIR_ENV = "GPUSTACK_ENVTEST_BIN_DIR"
#: Environment variable naming a directory of Kueue CRD YAML files (overrides the default lookup).
KUEUE_CRD_DIR_ENV = "GPUSTACK_ENVTEST_KUEUE_CRD_DIR"
#: Environment variable naming a directory of CRDs to install instead of ``deploy/crds``.
CRD_DIR_ENV = "GPUSTACK_ENVTEST_CRD_DIR"
#: Kueue release whose CRDs are installed; keep in step with ``KUEUE_VERSION`` in build.sh.
KUEUE_VERSION = "v0.17.0"
#: The Kueue CRDs the tests install (files under config/components/crd/bases/).
KUEUE_CRD_FILES = (
    "kueue.x-k8s.io_workloads.yaml",
    "kueue.x-k8s.io_localqueues.yaml",
    "kueue.x-k8s.io_clusterqueues.yaml",
    "kueue.x-k8s.io_admissionchecks.yaml",
)

_ONE_DAY = datetime.timedelta(days=1)
#: The Service range, as large as a real cluster's default (kubeadm's ``10.96.0.0/12``, the
#: largest IPv4 range the API server accepts): a /24 ran out at about 250 Services.
DEFAULT_SERVICE_CIDR = "10.96.0.0/12"


class ControlPlaneError(RuntimeError):
    """The envtest control plane could not be located, built or started."""


# --------------------------------------------------------------------------------------------
# PKI
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CertKeyPair:
    """A PEM certificate and its unencrypted PKCS#8 PEM private key."""

    cert_pem: bytes
    key_pem: bytes

    def write(self, directory: Path, name: str) -> tuple[Path, Path]:
        """Write ``<name>.crt`` and ``<name>.key`` (mode 0600) into ``directory``."""
        directory.mkdir(parents=True, exist_ok=True)
        cert_path = directory / f"{name}.crt"
        key_path = directory / f"{name}.key"
        cert_path.write_bytes(self.cert_pem)
        key_path.touch(mode=0o600)
        key_path.write_bytes(self.key_pem)
        return cert_path, key_path


def _private_key_pem(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


class CertificateAuthority:
    """A throw-away CA for the test cluster: signs serving and client certificates.

    The API server trusts it for client certificates (``--client-ca-file``), the kubeconfig
    trusts it for the API server, and webhook configurations carry it as ``caBundle``.
    """

    def __init__(self, common_name: str = "gpustack-envtest-ca") -> None:
        now = datetime.datetime.now(datetime.UTC)
        self._key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
        self._name = name
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + 7 * _ONE_DAY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(
                x509.SubjectKeyIdentifier.from_public_key(self._key.public_key()), critical=False
            )
            .sign(self._key, hashes.SHA256())
        )

    @property
    def cert_pem(self) -> bytes:
        """The CA certificate in PEM form (what a ``caBundle`` carries, before base64)."""
        return self._cert.public_bytes(serialization.Encoding.PEM)

    @property
    def ca_bundle(self) -> str:
        """The CA certificate PEM, base64-encoded, ready for ``clientConfig.caBundle``."""
        return base64.b64encode(self.cert_pem).decode("ascii")

    def issue(
        self,
        common_name: str,
        *,
        organizations: Sequence[str] = (),
        hosts: Sequence[str] = (),
        server: bool = False,
        client: bool = False,
    ) -> CertKeyPair:
        """Issue a leaf certificate signed by this CA.

        ``hosts`` become subject alternative names (IP addresses or DNS names); ``server`` and
        ``client`` select the extended key usages.
        """
        now = datetime.datetime.now(datetime.UTC)
        key = ec.generate_private_key(ec.SECP256R1())
        attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in organizations]
        attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
        usages = []
        if server:
            usages.append(ExtendedKeyUsageOID.SERVER_AUTH)
        if client:
            usages.append(ExtendedKeyUsageOID.CLIENT_AUTH)
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name(attrs))
            .issuer_name(self._name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + 7 * _ONE_DAY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=False,
                    crl_sign=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()),
                critical=False,
            )
        )
        if usages:
            builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        if hosts:
            sans: list[x509.GeneralName] = []
            for host in hosts:
                try:
                    sans.append(x509.IPAddress(ipaddress.ip_address(host)))
                except ValueError:
                    sans.append(x509.DNSName(host))
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        return CertKeyPair(cert.public_bytes(serialization.Encoding.PEM), _private_key_pem(key))

    def issue_serving(
        self, hosts: Sequence[str] = ("127.0.0.1", "localhost"), common_name: str = "127.0.0.1"
    ) -> CertKeyPair:
        """A serving certificate for a local server (a webhook, the API server)."""
        return self.issue(common_name, hosts=hosts, server=True)

    def server_ssl_context(
        self, directory: Path, hosts: Sequence[str] = ("127.0.0.1", "localhost")
    ) -> ssl.SSLContext:
        """A server-side SSL context with a fresh serving certificate for ``hosts``.

        The certificate files are written to ``directory`` (``ssl`` can only load from files).
        Use it for a webhook server on 127.0.0.1 that the API server calls by URL.
        """
        cert_path, key_path = self.issue_serving(hosts).write(directory, "serving")
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(cert_path, key_path)
        return context


def generate_service_account_keys() -> tuple[bytes, bytes]:
    """An RSA key pair for service account token signing: (private PEM, public PEM)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return _private_key_pem(key), public


# --------------------------------------------------------------------------------------------
# Binaries
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Binaries:
    """Where the control plane's executables and the Kueue CRDs are."""

    kube_apiserver: Path
    etcd: Path
    kueue_crd_dir: Path | None


def _check_binaries(bin_dir: Path) -> tuple[Path, Path]:
    apiserver = bin_dir / "kube-apiserver"
    etcd = bin_dir / "etcd"
    missing = [str(p) for p in (apiserver, etcd) if not os.access(p, os.X_OK)]
    if missing:
        raise ControlPlaneError(f"envtest binaries missing or not executable: {', '.join(missing)}")
    return apiserver, etcd


def _kueue_crd_dir(bin_dir: Path) -> Path | None:
    override = os.environ.get(KUEUE_CRD_DIR_ENV)
    if override:
        return Path(override)
    candidate = bin_dir / "kueue-crds" / "bases"
    if all((candidate / name).is_file() for name in KUEUE_CRD_FILES):
        return candidate
    return None


def _download_kueue_crds() -> Path:
    """Fetch the pinned Kueue module with ``go mod download`` and return its CRD directory."""
    go = shutil.which("go") or "/usr/local/go/bin/go"
    with tempfile.TemporaryDirectory(prefix="gpustack-kueue-") as scratch:
        env = {**os.environ, "GOFLAGS": "", "GOWORK": "off"}
        try:
            out = subprocess.run(
                [go, "mod", "download", "-json", f"sigs.k8s.io/kueue@{KUEUE_VERSION}"],
                cwd=scratch,
                env=env,
                check=True,
                capture_output=True,
                text=True,
                timeout=600,
            ).stdout
        except (OSError, subprocess.SubprocessError) as exc:
            raise ControlPlaneError(
                f"cannot download sigs.k8s.io/kueue@{KUEUE_VERSION} for its CRDs: {exc}; "
                f"run hack/envtest/build.sh or set {KUEUE_CRD_DIR_ENV}"
            ) from exc
    crd_dir = Path(json.loads(out)["Dir"]) / "config" / "components" / "crd" / "bases"
    if not crd_dir.is_dir():
        raise ControlPlaneError(f"no Kueue CRDs under {crd_dir}")
    return crd_dir


def locate_bin_dir(*, build: bool, what: str, error: type[Exception] = ControlPlaneError) -> Path:
    """The directory of built components: ``$GPUSTACK_ENVTEST_BIN_DIR`` when set, else the last
    line ``hack/envtest/build.sh`` prints (when ``build`` allows running it). Raises ``error``
    (naming ``what`` was being built) when neither gives one."""
    configured = os.environ.get(BIN_DIR_ENV)
    if configured:
        return Path(configured)
    if not build:
        raise error(f"{BIN_DIR_ENV} is not set and building was not allowed")
    try:
        result = subprocess.run(
            ["bash", str(BUILD_SCRIPT)],
            check=True,
            stdout=subprocess.PIPE,
            text=True,
            timeout=3600,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise error(f"building {what} with {BUILD_SCRIPT} failed: {exc}") from exc
    lines = result.stdout.strip().splitlines()
    if not lines:
        raise error(f"{BUILD_SCRIPT} printed no bin directory")
    return Path(lines[-1])


def locate_binaries(*, build: bool = True) -> Binaries:
    """Find (or build) kube-apiserver, etcd and the Kueue CRDs.

    ``$GPUSTACK_ENVTEST_BIN_DIR`` wins when set; otherwise ``hack/envtest/build.sh`` is run, which
    returns immediately when its cache already holds the binaries. Raises
    :class:`ControlPlaneError` when nothing usable is found: the integration tests must never be
    skipped silently.
    """
    bin_dir = locate_bin_dir(build=build, what="the envtest binaries")
    apiserver, etcd = _check_binaries(bin_dir)
    return Binaries(apiserver, etcd, _kueue_crd_dir(bin_dir))


# --------------------------------------------------------------------------------------------
# Processes
# --------------------------------------------------------------------------------------------


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _die_with_parent() -> None:
    """Child-side hook: ask Linux to SIGKILL the child when the test process dies."""
    with contextlib.suppress(Exception):
        pr_set_pdeathsig = 1
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)


@dataclass
class ManagedProcess:
    """A component process started by :func:`start_process`, with its log file."""

    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path
    argv: tuple[str, ...] = ()

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, timeout: float = 10.0) -> None:
        if self.popen.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, signal.SIGTERM)
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait(timeout)


def wait_until_ready(
    proc: ManagedProcess,
    probe: Callable[[], bool],
    deadline: float,
    timeout: float,
    error: type[Exception] = ControlPlaneError,
) -> None:
    """Poll ``probe`` until it is true; raise ``error`` with the log's tail when ``proc`` exits or
    ``deadline`` (a ``time.monotonic()`` value) passes first."""
    while True:
        if proc.popen.poll() is not None:
            raise error(f"{proc.name} exited with {proc.popen.returncode}:\n{proc.log_tail()}")
        if probe():
            return
        if time.monotonic() > deadline:
            raise error(f"{proc.name} not ready after {timeout:.0f}s:\n{proc.log_tail()}")
        time.sleep(0.1)


def start_process(
    name: str,
    argv: Sequence[str],
    log_path: Path,
    *,
    append: bool = False,
    env: Mapping[str, str] | None = None,
) -> ManagedProcess:
    """Start ``argv`` in its own session, output to ``log_path``, killed if this process dies."""
    log = log_path.open("ab" if append else "wb")
    try:
        popen = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent,
            env=None if env is None else dict(env),
        )
    finally:
        log.close()
    return ManagedProcess(name, popen, log_path, tuple(argv))


# --------------------------------------------------------------------------------------------
# Control plane
# --------------------------------------------------------------------------------------------


_ROOT_PREFIX = "gpustack-envtest-"
#: The common name of the client certificate the API server proxies aggregated requests with.
FRONT_PROXY_CLIENT = "front-proxy-client"
_OWNER_FILE = "owner.pid"

#: The one identity the API server audits: every request it sends is a line of
#: :attr:`ControlPlane.audit_log` (level Metadata: verb, URI, user agent, status; no bodies).
#: A test that must prove what a client sends, and nothing else, acts as this user
#: (:meth:`ControlPlane.user_kubeconfig`); nobody else is audited, so the log stays small.
AUDITED_USER = "audited-client"
AUDIT_POLICY: dict[str, Any] = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [
        {"level": "Metadata", "users": [AUDITED_USER]},
        {"level": "None"},
    ],
}


def pid_alive(pid: int) -> bool:
    """Whether a process with this id exists (one owned by another user counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_roots() -> None:
    """Remove control-plane temp dirs left by a test process that was killed outright.

    The processes themselves die with their parent (``PR_SET_PDEATHSIG``); only the directory
    can outlive a ``SIGKILL``ed test run, and the next run removes it here.
    """
    for candidate in Path(tempfile.gettempdir()).glob(f"{_ROOT_PREFIX}*"):
        try:
            owner = int((candidate / _OWNER_FILE).read_text())
        except (OSError, ValueError):
            continue
        if owner != os.getpid() and not pid_alive(owner):
            shutil.rmtree(candidate, ignore_errors=True)


class APIError(RuntimeError):
    """A non-2xx answer from the API server."""

    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"HTTP {status}: {body[:2000]}")
        self.status = status
        self.body = body


class Supervisor:
    """Start and stop for a harness object that runs processes, as a context manager.

    :meth:`start` runs :meth:`_prepare`, then :meth:`_start`; when ``_start`` fails part-way it
    stops what was started before re-raising, and on success records ``startup_seconds``.
    :meth:`stop` runs :meth:`_stop` once, however often it is called. A subclass declares the
    ``startup_seconds`` and ``_stopped`` fields (default 0.0 and False).
    """

    startup_seconds: float
    _stopped: bool

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        started = time.monotonic()
        self._prepare()
        try:
            self._start(started)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - started

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        self._stop()

    def _prepare(self) -> None:
        """What must be in place before anything starts; a failure here stops nothing."""

    def _start(self, started: float) -> None:
        """Start every process (``started``: the ``time.monotonic()`` of :meth:`start`)."""
        raise NotImplementedError

    def _stop(self) -> None:
        """Stop every process started so far."""
        raise NotImplementedError


@dataclass(frozen=True)
class ApiServer:
    """One more kube-apiserver of a :class:`ControlPlane` (:meth:`ControlPlane.add_apiserver`)."""

    control_plane: ControlPlane
    name: str
    port: int

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def ready(self) -> bool:
        try:
            status, _ = self.control_plane.request("GET", "/readyz", timeout=5, server=self.url)
        except (OSError, APIError):
            return False
        return status == 200

    def kubeconfig(self, user: str, groups: Sequence[str] = ()) -> Path:
        """A kubeconfig of the identity ``user`` in ``groups`` pointed at this server."""
        return self.control_plane.user_kubeconfig(user, groups, server=self.url)

    def metrics(self) -> str:
        """The Prometheus text of this server's ``/metrics`` (read as the admin)."""
        _, text = self.control_plane.request("GET", "/metrics", server=self.url, timeout=60)
        return str(text)


@dataclass
class ControlPlane(Supervisor):
    """etcd + kube-apiserver on loopback, with an admin kubeconfig.

    Use as a context manager, or call :meth:`start` and :meth:`stop`. ``stop`` is idempotent and
    also registered with :mod:`atexit`, so an interrupted run still kills both processes and
    removes the temporary directory.
    """

    binaries: Binaries | Any
    startup_timeout: float = 60.0
    extra_apiserver_args: Sequence[str] = ()
    #: Turn on the aggregation layer (:meth:`_aggregation_args`), so an APIService can route a
    #: group to an extension API server such as metrics-server.
    aggregation: bool = False
    #: Run in this directory (created, kept on stop) instead of a fresh temporary one.
    root_dir: Path | None = None
    #: ``--service-cluster-ip-range``; its first address is the ``kubernetes`` Service's.
    service_cidr: str = DEFAULT_SERVICE_CIDR
    root: Path = field(init=False)
    ca: CertificateAuthority = field(init=False)
    admin: CertKeyPair = field(init=False)
    port: int = field(init=False, default=0)
    etcd_url: str = field(init=False, default="")
    kubeconfig: Path = field(init=False)
    startup_seconds: float = field(init=False, default=0.0)
    processes: list[ManagedProcess] = field(init=False, default_factory=list)
    _ssl: ssl.SSLContext | None = field(init=False, default=None)
    _stopped: bool = field(init=False, default=False)

    # ---- lifecycle -------------------------------------------------------------------------

    @property
    def audit_log(self) -> Path:
        """The API server's audit log (JSON lines; only :data:`AUDITED_USER` is audited)."""
        return self.root / "audit.log"

    def audit_events(self) -> list[dict[str, Any]]:
        """Every audit event written so far, oldest first."""
        try:
            text = self.audit_log.read_text()
        except FileNotFoundError:
            return []
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    @property
    def url(self) -> str:
        """The API server's base URL, e.g. ``https://127.0.0.1:41234``."""
        return f"https://127.0.0.1:{self.port}"

    def _prepare(self) -> None:
        remove_stale_roots()
        if self.root_dir is not None:
            self.root_dir.mkdir(parents=True, exist_ok=True)
            self.root = self.root_dir
        else:
            self.root = Path(tempfile.mkdtemp(prefix=_ROOT_PREFIX))
        (self.root / _OWNER_FILE).write_text(str(os.getpid()))
        atexit.register(self.stop)

    def _stop(self) -> None:
        """Kill both processes (API server first) and remove the temporary directory."""
        atexit.unregister(self.stop)
        for proc in reversed(self.processes):
            with contextlib.suppress(Exception):
                proc.stop()
        if getattr(self, "root", None) is not None and self.root_dir is None:
            shutil.rmtree(self.root, ignore_errors=True)

    def _start(self, started: float) -> None:
        pki = self.root / "pki"
        self.ca = CertificateAuthority()
        ca_path = pki / "ca.crt"
        pki.mkdir(parents=True)
        ca_path.write_bytes(self.ca.cert_pem)
        first_ip = str(next(ipaddress.ip_network(self.service_cidr).hosts()))
        self.ca.issue(
            "kube-apiserver",
            hosts=("127.0.0.1", "localhost", "kubernetes", "kubernetes.default", first_ip),
            server=True,
        ).write(pki, "apiserver")
        self.admin = self.ca.issue("envtest-admin", organizations=("system:masters",), client=True)
        admin_crt, admin_key = self.admin.write(pki, "admin")
        sa_private, sa_public = generate_service_account_keys()
        sa_key = pki / "sa.key"
        sa_key.touch(mode=0o600)
        sa_key.write_bytes(sa_private)
        sa_pub = pki / "sa.pub"
        sa_pub.write_bytes(sa_public)

        self._ssl = ssl.create_default_context(cafile=str(ca_path))
        self._ssl.load_cert_chain(admin_crt, admin_key)

        etcd_client, etcd_peer = free_port(), free_port()
        self.etcd_url = f"http://127.0.0.1:{etcd_client}"
        peer_url = f"http://127.0.0.1:{etcd_peer}"
        etcd = start_process(
            "etcd",
            [
                str(self.binaries.etcd),
                "--name=envtest",
                f"--data-dir={self.root / 'etcd'}",
                f"--listen-client-urls={self.etcd_url}",
                f"--advertise-client-urls={self.etcd_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=envtest={peer_url}",
                "--unsafe-no-fsync=true",
                "--log-level=warn",
            ],
            self.root / "etcd.log",
        )
        self.processes.append(etcd)
        self._wait(etcd, lambda: _http_ok(f"{self.etcd_url}/health"), started)

        self.port = free_port()
        audit_policy = self.root / "audit-policy.json"
        audit_policy.write_text(json.dumps(AUDIT_POLICY))
        apiserver = start_process(
            "kube-apiserver",
            self._apiserver_argv(self.port, self.audit_log),
            self.root / "kube-apiserver.log",
        )
        self.processes.append(apiserver)
        self._wait(apiserver, self._ready, started)
        self.kubeconfig = self.root / "kubeconfig"
        self.kubeconfig.write_text(json.dumps(self.kubeconfig_dict(), indent=2))

    def _apiserver_argv(self, port: int, audit_log: Path) -> list[str]:
        pki = self.root / "pki"
        return [
            str(self.binaries.kube_apiserver),
            f"--etcd-servers={self.etcd_url}",
            f"--cert-dir={self.root / 'apiserver-certs'}",
            f"--tls-cert-file={pki / 'apiserver.crt'}",
            f"--tls-private-key-file={pki / 'apiserver.key'}",
            f"--client-ca-file={pki / 'ca.crt'}",
            f"--secure-port={port}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--service-cluster-ip-range={self.service_cidr}",
            "--allow-privileged=true",
            "--disable-admission-plugins=ServiceAccount",
            "--authorization-mode=RBAC",
            # One issuer for every API server of the cluster (tokens are valid on each).
            f"--service-account-issuer=https://127.0.0.1:{self.port}/",
            f"--service-account-key-file={pki / 'sa.pub'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}",
            f"--audit-policy-file={self.root / 'audit-policy.json'}",
            f"--audit-log-path={audit_log}",
            "--audit-log-format=json",
            *(self._aggregation_args(pki) if self.aggregation else ()),
            *self.extra_apiserver_args,
        ]

    def add_apiserver(self, name: str) -> ApiServer:
        """Start one more kube-apiserver on the same etcd (as an HA control plane runs two or
        three), with the same flags on its own port; it leaves the ``kubernetes`` Service's
        endpoints to the first one. A client pointed at it alone is the only traffic it serves
        besides its own loopback requests, so its ``/metrics`` counts that client's requests
        (``apiserver_request_total`` minus ``apiserver_selfrequest_total``)."""
        port = free_port()
        argv = [
            *self._apiserver_argv(port, self.root / f"audit-{name}.log"),
            "--endpoint-reconciler-type=none",
        ]
        proc = start_process(
            f"kube-apiserver-{name}", argv, self.root / f"kube-apiserver-{name}.log"
        )
        self.processes.append(proc)
        server = ApiServer(self, name, port)
        self._wait(proc, server.ready, time.monotonic())
        return server

    def _aggregation_args(self, pki: Path) -> list[str]:
        """The API server's side of the aggregation layer, as kubeadm sets it up: a front-proxy CA
        of its own (``--requestheader-client-ca-file``), the client certificate the API server
        presents when it proxies a request to an extension API server (CN
        ``front-proxy-client``, the only name allowed to assert ``X-Remote-*`` identities), and
        no endpoint routing: an APIService's ExternalName Service pointing at 127.0.0.1 is
        resolved by name (Endpoints and EndpointSlices refuse loopback addresses, so
        ``--enable-aggregator-routing`` cannot reach a local process)."""
        front_proxy = CertificateAuthority("gpustack-envtest-front-proxy-ca")
        front_proxy_ca = pki / "front-proxy-ca.crt"
        front_proxy_ca.write_bytes(front_proxy.cert_pem)
        client_crt, client_key = front_proxy.issue(FRONT_PROXY_CLIENT, client=True).write(
            pki, "front-proxy-client"
        )
        return [
            f"--requestheader-client-ca-file={front_proxy_ca}",
            f"--requestheader-allowed-names={FRONT_PROXY_CLIENT}",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            f"--proxy-client-cert-file={client_crt}",
            f"--proxy-client-key-file={client_key}",
            "--enable-aggregator-routing=false",
        ]

    def _wait(self, proc: ManagedProcess, probe: Any, started: float) -> None:
        wait_until_ready(proc, probe, started + self.startup_timeout, self.startup_timeout)

    def _ready(self) -> bool:
        try:
            status, _ = self.request("GET", "/readyz", timeout=5)
        except (OSError, APIError):
            return False
        return status == 200

    def pause_apiserver(self, seconds: float) -> None:
        """Stop the API server, keep it down for ``seconds``, start it again on the same port
        with the same flags (etcd keeps running), and wait until it is ready."""
        index = next(i for i, p in enumerate(self.processes) if p.name == "kube-apiserver")
        old = self.processes[index]
        old.stop()
        time.sleep(seconds)
        new = start_process(old.name, old.argv, old.log_path, append=True)
        self.processes[index] = new
        self._wait(new, self._ready, time.monotonic())

    def restart_apiserver(self, name: str, *, down: float = 0.0) -> None:
        """Stop the kube-apiserver added as ``name`` (:meth:`add_apiserver`), keep it down for
        ``down`` seconds, start it again on the same port with the same flags, and wait until
        it is ready (etcd and the other API servers keep running)."""
        index = next(i for i, p in enumerate(self.processes) if p.name == f"kube-apiserver-{name}")
        old = self.processes[index]
        old.stop()
        time.sleep(down)
        new = start_process(old.name, old.argv, old.log_path, append=True)
        self.processes[index] = new
        port = int(next(a for a in old.argv if a.startswith("--secure-port=")).split("=", 1)[1])
        self._wait(new, ApiServer(self, name, port).ready, time.monotonic())

    def etcd_pid(self) -> int:
        """The etcd process's id (a test pauses it with SIGSTOP and SIGCONT)."""
        return next(p.popen.pid for p in self.processes if p.name == "etcd")

    # ---- client configuration --------------------------------------------------------------

    def user_kubeconfig(
        self, user: str, groups: Sequence[str] = (), *, server: str | None = None
    ) -> Path:
        """Write a kubeconfig for a client-certificate identity ``user`` in ``groups``.

        The identity has no permissions beyond what RBAC objects grant it (unless a group is
        ``system:masters``). Returns the kubeconfig path inside the control plane's temp dir.
        ``server`` points it at another API server of the cluster (:meth:`add_apiserver`).
        """
        pair = self.ca.issue(user, organizations=groups, client=True)
        suffix = "" if server is None else f"-{free_port()}"
        path = self.root / "users" / f"{user.replace(':', '_')}{suffix}.kubeconfig"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.kubeconfig_dict(user, pair, server=server), indent=2))
        return path

    def kubeconfig_dict(
        self,
        user: str = "envtest-admin",
        credentials: CertKeyPair | None = None,
        *,
        server: str | None = None,
    ) -> dict[str, Any]:
        """A kubeconfig (client certificate, CA-verified server) as a dict; admin by default."""
        pair = credentials or self.admin
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "envtest",
                    "cluster": {
                        "server": server or self.url,
                        "certificate-authority-data": self.ca.ca_bundle,
                    },
                }
            ],
            "users": [
                {
                    "name": user,
                    "user": {
                        "client-certificate-data": base64.b64encode(pair.cert_pem).decode(),
                        "client-key-data": base64.b64encode(pair.key_pem).decode(),
                    },
                }
            ],
            "contexts": [{"name": "envtest", "context": {"cluster": "envtest", "user": user}}],
            "current-context": "envtest",
        }

    # ---- a tiny synchronous REST client ----------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        *,
        query: Mapping[str, str] | None = None,
        content_type: str = "application/json",
        timeout: float = 30,
        server: str | None = None,
    ) -> tuple[int, Any]:
        """Send one request as the admin (to ``server``, default this API server); returns
        (status, decoded JSON or text).

        Raises :class:`APIError` for non-2xx answers.
        """
        url = (server or self.url) + path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(url, data=data, method=method)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(req, context=self._ssl, timeout=timeout) as resp:
                raw = resp.read().decode()
                status = int(resp.status)
        except urllib.error.HTTPError as err:
            raise APIError(err.code, err.read().decode(errors="replace")) from None
        try:
            return status, json.loads(raw)
        except ValueError:
            return status, raw

    # ---- CRDs ------------------------------------------------------------------------------

    def install_crds(self, documents: Iterable[Mapping[str, Any]], timeout: float = 30) -> None:
        """Create (or replace) CustomResourceDefinitions and wait until all are Established."""
        names: list[str] = []
        base = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
        for doc in documents:
            if doc.get("kind") != "CustomResourceDefinition":
                continue
            name = str(doc["metadata"]["name"])
            metadata = {
                key: value
                for key, value in doc["metadata"].items()
                if key in ("name", "labels", "annotations")
            }
            body = {
                "apiVersion": "apiextensions.k8s.io/v1",
                "kind": "CustomResourceDefinition",
                "metadata": metadata,
                "spec": doc["spec"],
            }
            self.request(
                "PATCH",
                f"{base}/{name}",
                body,
                query={"fieldManager": "gpustack-envtest", "force": "true"},
                content_type="application/apply-patch+yaml",
            )
            names.append(name)
        deadline = time.monotonic() + timeout
        for name in names:
            while not self._crd_established(f"{base}/{name}"):
                if time.monotonic() > deadline:
                    raise ControlPlaneError(f"CRD {name} not Established after {timeout:.0f}s")
                time.sleep(0.1)

    def _crd_established(self, path: str) -> bool:
        _, crd = self.request("GET", path)
        conditions = (crd.get("status") or {}).get("conditions") or []
        return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)

    def install_crd_files(self, paths: Iterable[Path]) -> list[str]:
        """Install every CRD found in the given YAML files; returns the CRD names."""
        docs = [doc for path in paths for doc in load_yaml_documents(path)]
        crds = [d for d in docs if d.get("kind") == "CustomResourceDefinition"]
        self.install_crds(crds)
        return [str(d["metadata"]["name"]) for d in crds]


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return int(resp.status) == 200
    except (OSError, ValueError):
        return False


def load_yaml_documents(path: Path) -> list[dict[str, Any]]:
    """Every non-empty YAML document in ``path`` as plain dicts."""
    yaml = YAML(typ="safe", pure=True)
    return [dict(doc) for doc in yaml.load_all(path.read_text()) if doc]


def project_crd_files(crd_dir: Path | None = None) -> list[Path]:
    """The CRD YAML files the project ships (``deploy/crds/*.yaml``, sorted).

    ``$GPUSTACK_ENVTEST_CRD_DIR`` replaces ``deploy/crds`` when set (for trying out CRDs).
    """
    if crd_dir is None:
        crd_dir = Path(os.environ.get(CRD_DIR_ENV) or CRD_DIR)
    return sorted([*crd_dir.glob("*.yaml"), *crd_dir.glob("*.yml")])


def kueue_crd_files(binaries: Binaries) -> list[Path]:
    """The pinned Kueue CRD files the tests install (downloading the module when needed)."""
    crd_dir = binaries.kueue_crd_dir or _download_kueue_crds()
    files = [crd_dir / name for name in KUEUE_CRD_FILES]
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise ControlPlaneError(f"Kueue CRD files missing: {', '.join(missing)}")
    return files


# --------------------------------------------------------------------------------------------
# Webhook configurations
# --------------------------------------------------------------------------------------------

_WEBHOOK_KINDS = {
    "MutatingWebhookConfiguration": "mutatingwebhookconfigurations",
    "ValidatingWebhookConfiguration": "validatingwebhookconfigurations",
}


def point_webhooks_at(
    configuration: Mapping[str, Any], port: int, ca_bundle: str, host: str = "127.0.0.1"
) -> dict[str, Any]:
    """Rewrite a Mutating/ValidatingWebhookConfiguration to call ``https://host:port/<path>``.

    Each webhook's ``clientConfig.service`` is replaced by ``url`` (keeping the service's
    ``path``, or the path of an existing ``url``) and ``clientConfig.caBundle`` is set to
    ``ca_bundle`` (base64 PEM, e.g. :attr:`CertificateAuthority.ca_bundle`).
    """
    if configuration.get("apiVersion") != "admissionregistration.k8s.io/v1":
        raise ValueError("only admissionregistration.k8s.io/v1 webhook configurations are accepted")
    if configuration.get("kind") not in _WEBHOOK_KINDS:
        raise ValueError(f"not a webhook configuration: {configuration.get('kind')!r}")
    rewritten: dict[str, Any] = json.loads(json.dumps(configuration))
    for hook in rewritten.get("webhooks", []):
        client = hook.setdefault("clientConfig", {})
        service = client.pop("service", None) or {}
        path = service.get("path")
        if path is None and "url" in client:
            path = urllib.parse.urlsplit(client["url"]).path
        path = "/" + str(path or "").lstrip("/")
        client["url"] = f"https://{host}:{port}{path}"
        client["caBundle"] = ca_bundle
    return rewritten


def webhook_configuration_path(configuration: Mapping[str, Any]) -> str:
    """The REST path of a webhook configuration object."""
    plural = _WEBHOOK_KINDS[str(configuration["kind"])]
    name = configuration["metadata"]["name"]
    return f"/apis/admissionregistration.k8s.io/v1/{plural}/{name}"


@contextlib.contextmanager
def started_control_plane(binaries: Binaries | None = None) -> Iterator[ControlPlane]:
    """Start a control plane with every project and Kueue CRD installed; stop it on exit."""
    binaries = binaries or locate_binaries()
    with ControlPlane(binaries) as cp:
        cp.install_crd_files([*project_crd_files(), *kueue_crd_files(binaries)])
        yield cp
