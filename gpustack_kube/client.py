"""JSON over HTTP to one API server: the one transport of both shells and the live mode.

:class:`Kube` sends each request through its own :class:`aiohttp.ClientSession` (one keep-alive
pool of up to ``max_connections`` connections), built from a kubernetes_asyncio
``Configuration`` (:mod:`gpustack_kube.config`): the CA, client certificate, ``verify_ssl``,
``tls_server_name`` and proxy of the kubeconfig or the service account, and the bearer token,
read through the configuration's refresh hook before every request (a rotated service-account
token, an exec plugin's). Objects travel as plain JSON dicts, decoded with the bounded parser
(:func:`gpustack_render.core.nesting.loads`), so the library's readers see exactly what the API
server stores. Paths come from :class:`gpustack_render.schema.resources.Resource`.

Why not the generated client (``kubernetes_asyncio.client.ApiClient.call_api``): measured
under ``bench/webhook_load.py`` it cost more per read than the read itself. Its session is
created with ``trust_env``, which sends every request through two worker-thread hops (a
``.netrc`` lookup and an environment-proxy lookup), and its model layer re-walks every answer.
Here the environment proxy is resolved once, when the client is built
(docs/design/0005-kube-client.md).

Failures: a non-2xx answer is an :class:`ApiError` with its status (from :meth:`Kube.request`
and the verbs; :meth:`Kube.send` returns it as an :class:`Answer` for a caller that words its
own errors); a transport failure (refused, reset, timed out, a credential plugin that fails) is
an :class:`ApiError` with status 0 whose ``__cause__`` is the original exception. Each
``Warning`` header of an answer (a deprecated version, an unknown field) is logged.

An answer that asks to be retried is retried, as client-go does (``rest.Request``'s
``checkWait``, up to ten times there): a ``429 Too Many Requests`` (API priority and fairness,
or "storage is (re)initializing" while a new API server fills its watch cache) with a
``Retry-After`` header, for any verb (the request was refused before it was served); a 5xx with
``Retry-After``, for reads only. Each wait is the header's seconds, at most
:data:`MAX_RETRY_AFTER`; a client makes at most ``retry_after_attempts`` of them (0: none, the
default, so a webhook review never sleeps inside its deadline).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import ssl
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any, Final, Self
from urllib.parse import urlencode

import aiohttp
from aiohttp.helpers import get_env_proxy_for_url
from kubernetes_asyncio.config.config_exception import ConfigException
from yarl import URL

from gpustack_kube import config
from gpustack_render.core import nesting
from gpustack_render.schema.resources import Resource

JSON: Final = "application/json"
MERGE_PATCH: Final = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH: Final = "application/strategic-merge-patch+json"
APPLY_PATCH: Final = "application/apply-patch+yaml"

#: What a request may fail with before any answer: each becomes an ``ApiError`` of status 0.
_TRANSPORT_FAILURES: Final = (aiohttp.ClientError, TimeoutError, OSError, ConfigException)

#: The longest single wait a ``Retry-After`` header may ask for.
MAX_RETRY_AFTER: Final = 10.0

log = logging.getLogger(__name__)


class ApiError(Exception):
    """A non-2xx answer (or a transport failure, ``status`` 0) from the API server."""

    def __init__(self, status: int, reason: str, body: str = "") -> None:
        super().__init__(f"HTTP {status} {reason}: {body[:500]}".rstrip(": "))
        self.status = status
        self.reason = reason
        self.body = body

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def conflict(self) -> bool:
        return self.status == 409

    @property
    def gone(self) -> bool:
        return self.status == 410


def _transport_error(exc: BaseException, what: str = "") -> ApiError:
    return ApiError(0, type(exc).__name__, str(exc) or what)


@dataclass(frozen=True, slots=True)
class Answer:
    """One whole answer: the status, the HTTP reason phrase and the body."""

    status: int
    reason: str
    body: bytes

    @property
    def ok(self) -> bool:
        return 200 <= self.status <= 299

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")

    def json(self) -> Any:
        """The decoded body (nesting bounded); ``ValueError`` when it is not JSON (or empty)."""
        return nesting.loads(self.text)

    def error(self) -> ApiError:
        """The answer as an :class:`ApiError`: its ``reason`` is the Status object's when the
        body is one, else the HTTP reason phrase."""
        text = self.text
        reason = ""
        with contextlib.suppress(ValueError, AttributeError):
            reason = str(nesting.loads(text).get("reason") or "")
        return ApiError(self.status, reason or self.reason, text)


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """One decoded watch event: ``ADDED`` | ``MODIFIED`` | ``DELETED`` | ``BOOKMARK`` |
    ``ERROR`` and its object (an ``ERROR`` carries a Status)."""

    type: str
    object: dict[str, Any]


def log_warnings(method: str, path: str, response: Any) -> None:
    """Log each ``Warning`` header of an answer (a deprecated version, an unknown field)."""
    headers = getattr(response, "headers", None)
    getall = getattr(headers, "getall", None)
    if getall is None:
        return
    for warning in getall("Warning", ()):
        log.warning("the API server warns about %s %s: %s", method, path, warning)


def ssl_context(configuration: Any) -> ssl.SSLContext:
    """The client TLS context of a Configuration (as kubernetes_asyncio's REST client builds
    it)."""
    context = ssl.create_default_context(cafile=configuration.ssl_ca_cert)
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, keyfile=configuration.key_file)
    if not configuration.verify_ssl:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if getattr(configuration, "disable_strict_ssl_verification", False):
        context.verify_flags &= ~ssl.VERIFY_X509_STRICT
    return context


class Kube:
    """Plain-JSON REST access to one API server.

    Must be built inside the running event loop (the session belongs to it).
    """

    def __init__(
        self,
        configuration: Any,
        *,
        user_agent: str,
        request_timeout: float = 30.0,
        max_connections: int = 100,
        retry_after_attempts: int = 0,
    ) -> None:
        self.configuration = configuration
        self.request_timeout = request_timeout
        self.retry_after_attempts = retry_after_attempts
        self.host = str(configuration.host).rstrip("/")
        self._timeout = aiohttp.ClientTimeout(total=request_timeout)
        self._request_args: dict[str, Any] = {}
        if configuration.tls_server_name:
            self._request_args["server_hostname"] = configuration.tls_server_name
        if configuration.proxy:
            self._request_args["proxy"] = configuration.proxy
            if configuration.proxy_headers:
                self._request_args["proxy_headers"] = configuration.proxy_headers
        else:
            # What trust_env would find on every request, looked up once.
            try:
                proxy, proxy_auth = get_env_proxy_for_url(URL(self.host))
            except LookupError:
                pass
            else:
                self._request_args["proxy"] = proxy
                if proxy_auth is not None:
                    self._request_args["proxy_auth"] = proxy_auth
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=max_connections, ssl=ssl_context(configuration)),
            headers={"Accept": JSON, "User-Agent": user_agent},
            # A watch event or a list can carry objects up to etcd's 1.5 MiB request limit.
            read_bufsize=2**21,
        )

    @classmethod
    async def connect(
        cls,
        *,
        kubeconfig: str | None = None,
        user_agent: str,
        request_timeout: float = 30.0,
        max_connections: int = 100,
        retry_after_attempts: int = 0,
    ) -> Self:
        """A client from ``kubeconfig``, else the in-cluster service account, else the default
        kubeconfig; :class:`~gpustack_kube.config.ClusterConfigError` when none loads."""
        loaded = await config.load(kubeconfig)
        return cls(
            loaded.configuration,
            user_agent=user_agent,
            request_timeout=request_timeout,
            max_connections=max_connections,
            retry_after_attempts=retry_after_attempts,
        )

    async def close(self) -> None:
        await self._session.close()

    # ---- the transport ----------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _open(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None,
        body: Any,
        content_type: str,
        timeout: aiohttp.ClientTimeout | None,
    ) -> AsyncIterator[aiohttp.ClientResponse]:
        """The open response of one request (released on exit); its Warning headers logged."""
        headers: dict[str, str] = {}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = content_type
        url = self.host + path + (f"?{urlencode(dict(query))}" if query else "")
        try:
            # Calls the configuration's refresh hook (a rotated service-account token).
            auth = await self.configuration.auth_settings()
            for setting in auth.values():
                if setting.get("in") == "header" and setting.get("value"):
                    headers[setting["key"]] = setting["value"]
            response = await self._session.request(
                method,
                URL(url, encoded=True),
                headers=headers,
                data=data,
                timeout=timeout or self._timeout,
                **self._request_args,
            )
        except _TRANSPORT_FAILURES as exc:
            raise _transport_error(exc) from exc
        try:
            log_warnings(method, path, response)
            yield response
        finally:
            response.release()

    async def send(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = JSON,
    ) -> Answer:
        """One request and its whole answer, whatever its status (after the retries an answer
        asks for: the module docstring); :class:`ApiError` (status 0) only when no answer
        came."""
        attempt = 0
        while True:
            async with self._open(
                method, path, query=query, body=body, content_type=content_type, timeout=None
            ) as response:
                answer = await _whole(response)
                wait = retry_after(method, answer.status, response.headers.get("Retry-After"))
            if wait is None or attempt >= self.retry_after_attempts:
                return answer
            attempt += 1
            log.info(
                "%s %s answered %s; retrying in %.1f s (attempt %d of %d)",
                method,
                path,
                answer.status,
                wait,
                attempt,
                self.retry_after_attempts,
            )
            await asyncio.sleep(wait)

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = JSON,
    ) -> dict[str, Any]:
        """One request; the decoded JSON answer (``{}`` when empty), or :class:`ApiError`."""
        answer = await self.send(method, path, query=query, body=body, content_type=content_type)
        if not answer.ok:
            raise answer.error()
        if not answer.body:
            return {}
        try:
            data = answer.json()
        except ValueError as exc:
            raise ApiError(answer.status, "UndecodableBody", answer.text) from exc
        return data if isinstance(data, dict) else {"value": data}

    # ---- reads ------------------------------------------------------------------------------

    async def get(
        self, resource: Resource, name: str, namespace: str | None = None
    ) -> dict[str, Any] | None:
        """The object, or ``None`` when it does not exist."""
        try:
            return await self.request("GET", resource.path(namespace, name))
        except ApiError as exc:
            if exc.not_found:
                return None
            raise

    async def list(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> tuple[list[dict[str, Any]], str]:
        """Every object (a consistent read) and the list's ``resourceVersion``."""
        data = await self.request(
            "GET", resource.path(namespace), query=_selectors(label_selector, field_selector)
        )
        items = [i for i in data.get("items") or () if isinstance(i, dict)]
        for item in items:  # lists leave kind and apiVersion out of their items
            item.setdefault("kind", resource.kind)
            item.setdefault("apiVersion", resource.api_version)
        return items, str((data.get("metadata") or {}).get("resourceVersion") or "")

    async def watch(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        resource_version: str,
        timeout_seconds: int = 300,
        inactivity_seconds: float = 70.0,
    ) -> AsyncIterator[WatchEvent]:
        """Events after ``resource_version``, with bookmarks, until the server ends the stream.

        A stream silent for ``inactivity_seconds`` (bookmarks included) raises
        :class:`ApiError` (status 0): a half-open connection never hangs the informer. A
        ``410 Gone`` raises :class:`ApiError` with status 410, whether it comes as the HTTP
        status or as an ``ERROR`` event inside the stream.
        """
        query = {
            "watch": "true",
            "allowWatchBookmarks": "true",
            "resourceVersion": resource_version,
            "timeoutSeconds": str(timeout_seconds),
            **_selectors(label_selector, field_selector),
        }
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=30, sock_read=inactivity_seconds)
        async with self._open(
            "GET",
            resource.path(namespace),
            query=query,
            body=None,
            content_type=JSON,
            timeout=timeout,
        ) as response:
            if not 200 <= response.status <= 299:
                raise (await _whole(response)).error()
            buffer = b""
            while True:
                try:
                    chunk = await response.content.readany()
                except _TRANSPORT_FAILURES as exc:
                    raise _transport_error(exc, "watch inactive") from exc
                if not chunk:
                    return
                # One split per chunk: a chunk of many events costs its length, not its
                # length times its lines (a re-split of the rest after every line would).
                lines = (buffer + chunk).split(b"\n")
                buffer = lines.pop()
                for line in lines:
                    event = _watch_event(line)
                    if event is not None:
                        yield event

    # ---- writes -----------------------------------------------------------------------------

    async def create(
        self, resource: Resource, body: Mapping[str, Any], namespace: str | None = None
    ) -> dict[str, Any]:
        return await self.request("POST", resource.path(namespace), body=dict(body))

    async def replace(
        self, resource: Resource, body: Mapping[str, Any], namespace: str | None = None
    ) -> dict[str, Any]:
        """PUT: an update carrying ``metadata.resourceVersion`` (optimistic concurrency)."""
        name = str(body["metadata"]["name"])
        return await self.request("PUT", resource.path(namespace, name), body=dict(body))

    async def delete(
        self,
        resource: Resource,
        name: str,
        namespace: str | None = None,
        *,
        uid: str | None = None,
        resource_version: str | None = None,
    ) -> bool:
        """Delete with the default grace period; ``False`` when it was already gone.

        ``uid`` adds a precondition, so a same-named successor is never deleted by mistake (a
        409 then reads as gone). ``resource_version`` adds one more, so an object written since
        it was read is not deleted: a 409 is then raised, since it cannot say which precondition
        failed (a record of a state machine, D28).
        """
        body: dict[str, Any] | None = None
        preconditions = {
            k: v for k, v in (("uid", uid), ("resourceVersion", resource_version)) if v
        }
        if preconditions:
            body = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": preconditions}
        try:
            await self.request("DELETE", resource.path(namespace, name), body=body)
        except ApiError as exc:
            if exc.not_found or (uid and exc.conflict and not resource_version):
                return False
            raise
        return True

    async def merge_patch(
        self,
        resource: Resource,
        name: str,
        body: Mapping[str, Any],
        namespace: str | None = None,
        *,
        subresource: str = "",
    ) -> dict[str, Any]:
        return await self.request(
            "PATCH",
            resource.path(namespace, name, subresource),
            body=dict(body),
            content_type=MERGE_PATCH,
        )

    async def apply(
        self,
        resource: Resource,
        body: Mapping[str, Any],
        *,
        field_manager: str,
        namespace: str | None = None,
        subresource: str = "",
    ) -> dict[str, Any]:
        """Server-side apply (forced) of ``body`` by ``field_manager``; creates when absent."""
        name = str(body["metadata"]["name"])
        return await self.request(
            "PATCH",
            resource.path(namespace, name, subresource),
            query={"fieldManager": field_manager, "force": "true"},
            body=dict(body),
            content_type=APPLY_PATCH,
        )


def retry_after(method: str, status: int, header: str | None) -> float | None:
    """The seconds to wait before retrying an answer of ``status`` carrying ``Retry-After:
    header``, or ``None`` when it is not to be retried: a 429 for any verb, a 5xx for a read,
    and only with a header of whole seconds (at most :data:`MAX_RETRY_AFTER`)."""
    if header is None or not (status == 429 or (status >= 500 and method == "GET")):
        return None
    try:
        seconds = int(header.strip())
    except ValueError:
        return None
    return float(min(max(seconds, 0), MAX_RETRY_AFTER))


async def _whole(response: aiohttp.ClientResponse) -> Answer:
    """The rest of ``response``, read whole."""
    try:
        raw = await response.read()
    except _TRANSPORT_FAILURES as exc:
        raise _transport_error(exc) from exc
    return Answer(response.status, str(response.reason or ""), raw)


def _selectors(label_selector: str | None, field_selector: str | None) -> dict[str, str]:
    query: dict[str, str] = {}
    if label_selector:
        query["labelSelector"] = label_selector
    if field_selector:
        query["fieldSelector"] = field_selector
    return query


def _watch_event(line: bytes) -> WatchEvent | None:
    """One line of a watch stream as an event; ``None`` for a blank or unreadable line. An
    ``ERROR`` event raises its Status as an :class:`ApiError` (``410`` when the history asked
    for is gone)."""
    if not line.strip():
        return None
    try:
        event = nesting.loads(line)
    except ValueError:
        return None
    if not isinstance(event, dict):
        return None
    obj = event.get("object")
    if not isinstance(obj, dict):
        return None
    kind = str(event.get("type") or "")
    if kind == "ERROR":
        code = int(obj.get("code") or 0)
        raise ApiError(code, str(obj.get("reason") or ""), str(obj.get("message")))
    return WatchEvent(kind, obj)
