"""``python -m gpustack_modelmanager``: model-manager, the CSI node plugin of
``model.csi.gpustack.ai`` (docs/node-store.md). Serves the CSI Identity and Node services on a
unix socket until SIGTERM/SIGINT.

It reads ModelArtifacts (in the namespace of the Pod being mounted) and the ``gpustack-settings``
ConfigMap of the system namespace (``--namespace``, else the Pod's own, else gpustack-system),
the way the controller reads them: the hub endpoints come from the Settings.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NoReturn

from gpustack_kube.client import Kube
from gpustack_kube.config import ClusterConfigError, in_cluster_namespace
from gpustack_kube.informer import Informer
from gpustack_modelmanager.csi import server
from gpustack_modelmanager.csi.identity import IdentityService
from gpustack_modelmanager.csi.node import NodeService
from gpustack_modelmanager.csi.storeapi import ModelStore
from gpustack_modelmanager.store import ModelStore as NodeStore
from gpustack_modelmanager.store.records import KubeRecordWriter
from gpustack_render.core.settings import (
    CONFIGMAP_NAME,
    DEFAULT_SYSTEM_NAMESPACE,
    Settings,
    settings_of_config_map,
)
from gpustack_render.schema.resources import CONFIGMAPS, MODEL_ARTIFACTS

log = logging.getLogger("gpustack_modelmanager")

#: Bad usage: a flag the parser refuses, no node name, or no cluster configuration.
EXIT_USAGE = 2
LOG_LEVELS = ("debug", "info", "warning", "error")
DEFAULT_ENDPOINT = "unix:///csi/csi.sock"
DEFAULT_STORE_ROOT = "/var/lib/gpustack/model-store"


class _Parser(argparse.ArgumentParser):
    """Bad flags are one line on stderr and exit 2 (the usage is in --help)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see --help)\n")


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="model-manager", description=__doc__)
    p.add_argument(
        "--csi-address",
        default=DEFAULT_ENDPOINT,
        help=f"the CSI endpoint, unix:///path or a path (default {DEFAULT_ENDPOINT})",
    )
    p.add_argument(
        "--node-name",
        default=os.environ.get("NODE_NAME", ""),
        help="this node's name: NodeGetInfo's node id and the NodeModelStore's name "
        "(default $NODE_NAME)",
    )
    p.add_argument(
        "--store-root",
        default=DEFAULT_STORE_ROOT,
        help=f"the node store's directory (default {DEFAULT_STORE_ROOT})",
    )
    p.add_argument(
        "--kubeconfig",
        help="kubeconfig file (default: the in-cluster service account, else $KUBECONFIG, "
        "else ~/.kube/config)",
    )
    p.add_argument(
        "--namespace",
        help=f"system namespace (default: the Pod's own, else {DEFAULT_SYSTEM_NAMESPACE})",
    )
    p.add_argument(
        "--log-level", default="info", choices=LOG_LEVELS, help="log threshold (default info)"
    )
    return p


class SettingsWatch:
    """The Settings of the ``gpustack-settings`` ConfigMap, kept current by an informer on that
    one name (a bad value keeps its default and is logged, as in the controller). Each change
    is also handed to the ``listeners`` (the store reads its watermarks, download concurrency
    and proxy from the Settings it holds)."""

    def __init__(self, kube: Kube, namespace: str) -> None:
        self.namespace = namespace
        self.current = Settings(system_namespace=namespace)
        self.listeners: list[Callable[[Settings], None]] = []
        self.informer = Informer(
            kube,
            CONFIGMAPS,
            namespace=namespace,
            field_selector=f"metadata.name={CONFIGMAP_NAME}",
            handlers=[self._on_settings],
        )

    def _on_settings(self, kind: str, new: dict[str, Any], old: dict[str, Any] | None) -> None:
        settings, errs = settings_of_config_map(
            None if kind == "DELETED" else new, system_namespace=self.namespace
        )
        for err in errs:
            log.warning("ConfigMap %s: %s (the default is kept)", CONFIGMAP_NAME, err.message())
        self.current = settings
        for listener in self.listeners:
            listener(settings)

    def __call__(self) -> Settings:
        return self.current


def open_store(root: Path, *, kube: Kube, settings: SettingsWatch, node_name: str) -> NodeStore:
    """The node store under ``root``, writing node ``node_name``'s ``NodeModelStore`` and
    following the Settings as they change."""
    store = NodeStore(
        root,
        settings=settings(),
        node_name=node_name,
        records=KubeRecordWriter(kube, node_name),
    )

    def follow(current: Settings) -> None:
        store.settings = current

    settings.listeners.append(follow)
    return store


async def run(args: argparse.Namespace, *, store: ModelStore | None = None) -> int:
    """Serve until SIGTERM/SIGINT. ``store``: a store already built (a test double of ours);
    else the node store under ``--store-root`` (:func:`open_store`)."""
    if not args.node_name:
        sys.stderr.write("model-manager: error: --node-name (or $NODE_NAME) is required\n")
        return EXIT_USAGE
    namespace = args.namespace or in_cluster_namespace() or DEFAULT_SYSTEM_NAMESPACE
    try:
        kube = await Kube.connect(kubeconfig=args.kubeconfig, user_agent="model-manager")
    except ClusterConfigError as exc:
        sys.stderr.write(f"model-manager: error: {exc}\n")
        return EXIT_USAGE
    settings = SettingsWatch(kube, namespace)
    settings.informer.start()
    try:
        # The hub endpoints are Settings: wait for the ConfigMap's first list before serving.
        await asyncio.wait_for(settings.informer.synced.wait(), timeout=60)
    except TimeoutError:
        log.warning("ConfigMap %s not listed within 60 s; serving with defaults", CONFIGMAP_NAME)
    if store is None:
        node_store = open_store(
            Path(args.store_root), kube=kube, settings=settings, node_name=args.node_name
        )
        # The root loaded, the first record written and the sweep started now, not at the first
        # publish: the controller sees the node's store (and its capacity) from the start.
        await node_store.start()
        store = node_store

    async def read_artifact(namespace: str, name: str) -> Mapping[str, Any] | None:
        return await kube.get(MODEL_ARTIFACTS, name, namespace)

    node = NodeService(
        node_name=args.node_name, store=store, read_artifact=read_artifact, settings=settings
    )
    grpc_server = await server.start(args.csi_address, IdentityService(), node)
    log.info("serving CSI on %s for node %s", args.csi_address, args.node_name)
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stopping.set)
    try:
        await stopping.wait()
    finally:
        await grpc_server.stop(grace=5)
        await settings.informer.stop()
        await store.close()
        await kube.close()
    return 0


def main(argv: list[str] | None = None) -> NoReturn:
    args = parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    sys.exit(asyncio.run(run(args)))


if __name__ == "__main__":
    main()
