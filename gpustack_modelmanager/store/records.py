"""The node's ``NodeModelStore``, written through ``gpustack_kube`` (docs/node-store.md, "The
record"): the object named after the node is created when absent, its status written through
the status subresource. The store calls :meth:`KubeRecordWriter.write` only when the record says
something new (progress on thresholds, a state, a reference, the capacity's whole percent)."""

from __future__ import annotations

from typing import Any

from gpustack_kube.client import ApiError, Kube
from gpustack_render.api.nodestore import NodeModelStoreStatus
from gpustack_render.schema.resources import project_resource

NODE_MODEL_STORES = project_resource("NodeModelStore")


def status_body(status: NodeModelStoreStatus) -> dict[str, Any]:
    return {"status": status.model_dump(by_alias=True, exclude_none=True, mode="json")}


class KubeRecordWriter:
    """Writes node ``node_name``'s record."""

    def __init__(self, kube: Kube, node_name: str) -> None:
        self.kube = kube
        self.node_name = node_name
        self._exists = False

    async def _ensure(self) -> None:
        if self._exists:
            return
        if await self.kube.get(NODE_MODEL_STORES, self.node_name) is None:
            body = {
                "apiVersion": NODE_MODEL_STORES.api_version,
                "kind": NODE_MODEL_STORES.kind,
                "metadata": {"name": self.node_name},
            }
            try:
                await self.kube.create(NODE_MODEL_STORES, body)
            except ApiError as exc:
                if exc.status != 409:
                    raise
        self._exists = True

    async def write(self, status: NodeModelStoreStatus) -> None:
        await self._ensure()
        try:
            await self.kube.merge_patch(
                NODE_MODEL_STORES, self.node_name, status_body(status), subresource="status"
            )
        except ApiError as exc:
            if exc.not_found:
                # Deleted since: create it again on the next write.
                self._exists = False
            raise
