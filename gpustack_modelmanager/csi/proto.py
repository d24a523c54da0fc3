"""The CSI v1 messages and services, built from the vendored ``csi.proto`` when first imported.

``csi.proto`` is the CSI spec's own source file (v1.13.0, the version csi-sanity is built
against), kept unchanged beside this module; grpcio-tools compiles it in memory
(``grpc.protos_and_services``), so no generated code is committed (docs/decisions.md, "The CSI
stubs are built at import time"). The modules are untyped: :data:`pb` and :data:`services` are
``Any`` and the servicers read them through small typed helpers.
"""

from __future__ import annotations

from typing import Any

import grpc

# protos_and_services compiles with grpcio-tools' protoc; imported here so that the dependency is
# visible (and a missing one fails at import, naming the package).
import grpc_tools.protoc  # noqa: F401

#: The path grpcio-tools resolves against ``sys.path`` (the repository root, or site-packages).
PROTO = "gpustack_modelmanager/csi/csi.proto"

_modules: tuple[Any, Any] = grpc.protos_and_services(PROTO)
#: ``csi.v1`` messages (``csi_pb2``).
pb: Any = _modules[0]
#: ``csi.v1`` services (``csi_pb2_grpc``): the servicer bases and ``add_*_to_server``.
services: Any = _modules[1]
