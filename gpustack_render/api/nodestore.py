"""``NodeModelStore``: one node's model store, as its node plugin reports it (docs/node-store.md).

Cluster-scoped, one per node, named after the node. It carries status only (D28): the node
plugin ``model-manager`` writes which manifest digests the node holds, is downloading or failed
to download, and how full its store is. The watermarks and download limits are Settings, not
fields here. The controller reads these records for three things: a ``ModelArtifact``'s
``status.nodes``, the ``Materializing``/``MaterializationFailed`` reasons of ``WeightsReady``,
and the node preference of a node-delivered Pod.
"""

# Annotations are objects, not strings: see the note in common.py.

from typing import Annotated, Literal

from pydantic import Field

from gpustack_render.api.common import Condition, Int32, Int64, OpenModel, list_map
from gpustack_render.api.inputs import InputObject

#: At most this many digests are listed in one store's status.
MAX_MODELS = 256

ModelState = Literal["Downloading", "Ready", "Failed"]
#: The states, in the order a digest goes through them.
MODEL_STATES: tuple[str, ...] = ("Downloading", "Ready", "Failed")


class StoreCapacity(OpenModel):
    """How full the store's filesystem is."""

    total_bytes: Annotated[Int64 | None, Field(description="The store's filesystem size.")] = None
    stored_bytes: Annotated[
        Int64 | None, Field(description="Bytes held by published and partial trees.")
    ] = None
    used_percent: Annotated[
        Int32 | None, Field(description="The filesystem's used share, in whole percent.")
    ] = None


class StoredModel(OpenModel):
    """One manifest digest on the node."""

    digest: Annotated[
        str, Field(description="The manifest digest (sha256:<64 hex>), the tree's identity.")
    ]
    state: Annotated[
        ModelState,
        Field(description="Downloading, Ready (verified and published) or Failed."),
    ]
    size_bytes: Annotated[Int64 | None, Field(description="Bytes in the manifest.")] = None
    downloaded_bytes: Annotated[
        Int64 | None,
        Field(description="Bytes downloaded and verified so far (written on thresholds)."),
    ] = None
    referenced: Annotated[
        Int32 | None, Field(description="Volumes currently published from this tree.")
    ] = None
    last_used_time: Annotated[
        str | None, Field(description="When a volume was last published or unpublished.")
    ] = None
    reason: Annotated[str | None, Field(description="Why it failed (CamelCase).")] = None
    message: Annotated[str | None, Field(description="The failure, for humans.")] = None
    retry_time: Annotated[
        str | None, Field(description="When a failed download is tried again (RFC 3339).")
    ] = None
    source: Annotated[
        str | None, Field(description="Where it came from: the hub, repository and commit.")
    ] = None


class NodeModelStoreStatus(OpenModel):
    """Written by the node plugin."""

    observed_generation: Annotated[
        int | None, Field(description="The generation this status was written for.")
    ] = None
    capacity: Annotated[StoreCapacity | None, Field(description="The store's filesystem use.")] = (
        None
    )
    models: Annotated[
        list[StoredModel] | None,
        Field(
            max_length=MAX_MODELS,
            json_schema_extra=list_map("digest"),
            description="The digests the node holds or is fetching.",
        ),
    ] = None
    conditions: Annotated[
        list[Condition] | None,
        Field(json_schema_extra=list_map("type"), description="Ready and CapacityLow."),
    ] = None


class NodeModelStore(InputObject):
    """One node's model store (status only; the node plugin writes it)."""

    kind: Literal["NodeModelStore"] = "NodeModelStore"
    status: Annotated[
        NodeModelStoreStatus,
        Field(default_factory=NodeModelStoreStatus, description="What the node holds."),
    ]

    def model(self, digest: str) -> StoredModel | None:
        """The record of ``digest`` on this node, if listed."""
        for entry in self.status.models or ():
            if entry.digest == digest:
                return entry
        return None
