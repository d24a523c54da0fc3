"""The node store's record on the real API server, with the shipped NodeModelStore CRD: the
plugin's identity, holding only the verbs its RBAC grants (get and create on nodemodelstores,
update on nodemodelstores/status), creates its node's record and writes what the store holds:
a download from the test hub shows Downloading, then Ready with every byte, its reference and
the store's capacity, and a refused tree shows Failed with its reason and retry time
(docs/node-store.md, "The record")."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from support.hubserver import HubServer

from gpustack_controller.kube import Kube
from gpustack_kube.client import ApiError
from gpustack_modelmanager.store import ModelStore, TreeFailed, TreeReady, TreeRequest
from gpustack_modelmanager.store.records import NODE_MODEL_STORES, KubeRecordWriter
from gpustack_render.api.nodestore import NodeModelStoreStatus
from gpustack_render.core.settings import Settings
from gpustack_render.weights.manifest import ManifestEntry, build_manifest

from .controlplane import ControlPlane

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

ACCOUNT = "system:serviceaccount:gpustack-system:model-manager-records-test"


def _rbac(control_plane: ControlPlane) -> None:
    role = "model-manager-records-test"
    control_plane.request(
        "POST",
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": role},
            "rules": [
                {
                    "apiGroups": ["worker.gpustack.ai"],
                    "resources": ["nodemodelstores"],
                    "verbs": ["get", "create"],
                },
                {
                    "apiGroups": ["worker.gpustack.ai"],
                    "resources": ["nodemodelstores/status"],
                    "verbs": ["update"],
                },
            ],
        },
    )
    control_plane.request(
        "POST",
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": role},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": role,
            },
            "subjects": [
                {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": ACCOUNT}
            ],
        },
    )


@pytest_asyncio.fixture(loop_scope="session")
async def plugin_kube(control_plane: ControlPlane) -> AsyncIterator[Kube]:
    _rbac(control_plane)
    client = await Kube.connect(kubeconfig=str(control_plane.user_kubeconfig(ACCOUNT)))
    try:
        yield client
    finally:
        await client.close()


async def _record(kube: Kube, node: str) -> dict[str, Any] | None:
    return await kube.get(NODE_MODEL_STORES, node)


async def _until(kube: Kube, node: str, check: Any, timeout: float = 20) -> dict[str, Any]:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        record = await _record(kube, node)
        if record is not None and check(record):
            return record
        if asyncio.get_running_loop().time() > deadline:
            pytest.fail(f"the record never got there: {record}")
        await asyncio.sleep(0.1)


async def test_the_plugin_writes_its_nodes_record(
    kube: Kube, plugin_kube: Kube, tmp_path: Path
) -> None:
    node = f"node-{uuid.uuid4().hex[:6]}"
    server = HubServer()
    repo = server.repo("org/records")
    commit = repo.add_commit(
        {"config.json": b"{}\n", "weights.bin": (os.urandom(2 << 20), True)}, ref="main"
    )
    manifest = build_manifest(
        ManifestEntry(f.path, "sha256" if f.lfs else "gitsha1", f.etag, f.size)
        for f in repo.commits[commit].values()
    )
    await server.start()
    writer = KubeRecordWriter(plugin_kube, node)
    store = ModelStore(tmp_path, settings=Settings(), node_name=node, records=writer)
    request = TreeRequest(
        digest=manifest.digest,
        hub="huggingFace",
        repository="org/records",
        commit=commit,
        endpoint=server.url,
        size_bytes=manifest.size_bytes,
        source=f"huggingFace:org/records@{commit}",
    )
    try:
        await store.acquire(request)
        assert isinstance(await store.wait(request.digest), TreeReady)
        await store.reference(request.digest, "/var/lib/kubelet/pods/x/volumes/model")
        record = await _until(
            kube,
            node,
            lambda r: [m.get("referenced") for m in r.get("status", {}).get("models", [])] == [1],
        )
        (model,) = record["status"]["models"]
        assert model["digest"] == manifest.digest
        assert model["state"] == "Ready"
        assert model["sizeBytes"] == model["downloadedBytes"] == manifest.size_bytes
        assert model["source"] == request.source
        assert model["lastUsedTime"].endswith("Z")
        capacity = record["status"]["capacity"]
        assert capacity["totalBytes"] > 0 and 0 <= capacity["usedPercent"] <= 100
        conditions = {c["type"]: c["status"] for c in record["status"]["conditions"]}
        assert conditions == {"Ready": "True", "CapacityLow": conditions["CapacityLow"]}
        # The record passed the CRD's schema as written (nothing pruned).
        parsed = NodeModelStoreStatus.model_validate(record["status"])
        assert parsed.models is not None and parsed.models[0].referenced == 1

        # A digest the hub's listing does not give: Failed, with the reason and when it is
        # tried again.
        wrong = TreeRequest(**{**request.__dict__, "digest": "sha256:" + "1" * 64})
        await store.acquire(wrong)
        failed = await store.wait(wrong.digest)
        assert isinstance(failed, TreeFailed) and failed.reason == "ManifestMismatch"

        def failed_listed(record: dict[str, Any]) -> bool:
            models = record.get("status", {}).get("models", [])
            return any(m["digest"] == wrong.digest and m["state"] == "Failed" for m in models)

        record = await _until(kube, node, failed_listed)
        assert len(record["status"]["models"]) == 2
        bad = next(m for m in record["status"]["models"] if m["digest"] == wrong.digest)
        assert (bad["state"], bad["reason"]) == ("Failed", "ManifestMismatch")
        assert bad["retryTime"].endswith("Z") and wrong.digest in bad["message"]
    finally:
        await store.close()
        await server.stop()

    # The identity may not do more than its verbs: no delete, no list.
    with pytest.raises(ApiError) as denied:
        await plugin_kube.delete(NODE_MODEL_STORES, node)
    assert denied.value.status == 403
    assert await kube.delete(NODE_MODEL_STORES, node)
