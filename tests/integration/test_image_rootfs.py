"""The image, built without a container engine and run without one.

``hack/image/build-rootfs.sh`` (``make image-rootfs``) builds the Dockerfile's image from Debian
packages (mmdebstrap) and the project's wheels as an OCI layout (umoci), cached under a hash of
its inputs, and unpacks it with ``umoci unpack``; the module runs it with
``hack/image/run-in-rootfs.sh`` as a runtime would: the unpacked runtime configuration's user,
environment and working directory, the root read-only, no capabilities, PID 1 of its own PID
namespace, the host's loopback.

* the image configuration is the Dockerfile's runtime stage (user, entry point, command,
  environment, labels, ports, working directory), and the unpacked runtime configuration runs
  as that user;
* both entry points, as console scripts and as the manifests' ``python -m`` commands, print
  their usage and exit 0;
* inside: Debian's Python 3.11, the CA certificates, the installed version is pyproject's,
  every imported module's bytecode is there and valid as it is (nothing compiled at start), and
  nothing is writable (root, /tmp, the venv, HOME);
* the controller, with the manifest's command and a kubeconfig for the test API server, serves
  ``/healthz`` "ok" and ``/readyz`` (informers synced, Lease held) and ``/metrics``, and stops on
  SIGTERM with exit 0, releasing the Lease;
* the webhook server, with a serving certificate from the test CA, and with the self-managed
  certificate it creates in its Secret (the manifests' default), serves ``/readyz`` on its probe
  port and ``/healthz`` over HTTPS, and stops on SIGTERM with exit 0.

Needs root (or ``sudo -n``) and apt-get for mmdebstrap and umoci; without them every test here
skips with the reason. The first build takes about a minute, a cached one a second.
"""

from __future__ import annotations

import base64
import contextlib
import importlib.util
import json
import os
import shlex
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from .controlplane import (
    REPO_ROOT,
    APIError,
    CertificateAuthority,
    ControlPlane,
    free_port,
    load_yaml_documents,
)
from .webhook_fixtures import create_namespace

pytestmark = [pytest.mark.integration, pytest.mark.image]

BUILD = REPO_ROOT / "hack" / "image" / "build-rootfs.sh"
RUN = REPO_ROOT / "hack" / "image" / "run-in-rootfs.sh"
#: build-rootfs.sh's exit status when its prerequisites (root, apt-get) cannot be had here.
UNAVAILABLE = 3
SYSTEM = "gpustack-system"
#: Where the test's credentials appear inside the image (an empty directory of Debian's).
CREDENTIALS = "/mnt"
#: The parsed Dockerfile (the unit tests' reader: the same one checks both images).
_spec = importlib.util.spec_from_file_location(
    "dockerfile_reader", REPO_ROOT / "tests" / "unit" / "test_image.py"
)
assert _spec is not None and _spec.loader is not None
dockerfile = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(dockerfile)


def _privileged() -> list[str]:
    if os.geteuid() == 0:
        return []
    if shutil.which("sudo") and subprocess.run(["sudo", "-n", "true"]).returncode == 0:
        return ["sudo", "-n"]
    pytest.skip("the image tests need root or sudo -n (mmdebstrap, chroot, mounts)")


@dataclass(frozen=True)
class Image:
    layout: Path
    tag: str

    @property
    def ref(self) -> str:
        return f"{self.layout}:{self.tag}"

    def blob(self, digest: str) -> dict[str, Any]:
        algorithm, _, hexdigest = digest.partition(":")
        return dict(json.loads((self.layout / "blobs" / algorithm / hexdigest).read_text()))

    def config(self) -> dict[str, Any]:
        index = json.loads((self.layout / "index.json").read_text())
        (manifest,) = [
            m
            for m in index["manifests"]
            if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == self.tag
        ]
        return self.blob(self.blob(manifest["digest"])["config"]["digest"])


@dataclass(frozen=True)
class Bundle:
    """An unpacked image: its root and the runtime configuration umoci wrote for it."""

    rootfs: Path
    process: dict[str, Any]

    def argv(self, command: Sequence[str], binds: Sequence[str] = ()) -> list[str]:
        user = self.process["user"]
        argv = [*_privileged(), "bash", str(RUN), "--read-only"]
        argv += ["--user", f"{user['uid']}:{user['gid']}", "--cwd", self.process["cwd"]]
        for variable in self.process["env"]:
            argv += ["--env", variable]
        for bind in binds:
            argv += ["--bind", bind]
        return [*argv, str(self.rootfs), *command]

    def run(self, *command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.argv(command), capture_output=True, text=True, timeout=120)

    def start(self, command: Sequence[str], binds: Sequence[str], log: Path) -> Process:
        with log.open("wb") as out:
            proc = subprocess.Popen(
                self.argv(command, binds),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # one process group: killed whole if the test fails
            )
        return Process(proc, log)


@dataclass(frozen=True)
class Process:
    proc: subprocess.Popen[bytes]
    log: Path

    def stop(self) -> int:
        """SIGTERM (passed on to the command inside), then its exit status."""
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=30)

    def kill(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]


@pytest.fixture(scope="module")
def image() -> Image:
    result = subprocess.run(
        [*_privileged(), "bash", str(BUILD)],
        env={**os.environ, "PYTHON": sys.executable},  # the venv's, which has pip
        capture_output=True,
        text=True,
        timeout=1500,
    )
    if result.returncode == UNAVAILABLE:
        pytest.skip(f"the image cannot be built here: {result.stderr.strip().splitlines()[-1]}")
    assert result.returncode == 0, result.stderr[-4000:]
    layout, _, tag = result.stdout.strip().rpartition(":")
    return Image(Path(layout), tag)


@pytest.fixture(scope="module")
def bundle(image: Image) -> Bundle:
    """The image as ``umoci unpack`` unpacked it (the build does, once per cache entry; every run
    here mounts its root read-only, so it stays as unpacked)."""
    directory = image.layout.parent / "bundle"
    runtime = json.loads((directory / "config.json").read_text())
    return Bundle(directory / runtime["root"]["path"], runtime["process"])


@pytest.fixture(scope="module")
def credentials(control_plane: ControlPlane) -> Iterator[Path]:
    """A kubeconfig for the test API server (admin) that names its certificates by path inside
    the image, so the client writes no temporary files; readable by the image's user only."""
    directory = Path(tempfile.mkdtemp(prefix="gpustack-image-creds-"))
    try:
        (directory / "ca.crt").write_bytes(control_plane.ca.cert_pem)
        control_plane.admin.write(directory, "admin")
        config = control_plane.kubeconfig_dict()
        (cluster,) = config["clusters"]
        del cluster["cluster"]["certificate-authority-data"]
        cluster["cluster"]["certificate-authority"] = f"{CREDENTIALS}/ca.crt"
        (user,) = config["users"]
        user["user"] = {
            "client-certificate": f"{CREDENTIALS}/admin.crt",
            "client-key": f"{CREDENTIALS}/admin.key",
        }
        (directory / "kubeconfig").write_text(json.dumps(config))
        create_namespace(control_plane, SYSTEM, {})
        yield directory
    finally:
        subprocess.run([*_privileged(), "rm", "-rf", str(directory)], check=False)


def _own_for_image(directory: Path, bundle: Bundle) -> None:
    """Hand ``directory`` to the image's user, read-only (like a Secret volume's files)."""
    user = bundle.process["user"]
    for command in (["chown", "-R", f"{user['uid']}:{user['gid']}"], ["chmod", "-R", "u=rX,go="]):
        subprocess.run([*_privileged(), *command, str(directory)], check=True)


def _get(url: str, context: ssl.SSLContext | None = None) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5, context=context) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _wait_for(
    url: str, process: Process, want: str | None = None, context: ssl.SSLContext | None = None
) -> None:
    """Until ``url`` answers 200 (with the body ``want``, if given): 60 s, and a failure at once
    if the process ends."""
    deadline = time.monotonic() + 60
    last = "no answer"
    while time.monotonic() < deadline:
        assert process.proc.poll() is None, f"exited {process.proc.returncode}:\n{process.output()}"
        try:
            status, body = _get(url, context)
        except OSError as exc:
            last = str(exc)
        else:
            if status == 200 and want in (None, body):
                return
            last = f"{status} {body}"
        time.sleep(0.3)
    raise AssertionError(f"{url}: {last}\n{process.output()}")


def _manifest_command(component: str) -> list[str]:
    (deployment,) = load_yaml_documents(REPO_ROOT / "deploy" / component / "deployment.yaml")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return list(container["command"])


# ---- the configuration ------------------------------------------------------------------------


def _runtime_stage() -> dict[str, list[str]]:
    *_, runtime = dockerfile.stages()
    found: dict[str, list[str]] = {}
    for word, args in runtime:
        found.setdefault(word, []).append(args)
    return found


def test_the_image_configuration_is_the_dockerfiles_runtime_stage(image: Image) -> None:
    stage = _runtime_stage()
    config = image.config()["config"]
    assert config["User"] == stage["USER"][-1]
    entrypoint = stage.get("ENTRYPOINT")
    assert config.get("Entrypoint") == (json.loads(entrypoint[-1]) if entrypoint else None)
    assert config["Cmd"] == json.loads(stage["CMD"][-1])
    assert config["WorkingDir"] == stage["WORKDIR"][-1]
    ports = {f"{p}/tcp" if "/" not in p else p for a in stage["EXPOSE"] for p in a.split()}
    assert set(config["ExposedPorts"]) == ports
    labels = dict(pair.split("=", 1) for a in stage["LABEL"] for pair in shlex.split(a))
    assert labels.items() <= config["Labels"].items()
    env = dict(v.split("=", 1) for v in config["Env"])
    for assignment in (pair for a in stage["ENV"] for pair in shlex.split(a)):
        name, _, value = assignment.partition("=")
        # ${PATH} is the base image's own: the image's PATH begins with what the stage adds.
        prefix, inherited, _ = value.partition(f"${{{name}}}")
        assert env[name].startswith(prefix) if inherited else env[name] == value, name


def test_the_unpacked_runtime_configuration_runs_the_images_user_and_command(
    image: Image, bundle: Bundle
) -> None:
    config = image.config()["config"]
    uid, _, gid = config["User"].partition(":")
    assert (bundle.process["user"]["uid"], bundle.process["user"]["gid"]) == (int(uid), int(gid))
    assert bundle.process["args"] == (config.get("Entrypoint") or []) + config["Cmd"]
    assert set(config["Env"]) <= set(bundle.process["env"])


# ---- inside the image -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        ["gpustack-controller"],
        ["gpustack-webhook"],
        _manifest_command("controller"),
        _manifest_command("webhook"),
    ],
    ids=" ".join,
)
def test_each_entry_point_prints_its_usage(bundle: Bundle, command: list[str]) -> None:
    result = bundle.run(*command, "--help")
    assert result.returncode == 0, result.stderr
    program = "gpustack-webhook" if "webhook" in " ".join(command) else "gpustack-controller"
    assert result.stdout.startswith(f"usage: {program}"), result.stdout
    assert result.stderr == ""


PROBE = """
import errno, importlib.metadata, importlib.util, json, os, ssl, sys
import gpustack_controller.__main__, gpustack_webhook.__main__


def stale(source):
    # The bytecode import would use as it is: unchecked hash, or the source's mtime and size.
    try:
        with open(importlib.util.cache_from_source(source), "rb") as f:
            header = f.read(16)
    except OSError:
        return True
    flags = int.from_bytes(header[4:8], "little")
    if flags & 1:
        return bool(flags & 2)  # hash-based: fine unless it asks to check the source
    st = os.stat(source)
    return header[8:16] != (
        (int(st.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little")
        + (st.st_size & 0xFFFFFFFF).to_bytes(4, "little")
    )


written = {}
for place in ("/", "/tmp", "/opt/gpustack-render", os.environ["HOME"]):
    try:
        with open(os.path.join(place, ".probe"), "w"):
            written[place] = "written"
    except OSError as exc:
        written[place] = errno.errorcode[exc.errno]
sources = [
    m.__file__ for m in list(sys.modules.values())
    if getattr(m, "__file__", None) and m.__file__.endswith(".py")
]
print(json.dumps({
    "ids": [os.getuid(), os.getgid(), os.getgroups()],
    "python": list(sys.version_info[:2]),
    "executable": sys.executable,
    "prefix": sys.prefix,
    "version": importlib.metadata.version("gpustack-render"),
    "modules": len(sources),
    "stale": [s for s in sources if stale(s)],
    "ca": ssl.create_default_context().cert_store_stats()["x509_ca"],
    "written": written,
}))
"""


def test_inside_the_image(image: Image, bundle: Bundle) -> None:
    result = bundle.run("python", "-c", PROBE)
    assert result.returncode == 0, result.stderr
    facts = json.loads(result.stdout)
    uid, gid = (int(n) for n in image.config()["config"]["User"].split(":"))
    assert facts["ids"][:2] == [uid, gid] and set(facts["ids"][2]) <= {gid}
    assert facts["python"] == [3, 11]  # Debian's, the ABI the wheels were fetched for
    assert facts["prefix"] == "/opt/gpustack-render"
    assert facts["executable"] == "/opt/gpustack-render/bin/python"
    assert facts["version"] == image.tag.removeprefix("v")
    # Compiled at build time and valid as unpacked: nothing compiled (or written) at start.
    assert facts["modules"] > 500 and facts["stale"] == []
    assert facts["ca"] > 100
    # Nothing is writable: not the root, not /tmp (the manifests mount no volume there).
    assert set(facts["written"].values()) == {"EROFS"}, facts["written"]


# ---- serving --------------------------------------------------------------------------------


def test_the_controller_serves_health_from_the_image(
    bundle: Bundle, credentials: Path, control_plane: ControlPlane, tmp_path: Path
) -> None:
    _own_for_image(credentials, bundle)
    port = free_port()
    lease = f"image-{port}"
    process = bundle.start(
        [
            *_manifest_command("controller"),
            f"--kubeconfig={CREDENTIALS}/kubeconfig",
            f"--namespace={SYSTEM}",
            f"--health-port={port}",
            "--health-host=127.0.0.1",
            f"--lease-name={lease}",
            f"--identity={lease}",
            "--leader-elect",
        ],
        [f"{credentials}:{CREDENTIALS}:ro"],
        tmp_path / "controller.log",
    )
    try:
        # "standby" until the Lease is held, then "ok" (informers synced, workers running).
        _wait_for(f"http://127.0.0.1:{port}/healthz", process, want="ok")
        assert _get(f"http://127.0.0.1:{port}/readyz") == (200, "ok")
        status, metrics = _get(f"http://127.0.0.1:{port}/metrics")
        assert status == 200 and "gpustack_controller_leader 1.0" in metrics
        path = f"/apis/coordination.k8s.io/v1/namespaces/{SYSTEM}/leases/{lease}"
        assert control_plane.request("GET", path)[1]["spec"]["holderIdentity"] == lease
        assert process.stop() == 0, process.output()
        assert control_plane.request("GET", path)[1]["spec"]["holderIdentity"] == ""
    finally:
        process.kill()


def test_the_webhook_serves_its_probes_from_the_image(
    bundle: Bundle, credentials: Path, envtest_ca: CertificateAuthority, tmp_path: Path
) -> None:
    envtest_ca.issue_serving(("127.0.0.1", "localhost")).write(credentials, "serving")
    _own_for_image(credentials, bundle)
    port, probe_port = free_port(), free_port()
    process = bundle.start(
        [
            *_manifest_command("webhook"),
            f"--cert-file={CREDENTIALS}/serving.crt",
            f"--key-file={CREDENTIALS}/serving.key",
            f"--kubeconfig={CREDENTIALS}/kubeconfig",
            f"--namespace={SYSTEM}",
            "--host=127.0.0.1",
            f"--port={port}",
            f"--probe-port={probe_port}",
            "--shutdown-delay=0",
        ],
        [f"{credentials}:{CREDENTIALS}:ro"],
        tmp_path / "webhook.log",
    )
    try:
        _wait_for(f"http://127.0.0.1:{probe_port}/readyz", process)
        trusted = ssl.create_default_context(cadata=envtest_ca.cert_pem.decode())
        assert _get(f"https://127.0.0.1:{port}/healthz", trusted)[0] == 200
        assert process.stop() == 0, process.output()
    finally:
        process.kill()


def test_the_webhook_keeps_its_own_certificate_from_the_image(
    bundle: Bundle, credentials: Path, control_plane: ControlPlane, tmp_path: Path
) -> None:
    """The manifests' default, self-managed certificates (``--tls-secret``): the server creates
    its CA and serving certificate in the Secret and serves them from memory (memfd), which the
    read-only root must allow."""
    _own_for_image(credentials, bundle)
    port, probe_port = free_port(), free_port()
    secret = f"image-tls-{port}"
    process = bundle.start(
        [
            *_manifest_command("webhook"),
            f"--tls-secret={secret}",
            "--cert-host=127.0.0.1",
            f"--kubeconfig={CREDENTIALS}/kubeconfig",
            f"--namespace={SYSTEM}",
            "--host=127.0.0.1",
            f"--port={port}",
            f"--probe-port={probe_port}",
            f"--mutating-webhook-configuration={secret}",  # none: the server waits for them
            f"--validating-webhook-configuration={secret}",
            "--shutdown-delay=0",
        ],
        [f"{credentials}:{CREDENTIALS}:ro"],
        tmp_path / "webhook.log",
    )
    path = f"/api/v1/namespaces/{SYSTEM}/secrets/{secret}"
    try:
        _wait_for(f"http://127.0.0.1:{probe_port}/readyz", process)
        data = control_plane.request("GET", path)[1]["data"]
        trusted = ssl.create_default_context(cadata=base64.b64decode(data["ca.crt"]).decode())
        assert _get(f"https://127.0.0.1:{port}/healthz", trusted)[0] == 200
        assert process.stop() == 0, process.output()
    finally:
        process.kill()
        with contextlib.suppress(APIError):
            control_plane.request("DELETE", path)
