"""The node's model store: one verified tree per manifest digest (docs/node-store.md,
"Materialization").

:meth:`ModelStore.acquire` never waits for a download: a published tree is answered at once,
else the digest's one download starts (or is joined) and the answer is ``Pending``; a failed
download answers ``Failed`` until its backoff ends. The CSI node service turns those answers
into a mount, ``ABORTED`` (kubelet retries) or an error. What to collect, when to write
progress, the backoff and the record are rules of ``gpustack_render.weights.store``.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import aiohttp

from gpustack_render.api.nodestore import NodeModelStoreStatus
from gpustack_render.core.settings import Settings
from gpustack_render.weights import mounts as access
from gpustack_render.weights import store as rules
from gpustack_render.weights.manifest import HEADER, Manifest, ManifestEntry
from gpustack_render.weights.resolution import HubProblem

from .fetch import FileProblem, HubClient, fetch_file, listing, proxy_for
from .layout import MARKER, TREE, Layout, disk_bytes, fsync_dir
from .types import (
    RecordWriter,
    TreeAnswer,
    TreeDenied,
    TreeFailed,
    TreePending,
    TreeReady,
    TreeRequest,
)

log = logging.getLogger(__name__)

#: After a failed record write, the next try waits this long.
RECORD_RETRY_SECONDS = 10.0
#: How often a lock another process holds is tried again.
LOCK_POLL_SECONDS = 0.5
#: The longest a listing that proves a namespace's access may take (kubelet gives a publish 2 min).
ACCESS_LISTING_SECONDS = 30.0


def _utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass
class _Tree:
    """What the store knows of one digest."""

    digest: str
    state: Literal["Downloading", "Ready", "Failed"]
    size_bytes: int | None = None
    #: Bytes of the tree verified so far (on disk, this attempt).
    downloaded: int = 0
    #: The progress last put in the record, and when.
    reported_bytes: int | None = None
    reported_at: datetime | None = None
    last_used: datetime | None = None
    reason: str = ""
    message: str = ""
    retry_time: datetime | None = None
    failures: int = 0
    #: Who the failed download was for (``rules.asker``): a failure of that request's own
    #: (``rules.REQUEST_FAILURES``) holds back only requests like it.
    failed_for: str = ""
    source: str = ""
    #: Bytes that came over the network for this digest, since the store started.
    fetched: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


def _manifest_size(marker: Path) -> int | None:
    """The size total of a published tree's marker (its manifest text)."""
    try:
        lines = marker.read_text("utf-8").splitlines()
    except OSError:
        return None
    if not lines or lines[0] != HEADER:
        return None
    total = 0
    for line in lines[1:]:
        parts = line.split(" ", 2)
        if len(parts) == 3 and parts[1].isdigit():
            total += int(parts[1])
    return total


def _backoff(tree: _Tree | None, now: datetime) -> TreeFailed | None:
    """The failure ``tree`` answers while its backoff runs (``None``: it may be tried)."""
    if tree is None or tree.state != "Failed" or tree.retry_time is None:
        return None
    if now < tree.retry_time:
        return TreeFailed(tree.reason, tree.message, tree.retry_time)
    return None


async def _lock(fd: int) -> None:
    """Take the digest's lock; another process on this root (a plugin being replaced) may hold
    it, so wait for it without blocking the loop (and stay cancellable)."""
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            await asyncio.sleep(LOCK_POLL_SECONDS)


def _parse_time(text: object) -> datetime | None:
    if not isinstance(text, str):
        return None
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return None


def _seal(staged: Path, manifest: Manifest) -> None:
    """Make a fully verified staged tree durable: files read-only and synced (each was synced
    as it finished), every directory synced, the marker written and synced last."""
    tree = staged / TREE
    tree.mkdir(parents=True, exist_ok=True)
    for entry in manifest.entries:
        os.chmod(tree / entry.path, 0o444)
    for folder, _dirs, _files in os.walk(tree, topdown=False):
        fsync_dir(Path(folder))
    marker = staged / MARKER
    with marker.open("w", encoding="utf-8") as handle:
        handle.write(manifest.text())
        handle.flush()
        os.fsync(handle.fileno())
    fsync_dir(staged)


class ModelStore:
    """The store under ``root`` on node ``node_name`` (see the module's docstring)."""

    def __init__(
        self,
        root: Path,
        *,
        settings: Settings,
        node_name: str,
        records: RecordWriter | None = None,
        clock: Callable[[], datetime] = _utcnow,
        session: aiohttp.ClientSession | None = None,
        statvfs: Callable[[Path], os.statvfs_result] = os.statvfs,
    ) -> None:
        self.layout = Layout(Path(root))
        self.settings = settings
        self.node_name = node_name
        self.records = records
        self.clock = clock
        self._session = session
        self._own_session = session is None
        self._statvfs = statvfs
        self._trees: dict[str, _Tree] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._refs: dict[str, str] = {}
        #: Per digest, the namespaces whose access to it is proven (docs/node-store.md, "Who may
        #: mount what"); kept in state.json with the references.
        self._proven: dict[str, set[str]] = {}
        self._proving: dict[tuple[str, str], asyncio.Lock] = {}
        self._pinned: set[str] = set()
        self._loaded = False
        self._problem = ""
        self._dirty: asyncio.Event | None = None
        self._writer: asyncio.Task[None] | None = None
        self._sweeper: asyncio.Task[None] | None = None
        self._written: NodeModelStoreStatus | None = None
        self._closed = False

    # ---- the interface ---------------------------------------------------------------------

    async def acquire(self, request: TreeRequest) -> TreeAnswer:
        """Ready if published; else starts (or joins) the digest's one download and answers
        Pending; Failed while a failure's backoff runs (after it, a new acquire retries)."""
        self._start()
        now = self.clock()
        problem = rules.digest_problem(request.digest)
        if problem:
            return TreeFailed("InvalidRequest", problem, now)
        if self._problem:
            return TreeFailed(rules.STORE_UNAVAILABLE, self._problem, now)
        digest = request.digest
        if request.namespace is not None and request.digest_source == "Hub":
            # The controller listed the repository with this namespace's token and got it.
            self._prove(digest, request.namespace)
        if self.layout.is_published(digest):
            verdict = access.tree_access(
                request.namespace, request.digest_source, self._proven.get(digest, ())
            )
            if verdict == "Prove":
                denied = await self._check_access(request)
                if denied is not None:
                    return denied
                if not self.layout.is_published(digest):  # collected while the hub answered
                    return await self.acquire(request)
            self._published_record(digest, request.source)
            # A use: the tree is about to be mounted, so no collection may take it meanwhile
            # (only trees idle for 10 min are collected).
            self._trees[digest].last_used = now
            return TreeReady(self.layout.tree(digest))
        tree = self._trees.get(digest)
        task = self._tasks.get(digest)
        if task is not None and not task.done() and tree is not None:
            return TreePending(tree.downloaded, tree.size_bytes)
        waiting = _backoff(tree, now)
        if waiting is not None and tree is not None:
            asking = rules.asker(request.namespace, request.commit)
            if rules.holds_back(tree.reason, tree.failed_for, asking):
                return waiting
        if tree is None:
            tree = self._trees[digest] = _Tree(digest, "Downloading")
        tree.state = "Downloading"
        tree.size_bytes = request.size_bytes if request.size_bytes is not None else tree.size_bytes
        tree.downloaded = 0
        tree.reported_bytes = None
        tree.reported_at = None
        tree.source = request.source or tree.source
        tree.failed_for = rules.asker(request.namespace, request.commit)
        self._tasks[digest] = asyncio.create_task(
            self._materialize(request, tree), name=f"materialize {digest}"
        )
        self._changed()
        return TreePending(0, tree.size_bytes)

    async def reference(self, digest: str, target: str) -> None:
        """A volume at ``target`` was published from ``digest``'s tree."""
        self._start()
        self._refs[target] = digest
        tree = self._trees.get(digest)
        if tree is not None:
            tree.last_used = self.clock()
        self._save_state()
        self._changed()

    async def release(self, target: str) -> None:
        """The volume at ``target`` was unpublished (idempotent)."""
        self._start()
        digest = self._refs.pop(target, None)
        if digest is None:
            return
        tree = self._trees.get(digest)
        if tree is not None:
            tree.last_used = self.clock()
        self._save_state()
        self._changed()

    async def wait(self, digest: str) -> TreeAnswer:
        """For tests and the benchmark: the answer once ``digest``'s download is over."""
        task = self._tasks.get(digest)
        if task is not None:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.shield(task)
        return self._answer(digest)

    async def close(self) -> None:
        self._closed = True
        for task in [*self._tasks.values(), self._sweeper]:
            if task is not None:
                task.cancel()
        await asyncio.gather(*self._tasks.values(), return_exceptions=True)
        if self._sweeper is not None:
            await asyncio.gather(self._sweeper, return_exceptions=True)
        if self._writer is not None:
            await self._flush()
            self._writer.cancel()
            await asyncio.gather(self._writer, return_exceptions=True)
        if self._own_session and self._session is not None:
            await self._session.close()
            self._session = None

    # ---- what tests, the benchmark and the node service may also use ------------------------

    async def start(self) -> None:
        """Load the root, write the first record and start the periodic sweep now, rather than
        at the first request (the plugin calls it when it starts; idempotent)."""
        self._start()

    def proven(self, digest: str) -> frozenset[str]:
        """The namespaces whose access to ``digest`` is proven."""
        self._load()
        return frozenset(self._proven.get(digest, ()))

    def fetched_bytes(self, digest: str | None = None) -> int:
        """Bytes that came over the network (for ``digest``, else all) since the store
        started."""
        if digest is not None:
            tree = self._trees.get(digest)
            return tree.fetched if tree is not None else 0
        return sum(t.fetched for t in self._trees.values())

    def referenced(self, digest: str) -> int:
        return sum(1 for d in self._refs.values() if d == digest)

    def pin(self, digest: str) -> None:
        """Never collect ``digest`` (the upstream ``spec.pinned``; not a Setting here)."""
        self._pinned.add(digest)

    def usage(self) -> rules.Usage | None:
        try:
            stat = self._statvfs(self.layout.root)
        except OSError:
            return None
        return rules.Usage(
            total_bytes=stat.f_blocks * stat.f_frsize,
            used_bytes=(stat.f_blocks - stat.f_bfree) * stat.f_frsize,
        )

    def status(self) -> NodeModelStoreStatus:
        """The record as it would be written now."""
        self._load()
        trees = [self._state_of(t) for t in self._trees.values()]
        stored = sum(
            (t.size_bytes or 0) if t.state == "Ready" else (t.reported_bytes or 0)
            for t in self._trees.values()
        )
        return rules.store_status(
            trees,
            self.usage(),
            stored_bytes=stored,
            high_percent=self.settings.store_high_watermark_percent,
            now=self.clock(),
            previous=self._written,
            problem=self._problem,
        )

    async def collect(self, *, periodic: bool = True) -> list[str]:
        """Collect unreferenced trees by the watermarks (the periodic sweep, or only when above
        the high one); the digests removed."""
        self._load()
        usage = self.usage()
        if usage is None:
            return []
        if not periodic and not rules.above_high(usage, self.settings.store_high_watermark_percent):
            return []
        return self._collect(usage)

    # ---- inside ----------------------------------------------------------------------------

    def _answer(self, digest: str) -> TreeAnswer:
        if self.layout.is_published(digest):
            return TreeReady(self.layout.tree(digest))
        tree = self._trees.get(digest)
        now = self.clock()
        if tree is None:
            return TreeFailed("NotRequested", f"no download of {digest} was asked for", now)
        if tree.state == "Failed":
            return TreeFailed(tree.reason, tree.message, tree.retry_time or now)
        task = self._tasks.get(digest)
        if task is not None and not task.done():
            return TreePending(tree.downloaded, tree.size_bytes)
        return TreeFailed("NotRequested", f"no download of {digest} runs", now)

    def _prove(self, digest: str, namespace: str) -> None:
        known = self._proven.setdefault(digest, set())
        if namespace not in known:
            known.add(namespace)
            self._save_state()

    async def _check_access(self, request: TreeRequest) -> TreeDenied | None:
        """List the repository at the request's revision with its token: the same digest proves
        the request's namespace (``None``), anything else refuses (a :class:`TreeDenied`)."""
        assert request.namespace is not None
        key = (request.digest, request.namespace)
        async with self._proving.setdefault(key, asyncio.Lock()):
            if request.namespace in self._proven.get(request.digest, ()):
                return None  # proven by the request this one waited behind
            client = HubClient(
                self._session_of(),
                proxy_for(
                    request.endpoint,
                    self.settings.artifact_https_proxy,
                    self.settings.artifact_no_proxy,
                ),
            )
            listed: str | None = None
            reason = message = ""
            try:
                manifest = await asyncio.wait_for(
                    listing(client, request), timeout=ACCESS_LISTING_SECONDS
                )
                listed = manifest.digest
            except HubProblem as problem:
                reason, message = problem.reason, problem.message
            except TimeoutError:
                reason, message = rules.SOURCE_UNAVAILABLE, "the listing timed out"
            except FileProblem as problem:
                reason, message = problem.reason, problem.message
            except (aiohttp.ClientError, OSError, ValueError) as exc:
                reason, message = rules.SOURCE_UNAVAILABLE, f"{type(exc).__name__}: {exc}"
            verdict = access.access_verdict(
                digest=request.digest,
                namespace=request.namespace,
                repository=request.repository,
                revision=request.commit,
                listed_digest=listed,
                problem_reason=reason,
                problem_message=message,
            )
            if verdict.granted:
                log.info("namespace %s proven for %s", request.namespace, request.digest)
                self._prove(request.digest, request.namespace)
                return None
            log.warning("%s: %s", verdict.reason, verdict.message)
            return TreeDenied(verdict.reason, verdict.message, verdict.retry)

    def _start(self) -> None:
        self._load()
        if self._dirty is None:
            self._dirty = asyncio.Event()
            if self.records is not None:
                self._writer = asyncio.create_task(self._write_loop(), name="nodemodelstore")
            self._sweeper = asyncio.create_task(self._sweep_loop(), name="collect")
            self._dirty.set()

    def _load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        try:
            self.layout.ensure()
            self.layout.empty_trash()
        except OSError as exc:
            self._problem = f"the store's directory {self.layout.root} is not usable: {exc}"
            return
        state: dict[str, Any] = {}
        with contextlib.suppress(OSError, ValueError):
            loaded = json.loads(self.layout.state_file.read_text("utf-8"))
            state = loaded if isinstance(loaded, dict) else {}
        refs = state.get("references")
        if isinstance(refs, dict):
            self._refs = {str(k): str(v) for k, v in refs.items() if isinstance(v, str)}
        proven = state.get("proven")
        if isinstance(proven, dict):
            self._proven = {
                str(d): {str(n) for n in spaces if isinstance(n, str)}
                for d, spaces in proven.items()
                if isinstance(spaces, list)
            }
        last_used = state.get("lastUsed")
        used = last_used if isinstance(last_used, dict) else {}
        for digest in self.layout.published_digests():
            tree = _Tree(digest, "Ready")
            tree.size_bytes = _manifest_size(self.layout.published(digest) / MARKER)
            tree.downloaded = tree.size_bytes or 0
            tree.last_used = _parse_time(used.get(digest))
            self._trees[digest] = tree

    def _save_state(self) -> None:
        state = {
            "references": dict(sorted(self._refs.items())),
            "lastUsed": {
                d: rules.stamp(t.last_used)
                for d, t in sorted(self._trees.items())
                if t.last_used is not None and t.state == "Ready"
            },
            "proven": {d: sorted(spaces) for d, spaces in sorted(self._proven.items()) if spaces},
        }
        temporary = self.layout.state_file.with_suffix(".tmp")
        try:
            with temporary.open("w", encoding="utf-8") as handle:
                json.dump(state, handle, indent=1)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, self.layout.state_file)
        except OSError as exc:
            log.warning("could not save the store's references: %s", exc)

    def _published_record(self, digest: str, source: str) -> None:
        tree = self._trees.get(digest)
        if tree is None or tree.state != "Ready":
            tree = tree or _Tree(digest, "Ready")
            tree.state = "Ready"
            tree.size_bytes = _manifest_size(self.layout.published(digest) / MARKER)
            tree.downloaded = tree.size_bytes or 0
            tree.last_used = tree.last_used or self.clock()
            self._trees[digest] = tree
            self._changed()
        if source and not tree.source:
            tree.source = source
            self._changed()

    def _state_of(self, tree: _Tree) -> rules.TreeState:
        downloaded = tree.downloaded if tree.state == "Ready" else tree.reported_bytes or 0
        return rules.TreeState(
            digest=tree.digest,
            state=tree.state,
            size_bytes=tree.size_bytes,
            downloaded_bytes=downloaded,
            stored_bytes=(tree.size_bytes or 0) if tree.state == "Ready" else downloaded,
            referenced=self.referenced(tree.digest),
            last_used=tree.last_used,
            reason=tree.reason,
            message=tree.message,
            retry_time=tree.retry_time,
            source=tree.source,
            pinned=tree.digest in self._pinned,
        )

    def _session_of(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0), trust_env=False
            )
        return self._session

    def _progress(self, tree: _Tree) -> Callable[[int, int], None]:
        def told(verified: int, fetched: int) -> None:
            tree.downloaded += verified
            tree.fetched += fetched
            now = self.clock()
            if rules.progress_due(
                downloaded=tree.downloaded,
                size=tree.size_bytes,
                now=now,
                last_written=tree.reported_at,
                last_written_bytes=tree.reported_bytes,
            ):
                tree.reported_bytes = tree.downloaded
                tree.reported_at = now
                self._changed()

        return told

    async def _materialize(self, request: TreeRequest, tree: _Tree) -> None:
        digest = request.digest
        lock_fd = -1
        try:
            lock_fd = os.open(self.layout.lock(digest), os.O_CREAT | os.O_RDWR, 0o600)
            await _lock(lock_fd)
            if not self.layout.is_published(digest):
                await self._download(request, tree)
            tree.state = "Ready"
            tree.size_bytes = _manifest_size(self.layout.published(digest) / MARKER)
            tree.downloaded = tree.size_bytes or 0
            tree.reported_bytes = tree.downloaded
            tree.reported_at = self.clock()
            tree.last_used = self.clock()
            tree.failures = 0
            tree.reason = tree.message = ""
            tree.retry_time = None
            if request.namespace is not None:
                # Listed with this namespace's token, and the listing gave the digest.
                self._proven.setdefault(digest, set()).add(request.namespace)
            self._save_state()
        except HubProblem as problem:
            self._fail(tree, problem.reason, problem.message)
        except FileProblem as problem:
            message = problem.message
            if problem.reason == rules.DIGEST_MISMATCH:
                message = rules.mismatch_message(message, digest)
            self._fail(tree, problem.reason, message)
        except OSError as exc:
            reason = rules.INSUFFICIENT_STORAGE if exc.errno == 28 else rules.DOWNLOAD_FAILED
            self._fail(tree, reason, f"the store could not write the tree: {exc}")
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # bad input never crashes the plugin: a Failed record
            log.exception("materializing %s failed", digest)
            self._fail(tree, rules.DOWNLOAD_FAILED, f"{type(exc).__name__}: {exc}")
        finally:
            if lock_fd >= 0:
                with contextlib.suppress(OSError):
                    fcntl.flock(lock_fd, fcntl.LOCK_UN)
                os.close(lock_fd)
            self._changed()
        if tree.state == "Ready":
            usage = self.usage()
            if usage is not None and rules.above_high(
                usage, self.settings.store_high_watermark_percent
            ):
                self._collect(usage)

    def _fail(self, tree: _Tree, reason: str, message: str) -> None:
        if reason == rules.INSUFFICIENT_STORAGE:
            # What was staged only holds the space other trees need.
            self.layout.discard_staged(tree.digest)
        tree.failures += 1
        tree.state = "Failed"
        tree.reason = reason
        tree.message = message
        tree.retry_time = rules.retry_time(tree.failures, self.clock())
        log.warning("%s: %s: %s", tree.digest, reason, message)

    async def _download(self, request: TreeRequest, tree: _Tree) -> None:
        if request.hub not in ("huggingFace", "modelScope"):
            raise FileProblem(
                rules.UNSUPPORTED_SOURCE, f"the node store does not fetch from {request.hub!r}"
            )
        client = HubClient(
            self._session_of(),
            proxy_for(
                request.endpoint,
                self.settings.artifact_https_proxy,
                self.settings.artifact_no_proxy,
            ),
        )
        manifest = await listing(client, request)
        if manifest.digest != request.digest:
            raise FileProblem(
                rules.MANIFEST_MISMATCH,
                f"the files {request.repository!r} lists at {request.commit} (with the "
                f"artifact's patterns) make {manifest.digest}, not {request.digest}",
            )
        tree.size_bytes = manifest.size_bytes
        staged = self.layout.staged(request.digest)
        (staged / TREE).mkdir(parents=True, exist_ok=True)
        self._make_room(manifest.size_bytes - disk_bytes(staged))
        await self._fetch_all(client, request, manifest.entries, staged / TREE, tree)
        await asyncio.to_thread(_seal, staged, manifest)
        self.layout.publish(request.digest)

    async def _fetch_all(
        self,
        client: HubClient,
        request: TreeRequest,
        entries: tuple[ManifestEntry, ...],
        folder: Path,
        tree: _Tree,
    ) -> None:
        gate = asyncio.Semaphore(self.settings.store_download_concurrency)
        told = self._progress(tree)

        async def one(entry: ManifestEntry) -> None:
            async with gate:
                await fetch_file(client, request, entry, folder / entry.path, told)

        tasks = [asyncio.create_task(one(e)) for e in entries]
        try:
            await asyncio.gather(*tasks)
        except BaseException:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise

    def _make_room(self, need: int) -> None:
        """Before a download: collect by the watermarks as if its bytes were already there."""
        usage = self.usage()
        if usage is None or need <= 0:
            return
        projected = rules.Usage(usage.total_bytes, usage.used_bytes + need)
        if rules.above_high(projected, self.settings.store_high_watermark_percent):
            self._collect(projected)

    def _collect(self, usage: rules.Usage) -> list[str]:
        trees = [self._state_of(t) for t in self._trees.values()]
        victims = rules.collect(
            trees, usage, now=self.clock(), low_percent=self.settings.store_low_watermark_percent
        )
        for digest in victims:
            # Checked again right before: nothing may have referenced it since the rule ran
            # (this runs without an await in between, so nothing can).
            if self.referenced(digest):
                continue
            log.info("collecting %s", digest)
            self.layout.remove(digest)
            self._trees.pop(digest, None)
            # A tree fetched again is proven again (a Hub artifact's namespace at its publish).
            self._proven.pop(digest, None)
        if victims:
            self._save_state()
            self._changed()
        return victims

    async def _sweep_loop(self) -> None:
        while not self._closed:
            await asyncio.sleep(rules.SWEEP_INTERVAL_SECONDS)
            try:
                await self.collect(periodic=True)
                self.sweep_staging()
            except OSError as exc:
                log.warning("the periodic collection failed: %s", exc)

    def sweep_staging(self) -> list[str]:
        """Remove partial downloads left untouched for an hour (the sweep's second half); the
        digests removed."""
        self._load()
        running = [d for d, t in self._tasks.items() if not t.done()]
        staged = [
            (digest, datetime.fromtimestamp(mtime, UTC))
            for digest, mtime in self.layout.staged_digests()
        ]
        removed: list[str] = []
        for digest in rules.stale_staging(staged, running=running, now=self.clock()):
            fd = os.open(self.layout.lock(digest), os.O_CREAT | os.O_RDWR, 0o600)
            try:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue  # another process is downloading it
                self.layout.discard_staged(digest)
                removed.append(digest)
            finally:
                os.close(fd)
        return removed

    # ---- the record ------------------------------------------------------------------------

    def _changed(self) -> None:
        if self._dirty is not None:
            self._dirty.set()

    async def _flush(self) -> None:
        if self.records is None:
            return
        status = self.status()
        if rules.record_changed(self._written, status):
            await self.records.write(status)
            self._written = status

    async def _write_loop(self) -> None:
        assert self._dirty is not None
        while True:
            await self._dirty.wait()
            self._dirty.clear()
            try:
                await self._flush()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("writing the NodeModelStore of %s failed: %s", self.node_name, exc)
                await asyncio.sleep(RECORD_RETRY_SECONDS)
                self._dirty.set()
