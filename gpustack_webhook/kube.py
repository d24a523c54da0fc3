"""The webhook server's only door to the API server (the one module importing kubernetes_asyncio).

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

kubernetes_asyncio only *configures* the reader (kubeconfig or in-cluster service account: host,
CA, client certificate, bearer token and its refresh hook, proxy). The GETs themselves go through
the reader's own :class:`aiohttp.ClientSession` (one keep-alive pool of up to
``max_connections`` connections), built with the same TLS and auth settings, and are decoded
with :func:`json.loads`. Measured under ``bench/webhook_load.py``, the generated client cost more
per read than the read itself: its session is created with ``trust_env``, which sends every
request through two worker-thread hops (a ``.netrc`` lookup and an environment-proxy lookup),
and its model layer re-walks every answer. Here the environment proxy is resolved once, when the
reader is built.
"""

from __future__ import annotations

import asyncio
import json
import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp
from aiohttp.helpers import get_env_proxy_for_url
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio import config as k8s_config
from kubernetes_asyncio.config.config_exception import ConfigException
from yarl import URL

from gpustack_render.api.common import GROUP, VERSION
from gpustack_render.core import nesting
from gpustack_render.core.clusterconfig import config_problem
from gpustack_render.schema.kinds import BY_KIND, INPUT_MODELS
from gpustack_webhook.lookups import ReadError
from gpustack_webhook.rotation import (
    MUTATING,
    VALIDATING,
    ConflictError,
    ForbiddenError,
    WriteError,
)

#: Where a Pod finds its service account's namespace.
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")

#: Connections kept to the API server: enough for every concurrent review to have its read in
#: flight (the benchmark runs 16 at once), with room for bursts.
DEFAULT_MAX_CONNECTIONS = 64

#: ``User-Agent`` of the reads (shows in the API server's audit log).
USER_AGENT = "gpustack-webhook"


@dataclass(frozen=True)
class Resource:
    """REST coordinates of a worker.gpustack.ai/v1 kind."""

    plural: str
    namespaced: bool


#: The kinds the library's Lookups read (the RBAC in deploy/webhook grants ``get`` on these).
RESOURCES: dict[str, Resource] = {
    kind: Resource(BY_KIND[kind].plural, namespaced=BY_KIND[kind].namespaced)
    for kind in INPUT_MODELS
}


#: REST paths of the webhook configuration kinds.
WEBHOOK_CONFIGURATIONS = {
    MUTATING: "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
    VALIDATING: "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
}

_STRATEGIC_MERGE = "application/strategic-merge-patch+json"


def _failure(exc: BaseException, error: type[Exception] = ReadError) -> Exception:
    if isinstance(exc, TimeoutError):
        return error("the API server did not answer in time")
    return error(f"{type(exc).__name__}: {exc}")


def _ssl_context(configuration: Any) -> ssl.SSLContext:
    """The client TLS context kubernetes_asyncio's own REST client would build."""
    context = ssl.create_default_context(cafile=configuration.ssl_ca_cert)
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, keyfile=configuration.key_file)
    if not configuration.verify_ssl:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if getattr(configuration, "disable_strict_ssl_verification", False):
        context.verify_flags &= ~ssl.VERIFY_X509_STRICT
    return context


def _segment(value: str) -> str:
    return quote(value, safe="")


def _nameable(name: str) -> bool:
    """Whether an object can have ``name``: the API server refuses ``.``, ``..`` and names
    holding ``/`` or ``%`` for every kind (400 to a GET), so no stored object has one."""
    return name not in (".", "..") and "/" not in name and "%" not in name


class ClusterConfigError(Exception):
    """No usable cluster configuration: ``--kubeconfig`` cannot be read, or there is neither the
    in-cluster service account nor a default kubeconfig. Bad usage, not a failure at run time."""


def _default_kubeconfig_exists() -> bool:
    """Whether ``$KUBECONFIG`` (a ``:``-separated list) or ``~/.kube/config`` names a file."""
    paths = os.environ.get("KUBECONFIG") or str(Path("~/.kube/config").expanduser())
    return any(os.path.isfile(os.path.expanduser(p)) for p in paths.split(os.pathsep) if p)


class KubeReader:
    """Live reads with the API server's configuration from kubernetes_asyncio.

    Must be built inside the running event loop (the session belongs to it).
    """

    def __init__(
        self,
        configuration: Any,
        *,
        request_timeout: float = 5.0,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
    ) -> None:
        self.configuration = configuration
        self.request_timeout = request_timeout
        self._base = str(configuration.host).rstrip("/")
        self._request_args: dict[str, Any] = {
            "timeout": aiohttp.ClientTimeout(total=request_timeout),
        }
        if configuration.tls_server_name:
            self._request_args["server_hostname"] = configuration.tls_server_name
        if configuration.proxy:
            self._request_args["proxy"] = configuration.proxy
            if configuration.proxy_headers:
                self._request_args["proxy_headers"] = configuration.proxy_headers
        else:
            # What trust_env would find on every request, looked up once.
            try:
                proxy, proxy_auth = get_env_proxy_for_url(URL(self._base))
            except LookupError:
                pass
            else:
                self._request_args["proxy"] = proxy
                if proxy_auth is not None:
                    self._request_args["proxy_auth"] = proxy_auth
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=max_connections, ssl=_ssl_context(configuration)),
            headers={"Accept": "application/json", "User-Agent": USER_AGENT},
            read_bufsize=2**21,
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
        kubeconfig (``$KUBECONFIG`` or ``~/.kube/config``)."""
        # A fresh Configuration, not a copy of the process-wide default.
        configuration = type.__call__(k8s.Configuration)
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
                    if not _default_kubeconfig_exists():
                        raise ClusterConfigError(config_problem(exc, nothing_found=True)) from exc
                    await k8s_config.load_kube_config(client_configuration=configuration)
        except ClusterConfigError:
            raise
        except Exception as exc:  # any way a configuration fails to load is the same answer
            raise ClusterConfigError(config_problem(exc, kubeconfig=kubeconfig)) from exc
        return cls(configuration, request_timeout=request_timeout, max_connections=max_connections)

    async def close(self) -> None:
        await self._session.close()

    async def _request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        content_type: str = "application/json",
        error: type[Exception] = ReadError,
    ) -> tuple[int, Any]:
        """The status and decoded JSON answer to one request; ``error`` on a transport failure
        or an answer that is not JSON."""
        headers: dict[str, str] = {}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = content_type
        try:
            # Calls the configuration's refresh hook (a rotated service-account token).
            auth = await self.configuration.auth_settings()
            for setting in auth.values():
                if setting.get("in") == "header" and setting.get("value"):
                    headers[setting["key"]] = setting["value"]
            async with self._session.request(
                method,
                URL(self._base + path, encoded=True),
                headers=headers,
                data=data,
                **self._request_args,
            ) as resp:
                answer = await resp.read()
                status, reason = resp.status, resp.reason or ""
        except (aiohttp.ClientError, TimeoutError, OSError, ConfigException) as exc:
            raise _failure(exc, error) from None
        if not 200 <= status < 300:
            return status, reason
        try:
            return status, nesting.loads(answer)
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

    async def _write(
        self, method: str, path: str, body: Any, *, content_type: str = "application/json"
    ) -> None:
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
        where = f"/namespaces/{_segment(namespace)}" if resource.namespaced else ""
        obj = await self._get(f"/apis/{GROUP}/{VERSION}{where}/{resource.plural}/{_segment(name)}")
        if obj is None:
            return None
        if not isinstance(obj, dict):
            raise ReadError(f"the API server answered a {type(obj).__name__}, not an object")
        return obj

    async def get_config_map_data(self, namespace: str, name: str) -> dict[str, str] | None:
        config_map = await self._get_dict(
            f"/api/v1/namespaces/{_segment(namespace)}/configmaps/{_segment(name)}", "ConfigMap"
        )
        if config_map is None:
            return None
        data = config_map.get("data") or {}
        if not isinstance(data, dict):
            raise ReadError("the API server answered a ConfigMap whose data is not an object")
        return {str(k): str(v) for k, v in data.items()}

    def _secrets(self, namespace: str) -> str:
        return f"/api/v1/namespaces/{_segment(namespace)}/secrets"

    async def get_secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        return await self._get_dict(f"{self._secrets(namespace)}/{_segment(name)}", "Secret")

    async def create_secret(self, namespace: str, body: Mapping[str, Any]) -> None:
        await self._write("POST", self._secrets(namespace), body)

    async def update_secret(self, namespace: str, name: str, body: Mapping[str, Any]) -> None:
        await self._write("PUT", f"{self._secrets(namespace)}/{_segment(name)}", body)

    async def get_webhook_configuration(self, kind: str, name: str) -> dict[str, Any] | None:
        return await self._get_dict(f"{WEBHOOK_CONFIGURATIONS[kind]}/{_segment(name)}", kind)

    async def patch_webhook_configuration(
        self, kind: str, name: str, patch: Mapping[str, Any]
    ) -> None:
        await self._write(
            "PATCH",
            f"{WEBHOOK_CONFIGURATIONS[kind]}/{_segment(name)}",
            patch,
            content_type=_STRATEGIC_MERGE,
        )

    async def ping(self) -> None:
        """One cheap authenticated request (the API server's version); raises ReadError."""
        await asyncio.wait_for(self._get("/version"), self.request_timeout)


def own_namespace(default: str) -> str:
    """The namespace of the service account this process runs as, else ``default``."""
    try:
        text = SERVICE_ACCOUNT_NAMESPACE.read_text().strip()
    except OSError:
        return default
    return text or default
