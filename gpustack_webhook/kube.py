"""The webhook server's only door to the API server (the one module importing kubernetes_asyncio).

:class:`KubeReader` makes the live GETs a review needs: the worker.gpustack.ai/v1 input kinds a
rule reads and the ``gpustack-settings`` ConfigMap. It implements
:class:`gpustack_webhook.lookups.ObjectReader`: 404 is ``None``; every other failure is a
:class:`~gpustack_webhook.lookups.ReadError` naming the status or the transport error, never the
object's content.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio import config as k8s_config
from kubernetes_asyncio.client.exceptions import ApiException
from kubernetes_asyncio.config.config_exception import ConfigException

from gpustack_render.api.common import GROUP, VERSION
from gpustack_webhook.lookups import ReadError

#: Where a Pod finds its service account's namespace.
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


@dataclass(frozen=True)
class Resource:
    """REST coordinates of a worker.gpustack.ai/v1 kind."""

    plural: str
    namespaced: bool


#: The kinds the library's Lookups read (the RBAC in deploy/webhook grants ``get`` on these).
RESOURCES: dict[str, Resource] = {
    "InstanceType": Resource("instancetypes", namespaced=False),
    "KVCachePoolBinding": Resource("kvcachepoolbindings", namespaced=True),
    "KVCachePool": Resource("kvcachepools", namespaced=False),
    "KVCacheBackend": Resource("kvcachebackends", namespaced=False),
    "ModelArtifact": Resource("modelartifacts", namespaced=True),
}


def _failure(exc: BaseException) -> ReadError:
    if isinstance(exc, ApiException):
        return ReadError(f"the API server answered {exc.status} {exc.reason or ''}".rstrip())
    if isinstance(exc, TimeoutError):
        return ReadError("the API server did not answer in time")
    return ReadError(f"{type(exc).__name__}: {exc}")


class KubeReader:
    """Live reads through one kubernetes_asyncio ApiClient (one connection pool)."""

    def __init__(self, api: k8s.ApiClient, *, request_timeout: float = 5.0) -> None:
        self.api = api
        self.request_timeout = request_timeout
        self._custom = k8s.CustomObjectsApi(api)
        self._core = k8s.CoreV1Api(api)

    @classmethod
    async def connect(
        cls, *, kubeconfig: str | None = None, request_timeout: float = 5.0
    ) -> KubeReader:
        """A reader from ``kubeconfig``, else the in-cluster service account, else the default
        kubeconfig (``$KUBECONFIG`` or ``~/.kube/config``)."""
        if kubeconfig:
            api = await k8s_config.new_client_from_config(config_file=kubeconfig)
            return cls(api, request_timeout=request_timeout)
        configuration = k8s.Configuration()
        try:
            k8s_config.load_incluster_config(  # type: ignore[no-untyped-call]
                client_configuration=configuration
            )
        except ConfigException:
            await k8s_config.load_kube_config(client_configuration=configuration)
        return cls(k8s.ApiClient(configuration), request_timeout=request_timeout)

    async def close(self) -> None:
        await self.api.close()

    async def get_object(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        resource = RESOURCES.get(kind)
        if resource is None:
            raise ReadError(f"{kind} is not a kind this server reads")
        try:
            if resource.namespaced:
                obj = await self._custom.get_namespaced_custom_object(
                    GROUP,
                    VERSION,
                    namespace,
                    resource.plural,
                    name,
                    _request_timeout=self.request_timeout,
                )
            else:
                obj = await self._custom.get_cluster_custom_object(
                    GROUP, VERSION, resource.plural, name, _request_timeout=self.request_timeout
                )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise _failure(exc) from None
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise _failure(exc) from None
        if not isinstance(obj, dict):
            raise ReadError(f"the API server answered a {type(obj).__name__}, not an object")
        return obj

    async def get_config_map_data(self, namespace: str, name: str) -> dict[str, str] | None:
        try:
            config_map = await self._core.read_namespaced_config_map(
                name, namespace, _request_timeout=self.request_timeout
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise _failure(exc) from None
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise _failure(exc) from None
        data = config_map.data or {}
        return dict(data)

    async def ping(self) -> None:
        """One cheap authenticated request (the API server's version); raises ReadError."""
        try:
            await asyncio.wait_for(k8s.VersionApi(self.api).get_code(), self.request_timeout)
        except (ApiException, aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise _failure(exc) from None


def own_namespace(default: str) -> str:
    """The namespace of the service account this process runs as, else ``default``."""
    try:
        text = SERVICE_ACCOUNT_NAMESPACE.read_text().strip()
    except OSError:
        return default
    return text or default
