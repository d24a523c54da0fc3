"""The manifest digest (``gpustack-manifest v1``) and the patterns (docs/weights.md, "The manifest
digest"; gpustack_render/weights/manifest.py).

Every expected digest here is computed in the test from manifest TEXT written out literally, so a
reader can check the vector by eye; the patterns are checked against huggingface_hub's own
``filter_repo_objects``, the function the engines' downloads filter with.
"""

from __future__ import annotations

import hashlib
import re

import pytest

# huggingface_hub.utils re-exports it; its own module is named so mypy sees the export.
from huggingface_hub.utils._paths import filter_repo_objects

from gpustack_render.weights.manifest import (
    InvalidManifest,
    ManifestEntry,
    build_manifest,
    filtered,
    hugging_face_entry,
    keeps,
    manifest_text,
    model_scope_entry,
)


def digest_of(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


# ---- the reference vector -----------------------------------------------------------------------

REFERENCE_TEXT = (
    "gpustack-manifest v1\n"
    "gitsha1:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa 1 B.json\n"
    "gitsha1:4ff64fe54ff64fe54ff64fe54ff64fe54ff64fe5 807 config.json\n"
    "sha256:8111d5af8111d5af8111d5af8111d5af8111d5af8111d5af8111d5af8111d5af 453864 "
    "model.safetensors\n"
)


def reference_entries() -> list[ManifestEntry]:
    # Given out of order: the manifest sorts.
    return [
        ManifestEntry("model.safetensors", "sha256", "8111d5af" * 8, 453864),
        ManifestEntry("config.json", "gitsha1", "4ff64fe5" * 5, 807),
        ManifestEntry("B.json", "gitsha1", "a" * 40, 1),
    ]


def test_reference_vector() -> None:
    manifest = build_manifest(reference_entries())
    assert manifest.text() == REFERENCE_TEXT
    assert manifest.digest == digest_of(REFERENCE_TEXT)
    assert manifest.digest == (
        "sha256:27c8457b973483260d2849c29d6ffce6c112a397fc21cfdbedea3f2f5aeb9b62"
    )
    assert manifest.file_count == 3
    assert manifest.size_bytes == 1 + 807 + 453864


def test_the_last_line_ends_in_a_line_feed_and_nothing_follows() -> None:
    text = build_manifest(reference_entries()).text()
    assert text.endswith("model.safetensors\n")
    assert not text.endswith("\n\n")
    # One more byte (or one fewer) is another digest.
    assert digest_of(text[:-1]) != build_manifest(reference_entries()).digest


def test_same_files_same_digest_whatever_the_listing_order() -> None:
    assert (
        build_manifest(reference_entries()).digest
        == build_manifest(list(reversed(reference_entries()))).digest
    )


def test_empty_list_is_the_header_alone() -> None:
    # Whether no file is an error (EmptyManifest) is the resolution's rule, not the digest's.
    manifest = build_manifest([])
    assert manifest.text() == "gpustack-manifest v1\n"
    assert manifest.digest == digest_of("gpustack-manifest v1\n")


# ---- order: the path's UTF-8 bytes ---------------------------------------------------------------

SHA = "0" * 40


def test_order_is_by_utf8_bytes() -> None:
    paths = ["z", "é.txt", "a.b", "a/b", "a-b", "a", "B", "Z"]
    text = manifest_text(ManifestEntry(p, "gitsha1", SHA, 0) for p in paths)
    # Upper case (0x41..) before lower (0x61..); '-' (0x2d) < '.' (0x2e) < '/' (0x2f); a
    # non-ASCII path (0xc3 0xa9 here) after every ASCII one.
    expected = (
        "gpustack-manifest v1\n"
        f"gitsha1:{SHA} 0 B\n"
        f"gitsha1:{SHA} 0 Z\n"
        f"gitsha1:{SHA} 0 a\n"
        f"gitsha1:{SHA} 0 a-b\n"
        f"gitsha1:{SHA} 0 a.b\n"
        f"gitsha1:{SHA} 0 a/b\n"
        f"gitsha1:{SHA} 0 z\n"
        f"gitsha1:{SHA} 0 é.txt\n"
    )
    assert text == expected


def test_utf8_order_is_not_utf16_order() -> None:
    # U+FF71 is ef bd b1 in UTF-8, U+10000 is f0 90 80 80: bytes put U+FF71 first. UTF-16 (a
    # JavaScript or Java string sort) would put U+10000 (d800 dc00) first. A space (0x20) sorts
    # before every other printable byte.
    entries = [ManifestEntry(p, "gitsha1", SHA, 0) for p in ["\U00010000", "ab", "a b", "a", "ｱ"]]
    lines = manifest_text(entries).splitlines()[1:]
    assert [line.split(" ", 2)[2] for line in lines] == ["a", "a b", "ab", "ｱ", "\U00010000"]


def test_a_path_with_spaces_keeps_them() -> None:
    manifest = build_manifest([ManifestEntry("my model/weights 1.bin", "sha256", "1" * 64, 5)])
    assert manifest.text() == (
        "gpustack-manifest v1\n"
        "sha256:1111111111111111111111111111111111111111111111111111111111111111 5 "
        "my model/weights 1.bin\n"
    )


def test_size_is_plain_decimal() -> None:
    text = build_manifest([ManifestEntry("f", "gitsha1", SHA, 10**12)]).text()
    assert f"gitsha1:{SHA} 1000000000000 f\n" in text


# ---- the per-file digest from a listing ----------------------------------------------------------


def test_hugging_face_lfs_file_is_named_by_its_sha256() -> None:
    item = {
        "type": "file",
        "oid": "f" * 40,
        "size": 453864,
        "path": "model.safetensors",
        "lfs": {"oid": "8111d5af" * 8, "size": 453864, "pointerSize": 134},
    }
    assert hugging_face_entry(item) == ManifestEntry(
        "model.safetensors", "sha256", "8111d5af" * 8, 453864
    )


def test_hugging_face_plain_file_is_named_by_its_git_blob_sha1() -> None:
    item = {"type": "file", "oid": "4ff64fe5" * 5, "size": 807, "path": "config.json"}
    assert hugging_face_entry(item) == ManifestEntry("config.json", "gitsha1", "4ff64fe5" * 5, 807)


def test_reference_vector_from_a_hugging_face_listing() -> None:
    listing = [
        {"type": "file", "oid": "a" * 40, "size": 1, "path": "B.json"},
        {"type": "file", "oid": "4ff64fe5" * 5, "size": 807, "path": "config.json"},
        {
            "type": "file",
            "oid": "9" * 40,
            "size": 453864,
            "path": "model.safetensors",
            "lfs": {"oid": "8111d5af" * 8, "size": 453864},
        },
    ]
    manifest = build_manifest(hugging_face_entry(i) for i in listing)
    assert manifest.digest == digest_of(REFERENCE_TEXT)


def test_hugging_face_lfs_size_must_equal_the_size() -> None:
    item = {
        "type": "file",
        "oid": "f" * 40,
        "size": 10,
        "path": "w.bin",
        "lfs": {"oid": "1" * 64, "size": 11},
    }
    with pytest.raises(InvalidManifest, match=r"lfs\.size 11 differs from size 10"):
        hugging_face_entry(item)


@pytest.mark.parametrize(
    ("item", "fragment"),
    [
        ({"type": "file", "oid": "a" * 40, "size": 1}, "no path"),
        ({"type": "file", "oid": "a" * 40, "size": "1", "path": "x"}, "no integer size"),
        ({"type": "file", "oid": "a" * 40, "size": True, "path": "x"}, "no integer size"),
    ],
)
def test_hugging_face_item_without_path_or_size(item: dict[str, object], fragment: str) -> None:
    with pytest.raises(InvalidManifest, match=fragment):
        hugging_face_entry(item)


def test_hugging_face_bad_oid_fails_the_manifest() -> None:
    entry = hugging_face_entry({"type": "file", "oid": "A" * 40, "size": 1, "path": "x"})
    with pytest.raises(InvalidManifest, match="40 lowercase hex"):
        build_manifest([entry])


def test_model_scope_file_is_named_by_its_sha256() -> None:
    item = {"Path": "config.json", "Size": 807, "Sha256": "2" * 64, "Type": "blob"}
    assert model_scope_entry(item) == ManifestEntry("config.json", "sha256", "2" * 64, 807)
    text = build_manifest([model_scope_entry(item)]).text()
    assert text == (
        "gpustack-manifest v1\n"
        "sha256:2222222222222222222222222222222222222222222222222222222222222222 807 config.json\n"
    )


@pytest.mark.parametrize(
    ("item", "fragment"),
    [
        ({"Size": 1, "Sha256": "2" * 64}, "no Path"),
        ({"Path": "x", "Size": None, "Sha256": "2" * 64}, "no integer Size"),
        ({"Path": "x", "Size": 1}, "no Sha256"),
        ({"Path": "x", "Size": 1, "Sha256": ""}, "no Sha256"),
    ],
)
def test_model_scope_item_missing_a_field(item: dict[str, object], fragment: str) -> None:
    with pytest.raises(InvalidManifest, match=fragment):
        model_scope_entry(item)


def test_same_files_across_hubs_give_different_digests() -> None:
    hf = build_manifest([ManifestEntry("config.json", "gitsha1", "4ff64fe5" * 5, 807)])
    ms = build_manifest([ManifestEntry("config.json", "sha256", "2" * 64, 807)])
    assert hf.digest != ms.digest


# ---- the rules an entry must meet ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "fragment"),
    [
        ("", "empty"),
        ("a\x00b", "U+0000"),
        ("a\nb", "U+000A"),
        ("a\x1fb", "U+001F"),
        ("a\x7fb", "U+007F"),
        (".", "'.' segment"),
        ("a/./b", "'.' segment"),
        ("..", "'..' segment"),
        ("a/../b", "'..' segment"),
        ("a//b", "an empty segment"),
        ("/a", "an empty segment"),
        ("a/", "an empty segment"),
        ("a\udc80b", "not valid UTF-8"),
    ],
)
def test_each_path_rule_is_refused(path: str, fragment: str) -> None:
    with pytest.raises(InvalidManifest, match=re.escape(fragment)):
        build_manifest([ManifestEntry(path, "gitsha1", SHA, 1)])


def test_a_dotted_name_is_not_a_dot_segment() -> None:
    manifest = build_manifest([ManifestEntry(".gitattributes", "gitsha1", SHA, 1)])
    assert manifest.file_count == 1
    build_manifest([ManifestEntry("a/...b", "gitsha1", SHA, 1)])


def test_a_duplicate_path_is_refused() -> None:
    with pytest.raises(InvalidManifest, match="listed twice"):
        build_manifest(
            [
                ManifestEntry("config.json", "gitsha1", SHA, 1),
                ManifestEntry("config.json", "sha256", "1" * 64, 1),
            ]
        )


@pytest.mark.parametrize(
    ("algorithm", "hexdigest", "fragment"),
    [
        ("md5", "0" * 32, "not sha256 or gitsha1"),
        ("sha1", "0" * 40, "not sha256 or gitsha1"),
        ("SHA256", "0" * 64, "not sha256 or gitsha1"),
        ("sha256", "0" * 63, "64 lowercase hex"),
        ("sha256", "0" * 65, "64 lowercase hex"),
        ("sha256", "G" * 64, "64 lowercase hex"),
        ("sha256", "A" * 64, "64 lowercase hex"),
        ("gitsha1", "0" * 64, "40 lowercase hex"),
        ("gitsha1", "*" * 40, "40 lowercase hex"),
    ],
)
def test_bad_algorithm_or_hex_is_refused(algorithm: str, hexdigest: str, fragment: str) -> None:
    with pytest.raises(InvalidManifest, match=fragment):
        build_manifest([ManifestEntry("x", algorithm, hexdigest, 1)])


@pytest.mark.parametrize("size", [-1, True])
def test_bad_size_is_refused(size: int) -> None:
    with pytest.raises(InvalidManifest, match="non-negative integer"):
        build_manifest([ManifestEntry("x", "gitsha1", SHA, size)])


def test_one_bad_entry_fails_the_whole_manifest() -> None:
    with pytest.raises(InvalidManifest, match="'a//b'"):
        build_manifest([*reference_entries(), ManifestEntry("a//b", "gitsha1", SHA, 1)])


# ---- patterns, against huggingface_hub's own filter ----------------------------------------------

PATHS = [
    "config.json",
    "model.safetensors",
    "model-00001-of-00002.safetensors",
    "original/consolidated.00.pth",
    "original/params.json",
    "onnx/model.onnx",
    "onnx/sub/deep.onnx",
    "README.md",
    "readme.md",
    ".gitattributes",
    "tokenizer/tokenizer.json",
    "a[1].bin",
    "dir\\win.bin",
]

CASES: list[tuple[list[str] | None, list[str] | None]] = [
    (None, None),
    (["*.json"], None),  # '*' matches '/': original/params.json and tokenizer/ too
    (["original/"], None),  # a trailing '/' is 'original/*'
    (["onnx/"], ["*.onnx"]),  # ignore wins over allow
    (["*.safetensors", "*.json"], ["original/*"]),
    (None, ["*.pth", ".*"]),
    (["README.md"], None),  # case-sensitive: readme.md is not kept
    (["*.MD"], None),
    (["model?safetensors"], None),  # '?' is any one character
    (["model[!.]*"], None),  # '[!…]' negates
    (["a[[]1].bin"], None),
    (["dir/*"], None),  # a backslash counts as '/', in paths
    (["dir\\"], None),  # and in patterns (a trailing one too)
    (["*"], ["*/"]),  # nothing ends in '/': 'x/*' ignores everything under a folder
]


@pytest.mark.parametrize(("allow", "ignore"), CASES)
def test_keeps_agrees_with_huggingface_hub(
    allow: list[str] | None, ignore: list[str] | None
) -> None:
    oracle = list(filter_repo_objects(PATHS, allow_patterns=allow, ignore_patterns=ignore))
    ours = [p for p in PATHS if keeps(p, allow, ignore)]
    assert ours == oracle
    entries = [ManifestEntry(p, "gitsha1", SHA, 1) for p in PATHS]
    assert [e.path for e in filtered(entries, allow, ignore)] == oracle


def test_the_cases_tell_the_rules_apart() -> None:
    """Each rule above changes the answer: a filter that ignored it would fail a case."""
    assert keeps("original/params.json", ["*.json"], None)
    assert keeps("original/params.json", ["original/"], None)
    assert not keeps("onnx/model.onnx", ["onnx/"], ["*.onnx"])
    assert not keeps("readme.md", ["README.md"], None)
    assert keeps("dir\\win.bin", ["dir/*"], None)
    assert not keeps("config.json", ["*.safetensors"], None)


def test_empty_allow_keeps_everything() -> None:
    # The spec's empty allow list is the client's None: huggingface_hub given [] keeps nothing,
    # so an absent and an empty allowPatterns both keep every file here.
    assert [p for p in PATHS if keeps(p, [], None)] == PATHS
    assert [p for p in PATHS if keeps(p, [], [])] == PATHS
    assert list(filter_repo_objects(PATHS, allow_patterns=None)) == PATHS
    assert list(filter_repo_objects(PATHS, allow_patterns=[])) == []
