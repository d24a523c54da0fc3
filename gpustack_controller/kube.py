"""The controller's only door to the API server (the one module importing kubernetes_asyncio).

Objects travel as plain JSON dicts: one REST path per :class:`Resource`, JSON in and out, so
the library's readers (``gpustack_render.reconcile.observed``, the pydantic models) see exactly
what the
API server stores. Writes are the four the controller needs: create (POST), delete, JSON merge
patch and server-side apply (``application/apply-patch+yaml`` with a field manager and
``force``). Watches are raw event streams: :meth:`Kube.watch` yields decoded events and leaves
re-listing to the informer (``watches.py``).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote

import aiohttp
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio import config as k8s_config
from kubernetes_asyncio.config.config_exception import ConfigException

from gpustack_render.api.common import GROUP, VERSION
from gpustack_render.core import nesting
from gpustack_render.core.clusterconfig import config_problem
from gpustack_render.schema.kinds import BY_KIND, KUEUE_KINDS

#: Where a Pod finds its service account's namespace.
SERVICE_ACCOUNT_NAMESPACE: Final = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
APPLY_PATCH: Final = "application/apply-patch+yaml"
MERGE_PATCH: Final = "application/merge-patch+json"
JSON: Final = "application/json"

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


@dataclass(frozen=True, slots=True)
class Resource:
    """REST coordinates of a kind: ``group`` is ``""`` for the core API."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None, sub: str = "") -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{quote(namespace, safe='')}"
        base += f"/{self.plural}"
        if name:
            base += f"/{quote(name, safe='')}"
        if sub:
            base += f"/{sub}"
        return base


PODS: Final = Resource("", "v1", "pods", "Pod")
SERVICES: Final = Resource("", "v1", "services", "Service")
EVENTS: Final = Resource("", "v1", "events", "Event")
CONFIGMAPS: Final = Resource("", "v1", "configmaps", "ConfigMap")
LEASES: Final = Resource("coordination.k8s.io", "v1", "leases", "Lease")


def project_kind(kind: str) -> Resource:
    """The REST coordinates of a worker.gpustack.ai kind, from the library's kind registry."""
    info = BY_KIND[kind]
    return Resource(GROUP, VERSION, info.plural, info.kind, namespaced=info.namespaced)


MODEL_DEPLOYMENTS: Final = project_kind("ModelDeployment")
BINDINGS: Final = project_kind("KVCachePoolBinding")
POOLS: Final = project_kind("KVCachePool")
BACKENDS: Final = project_kind("KVCacheBackend")
INSTANCE_TYPES: Final = project_kind("InstanceType")


def kueue_kind(kind: str) -> Resource:
    """The REST coordinates of a Kueue kind, at the one Kueue version the project speaks."""
    info = KUEUE_KINDS[kind]
    group, version = info.api_version.split("/")
    return Resource(group, version, info.plural, info.kind, namespaced=info.namespaced)


#: Kueue kinds are read, watched and written at Kueue's storage version only.
WORKLOADS: Final = kueue_kind("Workload")
LOCAL_QUEUES: Final = kueue_kind("LocalQueue")
CLUSTER_QUEUES: Final = kueue_kind("ClusterQueue")
ADMISSION_CHECKS: Final = kueue_kind("AdmissionCheck")


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


def in_cluster_namespace() -> str | None:
    """The namespace of the Pod this process runs in, when it runs in one."""
    try:
        return SERVICE_ACCOUNT_NAMESPACE.read_text().strip() or None
    except OSError:
        return None


def default_kubeconfig_exists() -> bool:
    """Whether ``$KUBECONFIG`` (a ``:``-separated list) or ``~/.kube/config`` names a file."""
    paths = os.environ.get("KUBECONFIG") or str(Path("~/.kube/config").expanduser())
    return any(os.path.isfile(os.path.expanduser(p)) for p in paths.split(os.pathsep) if p)


class ClusterConfigError(Exception):
    """No usable cluster configuration: ``--kubeconfig`` cannot be read, or there is neither the
    in-cluster service account nor a default kubeconfig. Bad usage, not a failure at run time."""


class Kube:
    """Plain-JSON REST access through one kubernetes_asyncio ApiClient (one connection pool)."""

    def __init__(self, api: k8s.ApiClient, *, request_timeout: float = 30.0) -> None:
        self.api = api
        self.request_timeout = request_timeout

    @classmethod
    async def connect(cls, *, kubeconfig: str | None = None, pool_size: int = 256) -> Kube:
        """A client from ``kubeconfig``, else the in-cluster service account, else the default
        kubeconfig (``$KUBECONFIG`` or ``~/.kube/config``)."""
        configuration = k8s.Configuration()
        try:
            if kubeconfig:
                await k8s_config.load_kube_config(
                    config_file=kubeconfig, client_configuration=configuration
                )
            else:
                try:
                    k8s_config.load_incluster_config(  # type: ignore[no-untyped-call]
                        client_configuration=configuration
                    )
                except ConfigException as exc:
                    if not default_kubeconfig_exists():
                        raise ClusterConfigError(config_problem(exc, nothing_found=True)) from exc
                    await k8s_config.load_kube_config(
                        config_file=os.environ.get("KUBECONFIG"),
                        client_configuration=configuration,
                    )
        except ClusterConfigError:
            raise
        except Exception as exc:  # any way a configuration fails to load is the same answer
            raise ClusterConfigError(config_problem(exc, kubeconfig=kubeconfig)) from exc
        # Watches each hold a connection for minutes; reconciles create Pods concurrently.
        configuration.connection_pool_maxsize = pool_size
        return cls(k8s.ApiClient(configuration))

    async def close(self) -> None:
        await self.api.close()

    # ---- plumbing -------------------------------------------------------------------------

    async def _send(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = JSON,
        timeout: aiohttp.ClientTimeout | float | None = None,
    ) -> Any:
        """The raw aiohttp response of one request (the caller reads and releases it)."""
        try:
            response = await self.api.call_api(
                path,
                method,
                query_params=list((query or {}).items()),
                header_params={"Accept": JSON, "Content-Type": content_type},
                body=body,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _request_timeout=timeout if timeout is not None else self.request_timeout,
            )
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise ApiError(0, type(exc).__name__, str(exc)) from exc
        log_warnings(method, path, response)
        return response

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = JSON,
    ) -> dict[str, Any]:
        """One request; the decoded JSON answer, or :class:`ApiError`."""
        response = await self._send(method, path, query=query, body=body, content_type=content_type)
        try:
            raw = await response.read()
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise ApiError(0, type(exc).__name__, str(exc)) from exc
        finally:
            response.release()
        text = raw.decode("utf-8", errors="replace")
        if not 200 <= response.status <= 299:
            reason = ""
            with contextlib.suppress(ValueError, AttributeError):
                reason = str(nesting.loads(text).get("reason") or "")
            raise ApiError(response.status, reason or str(response.reason or ""), text)
        try:
            data = nesting.loads(text) if text else {}
        except ValueError as exc:
            raise ApiError(response.status, "UndecodableBody", text) from exc
        return data if isinstance(data, dict) else {"value": data}

    # ---- reads ----------------------------------------------------------------------------

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
        query: dict[str, str] = {}
        if label_selector:
            query["labelSelector"] = label_selector
        if field_selector:
            query["fieldSelector"] = field_selector
        data = await self.request("GET", resource.path(namespace), query=query)
        items = [i for i in data.get("items") or () if isinstance(i, dict)]
        kind = resource.kind
        for item in items:  # lists leave kind and apiVersion out of their items
            item.setdefault("kind", kind)
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
        }
        if label_selector:
            query["labelSelector"] = label_selector
        if field_selector:
            query["fieldSelector"] = field_selector
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=30, sock_read=inactivity_seconds)
        response = await self._send("GET", resource.path(namespace), query=query, timeout=timeout)
        try:
            if not 200 <= response.status <= 299:
                text = (await response.read()).decode("utf-8", errors="replace")
                raise ApiError(response.status, str(response.reason or ""), text)
            buffer = b""
            while True:
                try:
                    chunk = await response.content.readany()
                except (TimeoutError, aiohttp.ClientError, OSError) as exc:
                    raise ApiError(0, type(exc).__name__, str(exc) or "watch inactive") from exc
                if not chunk:
                    return
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if not line.strip():
                        continue
                    try:
                        event = nesting.loads(line)
                    except ValueError:
                        continue
                    kind = str(event.get("type") or "")
                    obj = event.get("object")
                    if not isinstance(obj, dict):
                        continue
                    if kind == "ERROR":
                        code = int(obj.get("code") or 0)
                        raise ApiError(code, str(obj.get("reason") or ""), str(obj.get("message")))
                    yield WatchEvent(kind, obj)
        finally:
            response.release()

    # ---- writes ---------------------------------------------------------------------------

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
    ) -> bool:
        """Delete with the default grace period; ``False`` when it was already gone.

        ``uid`` adds a precondition, so a same-named successor is never deleted by mistake.
        """
        body: dict[str, Any] | None = None
        if uid:
            body = {
                "apiVersion": "v1",
                "kind": "DeleteOptions",
                "preconditions": {"uid": uid},
            }
        try:
            await self.request("DELETE", resource.path(namespace, name), body=body)
        except ApiError as exc:
            if exc.not_found or (uid and exc.conflict):
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
