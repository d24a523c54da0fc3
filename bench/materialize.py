"""Materialization by the node store against a plain ``huggingface_hub`` download of the same
files, from the same local hub, in the same run (docs/node-store.md, "Materialization").

The hub (tests/support/hubserver.py, the test hub the real client accepts) runs in a process of
its own, serving one commit of :data:`FILES` LFS files of :data:`FILE_MIB` MiB each plus two
small JSON files. Each round, alternately:

- **store**: ``ModelStore.acquire`` of the commit's manifest digest and ``wait`` until the tree
  is published: the listing, every file streamed with its SHA-256 or git blob SHA-1 computed as
  it arrives and checked against the manifest, each file synced, the marker, the atomic rename;
- **plain**: ``huggingface_hub.snapshot_download`` of the same commit into an empty cache
  (``max_workers`` equal to the store's download concurrency), which checks no digest.

Best of :data:`ROUNDS` each; the ratio store/plain is the figure (target ≤ 1.5). Then the second
replica: an ``acquire`` of the same digest on the same store, and on a new store over the same
root (a restarted plugin), must answer Ready having fetched zero bytes.

Run: ``python -m bench.materialize`` (or ``python -m bench`` for every benchmark).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from gpustack_modelmanager.store import ModelStore, TreeReady, TreeRequest
from gpustack_render.core.settings import Settings
from gpustack_render.weights.manifest import ManifestEntry, build_manifest

FILES = 6
FILE_MIB = 32
ROUNDS = 3
REPO = "bench/model"


async def _serve() -> None:
    """The hub process: print the hub's coordinates as one JSON line, serve until stdin ends."""
    from support.hubserver import HubServer

    server = HubServer()
    repo = server.repo(REPO)
    files: dict[str, bytes | tuple[bytes, bool]] = {
        "config.json": b'{"model_type": "llama"}\n',
        "tokenizer_config.json": b"{}\n",
    }
    for i in range(FILES):
        files[f"model-{i + 1:05d}-of-{FILES:05d}.safetensors"] = (os.urandom(FILE_MIB << 20), True)
    commit = repo.add_commit(files, ref="main")
    manifest = build_manifest(
        ManifestEntry(f.path, "sha256" if f.lfs else "gitsha1", f.etag, f.size)
        for f in repo.commits[commit].values()
    )
    url = await server.start()
    print(
        json.dumps(
            {
                "url": url,
                "commit": commit,
                "digest": manifest.digest,
                "size": manifest.size_bytes,
            }
        ),
        flush=True,
    )
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    await server.stop()


async def _store_round(root: Path, request: TreeRequest, settings: Settings) -> float:
    store = ModelStore(root, settings=settings, node_name="bench")
    try:
        start = time.perf_counter()
        await store.acquire(request)
        answer = await store.wait(request.digest)
        seconds = time.perf_counter() - start
        assert isinstance(answer, TreeReady), answer
        return seconds
    finally:
        await store.close()


def _plain_round(cache: Path, hub: dict[str, Any], workers: int) -> float:
    from huggingface_hub import snapshot_download

    start = time.perf_counter()
    snapshot_download(
        REPO,
        revision=hub["commit"],
        endpoint=hub["url"],
        cache_dir=str(cache),
        token=False,
        max_workers=workers,
    )
    return time.perf_counter() - start


async def _second_replica(root: Path, request: TreeRequest, settings: Settings) -> int:
    """Bytes fetched by a second acquire of a published digest, on the same store and on a new
    store over the same root."""
    store = ModelStore(root, settings=settings, node_name="bench")
    fetched = 0
    try:
        await store.acquire(request)
        assert isinstance(await store.wait(request.digest), TreeReady)
        before = store.fetched_bytes()
        assert isinstance(await store.acquire(request), TreeReady)
        fetched += store.fetched_bytes() - before
    finally:
        await store.close()
    restarted = ModelStore(root, settings=settings, node_name="bench")
    try:
        assert isinstance(await restarted.acquire(request), TreeReady)
        fetched += restarted.fetched_bytes()
    finally:
        await restarted.close()
    return fetched


def main() -> int:
    env = {**os.environ, "HF_HUB_DISABLE_TELEMETRY": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
    os.environ.update(
        {k: env[k] for k in ("HF_HUB_DISABLE_TELEMETRY", "HF_HUB_DISABLE_PROGRESS_BARS")}
    )
    hub_process = subprocess.Popen(
        [sys.executable, "-m", "bench.materialize", "--serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=Path(__file__).resolve().parents[1],
        env=env,
        text=True,
    )
    try:
        assert hub_process.stdout is not None
        hub = json.loads(hub_process.stdout.readline())
        settings = Settings()
        request = TreeRequest(
            digest=hub["digest"],
            hub="huggingFace",
            repository=REPO,
            commit=hub["commit"],
            endpoint=hub["url"],
            size_bytes=hub["size"],
            source=f"huggingFace:{REPO}@{hub['commit']}",
        )
        store_s: list[float] = []
        plain_s: list[float] = []
        with tempfile.TemporaryDirectory(prefix="bench-materialize-") as folder:
            base = Path(folder)
            for i in range(ROUNDS):
                root, cache = base / f"store-{i}", base / f"cache-{i}"
                store_s.append(asyncio.run(_store_round(root, request, settings)))
                shutil.rmtree(root)
                plain_s.append(_plain_round(cache, hub, settings.store_download_concurrency))
                shutil.rmtree(cache)
            second = asyncio.run(_second_replica(base / "replica", request, settings))
    finally:
        if hub_process.stdin is not None:
            hub_process.stdin.close()
        try:
            hub_process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            hub_process.kill()
            hub_process.wait()
    mib = hub["size"] / 2**20
    best_store, best_plain = min(store_s), min(plain_s)
    ratio = best_store / best_plain
    print(f"{mib:.0f} MiB in {FILES + 2} files, best of {ROUNDS}:")
    print(
        f"  store (verified, synced, published) {best_store:.2f} s ({mib / best_store:.0f} MiB/s)"
    )
    print(
        f"  plain snapshot_download             {best_plain:.2f} s ({mib / best_plain:.0f} MiB/s)"
    )
    print(f"  second replica fetched {second} bytes")
    print(
        f"mib={mib:.0f} store_s={best_store:.3f} plain_s={best_plain:.3f} ratio={ratio:.2f} "
        f"second_replica_bytes={second}"
    )
    return 0 if ratio <= 1.5 and second == 0 else 1


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        asyncio.run(_serve())
        sys.exit(0)
    sys.exit(main())
