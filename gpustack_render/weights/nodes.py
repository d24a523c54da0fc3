"""What the node stores say about one manifest digest (docs/node-store.md, "The controller's
side").

Every ``NodeModelStore`` (one per node, written by the node plugin) lists the digests its node
holds, is downloading or failed to download. The controller reads them for three things, all
decided here:

- :func:`aggregate`: a ``ModelArtifact``'s ``status.nodes`` (how many nodes list the digest in
  each state; the downloading nodes' mean progress, rounded down to a multiple of 5, absent
  when none downloads), and :func:`nodes_write_in`, which keeps that field to one write every
  :data:`NODES_WRITE_SECONDS`;
- :func:`holding_nodes`: the nodes a node-delivered Pod prefers (the digest ``Ready`` and the
  store not ``CapacityLow``);
- :func:`pod_store_state`: a node-delivered Pod's node state behind ``WeightsReady``
  ``Materializing`` / ``MaterializationFailed``.

:func:`listed_digests`, :func:`changed_digests` and :func:`artifact_digest` read stored objects
leniently for the controller's indexes and requeues. A record whose node name is empty or whose
entry names no digest counts for nothing. The progress at full precision is the records
themselves (docs/node-store.md shows the kubectl view).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Final

from gpustack_render.api.artifact import ArtifactNodes
from gpustack_render.api.nodestore import NodeModelStore, StoredModel

#: ``status.nodes`` is written at most once in this many seconds per artifact.
NODES_WRITE_SECONDS: Final = 30.0
#: The store condition that takes a node out of the preference.
CAPACITY_LOW: Final = "CapacityLow"
#: The weight of the preferred node-affinity term (the largest the API accepts).
PREFERENCE_WEIGHT: Final = 100


def record_of(store: NodeModelStore, digest: str) -> StoredModel | None:
    """The entry of ``digest`` in ``store`` (the first, should a writer repeat one)."""
    return store.model(digest) if digest else None


def capacity_low(store: NodeModelStore) -> bool:
    """The store says ``CapacityLow=True``: above its high watermark, it takes no new tree."""
    return any(c.type == CAPACITY_LOW and c.status == "True" for c in store.status.conditions or ())


def share(entry: StoredModel) -> Fraction:
    """One entry's progress, exactly, between 0 and 1 (``Ready`` is 1, an unknown size 0)."""
    if entry.state == "Ready":
        return Fraction(1)
    size = entry.size_bytes or 0
    done = entry.downloaded_bytes or 0
    if size <= 0:
        return Fraction(0)
    return max(Fraction(0), min(Fraction(1), Fraction(done, size)))


def percent(entry: StoredModel) -> int:
    """One entry's progress in whole percent, rounded down."""
    return math.floor(share(entry) * 100)


def aggregate(stores: Iterable[NodeModelStore], digest: str) -> ArtifactNodes:
    """``status.nodes`` of the artifact whose manifest digest is ``digest``."""
    ready = downloading = failed = 0
    shares: list[Fraction] = []
    for store in stores:
        if not store.name:
            continue
        entry = record_of(store, digest)
        if entry is None:
            continue
        if entry.state == "Ready":
            ready += 1
        elif entry.state == "Downloading":
            downloading += 1
            shares.append(share(entry))
        elif entry.state == "Failed":
            failed += 1
    mean = None
    if shares:  # the exact mean, in percent, rounded down to a multiple of 5
        mean = math.floor(sum(shares) * 100 / len(shares)) // 5 * 5
    return ArtifactNodes(
        ready=ready, downloading=downloading, failed=failed, downloading_percent=mean
    )


def nodes_equal(stored: ArtifactNodes | None, wanted: ArtifactNodes) -> bool:
    """Whether the stored ``status.nodes`` already says ``wanted`` (absent is all zeros)."""
    return (stored or ArtifactNodes()) == wanted


def nodes_write_in(
    stored: ArtifactNodes | None, wanted: ArtifactNodes, *, since_last_write: float | None
) -> float | None:
    """When ``status.nodes`` may be written: ``None`` (nothing to write), ``0`` (now) or the
    seconds left of the :data:`NODES_WRITE_SECONDS` since the last write (``since_last_write``
    ``None``: never written by this process)."""
    if nodes_equal(stored, wanted):
        return None
    if since_last_write is None or since_last_write >= NODES_WRITE_SECONDS:
        return 0.0
    return NODES_WRITE_SECONDS - max(0.0, since_last_write)


def holding_nodes(stores: Iterable[NodeModelStore], digest: str) -> tuple[str, ...]:
    """The nodes that hold ``digest`` verified (``Ready``) and have room (not
    ``CapacityLow``), sorted: a node-delivered Pod's preference."""
    out = set()
    for store in stores:
        entry = record_of(store, digest)
        ready = entry is not None and entry.state == "Ready"
        if store.name and ready and not capacity_low(store):
            out.add(store.name)
    return tuple(sorted(out))


def node_preference(nodes: Iterable[str]) -> dict[str, Any] | None:
    """The preferred node-affinity term for ``nodes`` (``None`` when there is none)."""
    names = sorted(set(nodes))
    if not names:
        return None
    return {
        "weight": PREFERENCE_WEIGHT,
        "preference": {
            "matchFields": [{"key": "metadata.name", "operator": "In", "values": names}]
        },
    }


@dataclass(frozen=True)
class NodeRecord:
    """One node's entry for a digest."""

    node: str
    entry: StoredModel

    @property
    def percent(self) -> int:
        return percent(self.entry)

    def describe(self) -> str:
        """The node's state for a message: the node, the state, its reason and retry time, or
        its progress."""
        entry = self.entry
        if entry.state == "Failed":
            text = f"node {self.node} failed with {entry.reason or 'an unknown reason'}"
            if entry.message:
                text += f" ({entry.message})"
            if entry.retry_time:
                text += f" and retries at {entry.retry_time}"
            return text
        if entry.state == "Downloading":
            size = f" of {entry.size_bytes}" if entry.size_bytes is not None else ""
            return (
                f"node {self.node} has {entry.downloaded_bytes or 0}{size} bytes ({self.percent} %)"
            )
        return f"node {self.node}: {entry.state}"


def records_by_node(stores: Iterable[NodeModelStore], digest: str) -> dict[str, StoredModel]:
    """Each node's entry for ``digest``, by node name (nodes that do not list it are left
    out)."""
    out: dict[str, StoredModel] = {}
    for store in stores:
        entry = record_of(store, digest)
        if store.name and entry is not None:
            out[store.name] = entry
    return out


def pod_store_state(records: Mapping[str, StoredModel], node: str) -> NodeRecord | None:
    """The entry of the Pod's node (``node``: ``spec.nodeName``; empty before scheduling) for
    the digest, if it lists it."""
    if not node:
        return None
    entry = records.get(node)
    return NodeRecord(node, entry) if entry is not None else None


def listed_digests(raw: Mapping[str, Any]) -> list[str]:
    """The digests a stored ``NodeModelStore`` lists, read leniently (for an index: an entry
    that is not an object or names no digest is skipped)."""
    status = raw.get("status")
    models = status.get("models") if isinstance(status, Mapping) else None
    if not isinstance(models, list):
        return []
    out: list[str] = []
    for entry in models:
        if isinstance(entry, Mapping):
            digest = entry.get("digest")
            if isinstance(digest, str) and digest and digest not in out:
                out.append(digest)
    return out


def digest_view(raw: Mapping[str, Any] | None) -> dict[str, tuple[Any, ...]]:
    """What a stored record says per digest that matters to deployments (state, reason, retry
    time, and the store's ``CapacityLow``), leniently: two records with equal views need no
    deployment to look again (progress alone changes only ``status.nodes``)."""
    if raw is None:
        return {}
    status = raw.get("status")
    if not isinstance(status, Mapping):
        return {}
    conditions = status.get("conditions")
    low = any(
        isinstance(c, Mapping) and c.get("type") == CAPACITY_LOW and c.get("status") == "True"
        for c in (conditions if isinstance(conditions, list) else ())
    )
    out: dict[str, tuple[Any, ...]] = {}
    models = status.get("models")
    for entry in models if isinstance(models, list) else ():
        if isinstance(entry, Mapping) and isinstance(entry.get("digest"), str):
            out[entry["digest"]] = (
                entry.get("state"),
                entry.get("reason"),
                entry.get("message"),
                entry.get("retryTime"),
                low,
            )
    return out


def changed_digests(
    old: Mapping[str, Any] | None, new: Mapping[str, Any] | None
) -> tuple[set[str], set[str]]:
    """Between two versions of one record: the digests whose view (:func:`digest_view`)
    changed (deployments look again), and every digest whose entry changed at all (artifacts
    recount ``status.nodes``)."""
    before, after = digest_view(old), digest_view(new)
    viewed = {d for d in before.keys() | after.keys() if before.get(d) != after.get(d)}

    def entries(raw: Mapping[str, Any] | None) -> dict[str, Any]:
        status = raw.get("status") if raw is not None else None
        models = status.get("models") if isinstance(status, Mapping) else None
        return {
            e["digest"]: dict(e)
            for e in (models if isinstance(models, list) else ())
            if isinstance(e, Mapping) and isinstance(e.get("digest"), str)
        }

    old_entries, new_entries = entries(old), entries(new)
    counted = {
        d
        for d in old_entries.keys() | new_entries.keys()
        if old_entries.get(d) != new_entries.get(d)
    }
    return viewed, counted | viewed


def artifact_digest(raw: Mapping[str, Any]) -> list[str]:
    """The manifest digest of a stored hub-sourced ``ModelArtifact`` (for an index; none for a
    claim or an image, or before it resolves), read leniently."""
    spec = raw.get("spec")
    source = spec.get("source") if isinstance(spec, Mapping) else None
    if not isinstance(source, Mapping) or not (
        isinstance(source.get("huggingFace"), Mapping)
        or isinstance(source.get("modelScope"), Mapping)
    ):
        return []
    status = raw.get("status")
    resolved = status.get("resolved") if isinstance(status, Mapping) else None
    digest = resolved.get("manifestDigest") if isinstance(resolved, Mapping) else None
    return [digest] if isinstance(digest, str) and digest else []
