"""The node model store's rules (docs/node-store.md, "Materialization"; the contract's §8).

Pure: the node plugin (``gpustack_modelmanager/store``) reads the disk, the clock and the hub,
and asks these functions what to do:

- **Verification** (:func:`new_hasher`, :func:`verify`): every byte of a file is hashed while
  it streams, by the algorithm its manifest line names (``sha256`` for LFS and ModelScope files,
  ``gitsha1``, git's blob id, for other Hugging Face files); a file is kept only when its size
  and digest are the line's.
- **Progress** (:func:`progress_due`): when a download's progress is worth writing to the
  ``NodeModelStore``: the first and the last always, else at most every 30 s and only once it
  has moved to another 5 % step.
- **Backoff** (:func:`retry_delay`): a failed download waits 1 min, doubling to 1 h.
- **Collection** (:func:`collect`): which unreferenced trees go when the store is above its high
  watermark or at the periodic sweep: each unreferenced for at least 10 min, oldest last use
  first, until usage is under the low watermark; a pinned digest never.
- **The record** (:func:`store_status`): the ``NodeModelStoreStatus`` built from the store's
  trees: models sorted by digest and capped at 256, capacity, ``Ready`` and ``CapacityLow``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final, Literal, Protocol

from gpustack_render.api.common import Condition
from gpustack_render.api.nodestore import (
    MAX_MODELS,
    NodeModelStoreStatus,
    StoreCapacity,
    StoredModel,
)
from gpustack_render.weights.manifest import ManifestEntry

# ---- reasons ------------------------------------------------------------------------------------

#: A file's bytes are not what its manifest line says (size or digest); names the file.
DIGEST_MISMATCH: Final = "DigestMismatch"
#: The hub's listing at the commit no longer gives the artifact's manifest digest.
MANIFEST_MISMATCH: Final = "ManifestMismatch"
#: The hub did not answer, or answered something unusable (a 5xx, a network error).
SOURCE_UNAVAILABLE: Final = "SourceUnavailable"
#: The hub refused the repository or the token (401, 403, 404, gated).
ACCESS_DENIED: Final = "AccessDenied"
#: The hub has no such commit any more.
REVISION_NOT_FOUND: Final = "RevisionNotFound"
#: The store's filesystem is full (``ENOSPC``).
INSUFFICIENT_STORAGE: Final = "InsufficientStorage"
#: A source the node plugin cannot fetch (yet).
UNSUPPORTED_SOURCE: Final = "UnsupportedSource"
#: Anything else the download ran into (a local I/O error).
DOWNLOAD_FAILED: Final = "DownloadFailed"

#: Condition types and reasons of the record.
READY: Final = "Ready"
CAPACITY_LOW: Final = "CapacityLow"
STORE_READY: Final = "StoreReady"
STORE_UNAVAILABLE: Final = "StoreUnavailable"
ABOVE_HIGH_WATERMARK: Final = "AboveHighWatermark"
BELOW_HIGH_WATERMARK: Final = "BelowHighWatermark"

# ---- timings ------------------------------------------------------------------------------------

#: A failed download is retried after 1 min, then 2, 4, ... up to 1 h.
FIRST_RETRY_SECONDS: Final = 60
MAX_RETRY_SECONDS: Final = 3600
#: Progress is written at most this often, and only in steps of this many percent.
PROGRESS_INTERVAL_SECONDS: Final = 30
PROGRESS_STEP_PERCENT: Final = 5
#: A tree unreferenced for less than this is never collected.
COLLECT_IDLE_SECONDS: Final = 600
#: The periodic collection sweep.
SWEEP_INTERVAL_SECONDS: Final = 300
#: A partial download nobody has touched for this long is removed by the sweep.
STALE_STAGING_SECONDS: Final = 3600

_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


def digest_problem(digest: str) -> str:
    """Why ``digest`` is not a manifest digest (``""``: it is one)."""
    if _DIGEST.match(digest):
        return ""
    return f"{digest!r} is not a manifest digest (sha256: and 64 lowercase hex digits)"


# ---- verification -------------------------------------------------------------------------------


class Hasher(Protocol):
    def update(self, data: bytes, /) -> None: ...

    def hexdigest(self) -> str: ...


def new_hasher(entry: ManifestEntry) -> Hasher:
    """A hash object for ``entry``'s bytes: SHA-256, or git's blob SHA-1, which hashes the
    header ``blob <size>\\0`` first (so the size the line gives is part of the digest)."""
    if entry.algorithm == "gitsha1":
        hasher = hashlib.sha1(usedforsecurity=False)
        hasher.update(b"blob %d\x00" % entry.size)
        return hasher
    return hashlib.sha256()


def verify(entry: ManifestEntry, size: int, hexdigest: str) -> str:
    """Why the bytes read for ``entry`` (``size`` of them, hashing to ``hexdigest`` by
    :func:`new_hasher`) are not its line's (``""``: they are)."""
    if size != entry.size:
        return (
            f"{entry.path!r}: the hub sent {size} bytes, the manifest says {entry.size}"
            if size < entry.size
            else f"{entry.path!r}: the hub sent more than the manifest's {entry.size} bytes"
        )
    if hexdigest != entry.hexdigest:
        return (
            f"{entry.path!r}: the bytes hash to {entry.algorithm}:{hexdigest}, the manifest says "
            f"{entry.algorithm}:{entry.hexdigest}"
        )
    return ""


def mismatch_message(problem: str, digest: str) -> str:
    """A verification failure, for the record: the tree is refused as a whole."""
    return f"{problem}; the tree {digest} is not published (retried after the backoff)"


# ---- progress -----------------------------------------------------------------------------------


def percent(downloaded: int, size: int | None) -> int:
    """Whole percent done (rounded down; ``0`` when the size is unknown or zero and not done)."""
    if not size:
        return 0
    return min(100, downloaded * 100 // size)


def progress_due(
    *,
    downloaded: int,
    size: int | None,
    now: datetime,
    last_written: datetime | None,
    last_written_bytes: int | None,
) -> bool:
    """Whether a download's progress is written now: the first (nothing written yet) and the
    last (every byte) always; otherwise at least :data:`PROGRESS_INTERVAL_SECONDS` after the
    previous write and only when it crossed into another :data:`PROGRESS_STEP_PERCENT` step."""
    if last_written is None or last_written_bytes is None:
        return True
    if size is not None and downloaded >= size and last_written_bytes < size:
        return True
    if (now - last_written).total_seconds() < PROGRESS_INTERVAL_SECONDS:
        return False
    step = PROGRESS_STEP_PERCENT
    return percent(downloaded, size) // step != percent(last_written_bytes, size) // step


# ---- backoff ------------------------------------------------------------------------------------


def retry_delay(failures: int) -> int:
    """Seconds before a download that failed ``failures`` times in a row is tried again."""
    if failures <= 1:
        return FIRST_RETRY_SECONDS
    return min(MAX_RETRY_SECONDS, FIRST_RETRY_SECONDS << min(failures - 1, 16))


def retry_time(failures: int, now: datetime) -> datetime:
    return now + timedelta(seconds=retry_delay(failures))


#: Failures that come from the request (its token, its revision), not from the digest's bytes.
REQUEST_FAILURES: Final = frozenset({ACCESS_DENIED, REVISION_NOT_FOUND, MANIFEST_MISMATCH})


def asker(namespace: str | None, revision: str) -> str:
    """Who a request is, for :func:`holds_back`: its namespace and the revision it lists."""
    return f"{namespace or ''}@{revision}"


def holds_back(reason: str, failed_for: str, asking: str) -> bool:
    """Whether a digest's failure backoff answers a new request from ``asking`` (an
    :func:`asker`). A failure of the bytes or the hub (a mismatch, an outage, a full disk) holds
    back every request; one that came from the failed request itself (its token refused, its
    revision gone or listing another digest) holds back only requests like it, so another
    namespace's refused token never delays a namespace that may read the repository."""
    return reason not in REQUEST_FAILURES or failed_for == asking


# ---- collection ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Usage:
    """The store's filesystem: its size and the bytes used on it (by anything)."""

    total_bytes: int
    used_bytes: int

    @property
    def used_percent(self) -> int:
        """Whole percent used, rounded up (so 80.1 % is above an 80 % watermark)."""
        if self.total_bytes <= 0:
            return 100
        return min(100, -(-self.used_bytes * 100 // self.total_bytes))


@dataclass(frozen=True)
class TreeState:
    """One digest as the store knows it."""

    digest: str
    state: Literal["Downloading", "Ready", "Failed"]
    size_bytes: int | None = None
    downloaded_bytes: int = 0
    #: Bytes it takes on disk (published or partial).
    stored_bytes: int = 0
    referenced: int = 0
    last_used: datetime | None = None
    reason: str = ""
    message: str = ""
    retry_time: datetime | None = None
    source: str = ""
    pinned: bool = False


def collectable(tree: TreeState, now: datetime) -> bool:
    """Whether ``tree`` may be collected: a published tree, not pinned, unreferenced for at
    least :data:`COLLECT_IDLE_SECONDS` (a tree never used counts as used when published, which
    the store records as its last use)."""
    if tree.state != "Ready" or tree.pinned or tree.referenced > 0:
        return False
    if tree.last_used is None:
        return True
    return (now - tree.last_used).total_seconds() >= COLLECT_IDLE_SECONDS


def above_high(usage: Usage, high_percent: int) -> bool:
    """Whether the store is above its high watermark (collection runs at once)."""
    return usage.used_percent > high_percent


def collect(
    trees: Iterable[TreeState],
    usage: Usage,
    *,
    now: datetime,
    low_percent: int,
) -> list[str]:
    """The digests to remove, in order: collectable trees (:func:`collectable`), the oldest last
    use first (then the digest, for a stable order), until what is left is under the low
    watermark. Nothing when usage is already under it. The caller runs it when the store is
    :func:`above_high` and at each periodic sweep."""
    limit = usage.total_bytes * low_percent / 100
    used = usage.used_bytes
    if used < limit:
        return []
    candidates = sorted(
        (t for t in trees if collectable(t, now)),
        key=lambda t: (t.last_used or datetime.min.replace(tzinfo=now.tzinfo), t.digest),
    )
    victims: list[str] = []
    for tree in candidates:
        if used < limit:
            break
        victims.append(tree.digest)
        used -= tree.stored_bytes
    return victims


def stale_staging(
    staged: Iterable[tuple[str, datetime]], *, running: Iterable[str], now: datetime
) -> list[str]:
    """The partial downloads (digest, last modified) the sweep removes: not running here and
    untouched for :data:`STALE_STAGING_SECONDS` (a failed download's bytes, kept for a retry
    that never came). The caller also skips one another process holds the lock of."""
    busy = set(running)
    return sorted(
        digest
        for digest, modified in staged
        if digest not in busy and (now - modified).total_seconds() >= STALE_STAGING_SECONDS
    )


# ---- the record ---------------------------------------------------------------------------------


def stamp(moment: datetime | None) -> str | None:
    """RFC 3339, to the second, in UTC's ``Z`` spelling."""
    if moment is None:
        return None
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _keep_order(tree: TreeState) -> tuple[int, float]:
    # Which records survive the cap: referenced trees, then downloads and failures (someone
    # waits on them), then the most recently used.
    rank = 0 if tree.referenced else 1 if tree.state != "Ready" else 2
    used = tree.last_used.timestamp() if tree.last_used is not None else 0.0
    return rank, -used


def stored_model(tree: TreeState) -> StoredModel:
    failed = tree.state == "Failed"
    return StoredModel(
        digest=tree.digest,
        state=tree.state,
        size_bytes=tree.size_bytes,
        downloaded_bytes=tree.downloaded_bytes,
        referenced=tree.referenced,
        last_used_time=stamp(tree.last_used),
        reason=tree.reason or None if failed else None,
        message=tree.message or None if failed else None,
        retry_time=stamp(tree.retry_time) if failed else None,
        source=tree.source or None,
    )


def _condition(
    type_: str,
    status: bool,
    reason: str,
    message: str,
    now: datetime,
    previous: Sequence[Condition],
) -> Condition:
    word = "True" if status else "False"
    before = next((c for c in previous if c.type == type_), None)
    moved = before is None or before.status != word or before.reason != reason
    when = stamp(now) if moved or before is None else before.last_transition_time
    return Condition(
        type=type_, status=word, reason=reason, message=message, last_transition_time=when
    )


def store_status(
    trees: Iterable[TreeState],
    usage: Usage | None,
    *,
    stored_bytes: int,
    high_percent: int,
    now: datetime,
    previous: NodeModelStoreStatus | None = None,
    problem: str = "",
) -> NodeModelStoreStatus:
    """The record of a store: at most :data:`MAX_MODELS` models (those kept by
    :func:`_keep_order`), listed by digest; its capacity; ``Ready`` (``False`` with the problem
    when the store cannot be used, e.g. its directory is not writable) and ``CapacityLow``
    (above the high watermark). A condition's ``lastTransitionTime`` moves only when its status
    or reason does (``previous`` is the record last written)."""
    kept = sorted(trees, key=_keep_order)[:MAX_MODELS]
    models = [stored_model(t) for t in sorted(kept, key=lambda t: t.digest)]
    before = list(previous.conditions or ()) if previous is not None else []
    capacity = None
    if usage is not None:
        capacity = StoreCapacity(
            total_bytes=usage.total_bytes,
            stored_bytes=stored_bytes,
            used_percent=usage.used_percent,
        )
    ready = _condition(
        READY,
        not problem,
        STORE_UNAVAILABLE if problem else STORE_READY,
        problem or "the store accepts downloads and mounts",
        now,
        before,
    )
    low = usage is not None and above_high(usage, high_percent)
    shown = f"{usage.used_percent}%" if usage is not None else "unknown"
    capacity_low = _condition(
        CAPACITY_LOW,
        low,
        ABOVE_HIGH_WATERMARK if low else BELOW_HIGH_WATERMARK,
        f"the store's filesystem is {shown} used; the high watermark is {high_percent}%",
        now,
        before,
    )
    return NodeModelStoreStatus(capacity=capacity, models=models, conditions=[ready, capacity_low])


def record_changed(old: NodeModelStoreStatus | None, new: NodeModelStoreStatus) -> bool:
    """Whether ``new`` says something ``old`` does not (a write is needed)."""
    if old is None:
        return True
    return old.model_dump(by_alias=True, exclude_none=True) != new.model_dump(
        by_alias=True, exclude_none=True
    )
