"""The node store's disk in real conditions: a plugin SIGKILLed mid-download leaves nothing
published and the next acquire completes from what it left; a small filesystem (a real tmpfs in
a private mount namespace) fills and the store collects unreferenced trees by the watermarks,
never a referenced one, and fails a tree that cannot fit without publishing any of it
(docs/node-store.md, "Materialization" and "Collection")."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import sys
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from support.hubserver import HubRepo
from test_store_materialize import CountingHub, request_for

from gpustack_modelmanager.store import ModelStore, TreePending, TreeReady, TreeRequest
from gpustack_render.core.settings import Settings

pytestmark = pytest.mark.asyncio(loop_scope="session")

WORKTREE = Path(__file__).resolve().parents[2]
MIB = 1024 * 1024

#: A plugin process: runs the steps it is given against a store and prints each answer.
CHILD = r"""
import asyncio, json, sys
from datetime import UTC, datetime, timedelta
from datetime import UTC, datetime, timedelta
from pathlib import Path
from gpustack_modelmanager.store import ModelStore, TreeRequest
from gpustack_render.core.settings import Settings

async def main():
    args = json.loads(Path(sys.argv[1]).read_text())
    offset = [0.0]
    base = datetime.now(UTC)
    store = ModelStore(
        Path(args["root"]),
        settings=Settings(**args.get("settings", {})),
        node_name="node-a",
        clock=lambda: base + timedelta(seconds=offset[0]),
    )
    out = []
    for step in args["steps"]:
        verb = step[0]
        if verb == "acquire":
            answer = await store.acquire(TreeRequest(**step[1]))
            answer = await store.wait(step[1]["digest"])
            out.append([type(answer).__name__, getattr(answer, "reason", ""),
                        getattr(answer, "message", "")])
        elif verb == "reference":
            await store.reference(step[1], step[2])
        elif verb == "release":
            await store.release(step[1])
        elif verb == "advance":
            offset[0] += step[1]
        elif verb == "published":
            out.append(sorted(p.name for p in (Path(args["root"]) / "trees").iterdir()))
        elif verb == "status":
            out.append(store.status().model_dump(by_alias=True, exclude_none=True))
        print(json.dumps(out[-1]) if out else "", flush=True)
    await store.close()
    print("RESULT " + json.dumps(out), flush=True)

asyncio.run(main())
"""


def child_files(
    folder: Path, root: Path, steps: list[Any], settings: dict[str, Any] | None = None
) -> tuple[str, str]:
    """The plugin process's script and its arguments, as files in ``folder``."""
    script, args = folder / "child.py", folder / "child.json"
    script.write_text(CHILD)
    args.write_text(json.dumps({"root": str(root), "steps": steps, "settings": settings or {}}))
    return str(script), str(args)


def as_json(request: TreeRequest) -> dict[str, Any]:
    return {
        **request.__dict__,
        "allow_patterns": list(request.allow_patterns),
        "ignore_patterns": list(request.ignore_patterns),
    }


@pytest_asyncio.fixture(loop_scope="session")
async def big_hub() -> AsyncIterator[tuple[CountingHub, HubRepo, str]]:
    server = CountingHub()
    repo = server.repo("org/big")
    commit = repo.add_commit(
        {
            "config.json": b"{}\n",
            "model.safetensors": (os.urandom(6 * MIB + 5), True),
            "extra.bin": (os.urandom(2 * MIB), True),
        },
        ref="main",
    )
    await server.start()
    try:
        yield server, repo, commit
    finally:
        await server.stop()


async def test_a_kill_mid_download_publishes_nothing_and_the_next_acquire_completes(
    big_hub: tuple[CountingHub, HubRepo, str], tmp_path: Path
) -> None:
    server, repo, commit = big_hub
    request = request_for(server, repo, commit)
    server.slow["model.safetensors"] = 0.05
    staged = tmp_path / "staging" / request.digest[7:] / "tree" / "model.safetensors"
    folder = tmp_path / "child"
    folder.mkdir()
    script, args = child_files(folder, tmp_path, [["acquire", as_json(request)]])
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        script,
        args,
        cwd=WORKTREE,
        env={**os.environ, "PYTHONPATH": str(WORKTREE)},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        # Kill it once the big file is partly on disk.
        for _ in range(600):
            if staged.exists() and staged.stat().st_size >= 2 * MIB:
                break
            assert process.returncode is None, await process.communicate()
            await asyncio.sleep(0.01)
        else:
            pytest.fail("the download never got under way")
        process.send_signal(signal.SIGKILL)
        await process.wait()
    finally:
        server.slow.clear()
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode == -signal.SIGKILL
    left = staged.stat().st_size
    assert 0 < left < repo.commits[commit]["model.safetensors"].size
    assert not (tmp_path / "trees" / request.digest[7:]).exists()

    store = ModelStore(tmp_path, settings=Settings(), node_name="node-a")
    try:
        assert isinstance(await store.acquire(request), TreePending)
        answer = await store.wait(request.digest)
        assert isinstance(answer, TreeReady), answer
        assert (answer.path / "model.safetensors").read_bytes() == (
            repo.commits[commit]["model.safetensors"].content
        )
        # It went on from what the killed process left rather than fetching it again.
        assert request.size_bytes is not None
        assert store.fetched_bytes(request.digest) <= request.size_bytes - left
        assert not (tmp_path / "staging" / request.digest[7:]).exists()
    finally:
        await store.close()


@pytest_asyncio.fixture(loop_scope="session")
async def tree_hub() -> AsyncIterator[tuple[CountingHub, dict[str, TreeRequest]]]:
    server = CountingHub()
    requests: dict[str, TreeRequest] = {}
    await server.start()
    sizes = {"a": 5, "b": 5, "c": 5, "huge": 9}
    for name, mib in sizes.items():
        repo = server.repo(f"org/{name}")
        commit = repo.add_commit({"weights.bin": (os.urandom(mib * MIB), True)}, ref="main")
        requests[name] = request_for(server, repo, commit)
    try:
        yield server, requests
    finally:
        await server.stop()


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None, reason="needs root and unshare -m"
)
async def test_a_full_small_disk_collects_unreferenced_trees_by_the_watermarks(
    tree_hub: tuple[CountingHub, dict[str, TreeRequest]], tmp_path: Path
) -> None:
    _server, requests = tree_hub
    root = tmp_path / "store"
    root.mkdir()
    a, b, c, huge = (as_json(requests[n]) for n in ("a", "b", "c", "huge"))
    hexes = {n: requests[n].digest[7:] for n in requests}
    steps: list[Any] = [
        ["acquire", a],
        ["reference", a["digest"], "/pods/one/volume"],
        ["acquire", b],
        ["published"],
        # b was never referenced, but is younger than 10 min: nothing may go yet.
        ["advance", 11 * 60],
        # Now b is old enough; a is referenced. c's 5 MiB would bring the 16 MiB store to
        # ~94 %: b goes (oldest unreferenced first) to get under the low watermark.
        ["acquire", c],
        ["published"],
        # A tree that cannot fit while a and c are in use fails and leaves nothing behind.
        ["reference", c["digest"], "/pods/two/volume"],
        ["acquire", huge],
        ["published"],
        ["status"],
    ]
    script, args = child_files(tmp_path, root, steps)
    shell = 'mount -t tmpfs -o size=16m tmpfs "$1" && exec "$2" "$3" "$4"'

    process = await asyncio.create_subprocess_exec(
        "unshare",
        "-m",
        "sh",
        "-c",
        shell,
        "sh",
        str(root),
        sys.executable,
        script,
        args,
        cwd=WORKTREE,
        env={**os.environ, "PYTHONPATH": str(WORKTREE)},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0, stderr.decode()[-3000:]
    line = next(x for x in stdout.decode().splitlines() if x.startswith("RESULT "))
    got_a, got_b, before, got_c, after, got_huge, left, status = json.loads(line[7:])
    assert got_a[0] == got_b[0] == "TreeReady"
    assert before == sorted([hexes["a"], hexes["b"]])
    assert got_c[0] == "TreeReady"
    assert after == sorted([hexes["a"], hexes["c"]])
    assert got_huge[:2] == ["TreeFailed", "InsufficientStorage"], got_huge
    assert left == sorted([hexes["a"], hexes["c"]])
    capacity = status["capacity"]
    assert capacity["totalBytes"] == 16 * MIB
    models = {m["digest"]: m for m in status["models"]}
    assert models[requests["huge"].digest]["state"] == "Failed"
    assert models[requests["a"].digest]["referenced"] == 1
    assert requests["b"].digest not in models
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["Ready"]["status"] == "True"
    # a and c hold ~10 MiB of 16: under the 80 % watermark.
    assert conditions["CapacityLow"]["status"] == "False"


async def test_a_crash_between_the_marker_and_the_rename_is_finished_from_the_disk(
    big_hub: tuple[CountingHub, HubRepo, str], tmp_path: Path
) -> None:
    # A process that died after sealing the staged tree (files read-only, marker written) but
    # before its rename: nothing is published, and the next acquire checks the bytes on disk
    # and publishes them without fetching any file again.
    server, repo, commit = big_hub
    request = request_for(server, repo, commit)
    store = ModelStore(tmp_path / "first", settings=Settings(), node_name="node-a")
    try:
        await store.acquire(request)
        assert isinstance(await store.wait(request.digest), TreeReady)
    finally:
        await store.close()
    root = tmp_path / "second"
    (root / "staging").mkdir(parents=True)
    shutil.copytree(
        tmp_path / "first" / "trees" / request.digest[7:],
        root / "staging" / request.digest[7:],
    )
    assert not (root / "trees").exists()
    again = ModelStore(root, settings=Settings(), node_name="node-a")
    try:
        gets = len(server.gets())
        await again.acquire(request)
        answer = await again.wait(request.digest)
        assert isinstance(answer, TreeReady), answer
        assert server.gets()[gets:] == []
        assert again.fetched_bytes(request.digest) == 0
        assert (answer.path / "model.safetensors").read_bytes() == (
            repo.commits[commit]["model.safetensors"].content
        )
    finally:
        await again.close()


async def test_the_sweep_removes_partial_downloads_left_for_an_hour(tmp_path: Path) -> None:
    old, fresh = "a" * 64, "b" * 64
    for name in (old, fresh):
        (tmp_path / "staging" / name / "tree").mkdir(parents=True)
        (tmp_path / "staging" / name / "tree" / "part.bin").write_bytes(b"x" * 10)
    stamp = (datetime.now(UTC) - timedelta(hours=2)).timestamp()
    for path in (tmp_path / "staging" / old).rglob("*"):
        os.utime(path, (stamp, stamp))
    os.utime(tmp_path / "staging" / old, (stamp, stamp))
    store = ModelStore(tmp_path, settings=Settings(), node_name="node-a")
    try:
        assert store.sweep_staging() == [f"sha256:{old}"]
        assert sorted(p.name for p in (tmp_path / "staging").iterdir() if p.is_dir()) == [fresh]
    finally:
        await store.close()
