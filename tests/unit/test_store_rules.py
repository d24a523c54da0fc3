"""The node store's pure rules (gpustack_render/weights/store.py), table by table: the
verification of a file against its manifest line, when progress is written, the backoff, which
trees are collected, and the record built from the store's state; and the store's Settings."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

import pytest
from support.hubserver import git_blob_sha1

from gpustack_render.api.nodestore import MAX_MODELS
from gpustack_render.core.settings import Settings, settings_from_data, settings_to_data
from gpustack_render.weights import store as rules
from gpustack_render.weights.manifest import ManifestEntry
from gpustack_render.weights.store import TreeState, Usage

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
CONTENT = b"weights\x00\x01" * 1000


def _hash(entry: ManifestEntry, data: bytes, chunk: int = 7) -> str:
    hasher = rules.new_hasher(entry)
    for start in range(0, len(data), chunk):
        hasher.update(data[start : start + chunk])
    return hasher.hexdigest()


@pytest.mark.parametrize(
    ("algorithm", "hexdigest"),
    [
        ("sha256", hashlib.sha256(CONTENT).hexdigest()),
        ("gitsha1", git_blob_sha1(CONTENT)),
    ],
)
def test_a_file_streamed_in_pieces_verifies_by_its_line(algorithm: str, hexdigest: str) -> None:
    entry = ManifestEntry("model.bin", algorithm, hexdigest, len(CONTENT))
    assert rules.verify(entry, len(CONTENT), _hash(entry, CONTENT)) == ""


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (CONTENT[:-1] + b"\xff", ["'model.bin'", "hash to sha256:", "manifest says sha256:"]),
        (CONTENT[:-1], ["'model.bin'", f"sent {len(CONTENT) - 1} bytes"]),
        (CONTENT + b"x", ["'model.bin'", "more than the manifest's"]),
    ],
    ids=["wrong-byte", "short", "long"],
)
def test_a_file_that_differs_is_refused_naming_it(data: bytes, words: list[str]) -> None:
    entry = ManifestEntry("model.bin", "sha256", hashlib.sha256(CONTENT).hexdigest(), len(CONTENT))
    problem = rules.verify(entry, len(data), _hash(entry, data))
    assert problem
    for word in words:
        assert word in problem


def test_a_git_blob_digest_includes_the_size() -> None:
    # The same bytes under another size in the line cannot pass (git hashes the size in).
    entry = ManifestEntry("a.json", "gitsha1", git_blob_sha1(CONTENT), len(CONTENT) + 1)
    assert rules.verify(entry, len(CONTENT), _hash(entry, CONTENT))


@pytest.mark.parametrize(
    ("digest", "ok"),
    [
        ("sha256:" + "a" * 64, True),
        ("sha256:" + "A" * 64, False),
        ("sha256:" + "a" * 63, False),
        ("sha256:../../etc/passwd", False),
        ("", False),
    ],
)
def test_digest_problem(digest: str, ok: bool) -> None:
    assert (rules.digest_problem(digest) == "") is ok


SIZE = 1000


@pytest.mark.parametrize(
    ("downloaded", "seconds_since", "last_bytes", "due"),
    [
        (0, None, None, True),  # the first, always
        (1000, 1, 990, True),  # the last, always
        (1000, 1, 1000, False),  # the last was written already
        (120, 29, 0, False),  # moved a step, but within 30 s
        (120, 30, 0, True),  # a step, 30 s later
        (60, 300, 51, False),  # the same 5 % step, however late
        (100, 31, 99, True),  # crossed 10 %
    ],
)
def test_progress_is_written_on_thresholds(
    downloaded: int, seconds_since: int | None, last_bytes: int | None, due: bool
) -> None:
    last = NOW - timedelta(seconds=seconds_since) if seconds_since is not None else None
    assert (
        rules.progress_due(
            downloaded=downloaded,
            size=SIZE,
            now=NOW,
            last_written=last,
            last_written_bytes=last_bytes,
        )
        is due
    )


@pytest.mark.parametrize(
    ("failures", "seconds"),
    [(1, 60), (2, 120), (3, 240), (6, 1920), (7, 3600), (8, 3600), (500, 3600), (0, 60)],
)
def test_backoff_doubles_from_a_minute_to_an_hour(failures: int, seconds: int) -> None:
    assert rules.retry_delay(failures) == seconds
    assert rules.retry_time(failures, NOW) == NOW + timedelta(seconds=seconds)


def _tree(
    name: str,
    *,
    idle_minutes: float | None = 60,
    size: int = 10,
    referenced: int = 0,
    state: str = "Ready",
    pinned: bool = False,
) -> TreeState:
    last = NOW - timedelta(minutes=idle_minutes) if idle_minutes is not None else None
    return TreeState(
        digest=f"sha256:{name * 64}"[:71],
        state=state,  # type: ignore[arg-type]
        size_bytes=size,
        stored_bytes=size,
        referenced=referenced,
        last_used=last,
        pinned=pinned,
    )


def _names(digests: list[str]) -> list[str]:
    return [d[7] for d in digests]


@pytest.mark.parametrize(
    ("trees", "used", "victims"),
    [
        # Oldest last use first, until under 70 of 100.
        ([_tree("a", idle_minutes=30), _tree("b", idle_minutes=90), _tree("c")], 95, "bca"),
        ([_tree("a", idle_minutes=30), _tree("b", idle_minutes=90), _tree("c")], 85, "bc"),
        # Already under the low watermark: nothing.
        ([_tree("a"), _tree("b")], 69, ""),
        # Referenced, pinned, downloading, failed, recently used: never.
        (
            [
                _tree("a", referenced=1),
                _tree("b", pinned=True),
                _tree("c", state="Downloading"),
                _tree("d", state="Failed"),
                _tree("e", idle_minutes=9.9),
                _tree("f", idle_minutes=10),
            ],
            99,
            "f",
        ),
        # A tree never used since it was published counts as idle long enough.
        ([_tree("a", idle_minutes=None)], 90, "a"),
        # Ties in last use: by digest.
        ([_tree("b"), _tree("a")], 75, "a"),
    ],
)
def test_collection_by_the_watermarks(trees: list[TreeState], used: int, victims: str) -> None:
    got = rules.collect(trees, Usage(100, used), now=NOW, low_percent=70)
    assert "".join(_names(got)) == victims


@pytest.mark.parametrize(
    ("used", "high", "above"), [(80, 80, False), (81, 80, True), (80.5, 80, True), (0, 1, False)]
)
def test_above_the_high_watermark(used: float, high: int, above: bool) -> None:
    usage = Usage(1000, int(used * 10))
    assert rules.above_high(usage, high) is above


def test_the_record_lists_models_by_digest_and_says_capacity() -> None:
    trees = [
        _tree("b", referenced=2),
        TreeState(
            digest="sha256:" + "a" * 64,
            state="Failed",
            size_bytes=100,
            downloaded_bytes=40,
            reason="DigestMismatch",
            message="'x.bin': wrong",
            retry_time=NOW + timedelta(minutes=1),
            source="huggingFace:org/m@abc",
        ),
        TreeState(digest="sha256:" + "c" * 64, state="Downloading", size_bytes=100),
    ]
    status = rules.store_status(trees, Usage(1000, 850), stored_bytes=110, high_percent=80, now=NOW)
    models = status.models or []
    assert [m.digest[7] for m in models] == ["a", "b", "c"]
    failed, ready, downloading = models
    assert (failed.reason, failed.retry_time, failed.source) == (
        "DigestMismatch",
        "2026-03-01T12:01:00Z",
        "huggingFace:org/m@abc",
    )
    assert (ready.state, ready.referenced, ready.reason, ready.retry_time) == (
        "Ready",
        2,
        None,
        None,
    )
    assert downloading.downloaded_bytes == 0
    assert status.capacity is not None
    assert (status.capacity.total_bytes, status.capacity.used_percent) == (1000, 85)
    conditions = {c.type: c for c in status.conditions or []}
    assert (conditions["Ready"].status, conditions["Ready"].reason) == ("True", "StoreReady")
    assert (conditions["CapacityLow"].status, conditions["CapacityLow"].reason) == (
        "True",
        "AboveHighWatermark",
    )
    # A later record with the same states keeps the transition times.
    later = rules.store_status(
        trees,
        Usage(1000, 860),
        stored_bytes=110,
        high_percent=80,
        now=NOW + timedelta(hours=1),
        previous=status,
    )
    assert later.conditions == status.conditions or all(
        a.last_transition_time == b.last_transition_time
        for a, b in zip(later.conditions or [], status.conditions or [], strict=True)
    )
    down = rules.store_status(
        trees,
        Usage(1000, 100),
        stored_bytes=110,
        high_percent=80,
        now=NOW + timedelta(hours=2),
        previous=later,
        problem="the store's directory is not writable",
    )
    moved = {c.type: c for c in down.conditions or []}
    assert moved["Ready"].status == "False"
    assert moved["Ready"].message == "the store's directory is not writable"
    assert moved["Ready"].last_transition_time == "2026-03-01T14:00:00Z"
    assert moved["CapacityLow"].status == "False"
    assert rules.record_changed(later, down) and not rules.record_changed(later, later)


def test_the_record_keeps_referenced_and_busy_digests_under_the_cap() -> None:
    idle = [
        TreeState(
            digest=f"sha256:{i:064x}",
            state="Ready",
            last_used=NOW - timedelta(minutes=i),
        )
        for i in range(MAX_MODELS + 10)
    ]
    busy = TreeState(digest="sha256:" + "f" * 64, state="Downloading")
    oldest_referenced = TreeState(
        digest="sha256:" + "e" * 64, state="Ready", referenced=1, last_used=NOW - timedelta(days=9)
    )
    status = rules.store_status(
        [*idle, busy, oldest_referenced], None, stored_bytes=0, high_percent=80, now=NOW
    )
    digests = [m.digest for m in status.models or []]
    assert len(digests) == MAX_MODELS
    assert digests == sorted(digests)
    assert busy.digest in digests and oldest_referenced.digest in digests
    # The least recently used idle trees are the ones left out.
    assert idle[-1].digest not in digests and idle[0].digest in digests
    assert status.capacity is None


# ---- Settings ---------------------------------------------------------------------------------


def test_store_settings_defaults_and_round_trip() -> None:
    s = Settings()
    assert (
        s.store_high_watermark_percent,
        s.store_low_watermark_percent,
        s.store_download_concurrency,
    ) == (80, 70, 8)
    data = settings_to_data(s)
    assert data["model-store-high-watermark-percent"] == "80"
    assert settings_from_data(data)[0] == s
    changed, errs = settings_from_data(
        {
            "model-store-high-watermark-percent": "95",
            "model-store-low-watermark-percent": " 90 ",
            "model-store-download-concurrency": "100",
        }
    )
    assert not errs
    assert (
        changed.store_high_watermark_percent,
        changed.store_low_watermark_percent,
        changed.store_download_concurrency,
    ) == (95, 90, 100)


@pytest.mark.parametrize(
    ("data", "field", "expect"),
    [
        (
            {"model-store-download-concurrency": "0"},
            "model-store-download-concurrency",
            (80, 70, 8),
        ),
        (
            {"model-store-download-concurrency": "101"},
            "model-store-download-concurrency",
            (80, 70, 8),
        ),
        (
            {"model-store-high-watermark-percent": "8.5"},
            "model-store-high-watermark-percent",
            (80, 70, 8),
        ),
        (
            {"model-store-high-watermark-percent": "-1"},
            "model-store-high-watermark-percent",
            (80, 70, 8),
        ),
        (
            {"model-store-low-watermark-percent": "80"},
            "model-store-low-watermark-percent",
            (80, 70, 8),
        ),
        (
            {"model-store-high-watermark-percent": "60"},
            "model-store-low-watermark-percent",
            (80, 70, 8),
        ),
        (
            {"model-store-high-watermark-percent": "50", "model-store-low-watermark-percent": "60"},
            "model-store-low-watermark-percent",
            (80, 70, 8),
        ),
    ],
)
def test_bad_store_settings_keep_defaults_and_name_the_key(
    data: dict[str, str], field: str, expect: tuple[int, int, int]
) -> None:
    settings, errs = settings_from_data(data)
    assert (
        settings.store_high_watermark_percent,
        settings.store_low_watermark_percent,
        settings.store_download_concurrency,
    ) == expect
    assert errs
    assert any(field in str(e) for e in errs), [str(e) for e in errs]


def test_stale_partial_downloads() -> None:
    staged = [
        ("sha256:" + "a" * 64, NOW - timedelta(hours=2)),
        ("sha256:" + "b" * 64, NOW - timedelta(minutes=59)),
        ("sha256:" + "c" * 64, NOW - timedelta(hours=5)),
    ]
    got = rules.stale_staging(staged, running=["sha256:" + "c" * 64], now=NOW)
    assert got == ["sha256:" + "a" * 64]


@pytest.mark.parametrize(
    ("reason", "failed_for", "asking", "held"),
    [
        # The bytes or the hub: every request waits.
        ("DigestMismatch", "team-a@c1", "team-b@c1", True),
        ("SourceUnavailable", "team-a@c1", "team-b@c1", True),
        ("InsufficientStorage", "team-a@c1", "team-b@main", True),
        # The request's own: only requests like it wait.
        ("AccessDenied", "team-b@main", "team-b@main", True),
        ("AccessDenied", "team-b@main", "team-a@c1", False),
        ("RevisionNotFound", "team-b@v2", "team-b@main", False),
        ("ManifestMismatch", "team-b@main", "team-a@c1", False),
    ],
)
def test_holds_back(reason: str, failed_for: str, asking: str, held: bool) -> None:
    assert rules.holds_back(reason, failed_for, asking) is held
