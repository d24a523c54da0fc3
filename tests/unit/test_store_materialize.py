"""The node store against the test hub (tests/support/hubserver.py, which the real
``huggingface_hub`` client accepts): a tree is downloaded and verified once, published whole,
shared by concurrent requests, never published with a wrong byte, and only the files the
patterns keep are fetched (docs/node-store.md, "Materialization")."""

from __future__ import annotations

import asyncio
import hashlib
import os
import ssl
import stat
from collections.abc import AsyncIterator, Callable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path

import aiohttp
import pytest
import pytest_asyncio
from aiohttp import web
from support.hubserver import HubFile, HubRepo, HubServer, throwaway_ca

from gpustack_modelmanager.store import (
    ModelStore,
    TreeFailed,
    TreePending,
    TreeReady,
    TreeRequest,
)
from gpustack_render.api.nodestore import NodeModelStoreStatus
from gpustack_render.core.settings import Settings
from gpustack_render.weights.manifest import ManifestEntry, build_manifest, filtered

pytestmark = pytest.mark.asyncio(loop_scope="session")

REPO = "org/store-model"
FILES: dict[str, bytes | tuple[bytes, bool]] = {
    "config.json": b'{"model_type": "llama"}\n',
    "tokenizer.json": b'{"version": "1.0"}\n',
    "model-00001-of-00002.safetensors": (os.urandom(3 * 1024 * 1024 + 17), True),
    "model-00002-of-00002.safetensors": (os.urandom(1024 * 1024), True),
    "original/consolidated.00.pth": (b"\x03" * 4096, True),
    "README.md": b"# store model\n",
    "sub/dir/deep.txt": b"deep\n",
    "empty.txt": b"",
}


def entries_of(files: Mapping[str, HubFile]) -> list[ManifestEntry]:
    return [
        ManifestEntry(f.path, "sha256" if f.lfs else "gitsha1", f.etag, f.size)
        for f in files.values()
    ]


class CountingHub(HubServer):
    """The test hub, with two test switches: a file whose served bytes have one byte flipped
    (the listing still names the true digest), and a pause between served chunks."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.corrupt: set[str] = set()
        self.slow: dict[str, float] = {}

    def gets(self, part: str = "/resolve/") -> list[str]:
        return [p for m, p, _ in self.requests if m == "GET" and part in p]

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        answer = await super()._handle(request)
        name = request.path.rsplit("/resolve/", 1)[-1].split("/", 1)[-1]
        if "/resolve/" not in request.path or not isinstance(answer, web.Response):
            return answer
        body = answer.body
        if not isinstance(body, bytes) or request.method != "GET":
            return answer
        if name in self.corrupt and body:
            body = bytes([body[0] ^ 0xFF]) + body[1:]
            answer.body = body
        pause = self.slow.get(name)
        if pause is None:
            return answer
        streamed = web.StreamResponse(status=answer.status, headers=answer.headers)
        streamed.content_length = len(body)
        await streamed.prepare(request)
        for start in range(0, len(body), 256 * 1024):
            await streamed.write(body[start : start + 256 * 1024])
            await asyncio.sleep(pause)
        await streamed.write_eof()
        return streamed


@pytest_asyncio.fixture(loop_scope="session")
async def hub() -> AsyncIterator[tuple[CountingHub, HubRepo, str]]:
    server = CountingHub(page_size=3)
    repo = server.repo(REPO)
    commit = repo.add_commit(FILES, ref="main")
    await server.start()
    try:
        yield server, repo, commit
    finally:
        await server.stop()


def request_for(
    server: HubServer,
    repo: HubRepo,
    commit: str,
    *,
    allow: tuple[str, ...] = (),
    ignore: tuple[str, ...] = (),
    digest: str | None = None,
) -> TreeRequest:
    kept = filtered(entries_of(repo.commits[commit]), allow or None, ignore or None)
    manifest = build_manifest(kept)
    return TreeRequest(
        digest=digest or manifest.digest,
        hub="huggingFace",
        repository=repo.repo_id,
        commit=commit,
        endpoint=server.url,
        allow_patterns=allow,
        ignore_patterns=ignore,
        size_bytes=manifest.size_bytes,
        source=f"huggingFace:{repo.repo_id}@{commit}",
    )


class Records:
    """Collects what the store would write to its NodeModelStore."""

    def __init__(self) -> None:
        self.written: list[NodeModelStoreStatus] = []

    async def write(self, status: NodeModelStoreStatus) -> None:
        self.written.append(status)

    async def until(self, check: Callable[[NodeModelStoreStatus], bool]) -> NodeModelStoreStatus:
        """The last record once it passes ``check`` (the store writes from a task of its own)."""
        for _ in range(500):
            if self.written and check(self.written[-1]):
                return self.written[-1]
            await asyncio.sleep(0.01)
        pytest.fail(f"no record passed: {self.written[-1:]}")


def tree_files(path: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()
    }


def contents(repo: HubRepo, commit: str, paths: list[str] | None = None) -> dict[str, bytes]:
    files = repo.commits[commit]
    return {p: files[p].content for p in sorted(paths if paths is not None else files)}


async def test_publish_downloads_and_verifies_once(
    hub: tuple[CountingHub, HubRepo, str], tmp_path: Path
) -> None:
    server, repo, commit = hub
    records = Records()
    store = ModelStore(tmp_path, settings=Settings(), node_name="node-a", records=records)
    request = request_for(server, repo, commit)
    try:
        before = len(server.gets())
        first = await store.acquire(request)
        assert isinstance(first, TreePending)
        answer = await store.wait(request.digest)
        assert isinstance(answer, TreeReady), answer
        assert tree_files(answer.path) == contents(repo, commit)
        assert len(server.gets()) - before == len(FILES)  # one GET per file
        assert store.fetched_bytes(request.digest) == request.size_bytes
        # Published read-only, with the manifest beside the tree as its completion marker.
        mode = (answer.path / "config.json").stat().st_mode
        assert not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)
        marker = (answer.path.parent / "manifest").read_bytes()
        assert "sha256:" + hashlib.sha256(marker).hexdigest() == request.digest
        assert not list((tmp_path / "staging").glob("*/"))

        # The replacement: a second acquire answers at once and fetches nothing.
        gets = len(server.gets())
        again = await store.acquire(request)
        assert again == answer
        assert len(server.gets()) == gets
        assert store.fetched_bytes(request.digest) == request.size_bytes

        await store.reference(request.digest, "/pods/a/volume")
        last = await records.until(lambda r: [m.referenced for m in r.models or []] == [1])
        (model,) = last.models or []
        assert (model.digest, model.state, model.referenced) == (request.digest, "Ready", 1)
        assert model.downloaded_bytes == model.size_bytes == request.size_bytes
        assert model.source == request.source
        first_state = records.written[0].models or []
        assert [m.state for m in first_state] == ["Downloading"]
    finally:
        await store.close()

    # A new store on the same root (a restarted plugin) knows the tree and its reference.
    again_store = ModelStore(tmp_path, settings=Settings(), node_name="node-a")
    try:
        gets = len(server.gets())
        assert isinstance(await again_store.acquire(request), TreeReady)
        assert len(server.gets()) == gets
        assert again_store.referenced(request.digest) == 1
    finally:
        await again_store.close()


async def test_concurrent_acquires_share_one_download(
    hub: tuple[CountingHub, HubRepo, str], tmp_path: Path
) -> None:
    server, repo, commit = hub
    store = ModelStore(tmp_path, settings=Settings(), node_name="node-a")
    request = request_for(server, repo, commit, allow=("*.safetensors", "*.json"))
    server.slow["model-00001-of-00002.safetensors"] = 0.01
    try:
        before = len(server.gets())
        answers = await asyncio.gather(*(store.acquire(request) for _ in range(5)))
        assert all(isinstance(a, TreePending) for a in answers)
        done = await asyncio.gather(*(store.wait(request.digest) for _ in range(5)))
        assert len({a for a in done}) == 1 and isinstance(done[0], TreeReady)
        fetched = server.gets()[before:]
        # One GET per kept file; nothing the patterns drop.
        assert len(fetched) == 4
        assert not any("README" in p or ".pth" in p or "deep" in p for p in fetched)
        assert tree_files(done[0].path) == contents(
            repo,
            commit,
            [
                "config.json",
                "model-00001-of-00002.safetensors",
                "model-00002-of-00002.safetensors",
                "tokenizer.json",
            ],
        )
    finally:
        server.slow.clear()
        await store.close()


async def test_a_wrong_byte_is_never_published(
    hub: tuple[CountingHub, HubRepo, str], tmp_path: Path
) -> None:
    server, repo, commit = hub
    now = datetime(2026, 1, 1, tzinfo=UTC)
    clock = [now]
    records = Records()
    # One file at a time, in the manifest's order: what the first attempt finished is known.
    store = ModelStore(
        tmp_path,
        settings=Settings(store_download_concurrency=1),
        node_name="node-a",
        records=records,
        clock=lambda: clock[0],
    )
    request = request_for(server, repo, commit, ignore=("original/*",))
    server.corrupt.add("model-00002-of-00002.safetensors")
    try:
        await store.acquire(request)
        answer = await store.wait(request.digest)
        assert isinstance(answer, TreeFailed), answer
        assert answer.reason == "DigestMismatch"
        assert "model-00002-of-00002.safetensors" in answer.message
        assert answer.retry_time == now + timedelta(minutes=1)
        assert not (tmp_path / "trees" / request.digest[7:]).exists()
        assert not list((tmp_path / "staging").rglob("model-00002-of-00002.safetensors"))
        last = await records.until(lambda r: [m.state for m in r.models or []] == ["Failed"])
        (model,) = last.models or []
        assert (model.state, model.reason) == ("Failed", "DigestMismatch")
        assert "model-00002-of-00002.safetensors" in (model.message or "")
        assert model.retry_time == "2026-01-01T00:01:00Z"

        # During the backoff: Failed again, nothing fetched.
        gets = len(server.gets())
        assert isinstance(await store.acquire(request), TreeFailed)
        assert len(server.gets()) == gets

        # After it, with the hub fixed, the next acquire completes (resuming the good files).
        server.corrupt.clear()
        fetched = store.fetched_bytes(request.digest)
        clock[0] = now + timedelta(minutes=1, seconds=1)
        assert isinstance(await store.acquire(request), TreePending)
        answer = await store.wait(request.digest)
        assert isinstance(answer, TreeReady)
        assert (answer.path / "model-00002-of-00002.safetensors").read_bytes() == (
            repo.commits[commit]["model-00002-of-00002.safetensors"].content
        )
        # The refused file came again, and the files the failure stopped before they started;
        # what the first attempt finished was verified from the disk, not fetched.
        again = sorted(p.rsplit("/", 1)[-1] for p in server.gets()[gets:])
        assert again == ["deep.txt", "model-00002-of-00002.safetensors", "tokenizer.json"]
        files = repo.commits[commit]
        assert store.fetched_bytes(request.digest) - fetched == sum(
            files[p].size
            for p in ("sub/dir/deep.txt", "model-00002-of-00002.safetensors", "tokenizer.json")
        )
    finally:
        server.corrupt.clear()
        await store.close()


async def test_a_listing_that_is_not_the_digest_is_refused(
    hub: tuple[CountingHub, HubRepo, str], tmp_path: Path
) -> None:
    server, repo, commit = hub
    store = ModelStore(tmp_path, settings=Settings(), node_name="node-a")
    wrong = "sha256:" + "0" * 64
    request = request_for(server, repo, commit, digest=wrong)
    try:
        before = len(server.gets())
        await store.acquire(request)
        answer = await store.wait(wrong)
        assert isinstance(answer, TreeFailed)
        assert answer.reason == "ManifestMismatch"
        assert wrong in answer.message
        assert server.gets()[before:] == []
    finally:
        await store.close()


async def test_hub_refusals_and_bad_requests_are_failures(
    hub: tuple[CountingHub, HubRepo, str], tmp_path: Path
) -> None:
    server = hub[0]
    store = ModelStore(tmp_path, settings=Settings(), node_name="node-a")
    private = server.repo("org/store-private", token="hf_node_secret")
    private_commit = private.add_commit({"a.json": b"{}"}, ref="main")
    try:
        request = request_for(server, private, private_commit)
        await store.acquire(request)
        denied = await store.wait(request.digest)
        assert isinstance(denied, TreeFailed) and denied.reason == "AccessDenied"

        # With the Secret's token, the same repository is fetched.
        other = ModelStore(tmp_path / "second", settings=Settings(), node_name="node-a")
        try:
            with_token = TreeRequest(**{**request.__dict__, "token": "hf_node_secret"})
            await other.acquire(with_token)
            assert isinstance(await other.wait(request.digest), TreeReady)
            sent = [a for m, p, a in server.requests if "store-private/resolve" in p]
            assert sent[-1] == "Bearer hf_node_secret"
        finally:
            await other.close()

        bad = await store.acquire(TreeRequest(**{**request.__dict__, "digest": "sha256:../../etc"}))
        assert isinstance(bad, TreeFailed) and bad.reason == "InvalidRequest"
    finally:
        await store.close()


async def test_two_plugin_processes_on_one_root_download_once(
    hub: tuple[CountingHub, HubRepo, str], tmp_path: Path
) -> None:
    # Two stores over one root stand for an old and a new plugin process: the digest's lock
    # file makes the second wait, then find the tree published.
    server, repo, commit = hub
    request = request_for(server, repo, commit, allow=("*.safetensors",))
    first = ModelStore(tmp_path, settings=Settings(), node_name="node-a")
    second = ModelStore(tmp_path, settings=Settings(), node_name="node-a")
    server.slow["model-00001-of-00002.safetensors"] = 0.01
    try:
        before = len(server.gets())
        await first.acquire(request)
        await asyncio.sleep(0.05)
        await second.acquire(request)
        answers = await asyncio.gather(first.wait(request.digest), second.wait(request.digest))
        assert all(isinstance(a, TreeReady) for a in answers)
        assert len(server.gets()) - before == 2
        assert second.fetched_bytes(request.digest) == 0
    finally:
        server.slow.clear()
        await first.close()
        await second.close()


class FakeDisk:
    """A statvfs stand-in: a 1000-block filesystem whose used blocks the test sets."""

    def __init__(self) -> None:
        self.used = 0

    def __call__(self, path: Path) -> os.statvfs_result:
        free = 1000 - self.used
        return os.statvfs_result((4096, 4096, 1000, free, free, 100, 50, 50, 0, 255))


async def test_collection_by_the_watermarks_with_an_injected_disk(
    hub: tuple[CountingHub, HubRepo, str], tmp_path: Path
) -> None:
    server, repo, commit = hub
    disk = FakeDisk()
    start = datetime(2026, 1, 1, tzinfo=UTC)
    clock = [start]
    store = ModelStore(
        tmp_path,
        settings=Settings(),
        node_name="node-a",
        statvfs=disk,
        clock=lambda: clock[0],
    )
    old = request_for(server, repo, commit, allow=("config.json",))
    used = request_for(server, repo, commit, allow=("tokenizer.json",))
    young = request_for(server, repo, commit, allow=("README.md",))
    try:
        for request in (old, used):
            await store.acquire(request)
            assert isinstance(await store.wait(request.digest), TreeReady)
        await store.reference(used.digest, "/pods/a/volume")
        clock[0] = start + timedelta(minutes=30)
        await store.acquire(young)
        assert isinstance(await store.wait(young.digest), TreeReady)
        clock[0] = start + timedelta(minutes=35)

        # Under the low watermark (70 %): the sweep takes nothing.
        disk.used = 650
        assert await store.collect() == []
        # Between the watermarks: only the sweep collects, not the high-watermark check.
        disk.used = 750
        assert await store.collect(periodic=False) == []
        # Above the high one: the idle, unreferenced tree goes; the referenced one and the
        # one used 5 min ago stay.
        disk.used = 900
        assert await store.collect(periodic=False) == [old.digest]
        published = sorted(p.name for p in (tmp_path / "trees").iterdir())
        assert published == sorted([used.digest[7:], young.digest[7:]])
        status = store.status()
        assert status.capacity is not None and status.capacity.used_percent == 90
        conditions = {c.type: c for c in status.conditions or []}
        assert conditions["CapacityLow"].status == "True"
        # Released and idle long enough, the referenced tree may go too.
        await store.release("/pods/a/volume")
        clock[0] = start + timedelta(hours=2)
        assert sorted(await store.collect(periodic=False)) == sorted([used.digest, young.digest])
    finally:
        await store.close()


async def test_a_model_scope_tree_is_fetched_and_verified(tmp_path: Path) -> None:
    # ModelScope speaks HTTPS only: the hub serves under a throw-away CA the session trusts.
    ca = throwaway_ca()
    server = HubServer(ssl_context=ca.server_context)
    repo = server.repo("org/ms-model", token="ms_secret")
    files: dict[str, bytes | tuple[bytes, bool]] = {
        "configuration.json": b"{}\n",
        "config.json": b'{"model_type": "qwen2"}\n',
        "model.safetensors": os.urandom(300_000),
        "a/b.txt": b"b\n",
        "a/c/d.txt": b"d\n",
    }
    commit = repo.add_commit(files, ref="master")
    manifest = build_manifest(
        ManifestEntry(f.path, "sha256", f.sha256, f.size) for f in repo.commits[commit].values()
    )
    await server.start()
    context = ssl.create_default_context(cadata=ca.ca_pem)
    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context))
    store = ModelStore(tmp_path, settings=Settings(), node_name="node-a", session=session)
    request = TreeRequest(
        digest=manifest.digest,
        hub="modelScope",
        repository="org/ms-model",
        commit=commit,
        endpoint=server.url,
        token="ms_secret",
        size_bytes=manifest.size_bytes,
    )
    try:
        await store.acquire(request)
        answer = await store.wait(request.digest)
        assert isinstance(answer, TreeReady), answer
        assert tree_files(answer.path) == contents(repo, commit)
        listings = [p for m, p, _ in server.requests if "/repo/files" in p]
        assert len(listings) == 1 and f"Revision={commit}" in listings[0]
        gets = [p for m, p, _ in server.requests if m == "GET" and "FilePath=" in p]
        assert len(gets) == len(files)
        # Without the token: refused.
        other = ModelStore(
            tmp_path / "other", settings=Settings(), node_name="node-a", session=session
        )
        try:
            await other.acquire(TreeRequest(**{**request.__dict__, "token": None}))
            denied = await other.wait(request.digest)
            assert isinstance(denied, TreeFailed) and denied.reason == "AccessDenied"
        finally:
            await other.close()
    finally:
        await store.close()
        await session.close()
        await server.stop()


async def test_the_proxy_settings_reach_the_hub(
    hub: tuple[CountingHub, HubRepo, str], tmp_path: Path
) -> None:
    # A proxy that is not there: nothing gets through, unless no-proxy names the hub's host.
    server, repo, commit = hub
    dead = "http://127.0.0.1:9"
    request = request_for(server, repo, commit, allow=("config.json",))
    blocked = ModelStore(
        tmp_path / "blocked",
        settings=Settings(artifact_https_proxy=dead),
        node_name="node-a",
    )
    bypassed = ModelStore(
        tmp_path / "bypassed",
        settings=Settings(artifact_https_proxy=dead, artifact_no_proxy="localhost,127.0.0.1"),
        node_name="node-a",
    )
    try:
        await blocked.acquire(request)
        answer = await blocked.wait(request.digest)
        assert isinstance(answer, TreeFailed) and answer.reason == "SourceUnavailable"
        await bypassed.acquire(request)
        assert isinstance(await bypassed.wait(request.digest), TreeReady)
    finally:
        await blocked.close()
        await bypassed.close()


async def test_a_started_store_writes_its_record_before_any_request(tmp_path: Path) -> None:
    records = Records()
    store = ModelStore(tmp_path, settings=Settings(), node_name="node-a", records=records)
    try:
        await store.start()
        await records.until(lambda r: True)
        (first,) = records.written
        assert first.models == []
        assert first.capacity is not None and (first.capacity.total_bytes or 0) > 0
        assert {c.type: c.status for c in first.conditions or []}["Ready"] == "True"
    finally:
        await store.close()
    assert len(records.written) == 1  # nothing new to say when it closed


async def test_an_unusable_root_is_a_failed_answer_and_a_record(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    records = Records()
    store = ModelStore(blocker / "store", settings=Settings(), node_name="node-a", records=records)
    try:
        answer = await store.acquire(
            TreeRequest(
                digest="sha256:" + "a" * 64,
                hub="huggingFace",
                repository="org/m",
                commit="0" * 40,
                endpoint="http://127.0.0.1:9",
            )
        )
        assert isinstance(answer, TreeFailed) and answer.reason == "StoreUnavailable"
        last = await records.until(lambda r: True)
        ready = {c.type: c for c in last.conditions or []}["Ready"]
        assert ready.status == "False" and str(blocker) in ready.message
    finally:
        await store.close()
