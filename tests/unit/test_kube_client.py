"""The one client layer (gpustack_kube) and the REST paths it sends
(gpustack_render.schema.resources): path quoting, the kubeconfig loader's refusals, and how the
transport turns answers into JSON or an ApiError, against a small HTTP server on loopback.

The controller, the webhook server and ``explain``'s live mode all go through these; their own
wording of failures is tested beside them (test_webhook_kube_writes.py, test_explain_live.py).
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from kubernetes_asyncio import client as k8s

from gpustack_kube import config
from gpustack_kube.client import ApiError, Kube
from gpustack_render.core import nesting
from gpustack_render.schema.kinds import BY_KIND, KUEUE_KINDS
from gpustack_render.schema.resources import (
    CONFIGMAPS,
    INSTANCE_TYPES,
    MODEL_DEPLOYMENTS,
    MUTATING_WEBHOOK_CONFIGURATIONS,
    PODS,
    PROJECT_RESOURCES,
    WORKLOADS,
    kueue_resource,
)

PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")

# ---- paths ----------------------------------------------------------------------------------


def test_paths_of_core_group_and_cluster_scoped_kinds() -> None:
    assert PODS.path("team-a", "p") == "/api/v1/namespaces/team-a/pods/p"
    assert PODS.path("team-a") == "/api/v1/namespaces/team-a/pods"
    assert PODS.path() == "/api/v1/pods"  # every namespace
    assert (
        MODEL_DEPLOYMENTS.path("ns", "chat", "status")
        == "/apis/worker.gpustack.ai/v1/namespaces/ns/modeldeployments/chat/status"
    )
    # A cluster-scoped kind has no namespace segment, whatever the caller passes.
    assert INSTANCE_TYPES.path("ns", "gpu") == "/apis/worker.gpustack.ai/v1/instancetypes/gpu"
    assert (
        MUTATING_WEBHOOK_CONFIGURATIONS.path(None, "m")
        == "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/m"
    )
    assert WORKLOADS.path("ns") == "/apis/kueue.x-k8s.io/v1beta2/namespaces/ns/workloads"
    assert (PODS.api_version, WORKLOADS.api_version) == ("v1", "kueue.x-k8s.io/v1beta2")


@pytest.mark.parametrize(
    ("value", "segment"),
    [
        ("team/chat", "team%2Fchat"),
        ("..", ".."),  # one segment: the API server refuses it, no other path is reached
        ("a%2eb", "a%252eb"),
        ("a b?c#d", "a%20b%3Fc%23d"),
        ("qwen.chat-1_x~", "qwen.chat-1_x~"),
        ("é", "%C3%A9"),
    ],
)
def test_a_namespace_and_a_name_are_each_one_percent_encoded_segment(
    value: str, segment: str
) -> None:
    assert CONFIGMAPS.path(value, value) == f"/api/v1/namespaces/{segment}/configmaps/{segment}"


def test_the_coordinates_are_the_kind_registrys() -> None:
    assert set(PROJECT_RESOURCES) == set(BY_KIND)
    for kind, info in BY_KIND.items():
        resource = PROJECT_RESOURCES[kind]
        assert (resource.kind, resource.plural, resource.namespaced) == (
            info.kind,
            info.plural,
            info.namespaced,
        )
        assert resource.api_version == info.api_version
    for kind, kueue in KUEUE_KINDS.items():
        resource = kueue_resource(kind)
        assert (resource.api_version, resource.plural, resource.namespaced) == (
            kueue.api_version,
            kueue.plural,
            kueue.namespaced,
        )


# ---- the kubeconfig loader ------------------------------------------------------------------


def _kubeconfig(path: Path, server: str, *, namespace: str = "team-a") -> Path:
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": server}}],
                "users": [{"name": "u", "user": {"token": "secret"}}],
                "contexts": [
                    {
                        "name": "work",
                        "context": {"cluster": "c", "user": "u", "namespace": namespace},
                    },
                    {"name": "other", "context": {"cluster": "c", "user": "u"}},
                ],
                "current-context": "work",
            }
        )
    )
    return path


@pytest.fixture
def outside_a_cluster(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No service account, no $KUBECONFIG, an empty home; returns the home."""
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


async def test_a_kubeconfig_that_does_not_load_is_one_line_naming_it(tmp_path: Path) -> None:
    bad = tmp_path / "kubeconfig"
    bad.write_text("hello\n")
    with pytest.raises(config.ClusterConfigError) as caught:
        await config.load(str(bad))
    assert str(caught.value).startswith(f"--kubeconfig {bad}: not a usable kubeconfig (")
    assert "\n" not in str(caught.value)
    assert caught.value.__cause__ is not None  # what the live mode words its own line from

    with pytest.raises(config.ClusterConfigError, match="not a usable kubeconfig"):
        await config.load(str(_kubeconfig(tmp_path / "k", "http://x")), context="elsewhere")


async def test_nothing_to_load_names_the_service_account_and_the_flag(
    outside_a_cluster: Path,
) -> None:
    with pytest.raises(config.ClusterConfigError) as caught:
        await config.load()
    assert str(caught.value).startswith("no cluster configuration: no usable in-cluster")
    assert str(caught.value).endswith("pass --kubeconfig")


async def test_the_default_kubeconfig_is_kubeconfigs_list_else_the_home_one(
    outside_a_cluster: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = outside_a_cluster
    (home / ".kube").mkdir()
    _kubeconfig(home / ".kube" / "config", "http://home.example:1")
    assert config.default_kubeconfig() == [str(home / ".kube" / "config")]
    loaded = await config.load()
    assert (loaded.configuration.host, loaded.context, loaded.namespace) == (
        "http://home.example:1",
        "work",
        "team-a",
    )
    listed = _kubeconfig(home / "listed", "http://listed.example:2", namespace="b")
    monkeypatch.setenv("KUBECONFIG", f"{home}/missing:{listed}")
    assert config.default_kubeconfig() == [f"{home}/missing", str(listed)]
    assert (await config.load()).configuration.host == "http://listed.example:2"
    other = await config.load(str(listed), context="other")
    assert (other.context, other.namespace) == ("other", None)
    assert config.context_namespace(str(listed), None) == "b"
    assert config.context_namespace(str(listed), "other") is None
    assert config.context_namespace(str(home / "missing"), None) is None


async def test_every_load_is_a_configuration_of_its_own(tmp_path: Path) -> None:
    path = str(_kubeconfig(tmp_path / "k", "http://a.example:1"))
    default_before = k8s.Configuration.get_default_copy().host
    first, second = await config.load(path), await config.load(path)
    assert first.configuration is not second.configuration
    first.configuration.host = "http://changed"
    assert second.configuration.host == "http://a.example:1"
    assert k8s.Configuration.get_default_copy().host == default_before  # never written


def test_the_in_cluster_namespace_is_the_service_accounts(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    account = tmp_path / "namespace"
    monkeypatch.setattr(config, "SERVICE_ACCOUNT_NAMESPACE", account)
    assert config.in_cluster_namespace() is None
    account.write_text("ops\n")
    assert config.in_cluster_namespace() == "ops"


# ---- the transport --------------------------------------------------------------------------

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Api:
    """Answers by (method, path); records (method, path_qs, headers, body) of every request."""

    def __init__(self) -> None:
        self.answers: dict[tuple[str, str], Handler] = {}
        self.seen: list[tuple[str, str, Mapping[str, str], Any]] = []

    def json(self, method: str, path: str, status: int, body: Any, **headers: str) -> None:
        async def answer(_: web.Request) -> web.StreamResponse:
            return web.json_response(body, status=status, headers=headers)

        self.answers[(method, path)] = answer

    def raw(self, method: str, path: str, status: int, text: str) -> None:
        async def answer(_: web.Request) -> web.StreamResponse:
            return web.Response(status=status, text=text)

        self.answers[(method, path)] = answer

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json() if request.can_read_body else None
        # The headers as received, looked up case-insensitively.
        self.seen.append((request.method, request.path_qs, request.headers.copy(), body))
        answer = self.answers.get((request.method, request.path))
        if answer is None:
            status = {"kind": "Status", "code": 404, "reason": "NotFound", "message": "no"}
            return web.json_response(status, status=404)
        return await answer(request)


@pytest.fixture
async def served(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[Api, Kube]]:
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    api = Api()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", api.handle)
    server = TestServer(app)
    await server.start_server()
    configuration = config.fresh_configuration()
    configuration.host = str(server.make_url(""))
    configuration.api_key["BearerToken"] = "Bearer first"
    kube = Kube(configuration, user_agent="test-agent/1", request_timeout=5.0)
    try:
        yield api, kube
    finally:
        await kube.close()
        await server.close()


async def test_a_read_is_json_and_404_is_none(served: tuple[Api, Kube]) -> None:
    api, kube = served
    pod = {"metadata": {"name": "p"}}
    api.json("GET", "/api/v1/namespaces/ns/pods/p", 200, pod)
    assert await kube.get(PODS, "p", "ns") == pod
    assert await kube.get(PODS, "gone", "ns") is None
    method, uri, headers, _ = api.seen[0]
    assert (method, uri) == ("GET", "/api/v1/namespaces/ns/pods/p")
    assert headers["User-Agent"] == "test-agent/1"
    assert headers["Accept"] == "application/json"
    assert headers["authorization"] == "Bearer first"


async def test_a_refused_answer_is_an_api_error_with_the_status_reason(
    served: tuple[Api, Kube],
) -> None:
    api, kube = served
    api.json(
        "POST",
        "/api/v1/namespaces/ns/pods",
        409,
        {"kind": "Status", "code": 409, "reason": "AlreadyExists", "message": "exists"},
    )
    with pytest.raises(ApiError) as caught:
        await kube.create(PODS, {"metadata": {"name": "p"}}, "ns")
    assert (caught.value.status, caught.value.reason, caught.value.conflict) == (
        409,
        "AlreadyExists",
        True,
    )
    assert "exists" in caught.value.body
    # An answer that is no Status: the HTTP reason phrase, and the body as text.
    api.raw("GET", "/api/v1/namespaces/ns/pods/p", 500, "<html>oops</html>")
    with pytest.raises(ApiError) as caught:
        await kube.get(PODS, "p", "ns")
    assert (caught.value.status, caught.value.reason) == (500, "Internal Server Error")
    assert caught.value.body == "<html>oops</html>"
    api.raw("GET", "/api/v1/namespaces/ns/pods/gone", 410, "")
    with pytest.raises(ApiError) as caught:
        await kube.get(PODS, "gone", "ns")
    assert caught.value.gone


def _answers_in_turn(
    api: Api, method: str, path: str, *answers: tuple[int, dict[str, str]]
) -> None:
    """``path`` answers each (status, headers) in turn, then 200 with an empty object."""
    pending = list(answers)

    async def answer(_: web.Request) -> web.StreamResponse:
        if not pending:
            return web.json_response({"metadata": {"name": "p"}})
        status, headers = pending.pop(0)
        body = {"kind": "Status", "code": status, "reason": "TooManyRequests"}
        return web.json_response(body, status=status, headers=headers)

    api.answers[(method, path)] = answer


async def test_an_answer_asking_to_retry_is_retried_when_the_client_retries(
    served: tuple[Api, Kube], monkeypatch: pytest.MonkeyPatch
) -> None:
    """As client-go: 429 with Retry-After for any verb, 5xx with Retry-After for reads only,
    each wait capped, at most ``retry_after_attempts`` times; by default never."""
    api, kube = served
    waits: list[float] = []

    async def no_sleep(seconds: float) -> None:
        waits.append(seconds)

    monkeypatch.setattr("gpustack_kube.client.asyncio.sleep", no_sleep)
    path = "/api/v1/namespaces/ns/pods/p"
    # The default client (the webhook's, the command line's) does not retry.
    _answers_in_turn(api, "GET", path, (429, {"Retry-After": "1"}))
    with pytest.raises(ApiError) as caught:
        await kube.get(PODS, "p", "ns")
    assert caught.value.status == 429
    assert waits == []

    kube.retry_after_attempts = 3
    _answers_in_turn(api, "GET", path, (429, {"Retry-After": "1"}), (503, {"Retry-After": "60"}))
    assert await kube.get(PODS, "p", "ns") == {"metadata": {"name": "p"}}
    assert waits == [1.0, 10.0]  # the second wait capped
    # A write refused with 429 was not served: retried. A write failing with 5xx may have
    # been: not retried.
    waits.clear()
    _answers_in_turn(api, "POST", "/api/v1/namespaces/ns/pods", (429, {"Retry-After": "2"}))
    assert await kube.create(PODS, {"metadata": {"name": "p"}}, "ns") == {"metadata": {"name": "p"}}
    assert waits == [2.0]
    waits.clear()
    _answers_in_turn(api, "POST", "/api/v1/namespaces/ns/pods", (503, {"Retry-After": "2"}))
    with pytest.raises(ApiError) as caught:
        await kube.create(PODS, {"metadata": {"name": "p"}}, "ns")
    assert (caught.value.status, waits) == (503, [])
    # Without Retry-After, or past the attempts, the answer is the caller's.
    _answers_in_turn(api, "GET", path, (429, {}))
    with pytest.raises(ApiError):
        await kube.get(PODS, "p", "ns")
    _answers_in_turn(api, "GET", path, *[(429, {"Retry-After": "1"})] * 4)
    with pytest.raises(ApiError) as caught:
        await kube.get(PODS, "p", "ns")
    assert (caught.value.status, waits) == (429, [1.0, 1.0, 1.0])


async def test_an_undecodable_success_is_an_api_error(served: tuple[Api, Kube]) -> None:
    api, kube = served
    api.raw("GET", "/api/v1/namespaces/ns/pods/p", 200, '{"metadata": ')
    with pytest.raises(ApiError) as caught:
        await kube.get(PODS, "p", "ns")
    assert (caught.value.status, caught.value.reason) == (200, "UndecodableBody")
    answer = await kube.send("GET", "/api/v1/namespaces/ns/pods/p")
    assert answer.ok and answer.body == b'{"metadata": '
    with pytest.raises(ValueError):
        answer.json()


async def test_no_answer_is_status_0_caused_by_the_transport_failure() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))  # bound, not listening: refused
        configuration = config.fresh_configuration()
        configuration.host = f"http://127.0.0.1:{sock.getsockname()[1]}"
        kube = Kube(configuration, user_agent="t", request_timeout=5.0)
        try:
            with pytest.raises(ApiError) as caught:
                await kube.send("GET", "/version")
        finally:
            await kube.close()
    assert caught.value.status == 0
    assert isinstance(caught.value.__cause__, OSError)


async def test_an_answer_nested_past_the_parser_is_one_unreadable_item(
    served: tuple[Api, Kube],
) -> None:
    api, kube = served
    deep = '{"x":' * 1200 + "1" + "}" * 1200
    text = (
        '{"items":[{"metadata":{"name":"deep"},"spec":'
        + deep
        + '},{"metadata":{"name":"fine"}}],"metadata":{"resourceVersion":"9"}}'
    )
    api.raw("GET", "/api/v1/namespaces/ns/configmaps", 200, text)
    items, version = await kube.list(CONFIGMAPS, "ns")
    assert version == "9"
    assert [i["metadata"]["name"] for i in items] == ["deep", "fine"]
    assert nesting.too_deep(items[0]) is not None and nesting.too_deep(items[1]) is None
    assert {(i["kind"], i["apiVersion"]) for i in items} == {("ConfigMap", "v1")}


async def test_writes_send_their_content_type_and_query(served: tuple[Api, Kube]) -> None:
    api, kube = served
    base = "/apis/worker.gpustack.ai/v1/namespaces/ns/modeldeployments/chat"
    api.json("PATCH", base, 200, {})
    api.json("PATCH", f"{base}/status", 200, {})
    api.json("DELETE", base, 409, {"kind": "Status", "code": 409, "reason": "Conflict"})
    body = {"metadata": {"name": "chat"}, "status": {"phase": "Ready"}}
    await kube.apply(MODEL_DEPLOYMENTS, body, field_manager="me", namespace="ns")
    await kube.merge_patch(MODEL_DEPLOYMENTS, "chat", {"a": None}, "ns", subresource="status")
    # A uid precondition that no longer holds: a same-named successor, not deleted.
    assert await kube.delete(MODEL_DEPLOYMENTS, "chat", "ns", uid="u-1") is False
    assert await kube.delete(MODEL_DEPLOYMENTS, "gone", "ns") is False
    (apply, merge, delete, _) = api.seen
    assert apply[1] == f"{base}?fieldManager=me&force=true"
    assert apply[2]["Content-Type"] == "application/apply-patch+yaml" and apply[3] == body
    assert merge[1] == f"{base}/status"
    assert merge[2]["Content-Type"] == "application/merge-patch+json"
    assert merge[3] == {"a": None}
    assert delete[3] == {
        "apiVersion": "v1",
        "kind": "DeleteOptions",
        "preconditions": {"uid": "u-1"},
    }


async def test_warning_headers_are_logged(
    served: tuple[Api, Kube], caplog: pytest.LogCaptureFixture
) -> None:
    api, kube = served
    api.json("GET", "/version", 200, {}, Warning='299 - "deprecated"')
    with caplog.at_level(logging.WARNING, logger="gpustack_kube.client"):
        await kube.request("GET", "/version")
    assert [r.getMessage() for r in caplog.records] == [
        'the API server warns about GET /version: 299 - "deprecated"'
    ]


async def test_the_token_is_read_through_the_refresh_hook_on_every_request(
    served: tuple[Api, Kube],
) -> None:
    api, kube = served
    api.json("GET", "/version", 200, {})
    tokens = iter(["Bearer second", "Bearer third"])

    def refresh(configuration: Any) -> None:  # a rotated service-account token
        configuration.api_key["BearerToken"] = next(tokens)

    kube.configuration.refresh_api_key_hook = refresh
    await kube.request("GET", "/version")
    await kube.request("GET", "/version")
    assert [headers["authorization"] for *_, headers, _ in api.seen] == [
        "Bearer second",
        "Bearer third",
    ]


async def test_a_credential_that_cannot_be_refreshed_is_status_0(
    served: tuple[Api, Kube],
) -> None:
    from kubernetes_asyncio.config.config_exception import ConfigException

    _, kube = served

    def refresh(_: Any) -> None:
        raise ConfigException("exec plugin failed")

    kube.configuration.refresh_api_key_hook = refresh
    with pytest.raises(ApiError) as caught:
        await kube.request("GET", "/version")
    assert caught.value.status == 0 and isinstance(caught.value.__cause__, ConfigException)


async def test_the_environment_proxy_is_resolved_once_when_the_client_is_built(
    served: tuple[Api, Kube], monkeypatch: pytest.MonkeyPatch
) -> None:
    api, kube = served
    api.json("GET", "/version", 200, {"via": "proxy"})
    proxy = kube.host
    # An address nothing answers on (TEST-NET-1): only the proxy can answer for it.
    configuration = config.fresh_configuration()
    configuration.host = "http://192.0.2.1:9"
    monkeypatch.setenv("HTTP_PROXY", proxy)
    proxied = Kube(configuration, user_agent="t", request_timeout=5.0)
    monkeypatch.delenv("HTTP_PROXY")
    try:
        assert await proxied.request("GET", "/version") == {"via": "proxy"}
    finally:
        await proxied.close()
    assert api.seen[-1][1] == "/version"


# ---- watches --------------------------------------------------------------------------------


def _stream(*lines: str, hold: float = 0.0) -> Handler:
    async def answer(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        for line in lines:
            await response.write(line.encode() + b"\n")
        await asyncio.sleep(hold)
        return response

    return answer


async def test_a_watch_yields_events_and_bookmarks_and_raises_410_gone(
    served: tuple[Api, Kube],
) -> None:
    api, kube = served
    events = [
        json.dumps({"type": "ADDED", "object": {"metadata": {"name": "a"}}}),
        "",
        "not json",
        json.dumps({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "12"}}}),
        json.dumps({"type": "ERROR", "object": {"code": 410, "reason": "Expired"}}),
    ]
    api.answers[("GET", "/api/v1/namespaces/ns/pods")] = _stream(*events)
    seen = []
    with pytest.raises(ApiError) as caught:
        async for event in kube.watch(PODS, namespace="ns", resource_version="10"):
            seen.append(event.type)
    assert seen == ["ADDED", "BOOKMARK"]
    assert caught.value.gone
    uri = api.seen[0][1]
    assert "watch=true" in uri and "allowWatchBookmarks=true" in uri
    assert "resourceVersion=10" in uri


async def test_a_silent_watch_ends_in_status_0(served: tuple[Api, Kube]) -> None:
    api, kube = served
    api.answers[("GET", "/api/v1/pods")] = _stream(hold=5.0)
    with pytest.raises(ApiError) as caught:
        async for _ in kube.watch(PODS, resource_version="1", inactivity_seconds=0.2):
            pass
    assert caught.value.status == 0


@pytest.mark.parametrize(
    ("watch_timeout", "inactivity", "asked"),
    [
        (300, 70.0, 300),  # the controller's: the API server's minute bookmark comes in time
        (300, 10.0, 9),  # the webhook cache's: streams end (bookmark first) before the bound
        (300, 3.0, 2),
        (300, 0.5, 1),
        (5, 10.0, 5),  # already shorter
    ],
)
def test_a_stream_ends_before_it_could_count_as_silent(
    watch_timeout: int, inactivity: float, asked: int
) -> None:
    from gpustack_kube.informer import stream_timeout

    assert stream_timeout(watch_timeout, inactivity) == asked
