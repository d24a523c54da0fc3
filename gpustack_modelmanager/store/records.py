"""The node's ``NodeModelStore``, written through ``gpustack_kube`` (docs/node-store.md, "The
record"): the object named after the node is created when absent, and its status replaced
through the ``status`` subresource. The store calls :meth:`KubeRecordWriter.write` only when the
record says something new (progress on thresholds, a state, a reference, the capacity's whole
percent).

The verbs are the plugin's RBAC: ``get`` and ``create`` on ``nodemodelstores``, ``update`` on
``nodemodelstores/status`` (a PUT carrying the ``resourceVersion`` just read; the plugin is the
record's only writer, so a conflict means only that the object was recreated)."""

from __future__ import annotations

from typing import Any

from gpustack_kube.client import ApiError, Kube
from gpustack_render.api.nodestore import NodeModelStoreStatus
from gpustack_render.schema.resources import project_resource

NODE_MODEL_STORES = project_resource("NodeModelStore")
#: Conflicting writes retried before giving up (the store writes again on its next change).
ATTEMPTS = 3


def status_of(status: NodeModelStoreStatus) -> dict[str, Any]:
    return status.model_dump(by_alias=True, exclude_none=True, mode="json")


class KubeRecordWriter:
    """Writes node ``node_name``'s record."""

    def __init__(self, kube: Kube, node_name: str) -> None:
        self.kube = kube
        self.node_name = node_name

    async def _current(self) -> dict[str, Any]:
        found = await self.kube.get(NODE_MODEL_STORES, self.node_name)
        if found is not None:
            return found
        body = {
            "apiVersion": NODE_MODEL_STORES.api_version,
            "kind": NODE_MODEL_STORES.kind,
            "metadata": {"name": self.node_name},
        }
        try:
            return await self.kube.create(NODE_MODEL_STORES, body)
        except ApiError as exc:
            if not exc.conflict:
                raise
        found = await self.kube.get(NODE_MODEL_STORES, self.node_name)
        if found is None:
            raise ApiError(404, "NotFound", f"NodeModelStore {self.node_name} vanished")
        return found

    async def write(self, status: NodeModelStoreStatus) -> None:
        for attempt in range(ATTEMPTS):
            current = await self._current()
            body = {
                "apiVersion": NODE_MODEL_STORES.api_version,
                "kind": NODE_MODEL_STORES.kind,
                "metadata": {
                    "name": self.node_name,
                    "resourceVersion": current["metadata"]["resourceVersion"],
                },
                "status": {
                    **status_of(status),
                    "observedGeneration": current["metadata"].get("generation", 1),
                },
            }
            try:
                await self.kube.request(
                    "PUT",
                    NODE_MODEL_STORES.path(None, self.node_name, "status"),
                    body=body,
                )
                return
            except ApiError as exc:
                if not (exc.conflict or exc.not_found) or attempt == ATTEMPTS - 1:
                    raise
