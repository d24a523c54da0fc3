"""The webhook server's Secret and webhook-configuration requests (self-managed certificates)
against a small HTTP server: what is sent, and how each answer is reported (404 is None, 409 a
ConflictError the pass retries, any other failure a WriteError or ReadError naming the status)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from kubernetes_asyncio import client as k8s

from gpustack_webhook.kube import KubeReader
from gpustack_webhook.lookups import ReadError
from gpustack_webhook.rotation import MUTATING, ConflictError, WriteError

SECRET = "/api/v1/namespaces/gpustack-system/secrets/gpustack-webhook-tls"
CONFIGURATION = (
    "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/gpustack-worker-mutation"
)


class Api:
    """Answers by (method, path); records every request."""

    def __init__(self) -> None:
        self.answers: dict[tuple[str, str], tuple[int, Any]] = {}
        self.seen: list[tuple[str, str, str, Any]] = []

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json() if request.can_read_body else None
        self.seen.append((request.method, request.path, request.content_type, body))
        status, answer = self.answers.get((request.method, request.path), (404, {}))
        return web.json_response(answer, status=status)


@pytest.fixture
async def served(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[Api, KubeReader]]:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    api = Api()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", api.handle)
    server = TestServer(app)
    await server.start_server()
    configuration = type.__call__(k8s.Configuration)
    configuration.host = str(server.make_url(""))
    reader = KubeReader(configuration, request_timeout=5.0)
    try:
        yield api, reader
    finally:
        await reader.close()
        await server.close()


async def test_a_missing_secret_is_none_and_a_stored_one_its_object(
    served: tuple[Api, KubeReader],
) -> None:
    api, reader = served
    assert await reader.get_secret("gpustack-system", "gpustack-webhook-tls") is None
    api.answers[("GET", SECRET)] = (200, {"kind": "Secret", "data": {}})
    assert await reader.get_secret("gpustack-system", "gpustack-webhook-tls") == {
        "kind": "Secret",
        "data": {},
    }
    api.answers[("GET", SECRET)] = (200, ["not", "an", "object"])
    with pytest.raises(ReadError, match="Secret that is not an object"):
        await reader.get_secret("gpustack-system", "gpustack-webhook-tls")
    api.answers[("GET", SECRET)] = (403, {})
    with pytest.raises(ReadError, match="403"):
        await reader.get_secret("gpustack-system", "gpustack-webhook-tls")


async def test_writes_send_json_and_a_conflict_is_a_conflict_error(
    served: tuple[Api, KubeReader],
) -> None:
    api, reader = served
    body = {"metadata": {"name": "gpustack-webhook-tls", "resourceVersion": "7"}}
    collection = SECRET.rsplit("/", 1)[0]
    api.answers[("POST", collection)] = (201, body)
    await reader.create_secret("gpustack-system", body)
    assert api.seen[-1] == ("POST", collection, "application/json", body)

    api.answers[("PUT", SECRET)] = (409, {"reason": "Conflict"})
    with pytest.raises(ConflictError):
        await reader.update_secret("gpustack-system", "gpustack-webhook-tls", body)
    assert api.seen[-1] == ("PUT", SECRET, "application/json", body)

    api.answers[("PUT", SECRET)] = (500, {})
    with pytest.raises(WriteError, match=r"PUT .* 500") as info:
        await reader.update_secret("gpustack-system", "gpustack-webhook-tls", body)
    assert not isinstance(info.value, ConflictError)


async def test_the_ca_bundle_is_a_strategic_merge_patch(served: tuple[Api, KubeReader]) -> None:
    api, reader = served
    assert await reader.get_webhook_configuration(MUTATING, "gpustack-worker-mutation") is None
    patch = {"metadata": {"resourceVersion": "3"}, "webhooks": [{"name": "m", "clientConfig": {}}]}
    api.answers[("PATCH", CONFIGURATION)] = (200, {})
    await reader.patch_webhook_configuration(MUTATING, "gpustack-worker-mutation", patch)
    assert api.seen[-1] == (
        "PATCH",
        CONFIGURATION,
        "application/strategic-merge-patch+json",
        patch,
    )
    api.answers[("PATCH", CONFIGURATION)] = (409, {})
    with pytest.raises(ConflictError):
        await reader.patch_webhook_configuration(MUTATING, "gpustack-worker-mutation", patch)
