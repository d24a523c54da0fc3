"""Helpers for running the real routers (``vllm-router``, ``sglang-router``) against the simulated
cluster (docs/routers.md).

- :func:`loopback_nodes`: fake Nodes whose ``spec.podCIDR`` is a loopback range, so the Pod IPs
  KWOK gives the engine Pods are addresses a local process can dial (all of 127.0.0.0/8 is local
  on Linux). Nothing else in the harness dials a Pod IP.
- :class:`EngineHealthStandIn`: a stand-in for **the engine's** ``GET /health`` only. An engine
  cannot run here (no GPU), and a router lists a discovered Pod only once ``GET
  http://<podIP>:<port>/health`` answers 2xx. It answers 200 on that one path (404 on any
  other: the routers tolerate a failed ``/metrics`` or ``/server_info``) on every address of the
  Nodes' Pod ranges that KWOK hands out first, so whichever IP a new Pod gets is answered, and a
  Pod the router must not list is healthy too: what excludes it is the router's selector. It
  imitates no router.
- :class:`RouterProcess`: the router's own binary from the test extra, started with the command
  line the controller rendered into the router Deployment, only its listen addresses and ports
  moved to loopback; authenticated as the rendered ServiceAccount by a TokenRequest token in a
  kubeconfig (``KUBECONFIG``), as its in-cluster token would.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import os
import sys
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from gpustack_controller.kube import Kube
from gpustack_render.schema.resources import DEPLOYMENTS

from .cluster import BLOCK_LABEL, RACK_LABEL, FakeNode
from .controlplane import ControlPlane, ManagedProcess, free_port, start_process
from .webhook_fixtures import token_kubeconfig

#: The console scripts of the test extra sit beside the interpreter running the tests.
BIN = Path(sys.executable).parent
#: Loopback requests go straight to the router, whatever proxy the environment names.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))
#: The loopback Pod ranges of :func:`loopback_nodes`, one /24 per Node.
POD_RANGE = "127.244.{node}.0/24"
#: How many addresses of each range the stand-in answers on (KWOK hands them out in order and
#: reuses released ones first).
STANDIN_ADDRESSES = 48


def loopback_nodes(count: int = 2, gpus: int = 8) -> list[FakeNode]:
    """``count`` GPU Nodes whose Pods get loopback IPs (``127.244.<n>.x``)."""
    return [
        FakeNode(
            f"router-node-{n}",
            gpus=gpus,
            pod_cidr=POD_RANGE.format(node=n),
            # The topology levels Kueue's TAS flavor reads (deploy/kueue/resourceflavor.yaml).
            labels={BLOCK_LABEL: "block-0", RACK_LABEL: f"rack-{n}"},
        )
        for n in range(count)
    ]


def standin_addresses(nodes: Sequence[FakeNode]) -> list[str]:
    out: list[str] = []
    for node in nodes:
        assert node.pod_cidr is not None
        hosts = ipaddress.ip_network(node.pod_cidr).hosts()
        out += [str(next(hosts)) for _ in range(STANDIN_ADDRESSES)]
    return out


@dataclass
class EngineHealthStandIn:
    """Answers the engine's ``GET /health`` with 200 on ``addresses`` × ``port``."""

    addresses: Sequence[str]
    port: int
    _runner: web.AppRunner | None = None

    async def start(self) -> None:
        async def health(request: web.Request) -> web.Response:
            return web.Response(text="")

        app = web.Application()
        app.router.add_get("/health", health)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        for address in self.addresses:
            await web.TCPSite(self._runner, address, self.port).start()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


def container_command(deployment: dict[str, Any]) -> list[str]:
    """The router container's ``command`` as the controller rendered it."""
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return list(container["command"])


def on_loopback(command: Sequence[str], *, port: int, metrics_port: int) -> list[str]:
    """``command`` with only its listeners moved to loopback: ``--host``, ``--port``,
    ``--prometheus-host``, ``--prometheus-port``; the executable from the test extra."""
    moved = {
        "--host": "127.0.0.1",
        "--port": str(port),
        "--prometheus-host": "127.0.0.1",
        "--prometheus-port": str(metrics_port),
    }
    out = [str(BIN / command[0]), *command[1:]]
    for i, token in enumerate(out[:-1]):
        if token in moved:
            out[i + 1] = moved[token]
    return out


@dataclass
class RouterProcess:
    """One router started from its rendered command line."""

    process: ManagedProcess
    port: int
    argv: tuple[str, ...] = field(default=())

    @classmethod
    def start(
        cls,
        command: Sequence[str],
        *,
        cp: ControlPlane,
        namespace: str,
        account: str,
        directory: Path,
    ) -> RouterProcess:
        port, metrics = free_port(), free_port()
        argv = on_loopback(command, port=port, metrics_port=metrics)
        kubeconfig = token_kubeconfig(cp, namespace, account, directory / "router.kubeconfig")
        home = directory / "home"
        home.mkdir(parents=True, exist_ok=True)
        env = {"PATH": os.environ.get("PATH", ""), "HOME": str(home), "KUBECONFIG": str(kubeconfig)}
        process = start_process(Path(command[0]).name, argv, directory / "router.log", env=env)
        return cls(process, port, tuple(argv))

    def stop(self) -> None:
        self.process.stop()

    def _get(self, path: str) -> tuple[int, Any]:
        try:
            with _DIRECT.open(f"http://127.0.0.1:{self.port}{path}", timeout=3) as r:
                status, raw = int(r.status), r.read()
        except urllib.error.HTTPError as exc:
            return exc.code, None
        except OSError:
            return 0, None
        try:
            return status, json.loads(raw or b"null")
        except ValueError:  # /liveness answers plain text
            return status, raw.decode(errors="replace")

    async def alive(self) -> bool:
        assert self.process.popen.poll() is None, self.process.log_tail()
        status, _ = await asyncio.to_thread(self._get, "/liveness")
        return status == 200

    async def workers(self) -> list[dict[str, Any]]:
        """The router's own worker list (``GET /workers``, both routers)."""
        status, body = await asyncio.to_thread(self._get, "/workers")
        assert status == 200, f"GET /workers answered {status}: {self.process.log_tail()}"
        return list((body or {}).get("workers") or [])

    def log(self) -> str:
        return self.process.log_tail(200)


def worker_view(workers: Sequence[dict[str, Any]]) -> set[tuple[str, str, int | None]]:
    """(url, worker_type, bootstrap_port) of each worker the router lists."""
    return {(w["url"], w["worker_type"], w.get("bootstrap_port")) for w in workers}


async def router_deployment(kube: Kube, namespace: str, md: str) -> dict[str, Any] | None:
    return await kube.get(DEPLOYMENTS, f"{md}-router", namespace)


@contextlib.contextmanager
def router_running(
    command: Sequence[str], *, cp: ControlPlane, namespace: str, account: str, directory: Path
) -> Iterator[RouterProcess]:
    router = RouterProcess.start(
        command, cp=cp, namespace=namespace, account=account, directory=directory
    )
    try:
        yield router
    finally:
        router.stop()
