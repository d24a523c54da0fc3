"""The rendered Elastic EP Ray commands, run with real Ray (docs/elastic-ep.md, "How it is
proven"; docs/contract/elastic-ep.md §3.3 and §4.2).

The renderer's own Pods are taken apart here: the head Pod's ``ray start --head`` shell, the
master's shell (its JOIN, then ``exec "$@"`` of the engine) and each worker's ``ray start …
--block`` shell run as local processes of Ray 2.56.1 (:mod:`.ray_install`), with the env the Pod
would get. No engine runs (no GPU here): the master's ``exec "$@" …`` tail becomes a sleep.
Only addresses and ports move, so several nodes fit on one host's loopback (:func:`_loopback`
says exactly what). Then the head's own state API is read over HTTP and fed to the library
(``layers.read_ray_nodes``, ``layers.ray_layer``): the library must find every member ALIVE under
its Pod uid. A width change follows: the render at width 3 adds one worker, whose command joins,
and the Ray layer reaches 3.

Every process is stopped by its id (the ones carrying this run's marker in their environment),
never with ``ray stop``, which stops every Ray process on the machine.
"""

from __future__ import annotations

import contextlib
import copy
import os
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from gpustack_render.core.labels import COMPONENT, POD_ORDINAL
from gpustack_render.core.settings import Settings
from gpustack_render.elastic import layers
from gpustack_render.reconcile.observed import ObservedPod, observe_pod
from gpustack_render.rendering.elastic import BOOT_WIDTH_ANNOTATION, LiveMaster
from gpustack_render.rendering.renderer import Rendering, render
from gpustack_render.schema.decoding import decode_deployment, decode_model
from gpustack_render.schema.kinds import INPUT_MODELS
from gpustack_render.schema.lookups import StaticLookups

from .ray_install import RAY_VERSION, ray_bin

pytestmark = pytest.mark.integration

NS = "team-a"
MD = "deepseek"
MD_UID = "md-uid"
HEAD_SERVICE = f"{MD}-elastic-head.{NS}.svc:6379"
#: The master's tail that execs the engine (docs/contract/elastic-ep.md §3.3).
ENGINE_EXEC = 'exec "$@" --data-parallel-address "$GPUSTACK_ELASTIC_POD_IP"'
#: What runs instead of the engine: the master's shell stays alive, as the engine would.
ENGINE_STAND_IN = "exec sleep 600"
#: Bounded waits (a loaded 2-core machine starts a Ray head in ~10-20 s).
HEAD_TIMEOUT_S = 60.0
JOIN_TIMEOUT_S = 60.0
#: A marker in every process's environment: what the clean-up looks for (Ray's processes inherit
#: the environment of the ``ray start`` that spawned them, detached or not).
MARK = "GPUSTACK_RAY_TEST_RUN"

INSTANCE_TYPE: dict[str, Any] = {
    "apiVersion": "worker.gpustack.ai/v1",
    "kind": "InstanceType",
    "metadata": {"name": "h100"},
    "spec": {"acceleratable": True, "unitResources": {"cpu": "16", "ram": "128Gi"}},
    "status": {
        "entrance": "gpustack-fnv64-0123456789abcdef",
        "detail": {"manufacturer": "nvidia", "memory": "80Gi"},
        "accelerator": {"capacity": 64},
    },
}


def _deployment(width: int) -> dict[str, Any]:
    return {
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "ModelDeployment",
        "metadata": {"name": MD, "namespace": NS, "uid": MD_UID},
        "spec": {
            "model": {"name": "deepseek-ai/DeepSeek-V2-Lite"},
            "engine": {"name": "vLLM", "image": "gpustack/runner:cuda13.0-vllm0.33.0"},
            "roles": [
                {
                    "name": "server",
                    "instanceType": "h100",
                    "resources": {"accelerator": 1},
                    "elasticEp": {"width": width},
                    "extraArgs": ["--trust-remote-code"],
                }
            ],
        },
    }


def _render(width: int, masters: tuple[LiveMaster, ...] = ()) -> Rendering:
    md, errs = decode_deployment(_deployment(width))
    assert md is not None, errs
    it, errs = decode_model(INPUT_MODELS["InstanceType"], copy.deepcopy(INSTANCE_TYPE))
    assert it is not None, errs
    return render(md, lookups=StaticLookups.of([it]), settings=Settings(), elastic_masters=masters)


# --- the rendered Pods as local processes ----------------------------------------------------


def _main(pod: Mapping[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = next(c for c in pod["spec"]["containers"] if c["name"] == "main")
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _free_block(size: int, taken: set[int]) -> int:
    """The first port of ``size`` consecutive free ports (for a node's worker port range)."""
    for _ in range(200):
        base = _free_port()
        block = range(base, base + size)
        if base + size > 65535 or taken.intersection(block):
            continue
        try:
            for p in block:
                with socket.socket() as s:
                    s.bind(("127.0.0.1", p))
        except OSError:
            continue
        taken.update(block)
        return base
    raise AssertionError(f"no {size} consecutive free ports on 127.0.0.1")


@dataclass
class Node:
    """One rendered Pod run as a local process group."""

    name: str
    pod_uid: str
    argv: list[str]
    env: dict[str, str]
    log: Path
    proc: subprocess.Popen[bytes] | None = None
    moved: list[str] = field(default_factory=list)

    def tail(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-3000:]
        except OSError:
            return "(no log)"


@dataclass
class RayRun:
    """The local "cluster": the head's ports, the nodes started, this run's marker."""

    root: Path
    bindir: Path
    gcs_port: int
    dashboard_port: int
    mark: str = field(default_factory=lambda: uuid.uuid4().hex)
    taken: set[int] = field(default_factory=set)
    nodes: list[Node] = field(default_factory=list)

    def _node_ports(self, name: str, head: bool) -> str:
        """The ports that would collide between nodes sharing one host, each its own here."""
        flags = {
            "--node-manager-port": _free_port(),
            "--object-manager-port": _free_port(),
            "--dashboard-agent-listen-port": _free_port(),  # 52365 by default
            "--dashboard-agent-grpc-port": _free_port(),
            "--metrics-export-port": _free_port(),
            "--runtime-env-agent-port": _free_port(),
        }
        if head:
            flags["--dashboard-port"] = self.dashboard_port  # 8265 by default
            flags["--ray-client-server-port"] = _free_port()  # 10001 by default
        base = _free_block(16, self.taken)
        flags["--min-worker-port"] = base
        flags["--max-worker-port"] = base + 15
        parts = [f"{k}={v}" for k, v in flags.items()]
        parts.append(f"--temp-dir={self.root / name}")
        return " ".join(parts)

    def _env(self, pod: Mapping[str, Any], pod_uid: str) -> dict[str, str]:
        """The container env the Pod gets: values as rendered, the field references filled in
        (``metadata.uid`` → the fake Pod uid, ``status.podIP`` → 127.0.0.1), the head's Service
        address moved to loopback."""
        env = {
            "PATH": f"{self.bindir}:/usr/local/bin:/usr/bin:/bin",
            "HOME": os.environ.get("HOME", "/root"),
            "LANG": "C.UTF-8",
            # Not in the Pod: keeps Ray from reporting usage over the network from a test.
            "RAY_USAGE_STATS_ENABLED": "0",
            MARK: self.mark,
        }
        for entry in _main(pod).get("env") or ():
            name = entry["name"]
            if "value" in entry:
                env[name] = str(entry["value"]).replace(HEAD_SERVICE, self.head_address)
                continue
            ref = entry.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
            stand_in = {"metadata.uid": pod_uid, "status.podIP": "127.0.0.1"}.get(ref or "")
            assert stand_in is not None, f"{name}: an env source this test cannot fill: {entry}"
            env[name] = stand_in
        return env

    @property
    def head_address(self) -> str:
        return f"127.0.0.1:{self.gcs_port}"

    def start(self, name: str, pod: Mapping[str, Any], pod_uid: str) -> Node:
        """Start a rendered Pod's ``main`` command with only addresses and ports moved."""
        command = list(_main(pod)["command"])
        head = pod["metadata"]["labels"][COMPONENT] == f"{MD}-elastic-head"
        script, moved = _loopback(command[2], self, name, head=head)
        argv = [command[0], command[1], script, *command[3:]]
        node = Node(name, pod_uid, argv, self._env(pod, pod_uid), self.root / f"{name}.log")
        node.moved = moved
        with node.log.open("wb") as out:
            node.proc = subprocess.Popen(
                argv,
                env=node.env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                cwd=self.root,
            )
        self.nodes.append(node)
        return node

    def ours(self) -> list[int]:
        """Every process carrying this run's marker (the shells and all Ray spawned)."""
        needle = f"{MARK}={self.mark}".encode()
        pids = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                environ = (entry / "environ").read_bytes()
            except OSError:
                continue
            if needle in environ.split(b"\0"):
                pids.append(int(entry.name))
        return pids

    def stop(self) -> list[int]:
        """SIGTERM every process of this run by id, then SIGKILL what is left after 15 s;
        answers the ids still alive after that (none expected)."""
        for sig, grace in ((signal.SIGTERM, 15.0), (signal.SIGKILL, 5.0)):
            for pid in self.ours():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
            deadline = time.monotonic() + grace
            while time.monotonic() < deadline:
                for node in self.nodes:
                    if node.proc is not None:
                        node.proc.poll()  # reap our direct children
                if not self.ours():
                    return []
                time.sleep(0.2)
        return self.ours()


def _loopback(script: str, run: RayRun, name: str, *, head: bool) -> tuple[str, list[str]]:
    """The rendered shell with only addresses and ports moved (and, on the master, the engine's
    ``exec`` replaced by a sleep); answers it and the list of what was changed."""
    moved: list[str] = []

    def swap(old: str, new: str) -> None:
        nonlocal script
        assert script.count(old) == 1, f"{name}: expected {old!r} once in {script!r}"
        script = script.replace(old, new)
        moved.append(f"{old} -> {new}")

    if head:
        swap("--port=6379", f"--port={run.gcs_port}")
        swap("--dashboard-host=0.0.0.0", "--dashboard-host=127.0.0.1")
    else:
        swap(f"--address={HEAD_SERVICE}", f"--address={run.head_address}")
    if ENGINE_EXEC in script:
        swap(ENGINE_EXEC, ENGINE_STAND_IN)
    extra = run._node_ports(name, head)
    swap("ray start ", f"ray start {extra} ")
    return script, moved


# --- the head's state API ---------------------------------------------------------------------


def _get_nodes(run: RayRun) -> tuple[int, bytes]:
    url = f"http://127.0.0.1:{run.dashboard_port}{layers.RAY_NODES_PATH}"
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except (OSError, urllib.error.URLError) as exc:
        return 0, str(exc).encode()


def _wait_nodes(run: RayRun, count: int, timeout: float, what: str) -> layers.RayNodes:
    """The state API's answer once it is complete and lists ``count`` ALIVE nodes; fails with
    the last answer and every node's log when it does not come within ``timeout``."""
    deadline = time.monotonic() + timeout
    last: str = "no answer yet"
    while time.monotonic() < deadline:
        for node in run.nodes:
            assert node.proc is not None
            if node.proc.poll() is not None:
                pytest.fail(
                    f"{node.name} exited {node.proc.returncode} while waiting for {what}; "
                    f"its command: {node.argv}\nits log:\n{node.tail()}"
                )
        status, body = _get_nodes(run)
        read = layers.read_ray_nodes(status, body)
        if isinstance(read, layers.RayNodes):
            alive = [n for n in read.nodes if n.state == layers.ALIVE]
            if len(alive) == count:
                return read
            last = f"{len(alive)} ALIVE nodes: {[dict(n.labels) for n in alive]}"
        else:
            last = f"{read.reason} ({status}: {body[:300]!r})"
        time.sleep(1.0)
    logs = "\n".join(f"--- {n.name}\n{n.tail()}" for n in run.nodes)
    pytest.fail(f"{what}: no {count} ALIVE Ray nodes within {timeout:.0f} s; last: {last}\n{logs}")


def _observed(pod: Mapping[str, Any], uid: str, ordinal_name: str) -> ObservedPod:
    """The rendered Pod as the controller would read it once created and running."""
    obj = copy.deepcopy(dict(pod))
    obj["metadata"]["name"] = obj["metadata"]["generateName"] + ordinal_name
    obj["metadata"]["uid"] = uid
    obj["status"] = {"phase": "Running"}
    return observe_pod(obj, owner_uid=MD_UID)


# --- the test ---------------------------------------------------------------------------------


@pytest.fixture
def ray_run() -> Iterator[RayRun]:
    t0 = time.monotonic()
    bindir = ray_bin()
    print(f"Ray {RAY_VERSION} ready in {time.monotonic() - t0:.1f} s at {bindir}")
    # A short root: Ray's Unix sockets live under <temp-dir>/session_…/sockets/, and a pytest
    # tmp_path is long enough to pass the 107-byte limit of a socket path.
    root = Path(tempfile.mkdtemp(prefix="gr-ray-", dir="/tmp"))
    run = RayRun(root=root, bindir=bindir, gcs_port=_free_port(), dashboard_port=_free_port())
    try:
        yield run
    finally:
        left = run.stop()
        for node in run.nodes:
            print(f"--- {node.name}: {node.argv[2]}")
        subprocess.run(["rm", "-rf", str(root)], check=False)
        assert not left, f"processes of this run still alive after SIGKILL: {left}"


def test_rendered_ray_commands_join_and_the_library_reads_the_state_api(
    ray_run: RayRun,
) -> None:
    started = time.monotonic()
    run = ray_run
    two = _render(2)
    role = two.roles[0]
    assert role.elastic is not None
    head_pod = role.elastic.head_pod
    seats = {s.ordinal: s.pod for s in role.seats}
    assert sorted(seats) == [0, 1]
    uids = {0: "pod-uid-master-0", 1: "pod-uid-worker-1", 2: "pod-uid-worker-2"}

    # The head first, then the master's JOIN and worker 1 together.
    head = run.start("head", head_pod, "pod-uid-head")
    _wait_nodes(run, 1, HEAD_TIMEOUT_S, "the head")
    run.start("m0", seats[0], uids[0])
    run.start("w1", seats[1], uids[1])
    answer = _wait_nodes(run, 3, JOIN_TIMEOUT_S, "the master and worker 1 joining")

    # What the head's state API says, read by the library as the controller reads it.
    status, body = _get_nodes(run)
    read = layers.read_ray_nodes(status, body)
    assert isinstance(read, layers.RayNodes), read
    assert len(read.nodes) == 3 and all(n.state == layers.ALIVE for n in read.nodes)
    by_uid = {n.labels.get(layers.POD_UID_LABEL): n for n in read.nodes}
    assert set(by_uid) == {"pod-uid-head", uids[0], uids[1]}, [n.labels for n in answer.nodes]
    assert by_uid["pod-uid-head"].is_head and not by_uid[uids[0]].is_head
    component = seats[0]["metadata"]["labels"][COMPONENT]  # the members' component label
    members = layers.live_members([_observed(seats[o], uids[o], str(o)) for o in (0, 1)], component)
    assert [p.ordinal for p in members] == [0, 1]
    ray = layers.ray_layer(members, read)
    assert (ray.known, ray.value, ray.ordinals) == (True, 2, frozenset({0, 1})), ray
    assert ray.covers(2) and not ray.covers(3)

    # A width change: the render at width 3, the live master passed in, keeps the master and
    # worker 1 as they are and adds worker 2.
    master = seats[0]
    live = LiveMaster(
        master["metadata"]["generateName"] + "0",
        uids[0],
        master["metadata"]["annotations"][BOOT_WIDTH_ANNOTATION],
    )
    three = _render(3, (live,)).roles[0]
    seats3 = {s.ordinal: s.pod for s in three.seats}
    assert sorted(seats3) == [0, 1, 2]
    for o in (0, 1):
        assert _main(seats3[o])["command"] == _main(seats[o])["command"], o
    assert three.elastic is not None
    assert _main(three.elastic.head_pod)["command"] == _main(head_pod)["command"]
    members3 = layers.live_members(
        [_observed(seats3[o], uids[o], str(o)) for o in (0, 1, 2)], component
    )
    assert [p.ordinal for p in members3] == [0, 1, 2]
    before = layers.ray_layer(members3, read)
    assert (before.value, before.covers(3)) == (2, False), before
    assert "member 2: not joined to Ray" in before.reason, before.reason

    run.start("w2", seats3[2], uids[2])
    _wait_nodes(run, 4, JOIN_TIMEOUT_S, "worker 2 joining after the width change")
    status, body = _get_nodes(run)
    read = layers.read_ray_nodes(status, body)
    assert isinstance(read, layers.RayNodes), read
    after = layers.ray_layer(members3, read)
    assert (after.known, after.value, after.covers(3)) == (True, 3, True), after
    labels = sorted(str(n.labels.get(layers.POD_UID_LABEL)) for n in read.nodes)
    assert labels == sorted(["pod-uid-head", *uids.values()])

    # The master's shell is still up: its JOIN succeeded under `set -e` and reached the exec.
    m0 = next(n for n in run.nodes if n.name == "m0")
    assert m0.proc is not None and m0.proc.poll() is None, m0.tail()
    assert head.proc is not None and head.proc.poll() is None, head.tail()
    for node in run.nodes:
        print(f"{node.name}: moved {node.moved}")
    print(f"Ray part took {time.monotonic() - started:.1f} s")
    assert {seats3[o]["metadata"]["labels"][POD_ORDINAL] for o in seats3} == {"0", "1", "2"}
