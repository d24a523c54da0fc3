"""The test hub (tests/support/hubserver.py) is accepted by the real ``huggingface_hub`` 2.4
client: the client is this server's test. ``snapshot_download`` of a commit fetches exactly that
commit's files, ``list_repo_tree`` returns every page, revisions resolve as the Hub resolves them,
a loader's Range GET gets its bytes, and each error mode raises the client's own error."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import httpx2
import pytest
import pytest_asyncio
from huggingface_hub import HfApi, snapshot_download
from huggingface_hub.errors import (
    GatedRepoError,
    HfHubHTTPError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.hf_api import ModelInfo, RepoFile, RepoFolder
from support.hubserver import HubRepo, HubServer, git_blob_sha1

pytestmark = pytest.mark.asyncio(loop_scope="session")

REPO = "org/tiny-model"
#: Commit 1: LFS and non-LFS files, files a loader skips (the original checkpoint, the README),
#: and folders two deep, more entries than one page holds.
FIRST: dict[str, bytes | tuple[bytes, bool]] = {
    "config.json": b'{"model_type": "llama"}\n',
    "tokenizer.json": b'{"version": "1.0"}\n',
    "model-00001-of-00002.safetensors": (b"\x01" * 300, True),
    "model-00002-of-00002.safetensors": (b"\x02" * 200, True),
    "model.safetensors.index.json": b'{"weight_map": {}}\n',
    "original/consolidated.00.pth": (b"\x03" * 150, True),
    "original/params.json": b'{"dim": 8}\n',
    "README.md": b"# tiny\n",
    ".gitattributes": b"*.safetensors filter=lfs diff=lfs merge=lfs -text\n",
    "sub/dir/deep.txt": b"deep\n",
}
#: Commit 2 (main moves on): one file changed, one removed, one added.
SECOND: dict[str, bytes | tuple[bytes, bool]] = {
    **{k: v for k, v in FIRST.items() if k != "README.md"},
    "config.json": b'{"model_type": "llama", "v": 2}\n',
    "generation_config.json": b"{}\n",
}


@pytest_asyncio.fixture(loop_scope="session")
async def hub() -> AsyncIterator[tuple[HubServer, HubRepo, str, str]]:
    server = HubServer(page_size=4)
    repo = server.repo(REPO)
    first = repo.add_commit(FIRST, ref="v1.0")
    repo.tags.add("v1.0")
    second = repo.add_commit(SECOND, ref="main")
    repo.refs["refs/pr/1"] = first
    server.repo("org/gated", gated=True).add_commit({"a.json": b"{}"}, ref="main")
    server.repo("org/private", token="hf_secret").add_commit({"a.json": b"{}"}, ref="main")
    server.repo("org/down", fail_status=503).add_commit({"a.json": b"{}"}, ref="main")
    await server.start()
    try:
        yield server, repo, first, second
    finally:
        await server.stop()


def content_of(value: bytes | tuple[bytes, bool]) -> bytes:
    return value[0] if isinstance(value, tuple) else value


async def test_snapshot_download_fetches_exactly_the_commit(
    hub: tuple[HubServer, HubRepo, str, str], tmp_path: Path
) -> None:
    server, _, first, _ = hub
    folder = await asyncio.to_thread(
        snapshot_download,
        REPO,
        revision=first,
        endpoint=server.url,
        token=False,
        cache_dir=tmp_path / "cache",
    )
    root = Path(folder)
    got = {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file() or (p.is_symlink() and p.resolve().is_file())
    }
    assert got == {k: content_of(v) for k, v in FIRST.items()}
    # No token went out: token=False sends no Authorization header at all.
    assert all(auth == "" for _, _, auth in server.requests)
    # No request asked for the newer commit.
    assert not any("main" in path for _, path, _ in server.requests if "/resolve/" in path)


async def test_list_repo_tree_returns_every_page(hub: tuple[HubServer, HubRepo, str, str]) -> None:
    server, repo, first, _ = hub
    before = len(server.requests)
    api = HfApi(endpoint=server.url, token=False)
    entries = await asyncio.to_thread(
        lambda: list(api.list_repo_tree(REPO, recursive=True, revision=first))
    )
    files = {e.path: e for e in entries if isinstance(e, RepoFile)}
    folders = {e.path for e in entries if isinstance(e, RepoFolder)}
    assert set(files) == set(FIRST)
    assert folders == {"original", "sub", "sub/dir"}
    pages = [p for _, p, _ in server.requests[before:] if "/tree/" in p]
    # 13 entries at 4 a page: four requests, the last three by the Link header's cursor.
    assert len(pages) == 4
    assert [("cursor=" in p) for p in pages] == [False, True, True, True]
    # An LFS file is named by its sha256, another by its git blob id.
    weights = files["model-00001-of-00002.safetensors"]
    assert weights.lfs is not None
    assert weights.lfs.sha256 == repo.commits[first][weights.path].sha256
    assert files["config.json"].lfs is None
    assert files["config.json"].blob_id == git_blob_sha1(content_of(FIRST["config.json"]))


@pytest.mark.parametrize(
    ("revision", "expected"),
    [("main", "second"), ("v1.0", "first"), ("refs/pr/1", "first"), ("short", "first")],
)
async def test_revisions_resolve(
    hub: tuple[HubServer, HubRepo, str, str], revision: str, expected: str
) -> None:
    server, _, first, second = hub
    if revision == "short":
        revision = first[:7]
    api = HfApi(endpoint=server.url, token=False)
    info = await asyncio.to_thread(api.model_info, REPO, revision=revision)
    assert info.sha == {"first": first, "second": second}[expected]


async def test_range_get_and_file_headers(hub: tuple[HubServer, HubRepo, str, str]) -> None:
    server, repo, first, _ = hub
    url = f"{server.url}/{REPO}/resolve/{first}/model-00001-of-00002.safetensors"
    async with httpx2.AsyncClient() as client:
        head = await client.head(url)
        part = await client.get(url, headers={"Range": "bytes=10-19"})
    assert head.status_code == 200
    assert head.headers["X-Repo-Commit"] == first
    assert (
        head.headers["ETag"]
        == f'"{repo.commits[first]["model-00001-of-00002.safetensors"].sha256}"'
    )
    assert head.headers["Content-Length"] == "300"
    assert "X-Xet-Hash" not in head.headers
    assert part.status_code == 206
    assert part.content == b"\x01" * 10
    assert part.headers["Content-Range"] == "bytes 10-19/300"


async def test_error_modes_raise_the_clients_errors(
    hub: tuple[HubServer, HubRepo, str, str],
) -> None:
    server, _, _, _ = hub
    api = HfApi(endpoint=server.url, token=False)

    def call(repo: str, revision: str = "main", token: str | bool = False) -> ModelInfo:
        return api.model_info(repo, revision=revision, token=token)

    with pytest.raises(RevisionNotFoundError):
        await asyncio.to_thread(call, REPO, "no-such-branch")
    with pytest.raises(GatedRepoError):
        await asyncio.to_thread(call, "org/gated")
    with pytest.raises(RepositoryNotFoundError):
        await asyncio.to_thread(call, "org/private")
    with pytest.raises(RepositoryNotFoundError):
        await asyncio.to_thread(call, "org/nothing-here")
    with pytest.raises(HfHubHTTPError) as caught:
        await asyncio.to_thread(call, "org/down")
    assert caught.value.response.status_code == 503
    info = await asyncio.to_thread(call, "org/private", "main", "hf_secret")
    assert info.sha is not None
    me = await asyncio.to_thread(api.whoami, token="hf_secret")
    assert me["name"] == "tester"
