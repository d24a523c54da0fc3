"""Who may have a tree the node already holds (docs/node-store.md, "Who may mount what"): a
namespace is proven for a digest by a hub resolution (``digestSource: Hub``) or by the store's
own listing with that namespace's token; an anchored artifact (``Expected``) of a namespace not
proven gets the tree only after the store lists the repository with its token and finds the
digest; a hub that refuses the token refuses the tree, a hub that cannot be asked refuses it for
now (and is asked again). Against the test hub (tests/support/hubserver.py)."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from support.hubserver import HubRepo
from test_store_materialize import CountingHub, request_for

from gpustack_modelmanager.store import (
    ModelStore,
    TreeDenied,
    TreeFailed,
    TreePending,
    TreeReady,
    TreeRequest,
)
from gpustack_render.core.settings import Settings

pytestmark = pytest.mark.asyncio(loop_scope="session")

PRIVATE = "org/private-model"
TOKEN_A = "hf_token_of_team_a"
FILES: dict[str, bytes | tuple[bytes, bool]] = {
    "config.json": b'{"model_type": "private"}\n',
    "model.safetensors": (b"\x07" * 65536, True),
}


@pytest_asyncio.fixture(loop_scope="session")
async def private_hub() -> AsyncIterator[tuple[CountingHub, HubRepo, str]]:
    server = CountingHub()
    repo = server.repo(PRIVATE, token=TOKEN_A)
    commit = repo.add_commit(FILES, ref="main")
    await server.start()
    try:
        yield server, repo, commit
    finally:
        await server.stop()


def listings(server: CountingHub) -> int:
    return len(server.gets("/tree/"))


async def held_by_team_a(
    server: CountingHub, repo: HubRepo, commit: str, root: Path
) -> tuple[ModelStore, TreeRequest]:
    """A store on ``root`` holding the private tree, downloaded for team-a's Hub-resolved
    artifact with team-a's token."""
    store = ModelStore(root, settings=Settings(), node_name="node-a")
    request = dataclasses.replace(
        request_for(server, repo, commit), token=TOKEN_A, namespace="team-a", digest_source="Hub"
    )
    assert isinstance(await store.acquire(request), TreePending)
    assert isinstance(await store.wait(request.digest), TreeReady)
    assert store.proven(request.digest) == {"team-a"}
    return store, request


def anchored(request: TreeRequest, namespace: str, token: str | None) -> TreeRequest:
    """``namespace``'s artifact anchored to the same digest (no commit: the spec's revision)."""
    return dataclasses.replace(
        request, namespace=namespace, token=token, digest_source="Expected", commit="main"
    )


async def test_an_anchor_alone_never_opens_another_namespaces_tree(
    private_hub: tuple[CountingHub, HubRepo, str], tmp_path: Path
) -> None:
    server, repo, commit = private_hub
    store, request = await held_by_team_a(server, repo, commit, tmp_path)
    try:
        # team-a's replacement: proven, nothing asked of the hub.
        before = listings(server)
        assert isinstance(await store.acquire(request), TreeReady)
        assert listings(server) == before

        # team-b anchors the same digest, with a token the hub refuses, then with none.
        for token in ("hf_token_of_team_b", None):
            denied = await store.acquire(anchored(request, "team-b", token))
            assert isinstance(denied, TreeDenied), denied
            assert (denied.reason, denied.retry) == ("AccessRefused", False)
            assert "the hub refuses namespace team-b" in denied.message
            assert f"{PRIVATE}@main" in denied.message
        assert listings(server) == before + 2  # each refusal asked the hub with team-b's token
        assert store.proven(request.digest) == {"team-a"}
        gets = len(server.gets())

        # The hub now answers team-b's listing (team-b was given the token): granted, proven,
        # and no byte fetched again.
        granted = await store.acquire(anchored(request, "team-b", TOKEN_A))
        assert isinstance(granted, TreeReady), granted
        assert store.proven(request.digest) == {"team-a", "team-b"}
        assert len(server.gets()) == gets
        before = listings(server)
        assert isinstance(await store.acquire(anchored(request, "team-b", TOKEN_A)), TreeReady)
        assert listings(server) == before  # proven once is enough
    finally:
        await store.close()

    # The proofs are kept with the references: a restarted plugin knows them.
    again = ModelStore(tmp_path, settings=Settings(), node_name="node-a")
    try:
        assert again.proven(request.digest) == {"team-a", "team-b"}
    finally:
        await again.close()


async def test_a_hub_that_cannot_be_asked_refuses_for_now(
    private_hub: tuple[CountingHub, HubRepo, str], tmp_path: Path
) -> None:
    server, repo, commit = private_hub
    store, request = await held_by_team_a(server, repo, commit, tmp_path)
    try:
        repo.fail_status = 503
        denied = await store.acquire(anchored(request, "team-c", TOKEN_A))
        assert isinstance(denied, TreeDenied), denied
        assert (denied.reason, denied.retry) == ("AccessUnproven", True)
        assert "could not be asked" in denied.message and "asks again" in denied.message
        assert store.proven(request.digest) == {"team-a"}
        # The hub is back: the next publish asks again and is granted.
        repo.fail_status = None
        assert isinstance(await store.acquire(anchored(request, "team-c", TOKEN_A)), TreeReady)
    finally:
        repo.fail_status = None
        await store.close()


async def test_a_download_with_the_namespaces_token_proves_it(
    private_hub: tuple[CountingHub, HubRepo, str], tmp_path: Path
) -> None:
    """An anchored artifact whose tree is not held: the store's own listing (with the Pod's
    token) must give the digest before anything is fetched, and proves the namespace."""
    server, repo, commit = private_hub
    store = ModelStore(tmp_path, settings=Settings(), node_name="node-a")
    request = anchored(request_for(server, repo, commit), "team-d", TOKEN_A)
    try:
        await store.acquire(request)
        assert isinstance(await store.wait(request.digest), TreeReady)
        assert store.proven(request.digest) == {"team-d"}
        before = listings(server)
        assert isinstance(await store.acquire(request), TreeReady)
        assert listings(server) == before
    finally:
        await store.close()


async def test_another_namespaces_refused_token_does_not_hold_back_the_digest(
    private_hub: tuple[CountingHub, HubRepo, str], tmp_path: Path
) -> None:
    """team-b asks first, for a digest not held, with a token the hub refuses: its download
    fails (AccessDenied) and team-b waits out the backoff; team-a, who may read the repository,
    is not held back by team-b's failure."""
    server, repo, commit = private_hub
    store = ModelStore(tmp_path, settings=Settings(), node_name="node-a")
    mine = dataclasses.replace(
        request_for(server, repo, commit), token=TOKEN_A, namespace="team-a", digest_source="Hub"
    )
    theirs = anchored(mine, "team-b", "hf_token_of_team_b")
    try:
        await store.acquire(theirs)
        failed = await store.wait(theirs.digest)
        assert isinstance(failed, TreeFailed) and failed.reason == "AccessDenied", failed
        assert await store.acquire(theirs) == failed  # team-b waits out its backoff
        assert isinstance(await store.acquire(mine), TreePending)
        assert isinstance(await store.wait(mine.digest), TreeReady)
        assert store.proven(mine.digest) == {"team-a"}
        denied = await store.acquire(theirs)
        assert isinstance(denied, TreeDenied) and denied.reason == "AccessRefused"
    finally:
        await store.close()
