"""The router in front of the engine roles (``spec.router``; D26, docs/routers.md).

- ``build.py``: :func:`render_router`, the router's objects from the deployment and its role
  plans, or the reason there are none (no image; roles on different listener ports);
- ``commandline.py``: each router's command line from its real flags;
- ``llmd.py``: llm-d-router's scheduling configuration and its proxy's;
- ``objects.py``: the ServiceAccount, Role, RoleBinding, ConfigMap, Service, Deployment and
  InferencePool manifests;
- ``model.py``: :class:`RouterRendering`, what the renderer returns for the router.
"""

from gpustack_render.rendering.router.build import render_router
from gpustack_render.rendering.router.model import RouterFailure, RouterRendering

__all__ = ["RouterFailure", "RouterRendering", "render_router"]
