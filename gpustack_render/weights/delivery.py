"""How an artifact's weights reach a deployment's Pods (docs/weights.md, "Delivery").

:func:`weights_of` reads the deployment's ``spec.model.artifactRef`` and answers one of:

- ``None``: the deployment names no artifact (``WeightsReady=True NotApplicable``);
- a :class:`WeightsBlock`: nothing new may be created, with the ``WeightsReady`` reason and a
  message naming the object and the way out; running Pods are never touched because of it;
- a :class:`WeightsPlan`: what the renderer mounts, downloads or passes, and the
  ``bindings.artifact`` input of the pod-spec-hash.

The delivery: a claim source is ``PVC``, an image source ``Image``, a hub source the Setting
``model-artifact-delivery-mode`` (``Engine`` or ``Node``). Blocks are checked in the order of the
``WeightsReady`` table: the artifact, its resolution, the claim, the node driver, then the
patterns and the anchor (both need node delivery).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from gpustack_render.api.artifact import ArtifactSource, ModelArtifact
from gpustack_render.api.modeldeployment import ModelDeployment
from gpustack_render.api.nodestore import NodeModelStore, StoredModel
from gpustack_render.api.storage import (
    CSIDriver,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
)
from gpustack_render.core.settings import Settings
from gpustack_render.schema.lookups import Lookups, StaticLookups
from gpustack_render.weights import nodes as node_stores

Delivery = Literal["PVC", "Engine", "Node", "Image"]

#: Where every delivery but Engine mounts the weights, read-only.
MODEL_PATH = "/var/lib/gpustack/model"
#: Engine delivery: the hub client's cache, an emptyDir sized from the manifest.
CACHE_PATH = "/var/lib/gpustack/model-cache"
MODEL_VOLUME = "gpustack-model"
CACHE_VOLUME = "gpustack-model-cache"
#: The node plugin's CSI driver (issue 34 ships it); Node delivery waits for its CSIDriver.
CSI_DRIVER = "model.csi.gpustack.ai"
#: A claim's storage class with no provisioner: only a pre-bound claim ever binds.
NO_PROVISIONER = "kubernetes.io/no-provisioner"
_SHARED_MODES = frozenset({"ReadOnlyMany", "ReadWriteMany"})

# The WeightsReady reasons (docs/weights.md, "What status says").
NOT_APPLICABLE = "NotApplicable"
ARTIFACT_NOT_FOUND = "ArtifactNotFound"
ARTIFACT_NOT_RESOLVED = "ArtifactNotResolved"
CLAIM_NOT_BOUND = "ClaimNotBound"
ACCESS_MODE_CONFLICT = "AccessModeConflict"
NODE_DELIVERY_UNAVAILABLE = "NodeDeliveryUnavailable"
FILTER_NEEDS_NODE_DELIVERY = "FilterNeedsNodeDelivery"
ANCHOR_NEEDS_NODE_DELIVERY = "AnchorNeedsNodeDelivery"
MATERIALIZING = "Materializing"
MATERIALIZATION_FAILED = "MaterializationFailed"
WEIGHTS_NOT_MOUNTED = "WeightsNotMounted"
DOWNLOADING = "Downloading"
MOUNTED = "Mounted"
DOWNLOADED = "Downloaded"
#: The reasons that create nothing new.
BLOCKING_REASONS = (
    ARTIFACT_NOT_FOUND,
    ARTIFACT_NOT_RESOLVED,
    CLAIM_NOT_BOUND,
    ACCESS_MODE_CONFLICT,
    NODE_DELIVERY_UNAVAILABLE,
    FILTER_NEEDS_NODE_DELIVERY,
    ANCHOR_NEEDS_NODE_DELIVERY,
)


@dataclass(frozen=True)
class WeightsBlock:
    """Nothing new may be created: the ``WeightsReady`` reason and its message."""

    reason: str
    message: str


@dataclass(frozen=True)
class WeightsPlan:
    """What the renderer delivers for a deployment naming an artifact."""

    artifact: ModelArtifact
    delivery: Delivery
    #: ``Settings`` values the renderer writes into the Pod for this delivery.
    settings: Settings
    #: The bound volume's required node affinity (PVC delivery); never a hash input.
    node_affinity: Mapping[str, Any] | None = None
    #: Node delivery: the nodes whose store holds the digest ``Ready`` and is not
    #: ``CapacityLow`` (the Pod's preferred node affinity); never a hash input.
    holding_nodes: tuple[str, ...] = ()
    #: Node delivery: each node's entry for the digest (``WeightsReady`` Materializing).
    node_records: Mapping[str, StoredModel] = field(default_factory=dict)

    @property
    def source(self) -> ArtifactSource:
        return self.artifact.spec.source

    @property
    def hub_kind(self) -> str:
        """``huggingFace``, ``modelScope`` or ``""`` (claim, image)."""
        kind = self.source.kind
        return kind if kind in ("huggingFace", "modelScope") else ""

    @property
    def revision(self) -> str | None:
        """The resolved commit (hub sources; ``None`` for an anchored digest)."""
        resolved = self.artifact.status.resolved
        return resolved.revision if resolved is not None else None

    @property
    def manifest_digest(self) -> str | None:
        resolved = self.artifact.status.resolved
        return resolved.manifest_digest if resolved is not None else None

    @property
    def size_bytes(self) -> int | None:
        resolved = self.artifact.status.resolved
        return resolved.size_bytes if resolved is not None else None

    @property
    def secret_name(self) -> str | None:
        hub = self.source.hub
        return hub.secret_ref.name if hub is not None and hub.secret_ref is not None else None

    @property
    def identity(self) -> str:
        """The KV reuse identity: ``m-`` and 32 hex of the manifest digest (hub sources), or of
        the SHA-256 of the artifact's UID (claim, image)."""
        digest = self.manifest_digest
        if self.hub_kind and digest:
            return "m-" + digest.partition(":")[2][:32]
        return "m-" + hashlib.sha256(self.artifact.metadata.uid.encode("utf-8")).hexdigest()[:32]

    def pod_settings(self) -> dict[str, str]:
        """The Setting values the renderer writes into the Pod (Engine delivery only)."""
        if self.delivery != "Engine":
            return {}
        endpoint = (
            self.settings.huggingface_endpoint
            if self.hub_kind == "huggingFace"
            else modelscope_domain(self.settings.modelscope_endpoint)
        )
        out = {"endpoint": endpoint}
        if self.settings.artifact_https_proxy:
            out["httpsProxy"] = self.settings.artifact_https_proxy
        if self.settings.artifact_no_proxy:
            out["noProxy"] = self.settings.artifact_no_proxy
        return out

    def hash_input(self) -> dict[str, Any]:
        """``bindings.artifact`` of the pod-spec-hash (D28): the source as stored, the commit,
        the digest, the delivery and the Settings written into the Pod."""
        out: dict[str, Any] = {
            "source": self.source.model_dump(mode="json", by_alias=True, exclude_none=True),
            "revision": self.revision,
            "manifestDigest": self.manifest_digest,
            "delivery": self.delivery,
        }
        pod = self.pod_settings()
        if pod:
            out["settings"] = pod
        return out


def modelscope_domain(endpoint: str) -> str:
    """``host[:port]`` of the ModelScope endpoint (``MODELSCOPE_DOMAIN``: the SDK adds
    ``https://`` itself)."""
    _, sep, rest = endpoint.partition("://")
    return (rest if sep else endpoint).split("/", 1)[0]


def delivery_of(artifact: ModelArtifact, settings: Settings) -> Delivery:
    """The delivery of ``artifact``'s source under ``settings``."""
    source = artifact.spec.source
    if source.persistent_volume_claim is not None:
        return "PVC"
    if source.image is not None:
        return "Image"
    return "Node" if settings.artifact_delivery_mode == "Node" else "Engine"


def pod_count(md: ModelDeployment) -> int:
    """How many Pods of ``md`` would mount the weights at once (every role's replicas × size)."""
    return sum(role.replicas * role.size for role in md.spec.roles)


def weights_of(
    md: ModelDeployment, *, lookups: Lookups, settings: Settings
) -> WeightsPlan | WeightsBlock | None:
    """The deployment's weights: ``None`` without ``artifactRef``, else a block or a plan."""
    ref = md.spec.model.artifact_ref
    if ref is None:
        return None
    namespace = md.metadata.namespace or "default"
    artifact = lookups.get(ModelArtifact, namespace, ref.name)
    if artifact is None:
        return WeightsBlock(
            ARTIFACT_NOT_FOUND,
            f"ModelArtifact {namespace}/{ref.name} (spec.model.artifactRef) does not exist; "
            "create it, or name another in this namespace; no Pod is created until it resolves",
        )
    resolved = artifact.condition("Resolved")
    if resolved is None or resolved.status != "True":
        why = (
            f"{resolved.reason}: {resolved.message}"
            if resolved and resolved.reason
            else ("it has not resolved yet")
        )
        return WeightsBlock(
            ARTIFACT_NOT_RESOLVED,
            f"ModelArtifact {namespace}/{ref.name} is not resolved ({why}); no Pod is created "
            "until it resolves (kubectl describe mart " + ref.name + ")",
        )
    delivery = delivery_of(artifact, settings)
    affinity: Mapping[str, Any] | None = None
    if delivery == "PVC":
        claim_block, affinity = _claim(md, artifact, namespace=namespace, lookups=lookups)
        if claim_block is not None:
            return claim_block
    if delivery == "Node" and lookups.get(CSIDriver, "", CSI_DRIVER) is None:
        return WeightsBlock(
            NODE_DELIVERY_UNAVAILABLE,
            f"the Setting model-artifact-delivery-mode is Node but the CSIDriver {CSI_DRIVER} "
            "does not exist: install the node plugin, or set the delivery mode to Engine; "
            "running Pods are not touched",
        )
    spec = artifact.spec
    if delivery == "Engine" and (spec.allow_patterns or spec.ignore_patterns):
        return WeightsBlock(
            FILTER_NEEDS_NODE_DELIVERY,
            f"ModelArtifact {namespace}/{ref.name} filters files (spec.allowPatterns/"
            "spec.ignorePatterns), which only Node delivery honours: the engine downloads a "
            "whole commit; set model-artifact-delivery-mode to Node, or use an artifact without "
            "patterns",
        )
    if delivery == "Engine" and spec.expected_digest:
        return WeightsBlock(
            ANCHOR_NEEDS_NODE_DELIVERY,
            f"ModelArtifact {namespace}/{ref.name} pins spec.expectedDigest, which only Node "
            "delivery verifies: the engine does not check what it downloads; set "
            "model-artifact-delivery-mode to Node, or use an artifact without expectedDigest",
        )
    holding: tuple[str, ...] = ()
    records: dict[str, StoredModel] = {}
    digest = artifact.status.resolved.manifest_digest if artifact.status.resolved else None
    if delivery == "Node" and digest:
        stores = node_stores_in(lookups)
        holding = node_stores.holding_nodes(stores, digest)
        records = node_stores.records_by_node(stores, digest)
    return WeightsPlan(
        artifact=artifact,
        delivery=delivery,
        settings=settings,
        node_affinity=affinity,
        holding_nodes=holding,
        node_records=records,
    )


def node_stores_in(lookups: Lookups) -> list[NodeModelStore]:
    """The ``NodeModelStore`` records a render was given: every one held by in-memory lookups
    (the controller's input graph, the command line's files); none through any other (the
    webhook never places Pods)."""
    return lookups.all_of(NodeModelStore) if isinstance(lookups, StaticLookups) else []


def _claim(
    md: ModelDeployment, artifact: ModelArtifact, *, namespace: str, lookups: Lookups
) -> tuple[WeightsBlock | None, Mapping[str, Any] | None]:
    source = artifact.spec.source.persistent_volume_claim
    assert source is not None
    name = source.claim_name
    claim = lookups.get(PersistentVolumeClaim, namespace, name)
    where = f"PersistentVolumeClaim {namespace}/{name}"
    if claim is None:
        return (
            WeightsBlock(
                ARTIFACT_NOT_RESOLVED,
                f"{where} (ModelArtifact {artifact.name} spec.source.persistentVolumeClaim) "
                "does not exist; create it; no Pod is created until it does",
            ),
            None,
        )
    affinity: Mapping[str, Any] | None = None
    if claim.bound:
        volume = lookups.get(PersistentVolume, "", claim.spec.volume_name)
        if volume is not None and volume.spec.node_affinity is not None:
            affinity = volume.spec.node_affinity.required
    else:
        cls = (
            lookups.get(StorageClass, "", claim.spec.storage_class_name)
            if claim.spec.storage_class_name
            else None
        )
        waits = (
            cls is not None
            and cls.volume_binding_mode == "WaitForFirstConsumer"
            and cls.provisioner != NO_PROVISIONER
        )
        if not waits:
            return (
                WeightsBlock(
                    CLAIM_NOT_BOUND,
                    f"{where} is {claim.status.phase or 'Pending'} and nothing will bind it "
                    "for a Pod: bind the claim to a volume (spec.volumeName), or use a storage "
                    "class with a provisioner and volumeBindingMode WaitForFirstConsumer",
                ),
                None,
            )
    count = pod_count(md)
    if count > 1 and not (_SHARED_MODES & set(claim.modes)):
        modes = ", ".join(claim.modes) or "none"
        return (
            WeightsBlock(
                ACCESS_MODE_CONFLICT,
                f"{where} has access modes {modes}, but {count} Pods would mount it: "
                "give the claim ReadOnlyMany or ReadWriteMany, or run one Pod",
            ),
            None,
        )
    return None, affinity
