"""Cluster configuration: where the API server is and who this process is to it.

One loader for the controller, the webhook server and the command line's live mode.
:func:`load` reads ``--kubeconfig`` when given, else the in-cluster service account, else the
default kubeconfig (``$KUBECONFIG``, a ``:``-separated list, else ``~/.kube/config``), into a
fresh kubernetes_asyncio ``Configuration`` every time: never the process-wide default, which
the library's loaders overwrite when they are given no configuration of their own. Any way it
fails is a :class:`ClusterConfigError` whose message is
:func:`gpustack_render.core.clusterconfig.config_problem`'s one line, with the loader's own
exception as its ``__cause__`` (the live mode words its own line from it).

kubernetes_asyncio reads the files and the credentials (client certificates, tokens, exec
plugins and their refresh); :mod:`gpustack_kube.client` sends the requests.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from kubernetes_asyncio import client as k8s
from kubernetes_asyncio import config as k8s_config
from kubernetes_asyncio.config.config_exception import ConfigException

from gpustack_render.core.clusterconfig import config_problem

#: Where a Pod finds its service account's namespace.
SERVICE_ACCOUNT_NAMESPACE: Final = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


class ClusterConfigError(Exception):
    """No usable cluster configuration: ``--kubeconfig`` cannot be read, or there is neither the
    in-cluster service account nor a default kubeconfig. Bad usage, not a failure at run time."""


@dataclass(frozen=True)
class ClusterConfig:
    """A loaded configuration."""

    #: A kubernetes_asyncio ``Configuration`` of this process's own (host, TLS, credentials,
    #: the token refresh hook, the kubeconfig's proxy).
    configuration: Any
    #: The kubeconfig context read (``None`` in a cluster).
    context: str | None
    #: The context's namespace, or the service account's in a cluster; ``None`` when unset.
    namespace: str | None


def fresh_configuration() -> Any:
    """A new ``Configuration`` with the library's defaults, never a copy of the process-wide
    default (some kubernetes_asyncio releases build one from ``Configuration()``)."""
    return type.__call__(k8s.Configuration)


def in_cluster_namespace() -> str | None:
    """The namespace of the Pod this process runs in, when it runs in one."""
    try:
        return SERVICE_ACCOUNT_NAMESPACE.read_text().strip() or None
    except OSError:
        return None


def default_kubeconfig(environ: Mapping[str, str] | None = None) -> list[str]:
    """The kubeconfig files read when none is named, as kubectl reads them: each of
    ``$KUBECONFIG`` (a ``:``-separated list, merged in order), else ``~/.kube/config``; with
    ``~`` expanded, whether the files exist or not."""
    env = os.environ if environ is None else environ
    listed = env.get("KUBECONFIG", "")
    if listed:
        return [os.path.expanduser(p) for p in listed.split(os.pathsep) if p]
    return [os.path.join(os.path.expanduser("~"), ".kube", "config")]


async def load(
    kubeconfig: str | None = None, *, context: str | None = None, persist: bool = True
) -> ClusterConfig:
    """The configuration of ``kubeconfig`` (a path, or a ``:``-separated list) and ``context``
    (``None``: the current one); without ``kubeconfig``, the in-cluster service account, else
    the default kubeconfig. ``persist``: let the loader write refreshed credentials back to the
    kubeconfig (a read-only tool passes ``False``). Raises :class:`ClusterConfigError`."""
    configuration = fresh_configuration()
    try:
        if kubeconfig:
            return await _from_kubeconfig(configuration, kubeconfig, context, persist)
        try:
            k8s_config.load_incluster_config(  # type: ignore[no-untyped-call]
                client_configuration=configuration
            )
        except ConfigException as exc:
            files = [p for p in default_kubeconfig() if os.path.isfile(p)]
            if not files:
                raise ClusterConfigError(config_problem(exc, nothing_found=True)) from exc
            return await _from_kubeconfig(configuration, os.pathsep.join(files), context, persist)
        return ClusterConfig(configuration, context=None, namespace=in_cluster_namespace())
    except ClusterConfigError:
        raise
    except Exception as exc:  # any way a configuration fails to load is the same answer
        raise ClusterConfigError(config_problem(exc, kubeconfig=kubeconfig)) from exc


async def _from_kubeconfig(
    configuration: Any, files: str, context: str | None, persist: bool
) -> ClusterConfig:
    loader = await k8s_config.load_kube_config(
        config_file=files,
        context=context,
        client_configuration=configuration,
        persist_config=persist,
    )
    current = loader.current_context or {}
    namespace = (current.get("context") or {}).get("namespace")
    return ClusterConfig(
        configuration,
        context=current.get("name") or context,
        namespace=str(namespace) if namespace else None,
    )


def context_namespace(kubeconfig: str, context: str | None) -> str | None:
    """The namespace of ``context`` (``None``: the current one) in ``kubeconfig`` without
    loading credentials; ``None`` when it names none or the file cannot be read (:func:`load`
    names that problem)."""
    try:
        contexts, current = k8s_config.list_kube_config_contexts(config_file=kubeconfig)
    except (ConfigException, KeyError, TypeError, AttributeError, ValueError, OSError):
        return None
    chosen = next((c for c in contexts if c.get("name") == context), None) if context else current
    namespace = ((chosen or {}).get("context") or {}).get("namespace")
    return str(namespace) if namespace else None
