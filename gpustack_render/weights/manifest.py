"""The manifest digest, ``gpustack-manifest v1`` (docs/weights.md, "The manifest digest").

A manifest lists every file of a resolved source, one line each: ``<algorithm>:<hex> <size>
<path>``, after the header line ``gpustack-manifest v1``, every line ending in LF, sorted by the
path's UTF-8 bytes. Hugging Face LFS files are named by their ``sha256``, other Hugging Face files
by their git blob ``gitsha1``, every ModelScope file by its ``sha256``. The digest is ``sha256:``
and the SHA-256 of those bytes. It names the files, not where they came from: the source kind,
repository, commit and patterns are not in it.
"""

from __future__ import annotations

import fnmatch
import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

HEADER = "gpustack-manifest v1"
#: A tree with more entries than this is refused (``ManifestTooLarge``).
MAX_ENTRIES = 100_000
ALGORITHMS = {"sha256": 64, "gitsha1": 40}
_HEX = re.compile(r"^[0-9a-f]+$")


class InvalidManifest(ValueError):  # noqa: N818 (the reason it becomes)
    """An entry breaks a manifest rule; the whole resolution fails with ``InvalidManifest``."""


@dataclass(frozen=True)
class ManifestEntry:
    """One file: its path as served, its content digest and its size in bytes."""

    path: str
    algorithm: str
    hexdigest: str
    size: int

    def line(self) -> str:
        return f"{self.algorithm}:{self.hexdigest} {self.size} {self.path}"


@dataclass(frozen=True)
class Manifest:
    """A checked, sorted manifest and its digest."""

    entries: tuple[ManifestEntry, ...]
    digest: str

    @property
    def file_count(self) -> int:
        return len(self.entries)

    @property
    def size_bytes(self) -> int:
        return sum(e.size for e in self.entries)

    def text(self) -> str:
        return manifest_text(self.entries)


def path_problem(path: str) -> str:
    """Why ``path`` cannot be in a manifest (``""``: it can)."""
    if not path:
        return "the path is empty"
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return "the path is not valid UTF-8"
    for ch in path:
        if ord(ch) < 0x20 or ord(ch) == 0x7F:
            return f"the path holds the control character U+{ord(ch):04X}"
    for segment in path.split("/"):
        if segment in ("", ".", ".."):
            shown = repr(segment) if segment else "an empty"
            return f"the path has {shown} segment"
    return ""


def check_entry(entry: ManifestEntry) -> None:
    """Raise :class:`InvalidManifest` when ``entry`` breaks a rule."""
    problem = path_problem(entry.path)
    if problem:
        raise InvalidManifest(f"{entry.path!r}: {problem}")
    width = ALGORITHMS.get(entry.algorithm)
    if width is None:
        raise InvalidManifest(
            f"{entry.path!r}: digest algorithm {entry.algorithm!r} is not sha256 or gitsha1"
        )
    if len(entry.hexdigest) != width or not _HEX.match(entry.hexdigest):
        raise InvalidManifest(
            f"{entry.path!r}: {entry.algorithm} must be {width} lowercase hex digits, "
            f"got {entry.hexdigest!r}"
        )
    if isinstance(entry.size, bool) or not isinstance(entry.size, int) or entry.size < 0:
        raise InvalidManifest(f"{entry.path!r}: size must be a non-negative integer")


def _key(entry: ManifestEntry) -> bytes:
    return entry.path.encode("utf-8")


def manifest_text(entries: Iterable[ManifestEntry]) -> str:
    """The manifest's text: the header, then one line per entry in UTF-8 byte order."""
    lines = [HEADER, *(e.line() for e in sorted(entries, key=_key))]
    return "".join(f"{line}\n" for line in lines)


def build_manifest(entries: Iterable[ManifestEntry]) -> Manifest:
    """Check every entry, refuse duplicates, sort, and digest (``InvalidManifest`` on a bad one).

    An empty list is not refused here: whether no file is an error (``EmptyManifest``) is the
    caller's rule.
    """
    seen: set[str] = set()
    checked: list[ManifestEntry] = []
    for entry in entries:
        check_entry(entry)
        if entry.path in seen:
            raise InvalidManifest(f"{entry.path!r}: the path is listed twice")
        seen.add(entry.path)
        checked.append(entry)
    ordered = tuple(sorted(checked, key=_key))
    data = manifest_text(ordered).encode("utf-8")
    return Manifest(entries=ordered, digest="sha256:" + hashlib.sha256(data).hexdigest())


def hugging_face_entry(item: dict[str, object]) -> ManifestEntry:
    """One file of a Hugging Face tree listing (``type: file``): LFS → ``sha256`` of
    ``lfs.oid`` (whose ``lfs.size`` must equal ``size``), else ``gitsha1`` of ``oid``."""
    path = item.get("path")
    size = item.get("size")
    if not isinstance(path, str):
        raise InvalidManifest(f"a listed file has no path: {item!r}")
    if not isinstance(size, int) or isinstance(size, bool):
        raise InvalidManifest(f"{path!r}: the listing gives no integer size")
    lfs = item.get("lfs")
    if isinstance(lfs, dict):
        oid, lfs_size = lfs.get("oid"), lfs.get("size")
        if lfs_size != size:
            raise InvalidManifest(f"{path!r}: lfs.size {lfs_size!r} differs from size {size}")
        return ManifestEntry(path, "sha256", str(oid), size)
    return ManifestEntry(path, "gitsha1", str(item.get("oid")), size)


def model_scope_entry(item: dict[str, object]) -> ManifestEntry:
    """One file of a ModelScope listing: ``sha256`` of its ``Sha256`` (every file carries one)."""
    path = item.get("Path")
    size = item.get("Size")
    digest = item.get("Sha256")
    if not isinstance(path, str):
        raise InvalidManifest(f"a listed file has no Path: {item!r}")
    if not isinstance(size, int) or isinstance(size, bool):
        raise InvalidManifest(f"{path!r}: the listing gives no integer Size")
    if not isinstance(digest, str) or not digest:
        raise InvalidManifest(f"{path!r}: the listing gives no Sha256")
    return ManifestEntry(path, "sha256", digest, size)


def _separators(text: str) -> str:
    # huggingface_hub 2.4 reads a backslash as a path separator, in paths and patterns alike.
    return text.replace("\\", "/")


def _normalized(pattern: str) -> str:
    pattern = _separators(pattern)
    return pattern + "*" if pattern.endswith("/") else pattern


def keeps(path: str, allow: Sequence[str] | None, ignore: Sequence[str] | None) -> bool:
    """Whether ``path`` survives the patterns, as ``huggingface_hub`` 2.4 filters
    (``filter_repo_objects``): case-sensitive ``fnmatch``, ``*`` and ``?`` match ``/``, a
    pattern ending in ``/`` matches what is under it, a backslash counts as ``/``, ignore wins
    over allow. An empty allow list keeps everything (the client's ``None``; the client itself
    would keep nothing for ``[]``)."""
    path = _separators(path)
    if allow and not any(fnmatch.fnmatchcase(path, _normalized(p)) for p in allow):
        return False
    return not (ignore and any(fnmatch.fnmatchcase(path, _normalized(p)) for p in ignore))


def filtered(
    entries: Iterable[ManifestEntry], allow: Sequence[str] | None, ignore: Sequence[str] | None
) -> list[ManifestEntry]:
    """The entries the patterns keep, in the given order."""
    return [e for e in entries if keeps(e.path, allow, ignore)]
