"""``python -m gpustack_controller``: run the controller until SIGTERM/SIGINT or a lost lease.

The system namespace of the Settings (D24: the settings ConfigMap, the leader Lease and the place
no LocalQueue is created) is ``--namespace``, else the namespace of the Pod the process runs in,
else gpustack-system.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
from typing import NoReturn

from gpustack_controller.controller import Controller, Options
from gpustack_controller.kube import ClusterConfigError, Kube, in_cluster_namespace
from gpustack_controller.server import serve
from gpustack_render.core.settings import DEFAULT_SYSTEM_NAMESPACE

log = logging.getLogger("gpustack_controller")


#: Bad usage: a flag the parser refuses or a kubeconfig that does not exist.
EXIT_USAGE = 2
LOG_LEVELS = ("debug", "info", "warning", "error")


class _Parser(argparse.ArgumentParser):
    """Bad flags are one line on stderr and exit 2 (the usage is in --help)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see --help)\n")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="gpustack-controller", description=__doc__)
    p.add_argument(
        "--kubeconfig",
        help="kubeconfig file (default: the in-cluster service account, else $KUBECONFIG, "
        "else ~/.kube/config)",
    )
    p.add_argument(
        "--namespace",
        help=f"system namespace (default: the Pod's own, else {DEFAULT_SYSTEM_NAMESPACE})",
    )
    p.add_argument(
        "--workers", type=int, default=8, help="concurrent deployment reconciles (default 8)"
    )
    p.add_argument(
        "--health-port",
        type=int,
        default=8081,
        help="/healthz, /readyz and /metrics port (default 8081)",
    )
    p.add_argument(
        "--health-host",
        default="",
        help="address of the health server (default: every address, IPv4 and IPv6)",
    )
    p.add_argument(
        "--leader-elect",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="hold a coordination.k8s.io Lease before reconciling (default: on)",
    )
    p.add_argument(
        "--lease-name",
        default="gpustack-controller",
        help="the leader Lease's name (default gpustack-controller)",
    )
    p.add_argument("--identity", default=None, help="lease holder identity (default: hostname)")
    p.add_argument(
        "--log-level", default="info", choices=LOG_LEVELS, help="log threshold (default info)"
    )
    return p


async def run(args: argparse.Namespace) -> int:
    namespace = args.namespace or in_cluster_namespace() or DEFAULT_SYSTEM_NAMESPACE
    try:
        kube = await Kube.connect(kubeconfig=args.kubeconfig)
    except ClusterConfigError as exc:
        sys.stderr.write(f"gpustack-controller: error: {exc}\n")
        return EXIT_USAGE
    controller = Controller(
        kube,
        Options(
            system_namespace=namespace,
            workers=args.workers,
            leader_election=args.leader_elect,
            lease_name=args.lease_name,
            identity=args.identity or socket.gethostname(),
        ),
    )
    runner = await serve(controller.healthy, host=args.health_host, port=args.health_port)
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stopping.set)
    code = 0
    try:
        start = asyncio.create_task(controller.start())
        stop = asyncio.create_task(stopping.wait())
        await asyncio.wait({start, stop}, return_when=asyncio.FIRST_COMPLETED)
        if start.done() and start.exception() is None:
            waiting = asyncio.create_task(controller.wait())
            await asyncio.wait({waiting, stop}, return_when=asyncio.FIRST_COMPLETED)
            if waiting.done():
                log.error("a controller loop ended (lost lease?); exiting")
                code = 1
        elif start.done():
            log.error("controller failed to start: %s", start.exception())
            code = 1
        start.cancel()
        stop.cancel()
    finally:
        await controller.stop()
        await runner.cleanup()
        await kube.close()
    return code


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The flags; a refused one, or a --kubeconfig that is not a file, exits 2 with one line."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.kubeconfig and not os.path.isfile(args.kubeconfig):
        parser.error(f"--kubeconfig {args.kubeconfig}: no such file")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )
    logging.getLogger("kubernetes_asyncio").setLevel(logging.WARNING)
    return asyncio.run(run(args))


if __name__ == "__main__":
    raise SystemExit(main())
