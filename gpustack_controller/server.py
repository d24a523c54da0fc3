"""``/healthz`` and ``/metrics`` on one small aiohttp server.

``/healthz`` answers 200 while the process's loops are alive (the informers, the workers and,
when elected, the lease keeper) and 503 otherwise, so the kubelet restarts a controller whose
event loop is wedged or whose tasks died. ``/metrics`` is the Prometheus text exposition of the
controller's own registry.
"""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from gpustack_controller import metrics


def make_app(healthy: Callable[[], tuple[bool, str]]) -> web.Application:
    """The application; ``healthy`` returns (ok, detail)."""

    async def healthz(_: web.Request) -> web.Response:
        ok, detail = healthy()
        return web.Response(status=200 if ok else 503, text=detail or ("ok" if ok else "unhealthy"))

    async def metrics_view(_: web.Request) -> web.Response:
        body = generate_latest(metrics.REGISTRY)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", healthz)
    app.router.add_get("/metrics", metrics_view)
    return app


async def serve(
    healthy: Callable[[], tuple[bool, str]], *, host: str = "", port: int = 8081
) -> web.AppRunner:
    """Start the server; returns the runner (``await runner.cleanup()`` to stop)."""
    runner = web.AppRunner(make_app(healthy), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    return runner
