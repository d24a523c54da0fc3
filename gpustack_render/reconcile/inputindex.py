"""The input index: which ModelDeployments read each input object, kept up to date from the
watch events (docs/contract/controller.md §2).

An InstanceType, a KVCachePoolBinding, a KVCachePool or a KVCacheBackend that changes concerns
the deployments whose render reads it, directly (a role's InstanceType, the Binding ``poolRef``
names) or through the Binding → Pool → Backend walk. What a render reads is decided once, in
:mod:`gpustack_render.reconcile.inputs` (:func:`~gpustack_render.reconcile.inputs.deployment_reads`
and :func:`~gpustack_render.reconcile.inputs.references`, which the render's own
:class:`~gpustack_render.reconcile.inputs.InputGraph` follows); this index keeps their answers
as edges so that no event walks every deployment:

- a deployment event replaces that deployment's first-round reads (it is decoded again only when
  its ``spec`` changed);
- an input event replaces the references of that one object (a Binding's pool, a pool's first
  backend), decoded with the webhook's policy: an object that does not decode leads nowhere;
- :meth:`InputIndex.readers` walks the edges backwards from the changed object, so its cost is
  the number of objects that lead to it, never the number of deployments.

Work-queue keys are ``<namespace>/<name>``. Nothing here performs I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpustack_render.api.inputs import InputObject
from gpustack_render.reconcile.edges import Edges
from gpustack_render.reconcile.inputs import Read, deployment_reads, references
from gpustack_render.schema.decoding import decode_deployment
from gpustack_render.schema.lookups import LookupFailed, decode_stored


class InputIndex:
    """Which deployments read each input object, as edges updated one event at a time."""

    def __init__(self) -> None:
        #: deployment key → what its render reads first (its InstanceTypes and Binding).
        self._reads: Edges[str, Read] = Edges()
        #: deployment key → the ``spec`` those reads were taken from.
        self._specs: dict[str, Any] = {}
        #: input → the inputs the render reads through it (a Binding's pool, a pool's backend).
        self._refs: Edges[Read, Read] = Edges()

    # ---- deployments ---------------------------------------------------------------------------

    def deployment_changed(self, key: str, raw: Mapping[str, Any]) -> None:
        """Record what the stored deployment ``raw`` (work-queue ``key``) reads. A deployment
        that does not decode reads nothing: it cannot render whatever its inputs say."""
        spec = raw.get("spec")
        if key in self._specs and self._specs[key] == spec:
            return  # metadata or status only: the reads are the same
        md, _ = decode_deployment(dict(raw))
        if md is None:
            self._specs.pop(key, None)
            self._reads.set(key, ())
            return
        self._specs[key] = spec
        self._reads.set(key, deployment_reads(md))

    def deployment_deleted(self, key: str) -> None:
        """Forget the deployment ``key``."""
        self._specs.pop(key, None)
        self._reads.set(key, ())

    def reads_of(self, key: str) -> tuple[Read, ...]:
        """What the deployment ``key`` reads first, as last recorded."""
        return self._reads.targets(key)

    # ---- inputs ----------------------------------------------------------------------------------

    def input_changed(self, kind: type[InputObject], raw: Mapping[str, Any]) -> list[str]:
        """Record the stored input ``raw`` of ``kind``; the keys of the deployments that read
        it, sorted."""
        read = Read.of(kind, raw)
        try:
            obj = decode_stored(kind, raw, name=read.name, namespace=read.namespace)
        except LookupFailed:
            self._refs.set(read, ())  # never followed, as the render never follows it
        else:
            self._refs.set(read, references(obj))
        return self.readers(read)

    def input_deleted(self, kind: type[InputObject], raw: Mapping[str, Any]) -> list[str]:
        """Forget the input ``raw`` of ``kind``; the keys of the deployments that read it (they
        now find it missing), sorted."""
        read = Read.of(kind, raw)
        self._refs.set(read, ())
        return self.readers(read)

    def readers(self, read: Read) -> list[str]:
        """The keys of the deployments whose render reads ``read``, directly or through the
        inputs that lead to it, sorted."""
        keys = set(self._reads.keys_to(read))
        seen = {read}
        frontier = [read]
        while frontier:
            for referrer in self._refs.keys_to(frontier.pop()):
                if referrer not in seen:
                    seen.add(referrer)
                    keys |= self._reads.keys_to(referrer)
                    frontier.append(referrer)
        return sorted(keys)
