"""The worked vectors printed in the contract notes hold for the library's code.

docs/contract/model-delivery.md §3 prints a manifest and its digest; a reader checks an
implementation against them, so they must be what ``gpustack_render.weights.manifest`` computes.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from gpustack_render.weights.manifest import HEADER, ManifestEntry, build_manifest

NOTE = Path(__file__).resolve().parents[2] / "docs" / "contract" / "model-delivery.md"


def _vector() -> tuple[list[str], str]:
    """The manifest lines and the digest of the note's test vector."""
    text = NOTE.read_text(encoding="utf-8")
    start = text.index("Test vector")
    block = re.search(r"```\n(.*?)```", text[start:], re.S)
    digest = re.search(r"whose digest is `(sha256:[0-9a-f]{64})`", text[start:])
    assert block is not None and digest is not None, "the vector's block or digest moved"
    return block.group(1).splitlines(), digest.group(1)


def test_the_printed_manifest_hashes_to_the_printed_digest() -> None:
    lines, digest = _vector()
    assert lines[0] == HEADER
    data = "".join(line + "\n" for line in lines).encode("utf-8")
    assert "sha256:" + hashlib.sha256(data).hexdigest() == digest


def test_the_library_builds_the_same_manifest_from_the_files_in_any_order() -> None:
    lines, digest = _vector()
    entries = []
    for line in lines[1:]:
        algo_hex, size, path = line.split(" ", 2)
        algorithm, _, hexdigest = algo_hex.partition(":")
        entries.append(ManifestEntry(path, algorithm, hexdigest, int(size)))
    assert len(entries) == 3
    manifest = build_manifest(reversed(entries))
    assert manifest.text().splitlines() == lines
    assert manifest.digest == digest
    assert (manifest.file_count, manifest.size_bytes) == (3, 1 + 807 + 453864)
