"""The gRPC server on the CSI unix socket: Identity and Node (no Controller service)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

import grpc

from gpustack_modelmanager.csi.identity import IdentityService
from gpustack_modelmanager.csi.node import NodeService
from gpustack_modelmanager.csi.proto import services


def socket_path(endpoint: str) -> Path:
    """The socket file of ``unix:///path``, ``unix:/path`` or a bare path."""
    for prefix in ("unix://", "unix:"):
        if endpoint.startswith(prefix):
            endpoint = endpoint[len(prefix) :]
            break
    return Path(endpoint)


async def start(endpoint: str, identity: IdentityService, node: NodeService) -> Any:
    """A started ``grpc.aio`` server listening on the unix socket of ``endpoint`` (a stale
    socket file left by a previous process is removed first)."""
    path = socket_path(endpoint)
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        if path.is_socket():
            os.unlink(path)
    server = grpc.aio.server()
    services.add_IdentityServicer_to_server(identity, server)
    services.add_NodeServicer_to_server(node, server)
    server.add_insecure_port(f"unix://{path}")
    await server.start()
    return server
