"""The webhook server's Secret and webhook-configuration requests (self-managed certificates)
against a small HTTP server: what is sent, and how each answer is reported (404 is None, 409 a
ConflictError the pass retries, 403 a ForbiddenError, any other failure a WriteError or
ReadError naming the status); and the passes of a server whose Secret is missing and may not be
created (the manifests ship it and grant no `create`): one warning per pass, never a crash,
served once the Secret is applied."""

from __future__ import annotations

import asyncio
import base64
import datetime
import logging
import ssl
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from kubernetes_asyncio import client as k8s

from gpustack_webhook import certificates
from gpustack_webhook.kube import KubeReader
from gpustack_webhook.lookups import ReadError
from gpustack_webhook.rotation import (
    MUTATING,
    VALIDATING,
    ConflictError,
    ForbiddenError,
    SelfManagedCertificates,
    Setup,
    WriteError,
)

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
    assert not isinstance(info.value, ConflictError | ForbiddenError)

    api.answers[("POST", collection)] = (403, {"reason": "Forbidden"})
    with pytest.raises(ForbiddenError, match=r"POST .* 403"):
        await reader.create_secret("gpustack-system", body)


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


SETUP = Setup(
    namespace="gpustack-system",
    secret_name="gpustack-webhook-tls",
    policy=certificates.Policy(
        hosts=certificates.service_hosts("gpustack-webhook", "gpustack-system")
    ),
    target=certificates.Target("gpustack-system", "gpustack-webhook", ()),
    configurations=((MUTATING, "gpustack-worker-mutation"), (VALIDATING, "v")),
)


def _passes(api: Api) -> int:
    return sum(1 for method, *_ in api.seen if method == "POST")


async def test_a_missing_secret_that_may_not_be_created_is_one_warning_per_pass(
    served: tuple[Api, KubeReader], caplog: pytest.LogCaptureFixture
) -> None:
    api, reader = served
    collection = SECRET.rsplit("/", 1)[0]
    api.answers[("POST", collection)] = (403, {"reason": "Forbidden"})
    managed = SelfManagedCertificates(reader, SETUP)
    caplog.set_level(logging.INFO, logger="gpustack_webhook")
    starting = asyncio.create_task(managed.start(retry_max=0.01))
    try:
        async with asyncio.timeout(10):
            while _passes(api) < 3:
                await asyncio.sleep(0.01)
        assert not starting.done()  # still retrying, nothing raised
        assert managed.certificate is None
        warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
        # One line per refused pass (a pass in flight may not have logged yet).
        assert _passes(api) - 1 <= len(warnings) <= _passes(api)
        for record in warnings:
            assert record.getMessage() == "no serving certificate yet; retrying"
            line = record.fields  # type: ignore[attr-defined]
            assert (line["namespace"], line["secret"]) == (
                "gpustack-system",
                "gpustack-webhook-tls",
            )
            error = line["error"]
            assert "gpustack-system/gpustack-webhook-tls does not exist" in error
            assert "403" in error
            assert "apply the empty Secret the manifests ship" in error
            assert "grant this service account create on Secrets in gpustack-system" in error

        # The shipped Secret is applied (empty, Opaque): the next pass fills it and serves.
        api.answers[("GET", SECRET)] = (
            200,
            {"apiVersion": "v1", "kind": "Secret", "metadata": {"resourceVersion": "5"}},
        )
        api.answers[("PUT", SECRET)] = (200, {})
        async with asyncio.timeout(10):
            context = await starting
    finally:
        starting.cancel()
    assert isinstance(context, ssl.SSLContext)
    (put,) = [body for method, path, _, body in api.seen if method == "PUT" and path == SECRET]
    assert put["metadata"] == {"resourceVersion": "5"}  # conditional on what was read
    assert "type" not in put  # the shipped Secret's type is kept
    written = {k: base64.b64decode(v) for k, v in put["data"].items()}
    now = datetime.datetime.now(datetime.UTC)
    assert certificates.decide(written, policy=SETUP.policy, now=now).action.value == "reuse"


@pytest.mark.parametrize("name", [".", "..", "a%2eb", "team/chat"])
async def test_a_name_no_object_can_have_is_not_found_without_a_request(
    served: tuple[Api, KubeReader], name: str
) -> None:
    """The API server answers 400 to a GET of ``.``, ``..`` or a name holding ``%`` (and no
    object has ``/`` in its name): a read failure, retried in vain, where the rules answer a
    name that names nothing (a Pod's Binding annotation, a pool reference). It is not found."""
    api, reader = served
    assert await reader.get_object("KVCachePoolBinding", "team-a", name) is None
    assert await reader.get_object("InstanceType", "", name) is None
    assert api.seen == []
