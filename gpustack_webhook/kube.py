"""The webhook server's door to the API server: the shared client, worded as the server's errors.

:class:`KubeReader` makes the live GETs a review needs: the worker.gpustack.ai/v1 input kinds a
rule reads and the ``gpustack-settings`` ConfigMap; with self-managed certificates it also reads
and writes the certificate Secret and the webhook configurations' ``caBundle``
(:class:`gpustack_webhook.rotation.CertificateStore`: a 409 is a
:class:`~gpustack_webhook.rotation.ConflictError`, a 403 a
:class:`~gpustack_webhook.rotation.ForbiddenError`, another failed write a
:class:`~gpustack_webhook.rotation.WriteError`). It implements
:class:`gpustack_webhook.lookups.ObjectReader`: 404 is ``None``; every other failure is a
:class:`~gpustack_webhook.lookups.ReadError` naming the status or the transport error, never the
object's content.

The requests go through :class:`gpustack_kube.client.Kube` (its own aiohttp session: one
keep-alive pool of up to ``max_connections`` connections, the environment proxy resolved once,
answers decoded with the bounded JSON parser), configured by :mod:`gpustack_kube.config`
(kubeconfig or in-cluster service account). Measured under ``bench/webhook_load.py``, the
generated kubernetes_asyncio client cost more per read than the read itself
(docs/design/0005-kube-client.md); the shared client is the webhook's former reader made common.
Each request is bounded by ``request_timeout`` (5 s by default: a review waits on it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, Final

from gpustack_kube import config
from gpustack_kube.client import JSON, STRATEGIC_MERGE_PATCH, ApiError, Kube
from gpustack_kube.config import ClusterConfigError
from gpustack_render.schema.kinds import INPUT_MODELS
from gpustack_render.schema.resources import (
    CONFIGMAPS,
    MUTATING_WEBHOOK_CONFIGURATIONS,
    PROJECT_RESOURCES,
    SECRETS,
    VALIDATING_WEBHOOK_CONFIGURATIONS,
    Resource,
)
from gpustack_webhook.lookups import ReadError
from gpustack_webhook.rotation import (
    MUTATING,
    VALIDATING,
    ConflictError,
    ForbiddenError,
    WriteError,
)

__all__ = ["DEFAULT_MAX_CONNECTIONS", "ClusterConfigError", "KubeReader", "own_namespace"]

#: Connections kept to the API server: enough for every concurrent review to have its read in
#: flight (the benchmark runs 16 at once), with room for bursts.
DEFAULT_MAX_CONNECTIONS: Final = 64

#: ``User-Agent`` of the reads (shows in the API server's audit log).
USER_AGENT: Final = "gpustack-webhook"

#: The kinds the library's Lookups read (the RBAC in deploy/webhook grants ``get`` on these).
RESOURCES: Final[dict[str, Resource]] = {kind: PROJECT_RESOURCES[kind] for kind in INPUT_MODELS}

#: The webhook configuration kinds whose ``caBundle`` the server writes.
WEBHOOK_CONFIGURATIONS: Final = {
    MUTATING: MUTATING_WEBHOOK_CONFIGURATIONS,
    VALIDATING: VALIDATING_WEBHOOK_CONFIGURATIONS,
}


def _failure(exc: BaseException, error: type[Exception] = ReadError) -> Exception:
    if isinstance(exc, TimeoutError):
        return error("the API server did not answer in time")
    return error(f"{type(exc).__name__}: {exc}")


def _nameable(name: str) -> bool:
    """Whether an object can have ``name``: the API server refuses ``.``, ``..`` and names
    holding ``/`` or ``%`` for every kind (400 to a GET), so no stored object has one."""
    return name not in (".", "..") and "/" not in name and "%" not in name


class KubeReader:
    """Live reads (and the certificate writes) through the shared client.

    Must be built inside the running event loop (the session belongs to it).
    """

    def __init__(
        self,
        configuration: Any,
        *,
        request_timeout: float = 5.0,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
    ) -> None:
        self.request_timeout = request_timeout
        self.kube = Kube(
            configuration,
            user_agent=USER_AGENT,
            request_timeout=request_timeout,
            max_connections=max_connections,
        )

    @classmethod
    async def connect(
        cls,
        *,
        kubeconfig: str | None = None,
        request_timeout: float = 5.0,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
    ) -> KubeReader:
        """A reader from ``kubeconfig``, else the in-cluster service account, else the default
        kubeconfig (``$KUBECONFIG`` or ``~/.kube/config``); raises
        :class:`ClusterConfigError`."""
        loaded = await config.load(kubeconfig)
        return cls(
            loaded.configuration, request_timeout=request_timeout, max_connections=max_connections
        )

    async def close(self) -> None:
        await self.kube.close()

    async def _request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        content_type: str = JSON,
        error: type[Exception] = ReadError,
    ) -> tuple[int, Any]:
        """The status and decoded JSON answer to one request (the HTTP reason phrase for a
        non-2xx answer); ``error`` on a transport failure or an answer that is not JSON."""
        try:
            answer = await self.kube.send(method, path, body=body, content_type=content_type)
        except ApiError as exc:
            raise _failure(exc.__cause__ or exc, error) from None
        if not answer.ok:
            return answer.status, answer.reason
        try:
            return answer.status, answer.json()
        except ValueError:
            raise error("the API server answered something that is not JSON") from None

    async def _get(self, path: str) -> Any:
        """The decoded JSON answer to ``GET path``; None on 404; ReadError otherwise."""
        status, answer = await self._request("GET", path)
        if status == 404:
            return None
        if not 200 <= status < 300:
            raise ReadError(f"the API server answered {status} {answer}".rstrip())
        return answer

    async def _get_dict(self, path: str, what: str) -> dict[str, Any] | None:
        """``GET path`` as an object; None on 404; ReadError when the answer is no object."""
        obj = await self._get(path)
        if obj is not None and not isinstance(obj, dict):
            raise ReadError(f"the API server answered a {what} that is not an object")
        return obj

    async def _write(self, method: str, path: str, body: Any, *, content_type: str = JSON) -> None:
        """A write; ConflictError on 409, ForbiddenError on 403, WriteError on any other
        failure."""
        status, answer = await self._request(
            method, path, body=body, content_type=content_type, error=WriteError
        )
        if status == 409:
            raise ConflictError(f"{path}: {answer}")
        if not 200 <= status < 300:
            refused = ForbiddenError if status == 403 else WriteError
            raise refused(f"{method} {path}: the API server answered {status} {answer}".rstrip())

    async def get_object(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        resource = RESOURCES.get(kind)
        if resource is None:
            raise ReadError(f"{kind} is not a kind this server reads")
        if not _nameable(name):
            # Not found, as it is: a GET would be answered 400, a read failure that a retry
            # never heals, instead of the rule's answer for a name that names nothing.
            return None
        obj = await self._get(resource.path(namespace, name))
        if obj is None:
            return None
        if not isinstance(obj, dict):
            raise ReadError(f"the API server answered a {type(obj).__name__}, not an object")
        return obj

    async def get_config_map_data(self, namespace: str, name: str) -> dict[str, str] | None:
        config_map = await self._get_dict(CONFIGMAPS.path(namespace, name), "ConfigMap")
        if config_map is None:
            return None
        data = config_map.get("data") or {}
        if not isinstance(data, dict):
            raise ReadError("the API server answered a ConfigMap whose data is not an object")
        return {str(k): str(v) for k, v in data.items()}

    async def get_secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        return await self._get_dict(SECRETS.path(namespace, name), "Secret")

    async def create_secret(self, namespace: str, body: Mapping[str, Any]) -> None:
        await self._write("POST", SECRETS.path(namespace), body)

    async def update_secret(self, namespace: str, name: str, body: Mapping[str, Any]) -> None:
        await self._write("PUT", SECRETS.path(namespace, name), body)

    async def get_webhook_configuration(self, kind: str, name: str) -> dict[str, Any] | None:
        return await self._get_dict(WEBHOOK_CONFIGURATIONS[kind].path(None, name), kind)

    async def patch_webhook_configuration(
        self, kind: str, name: str, patch: Mapping[str, Any]
    ) -> None:
        await self._write(
            "PATCH",
            WEBHOOK_CONFIGURATIONS[kind].path(None, name),
            patch,
            content_type=STRATEGIC_MERGE_PATCH,
        )

    async def ping(self) -> None:
        """One cheap authenticated request (the API server's version); raises ReadError."""
        await asyncio.wait_for(self._get("/version"), self.request_timeout)


def own_namespace(default: str) -> str:
    """The namespace of the service account this process runs as, else ``default``."""
    return config.in_cluster_namespace() or default
