"""The CSI Identity service: the driver's name, its capabilities (none: a node-only plugin
without a Controller service), and readiness."""

from __future__ import annotations

from importlib import metadata
from typing import Any

from gpustack_modelmanager.csi.proto import pb, services
from gpustack_render.weights.delivery import CSI_DRIVER


def _version() -> str:
    try:
        return metadata.version("gpustack-render")
    except metadata.PackageNotFoundError:
        return "0.0.0"


class IdentityService(services.IdentityServicer):  # type: ignore[misc]
    """``csi.v1.Identity``."""

    def __init__(self, *, ready: Any = None) -> None:
        #: A callable answering whether the plugin is ready (``None``: always).
        self._ready = ready

    async def GetPluginInfo(self, request: Any, context: Any) -> Any:  # noqa: N802
        return pb.GetPluginInfoResponse(name=CSI_DRIVER, vendor_version=_version())

    async def GetPluginCapabilities(self, request: Any, context: Any) -> Any:  # noqa: N802
        # No CONTROLLER_SERVICE (nothing to provision or attach) and no topology constraints:
        # an inline ephemeral volume can be published on any node that runs the plugin.
        return pb.GetPluginCapabilitiesResponse(capabilities=[])

    async def Probe(self, request: Any, context: Any) -> Any:  # noqa: N802
        ready = True if self._ready is None else bool(self._ready())
        response = pb.ProbeResponse()
        response.ready.value = ready
        return response
