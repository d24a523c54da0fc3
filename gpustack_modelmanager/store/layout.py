"""The store's directories under its root (docs/node-store.md, "On disk").

::

    <root>/trees/<hex>/manifest      the completion marker: the manifest text, written last
    <root>/trees/<hex>/tree/...      the published files (read-only), what a volume mounts
    <root>/staging/<hex>/...         a download in progress, the same shape
    <root>/staging/<hex>.lock        held (flock) by the process downloading <hex>
    <root>/trash/...                 trees being removed (renamed out of trees/ first)
    <root>/state.json                references (target -> digest) and last uses

A tree is in ``trees/`` whole and verified, or not at all: a download is assembled in
``staging/``, every file synced, the marker written and synced, then the directory renamed into
``trees/`` in one step. ``<hex>`` is the digest's 64 hex digits.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from pathlib import Path

MARKER = "manifest"
TREE = "tree"


def hex_of(digest: str) -> str:
    return digest.removeprefix("sha256:")


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Layout:
    """Paths of one store root (created on first use)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.trees = root / "trees"
        self.staging = root / "staging"
        self.trash = root / "trash"
        self.state_file = root / "state.json"

    def ensure(self) -> None:
        for folder in (self.trees, self.staging, self.trash):
            folder.mkdir(parents=True, exist_ok=True)

    def published(self, digest: str) -> Path:
        return self.trees / hex_of(digest)

    def tree(self, digest: str) -> Path:
        """What a volume mounts."""
        return self.published(digest) / TREE

    def is_published(self, digest: str) -> bool:
        return (self.published(digest) / MARKER).is_file()

    def staged(self, digest: str) -> Path:
        return self.staging / hex_of(digest)

    def lock(self, digest: str) -> Path:
        return self.staging / f"{hex_of(digest)}.lock"

    def published_digests(self) -> list[str]:
        """Every published digest (a directory without its marker is not one)."""
        if not self.trees.is_dir():
            return []
        return sorted(
            f"sha256:{entry.name}"
            for entry in self.trees.iterdir()
            if len(entry.name) == 64 and (entry / MARKER).is_file()
        )

    def staged_digests(self) -> list[tuple[str, float]]:
        """Every partial download and when anything under it last changed (epoch seconds)."""
        if not self.staging.is_dir():
            return []
        out: list[tuple[str, float]] = []
        for entry in self.staging.iterdir():
            if len(entry.name) != 64 or not entry.is_dir():
                continue
            latest = entry.stat().st_mtime
            for folder, _dirs, files in os.walk(entry):
                for name in files:
                    with contextlib.suppress(OSError):
                        latest = max(latest, os.lstat(os.path.join(folder, name)).st_mtime)
            out.append((f"sha256:{entry.name}", latest))
        return out

    def publish(self, digest: str) -> None:
        """Rename the staged tree (marker written and synced) into ``trees/`` atomically."""
        os.rename(self.staged(digest), self.published(digest))
        fsync_dir(self.trees)
        fsync_dir(self.staging)

    def remove(self, digest: str) -> None:
        """Take a published tree out of ``trees/`` in one rename, then delete it."""
        target = self.trash / f"{hex_of(digest)}.{uuid.uuid4().hex}"
        try:
            os.rename(self.published(digest), target)
        except FileNotFoundError:
            return
        fsync_dir(self.trees)
        shutil.rmtree(target, ignore_errors=True)

    def empty_trash(self) -> None:
        if self.trash.is_dir():
            for entry in self.trash.iterdir():
                shutil.rmtree(entry, ignore_errors=True)

    def discard_staged(self, digest: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(self.staged(digest))


def disk_bytes(path: Path) -> int:
    """Bytes ``path`` takes on disk (allocated blocks), files under it included."""
    total = 0
    if not path.exists():
        return 0
    for folder, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(folder, name)).st_blocks * 512
    return total
