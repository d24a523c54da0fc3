"""ModelScope resolution (gpustack_controller/hubs.py, ``ModelScopeClient``) against the local
test hub served over HTTPS with a CA the test creates (the SDK and the engines only speak HTTPS
to ModelScope): the commit by ref and its git refs cross-check, the listing and its 3000-entry
truncation, every row of the answer table, the revalidation HEAD, the token check."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from support.hubserver import HubServer, throwaway_ca

from gpustack_controller.hubs import HubAccess, HubClient, HubTarget, parse_git_refs
from gpustack_render.weights.resolution import OutcomeKind

pytestmark = pytest.mark.asyncio(loop_scope="session")

FILES: dict[str, bytes | tuple[bytes, bool]] = {
    "config.json": b'{"model_type": "qwen2"}\n',
    "model.safetensors": b"\x09" * 700,
    "configuration.json": b'{"framework": "pytorch"}\n',
    "sub/extra.txt": b"extra\n",
}


def manifest_of(files: dict[str, bytes]) -> str:
    """Every ModelScope file is named by its sha256; sorted by the paths' bytes."""
    lines = [
        f"sha256:{hashlib.sha256(files[p]).hexdigest()} {len(files[p])} {p}\n"
        for p in sorted(files, key=lambda p: p.encode())
    ]
    return "gpustack-manifest v1\n" + "".join(lines)


@pytest_asyncio.fixture(loop_scope="session")
async def hub() -> AsyncIterator[tuple[HubServer, str]]:
    ca = throwaway_ca()
    server = HubServer(ssl_context=ca.server_context)
    repo = server.repo("org/model")
    repo.add_commit(FILES, ref="v1")
    repo.tags.add("v1")
    repo.add_commit({**FILES, "config.json": b"{}\n"}, ref="master")
    server.repo("org/private", token="ms_good").add_commit(FILES, ref="master")
    server.repo("org/down", fail_status=502).add_commit(FILES, ref="master")
    liar = server.repo("org/liar")
    liar.add_commit(FILES, ref="master")
    liar.git_refs = {"master": "0" * 40}
    big = server.repo("org/big")
    big.add_commit(
        {
            **{f"a/{i:04d}.bin": str(i).encode() for i in range(2000)},
            **{f"b/{i:04d}.bin": str(-i).encode() for i in range(1500)},
            "config.json": b"{}",
        },
        ref="master",
    )
    server.repo("org/flat").add_commit(
        {f"{i:04d}.bin": str(i).encode() for i in range(3001)}, ref="master"
    )
    await server.start()
    try:
        yield server, ca.ca_pem
    finally:
        await server.stop()


def target(repo: str = "org/model", revision: str = "master", **kw: object) -> HubTarget:
    return HubTarget("modelScope", repo, revision, **kw)  # type: ignore[arg-type]


async def test_resolves_a_branch_and_builds_the_manifest(hub: tuple[HubServer, str]) -> None:
    server, ca = hub
    outcome = await HubClient().resolve(target(), HubAccess(server.url, ca_pem=ca))
    assert outcome.kind is OutcomeKind.PASSED, outcome.message
    assert outcome.resolution is not None
    assert outcome.resolution.revision == server.repos["org/model"].refs["master"]
    files = {k: v for k, v in FILES.items() if isinstance(v, bytes)}
    text = manifest_of({**files, "config.json": b"{}\n"})
    assert outcome.resolution.manifest.text() == text
    assert (
        outcome.resolution.manifest.digest == "sha256:" + hashlib.sha256(text.encode()).hexdigest()
    )
    # The commit came from the commits API and the git refs of the endpoint's own host.
    paths = [p for _, p, _ in server.requests]
    assert any(p.startswith("/api/v1/models/org/model/commits?Ref=master") for p in paths)
    assert any(p.startswith("/org/model.git/info/refs?service=git-upload-pack") for p in paths)


async def test_an_annotated_tag_peels_and_a_commit_is_taken_as_is(
    hub: tuple[HubServer, str],
) -> None:
    server, ca = hub
    first = server.repos["org/model"].refs["v1"]
    tagged = await HubClient().resolve(target(revision="v1"), HubAccess(server.url, ca_pem=ca))
    assert tagged.resolution is not None and tagged.resolution.revision == first
    before = len(server.requests)
    pinned = await HubClient().resolve(target(revision=first), HubAccess(server.url, ca_pem=ca))
    assert pinned.resolution is not None and pinned.resolution.revision == first
    assert not any("commits" in p for _, p, _ in server.requests[before:])


@pytest.mark.parametrize(
    ("repo", "revision", "reason", "silent"),
    [
        ("org/model", "no-such-branch", "RevisionNotFound", False),  # Commit: null
        ("org/missing", "master", "AccessDenied", False),  # 404 code 10010200001
        ("org/private", "master", "AccessDenied", False),  # 401 without the token
        ("org/down", "master", "SourceUnavailable", True),  # 502
        ("org/liar", "master", "SourceUnavailable", False),  # the git refs disagree
        ("org/flat", "master", "SourceUnavailable", False),  # 3001 entries in one folder
    ],
)
async def test_answer_table(
    hub: tuple[HubServer, str], repo: str, revision: str, reason: str, silent: bool
) -> None:
    server, ca = hub
    outcome = await HubClient().resolve(target(repo, revision), HubAccess(server.url, ca_pem=ca))
    assert (outcome.reason, outcome.silent) == (reason, silent), outcome.message


async def test_a_missing_tree_is_revision_not_found(hub: tuple[HubServer, str]) -> None:
    server, ca = hub
    outcome = await HubClient().relist(target(), HubAccess(server.url, ca_pem=ca), "f" * 40)
    assert outcome.reason == "RevisionNotFound"  # 404 code 10990101004


async def test_a_truncated_listing_is_listed_again_by_directory(
    hub: tuple[HubServer, str],
) -> None:
    server, ca = hub
    before = len(server.requests)
    outcome = await HubClient().resolve(target("org/big"), HubAccess(server.url, ca_pem=ca))
    assert outcome.resolution is not None, outcome.message
    assert outcome.resolution.manifest.file_count == 3501
    listings = [p for _, p, _ in server.requests[before:] if "/repo/files" in p]
    # The whole tree (cut at 3000), the root's children, then each folder on its own.
    assert len(listings) == 4
    assert sum("Root=" in p for p in listings) == 2


async def test_private_repository_with_its_token(hub: tuple[HubServer, str]) -> None:
    server, ca = hub
    before = len(server.requests)
    outcome = await HubClient().resolve(
        target("org/private", token="ms_good"), HubAccess(server.url, ca_pem=ca)
    )
    assert outcome.kind is OutcomeKind.PASSED, outcome.message
    sent = {auth for _, _, auth in server.requests[before:]}
    assert "Bearer ms_good" in sent  # the API
    assert any(a.startswith("Basic ") for a in sent)  # the git refs: oauth2 and the token


async def test_untrusted_without_the_ca(hub: tuple[HubServer, str]) -> None:
    server, _ = hub
    outcome = await HubClient().resolve(target(), HubAccess(server.url))
    assert (outcome.reason, outcome.silent) == ("SourceUnavailable", True)


async def test_revalidation_heads_the_first_root_file(hub: tuple[HubServer, str]) -> None:
    server, ca = hub
    commit = server.repos["org/model"].refs["master"]
    before = len(server.requests)
    outcome = await HubClient().revalidate(target(), HubAccess(server.url, ca_pem=ca), commit)
    assert outcome.kind is OutcomeKind.PASSED, outcome.message
    heads = [p for m, p, _ in server.requests[before:] if m == "HEAD"]
    assert heads == [f"/api/v1/models/org/model/repo?Revision={commit}&FilePath=config.json"]


async def test_token_check(hub: tuple[HubServer, str]) -> None:
    server, ca = hub
    access = HubAccess(server.url, ca_pem=ca)
    assert await HubClient().token_valid("modelScope", "ms_good", access) is True
    assert await HubClient().token_valid("modelScope", "ms_bad", access) is False


async def test_git_refs_parsing_peels_annotated_tags() -> None:
    def pkt(line: str) -> bytes:
        return f"{len(line) + 4:04x}{line}".encode()

    head, tag_object, tagged = "a" * 40, "b" * 40, "c" * 40
    payload = (
        pkt("# service=git-upload-pack\n")
        + b"0000"
        + pkt(f"{head} refs/heads/master\x00side-band-64k\n")
        + pkt(f"{tag_object} refs/tags/v1\n")
        + pkt(f"{tagged} refs/tags/v1^{{}}\n")
        + b"0000"
    )
    assert parse_git_refs(payload) == {"refs/heads/master": head, "refs/tags/v1": tagged}


async def test_the_sdk_downloads_what_was_resolved(
    hub: tuple[HubServer, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real ModelScope SDK (1.40.2) accepts the test hub: ``snapshot_download`` of the
    resolved commit, with ``MODELSCOPE_DOMAIN`` as the engines get it (no scheme: the SDK adds
    ``https://``), fetches files whose manifest is the resolved one."""
    server, ca = hub
    outcome = await HubClient().resolve(target(), HubAccess(server.url, ca_pem=ca))
    assert outcome.resolution is not None
    bundle = tmp_path / "ca.pem"
    bundle.write_text(ca)
    monkeypatch.setenv("MODELSCOPE_DOMAIN", f"127.0.0.1:{server.port}")
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(bundle))
    monkeypatch.setenv("MODELSCOPE_CACHE", str(tmp_path / "cache"))
    from modelscope import snapshot_download  # reads the environment above

    folder = Path(
        await asyncio.to_thread(
            snapshot_download,
            "org/model",
            revision=outcome.resolution.revision,
            cache_dir=str(tmp_path / "cache"),
        )
    )
    downloaded = {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()
    }
    text = manifest_of(downloaded)
    assert text == outcome.resolution.manifest.text()
