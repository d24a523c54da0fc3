"""The input graph of one render: which stored objects a ModelDeployment's render reads.

The controller does not know which objects a deployment names; this module does. It says what
to read next (:meth:`InputGraph.pending`): every role's InstanceType and the KV-cache Binding
first, then the Binding's pool, then the pool's first backend (the Binding → Pool → Backend
walk). The shell fetches each (from a cache or the API server) and hands the raw object back
(:meth:`InputGraph.answer`); the graph decodes it with the same policy as the webhook
(:func:`~gpustack_render.schema.lookups.decode_stored`: a stored object that does not decode is
a failed read, never an absent one) and follows its references. :meth:`InputGraph.lookups` is
then the :class:`~gpustack_render.schema.lookups.StaticLookups` the render reads through.

A stored object that does not decode (one nested past the bound of
:mod:`gpustack_render.core.nesting`, say) is one unreadable object: its read fails for the
render, it is listed in :attr:`InputGraph.unreadable` (the shell logs it once per stored version
and records :meth:`Unreadable.event` on the deployment), and a Binding that does not decode is
never claimed.

What a deployment reads is decided by two functions, :func:`deployment_reads` (the first round)
and :func:`references` (what a decoded input leads to); the graph of one render and the
controller's :class:`~gpustack_render.reconcile.inputindex.InputIndex` (which deployments an
input event concerns) both follow them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from gpustack_render.api.artifact import ModelArtifact
from gpustack_render.api.inputs import (
    InputObject,
    InstanceType,
    KVCacheBackend,
    KVCachePool,
    KVCachePoolBinding,
)
from gpustack_render.api.modeldeployment import ModelDeployment
from gpustack_render.api.nodestore import NodeModelStore
from gpustack_render.api.storage import (
    CSIDriver,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
)
from gpustack_render.core import jsonview
from gpustack_render.reconcile import events
from gpustack_render.schema.lookups import LookupFailed, StaticLookups, decode_stored
from gpustack_render.weights.delivery import CSI_DRIVER


@dataclass(frozen=True)
class Read:
    """One stored object the render needs: its kind, namespace ("" if cluster-scoped), name."""

    kind: type[InputObject]
    namespace: str
    name: str

    @classmethod
    def of(cls, kind: type[InputObject], obj: Mapping[str, Any]) -> Read:
        """The read that answers with the stored object ``obj`` of ``kind``."""
        meta = jsonview.view(obj.get("metadata"))
        return cls(kind, str(meta.get("namespace") or ""), str(meta.get("name") or ""))


def deployment_reads(md: ModelDeployment) -> list[Read]:
    """What the render of ``md`` reads first: every role's InstanceType, then the KV-cache
    Binding its ``poolRef`` names (in its namespace), then the ModelArtifact its
    ``model.artifactRef`` names (in its namespace), each once."""
    reads: list[Read] = []
    for role in md.spec.roles:
        reads.append(Read(InstanceType, "", role.instance_type))
    if md.spec.kv_cache is not None and md.spec.kv_cache.pool_ref.name:
        reads.append(
            Read(KVCachePoolBinding, md.metadata.namespace, md.spec.kv_cache.pool_ref.name)
        )
    if md.spec.model.artifact_ref is not None:
        reads.append(Read(ModelArtifact, md.metadata.namespace, md.spec.model.artifact_ref.name))
    return list(dict.fromkeys(reads))


def references(obj: InputObject) -> list[Read]:
    """What the render reads next through the decoded input ``obj``: a Binding's pool, a pool's
    first backend (the Binding → Pool → Backend walk); a claim-sourced artifact's claim, a bound
    claim's volume and a claim's storage class (claim placement), a hub-sourced artifact's
    CSIDriver (whether node delivery is available); nothing for another kind."""
    if isinstance(obj, KVCachePoolBinding):
        return [Read(KVCachePool, "", obj.spec.pool_ref.name)]
    if isinstance(obj, KVCachePool) and obj.spec.backends:
        return [Read(KVCacheBackend, "", obj.spec.backends[0])]
    if isinstance(obj, ModelArtifact):
        claim = obj.spec.source.persistent_volume_claim
        if claim is not None:
            return [Read(PersistentVolumeClaim, obj.metadata.namespace, claim.claim_name)]
        if obj.spec.source.hub is not None:
            return [Read(CSIDriver, "", CSI_DRIVER)]
        return []
    if isinstance(obj, PersistentVolumeClaim):
        out: list[Read] = []
        if obj.spec.volume_name:
            out.append(Read(PersistentVolume, "", obj.spec.volume_name))
        if obj.spec.storage_class_name:
            out.append(Read(StorageClass, "", obj.spec.storage_class_name))
        return out
    return []


@dataclass(frozen=True)
class Unreadable:
    """A stored object that was read but does not decode."""

    read: Read
    failure: LookupFailed
    #: ``metadata.resourceVersion`` of the stored object ("" when it has none).
    resource_version: str

    def event(self) -> events.Event:
        """The ``InputUnreadable`` Event for the deployment that reads it."""
        return events.input_unreadable(self.failure)


class InputGraph:
    """The reads of one render of ``md``, answered one round at a time."""

    def __init__(self, md: ModelDeployment) -> None:
        self.namespace = md.metadata.namespace
        self.lookups = StaticLookups()
        #: The Binding as stored (its claim is written back), once read.
        self.raw_binding: dict[str, Any] | None = None
        #: The objects read that do not decode, in the order they were read.
        self.unreadable: list[Unreadable] = []
        self._answered: set[Read] = set()
        self._wanted: list[Read] = []
        for read in deployment_reads(md):
            self._want(read)

    def _want(self, read: Read) -> None:
        if read not in self._wanted:
            self._wanted.append(read)

    def node_store_digests(self) -> list[str]:
        """The manifest digests whose ``NodeModelStore`` records the render reads: each
        resolved hub-sourced artifact's (node delivery prefers the nodes holding it and reads a
        Pod's node state). Which nodes list a digest is not a read by name: the shell answers
        with every record listing it (:meth:`answer_node_stores`)."""
        out: list[str] = []
        for artifact in self.lookups.artifacts.values():
            resolved = artifact.status.resolved
            if artifact.spec.source.hub is None or resolved is None:
                continue
            if resolved.manifest_digest and resolved.manifest_digest not in out:
                out.append(resolved.manifest_digest)
        return out

    def answer_node_stores(self, raws: Iterable[Mapping[str, Any]]) -> None:
        """Record the stored ``NodeModelStore`` records listing :meth:`node_store_digests`. One
        that does not decode is unreadable (listed in :attr:`unreadable`) and counts as
        absent: a node's record never fails a render."""
        for raw in raws:
            read = Read.of(NodeModelStore, raw)
            if read in self._answered:
                continue
            self._answered.add(read)
            try:
                obj = decode_stored(NodeModelStore, raw, name=read.name)
            except LookupFailed as exc:
                metadata = raw.get("metadata")
                version = metadata.get("resourceVersion") if isinstance(metadata, Mapping) else None
                self.unreadable.append(Unreadable(read, exc, str(version or "")))
                continue
            self.lookups.others[(NodeModelStore.__name__, "", read.name)] = obj

    def pending(self) -> list[Read]:
        """The reads still to answer, in the order they were found."""
        return [r for r in self._wanted if r not in self._answered]

    def answer(self, read: Read, raw: Mapping[str, Any] | None) -> None:
        """Record what ``read`` returned (``None``: not found) and follow its references."""
        self._answered.add(read)
        if raw is None:
            return
        try:
            obj = decode_stored(read.kind, raw, name=read.name, namespace=read.namespace)
        except LookupFailed as exc:
            self.lookups.failures[(read.kind.__name__, read.namespace, read.name)] = exc
            metadata = raw.get("metadata")
            version = metadata.get("resourceVersion") if isinstance(metadata, Mapping) else None
            self.unreadable.append(Unreadable(read, exc, str(version or "")))
            return  # never claim an object that cannot be read
        if read.kind is KVCachePoolBinding:
            self.raw_binding = dict(raw)
        if isinstance(obj, InstanceType):
            self.lookups.instance_types[read.name] = obj
        elif isinstance(obj, KVCachePoolBinding):
            self.lookups.bindings[(read.namespace, read.name)] = obj
        elif isinstance(obj, KVCachePool):
            self.lookups.pools[read.name] = obj
        elif isinstance(obj, KVCacheBackend):
            self.lookups.backends[read.name] = obj
        elif isinstance(obj, ModelArtifact):
            self.lookups.artifacts[(read.namespace, read.name)] = obj
        else:
            self.lookups.others[(read.kind.__name__, read.namespace, read.name)] = obj
        for follow in references(obj):
            self._want(follow)
