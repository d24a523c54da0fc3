"""The controller's hub calls (gpustack_controller/hubs.py) against the local test hub
(tests/support/hubserver.py): every row of the Hugging Face answer table, paging, the manifest of
what the real client downloads, no token without a Secret, the revalidation HEAD, the token
check, the CA bundle and the proxy Settings."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from huggingface_hub import snapshot_download
from support.hubserver import HubServer, git_blob_sha1, throwaway_ca

from gpustack_controller.hubs import HubAccess, HubClient, HubTarget
from gpustack_render.weights.resolution import OutcomeKind

pytestmark = pytest.mark.asyncio(loop_scope="session")

FILES: dict[str, bytes | tuple[bytes, bool]] = {
    "config.json": b'{"model_type": "llama"}\n',
    "model.safetensors": (b"\x07" * 1000, True),
    "original/consolidated.00.pth": (b"\x08" * 64, True),
    "README.md": b"# model\n",
    "tokenizer/tokenizer.json": b"{}\n",
}


@pytest_asyncio.fixture(loop_scope="session")
async def hub() -> AsyncIterator[HubServer]:
    server = HubServer(page_size=2)
    repo = server.repo("org/model")
    repo.add_commit(FILES, ref="main")
    server.repo("org/gated", gated=True).add_commit(FILES, ref="main")
    server.repo("org/private", token="hf_good").add_commit(FILES, ref="main")
    server.repo("org/down", fail_status=503).add_commit(FILES, ref="main")
    server.repo("org/hidden", hide_lfs=True).add_commit(FILES, ref="main")
    server.repo("org/elsewhere", link_host="127.0.0.2:9").add_commit(FILES, ref="main")
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


def target(repo: str = "org/model", revision: str = "main", **kw: object) -> HubTarget:
    return HubTarget("huggingFace", repo, revision, **kw)  # type: ignore[arg-type]


def expected_manifest(files: dict[str, bytes | tuple[bytes, bool]]) -> str:
    """The manifest text, written out from the files' contents by hand."""
    lines = []
    for path in sorted(files, key=lambda p: p.encode()):
        value = files[path]
        content, lfs = value if isinstance(value, tuple) else (value, False)
        digest = (
            f"sha256:{hashlib.sha256(content).hexdigest()}"
            if lfs
            else f"gitsha1:{git_blob_sha1(content)}"
        )
        lines.append(f"{digest} {len(content)} {path}\n")
    return "gpustack-manifest v1\n" + "".join(lines)


async def test_resolves_commit_and_manifest_over_several_pages(hub: HubServer) -> None:
    client = HubClient()
    before = len(hub.requests)
    outcome = await client.resolve(target(), HubAccess(hub.url))
    assert outcome.kind is OutcomeKind.PASSED, outcome.message
    resolution = outcome.resolution
    assert resolution is not None
    assert resolution.revision == hub.repos["org/model"].refs["main"]
    text = expected_manifest(FILES)
    assert resolution.manifest.text() == text
    assert resolution.manifest.digest == "sha256:" + hashlib.sha256(text.encode()).hexdigest()
    tree = [p for _, p, _ in hub.requests[before:] if "/tree/" in p]
    assert len(tree) == 4  # 7 entries (5 files, 2 folders), 2 a page
    # No Secret: no token at all.
    assert all(auth == "" for _, _, auth in hub.requests[before:])


async def test_snapshot_download_matches_the_resolved_digest(
    hub: HubServer, tmp_path: Path
) -> None:
    outcome = await HubClient().resolve(target(), HubAccess(hub.url))
    assert outcome.resolution is not None
    commit = outcome.resolution.revision
    folder = Path(
        await asyncio.to_thread(
            snapshot_download,
            "org/model",
            revision=commit,
            endpoint=hub.url,
            token=False,
            cache_dir=tmp_path,
        )
    )
    downloaded: dict[str, bytes | tuple[bytes, bool]] = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = path.relative_to(folder).as_posix()
        lfs = rel.endswith((".safetensors", ".pth"))  # what the repository stores in LFS
        downloaded[rel] = (path.read_bytes(), True) if lfs else path.read_bytes()
    digest = "sha256:" + hashlib.sha256(expected_manifest(downloaded).encode()).hexdigest()
    assert digest == outcome.resolution.manifest.digest


async def test_patterns_filter_the_manifest(hub: HubServer) -> None:
    outcome = await HubClient().resolve(
        target(allow=("*.json", "*.safetensors"), ignore=("tokenizer/",)), HubAccess(hub.url)
    )
    assert outcome.resolution is not None
    assert [e.path for e in outcome.resolution.manifest.entries] == [
        "config.json",
        "model.safetensors",
    ]


@pytest.mark.parametrize(
    ("repo", "revision", "reason", "silent"),
    [
        ("org/model", "no-such-branch", "RevisionNotFound", False),
        ("org/gated", "main", "AccessDenied", False),
        ("org/private", "main", "AccessDenied", False),  # 401 without the token
        ("org/missing", "main", "AccessDenied", False),  # 404 RepoNotFound
        ("org/down", "main", "SourceUnavailable", True),  # 503: the hub did not answer
        ("org/hidden", "main", "AccessDenied", False),  # lfs.oid of 64 '*'
        ("org/elsewhere", "main", "SourceUnavailable", False),  # a Link to another host
    ],
)
async def test_answer_table(
    hub: HubServer, repo: str, revision: str, reason: str, silent: bool
) -> None:
    outcome = await HubClient().resolve(target(repo, revision), HubAccess(hub.url))
    assert (outcome.reason, outcome.silent) == (reason, silent), outcome.message
    if reason == "AccessDenied":
        assert "does not exist or is not accessible" in outcome.message


async def test_a_wrong_token_is_refused_and_the_right_one_resolves(hub: HubServer) -> None:
    wrong = await HubClient().resolve(target("org/private", token="hf_bad"), HubAccess(hub.url))
    assert wrong.reason == "AccessDenied"
    before = len(hub.requests)
    right = await HubClient().resolve(target("org/private", token="hf_good"), HubAccess(hub.url))
    assert right.kind is OutcomeKind.PASSED, right.message
    assert {auth for _, _, auth in hub.requests[before:]} == {"Bearer hf_good"}


async def test_unreachable_hub_is_silent() -> None:
    outcome = await HubClient().resolve(target(), HubAccess("http://127.0.0.1:9"))
    assert (outcome.reason, outcome.silent) == ("SourceUnavailable", True)
    assert outcome.message.startswith("the hub did not answer")


async def test_revalidation_heads_the_first_root_file(hub: HubServer) -> None:
    commit = hub.repos["org/model"].refs["main"]
    before = len(hub.requests)
    outcome = await HubClient().revalidate(target(), HubAccess(hub.url), commit)
    assert outcome.kind is OutcomeKind.PASSED, outcome.message
    heads = [p for m, p, _ in hub.requests[before:] if m == "HEAD"]
    assert heads == [f"/org/model/resolve/{commit}/README.md"]  # upper case sorts first
    # The repository turned gated: refused (the staircase decides what that does).
    gated = hub.repos["org/model"]
    gated.gated = True
    try:
        refused = await HubClient().revalidate(target(), HubAccess(hub.url), commit)
    finally:
        gated.gated = False
    assert refused.reason == "AccessDenied"
    gone = await HubClient().revalidate(target(), HubAccess(hub.url), "f" * 40)
    assert gone.reason == "RevisionNotFound"


async def test_anchored_revalidation_relists(hub: HubServer) -> None:
    commit = hub.repos["org/model"].refs["main"]
    outcome = await HubClient().relist(target(), HubAccess(hub.url), commit)
    assert outcome.resolution is not None
    assert outcome.resolution.manifest.text() == expected_manifest(FILES)


async def test_token_check(hub: HubServer) -> None:
    client = HubClient()
    assert await client.token_valid("huggingFace", "hf_good", HubAccess(hub.url)) is True
    assert await client.token_valid("huggingFace", "hf_bad", HubAccess(hub.url)) is False


async def test_ca_bundle_and_proxy_settings() -> None:
    ca = throwaway_ca()
    server = HubServer(ssl_context=ca.server_context)
    server.repo("org/model").add_commit(FILES, ref="main")
    await server.start()
    try:
        client = HubClient()
        # Not trusted without the bundle: the TLS handshake fails, no answer.
        untrusted = await client.resolve(target(), HubAccess(server.url))
        assert (untrusted.reason, untrusted.silent) == ("SourceUnavailable", True)
        trusted = await client.resolve(target(), HubAccess(server.url, ca_pem=ca.ca_pem))
        assert trusted.kind is OutcomeKind.PASSED, trusted.message
        # A proxy that is not there: nothing gets through, unless no-proxy names the host.
        dead = "http://127.0.0.1:9"
        proxied = await client.resolve(
            target(), HubAccess(server.url, https_proxy=dead, ca_pem=ca.ca_pem)
        )
        assert proxied.reason == "SourceUnavailable"
        bypassed = await client.resolve(
            target(),
            HubAccess(
                server.url, https_proxy=dead, no_proxy="localhost,127.0.0.1", ca_pem=ca.ca_pem
            ),
        )
        assert bypassed.kind is OutcomeKind.PASSED, bypassed.message
    finally:
        await server.stop()


async def test_one_resolution_is_bounded(hub: HubServer) -> None:
    outcome = await HubClient(timeout=0.000001).resolve(target(), HubAccess(hub.url))
    assert (outcome.reason, outcome.silent) == ("SourceUnavailable", True)
