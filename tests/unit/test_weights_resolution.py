"""Resolution and revalidation rules (docs/weights.md, "Resolution" and "Revalidation";
gpustack_render/weights/resolution.py): every row of the hub answer tables, the listings, and
every row of the staircase."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from gpustack_render.api.artifact import ModelArtifact
from gpustack_render.weights import resolution as r
from gpustack_render.weights.manifest import MAX_ENTRIES, ManifestEntry, build_manifest

T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
DAY = 24 * 3600
COMMIT = "0123456789abcdef0123456789abcdef01234567"
REQUEST = r.HubRequest("huggingFace", "https://hub.test", "org/model", "main", "revision")
MS_REQUEST = r.HubRequest("modelScope", "https://ms.test", "org/model", "master", "listing")


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


# ---- the Hugging Face answer table ----


@pytest.mark.parametrize(
    ("status", "headers", "reason"),
    [
        (200, {}, ""),
        (204, {}, ""),
        (302, {}, ""),  # a revalidation HEAD is not redirected: 3xx passes
        (307, {"Location": "https://cdn.test/x"}, ""),
        (404, {"X-Error-Code": "RevisionNotFound"}, "RevisionNotFound"),
        (404, {"x-error-code": "RevisionNotFound"}, "RevisionNotFound"),  # any header case
        (403, {"X-Error-Code": "GatedRepo"}, "AccessDenied"),
        (401, {"X-Error-Code": "GatedRepo"}, "AccessDenied"),
        (200 + 200, {"X-Error-Code": "GatedRepo"}, "AccessDenied"),  # 400 with GatedRepo
        (401, {}, "AccessDenied"),
        (403, {}, "AccessDenied"),
        (404, {"X-Error-Code": "RepoNotFound"}, "AccessDenied"),
        (404, {"X-Error-Code": "EntryNotFound"}, "AccessDenied"),
        (404, {}, "AccessDenied"),
        (401, {"X-Error-Code": "RevisionNotFound"}, "AccessDenied"),  # only a 404 says it
        (500, {}, "SourceUnavailable"),
        (502, {}, "SourceUnavailable"),
        (503, {"X-Error-Code": "RevisionNotFound"}, "SourceUnavailable"),
        (429, {}, "SourceUnavailable"),
        (400, {}, "SourceUnavailable"),  # an answer the table does not name: try again later
    ],
)
def test_hugging_face_table(status: int, headers: dict[str, str], reason: str) -> None:
    assert r.hugging_face_reason(status, headers) == reason
    problem = r.hugging_face_problem(REQUEST, status, headers)
    if not reason:
        assert problem is None
    else:
        assert problem is not None
        assert problem.reason == reason
        assert f"HTTP {status}" in problem.message


def test_only_a_5xx_is_a_silent_hub() -> None:
    assert r.hugging_face_problem(REQUEST, 503, {}).silent  # type: ignore[union-attr]
    for status in (429, 401, 404, 400):
        problem = r.hugging_face_problem(REQUEST, status, {})
        assert problem is not None and not problem.silent
    assert r.unreachable(REQUEST, "connection refused").silent
    assert not r.unusable(REQUEST, "the body is 17 MiB").silent


def test_access_denied_message_says_does_not_exist_or_is_not_accessible() -> None:
    problem = r.hugging_face_problem(REQUEST, 401, {})
    assert problem is not None
    assert "repository 'org/model' does not exist or is not accessible" in problem.message
    assert "spec.source.huggingFace.secretRef" in problem.message


def test_revision_not_found_message_names_the_field_and_the_value() -> None:
    problem = r.hugging_face_problem(REQUEST, 404, {"X-Error-Code": "RevisionNotFound"})
    assert problem is not None
    assert "spec.source.huggingFace.revision" in problem.message
    assert "'main'" in problem.message
    assert "new ModelArtifact" in problem.message


@pytest.mark.parametrize(
    ("sha", "ok"),
    [
        (COMMIT, True),
        (COMMIT.upper(), False),
        (COMMIT[:39], False),
        (COMMIT + "0", False),
        (None, False),
        (12, False),
        ("g" * 40, False),
    ],
)
def test_revision_answer_must_be_40_hex(sha: object, ok: bool) -> None:
    problem = r.revision_problem(REQUEST, sha)
    assert (problem is None) is ok
    if problem is not None:
        assert problem.reason == "SourceUnavailable" and not problem.silent


# ---- the ModelScope answer table ----


@pytest.mark.parametrize(
    ("status", "code", "reason"),
    [
        (200, None, ""),
        (200, 200, ""),
        (404, 10990101004, "RevisionNotFound"),
        (404, "10990101004", "RevisionNotFound"),
        (404, 10010205001, "AccessDenied"),
        (404, 10010200001, "AccessDenied"),
        (404, None, "AccessDenied"),
        (404, 12345, "AccessDenied"),
        (401, None, "AccessDenied"),
        (403, 10990101004, "AccessDenied"),  # the no-tree code counts on a 404 only
        (500, None, "SourceUnavailable"),
        (502, None, "SourceUnavailable"),
        (429, None, "SourceUnavailable"),
        (400, None, "SourceUnavailable"),
        (302, None, "SourceUnavailable"),
    ],
)
def test_model_scope_table(status: int, code: object, reason: str) -> None:
    assert r.model_scope_reason(status, code) == reason
    problem = r.model_scope_problem(MS_REQUEST, status, code)
    assert (problem.reason if problem else "") == reason


@pytest.mark.parametrize(
    ("status", "reason"),
    [
        (200, ""),
        (404, "AccessDenied"),  # every 404 of the HEAD, whatever it is
        (401, "AccessDenied"),
        (403, "AccessDenied"),
        (500, "SourceUnavailable"),
        (204, "SourceUnavailable"),  # only a 200 passes the ModelScope HEAD
    ],
)
def test_model_scope_head_table(status: int, reason: str) -> None:
    assert r.model_scope_head_reason(status) == reason
    problem = r.model_scope_problem(MS_REQUEST, status, head=True)
    assert (problem.reason if problem else "") == reason


def test_model_scope_messages_name_its_fields() -> None:
    problem = r.model_scope_problem(MS_REQUEST, 403)
    assert problem is not None and "spec.source.modelScope.secretRef" in problem.message
    assert r.model_scope_problem(MS_REQUEST, 503).silent  # type: ignore[union-attr]


# ---- listings ----


def hf_file(path: str, size: int = 1, *, lfs: str | None = None) -> dict[str, Any]:
    item: dict[str, Any] = {"type": "file", "oid": "a" * 40, "size": size, "path": path}
    if lfs is not None:
        item["lfs"] = {"oid": lfs, "size": size, "pointerSize": 130}
    return item


def test_hugging_face_listing_skips_directories_and_builds_the_manifest() -> None:
    items = [
        {"type": "directory", "oid": "b" * 40, "size": 0, "path": "sub"},
        hf_file("sub/w.safetensors", 10, lfs="1" * 64),
        hf_file("config.json", 3),
    ]
    manifest = r.hugging_face_manifest(items, REQUEST)
    text = (
        "gpustack-manifest v1\n"
        f"gitsha1:{'a' * 40} 3 config.json\n"
        f"sha256:{'1' * 64} 10 sub/w.safetensors\n"
    )
    assert manifest.digest == "sha256:" + hashlib.sha256(text.encode()).hexdigest()
    assert (manifest.file_count, manifest.size_bytes) == (2, 13)


def test_hugging_face_listing_other_type_is_invalid() -> None:
    with pytest.raises(r.HubProblem) as caught:
        r.hugging_face_manifest([{"type": "submodule", "path": "x", "oid": "a" * 40}], REQUEST)
    assert caught.value.reason == "InvalidManifest"
    assert "'submodule'" in caught.value.message


def test_hugging_face_hidden_lfs_oid_is_access_denied() -> None:
    with pytest.raises(r.HubProblem) as caught:
        r.hugging_face_manifest([hf_file("w.bin", 5, lfs="*" * 64)], REQUEST)
    assert caught.value.reason == "AccessDenied"
    assert "does not exist or is not accessible" in caught.value.message


def test_hugging_face_bad_entry_is_invalid_manifest() -> None:
    for item in (hf_file("a//b"), {**hf_file("w", 2, lfs="1" * 64), "lfs": {"oid": "1" * 64}}):
        with pytest.raises(r.HubProblem) as caught:
            r.hugging_face_manifest([item], REQUEST)
        assert caught.value.reason == "InvalidManifest"


def test_duplicate_path_is_invalid_manifest() -> None:
    with pytest.raises(r.HubProblem) as caught:
        r.hugging_face_manifest([hf_file("x"), hf_file("x")], REQUEST)
    assert caught.value.reason == "InvalidManifest"


def test_empty_listing_and_empty_filter_are_empty_manifest() -> None:
    with pytest.raises(r.HubProblem) as caught:
        r.hugging_face_manifest([{"type": "directory", "path": "d", "oid": "b" * 40}], REQUEST)
    assert caught.value.reason == "EmptyManifest"
    assert "holds no file" in caught.value.message
    with pytest.raises(r.HubProblem) as caught:
        r.hugging_face_manifest([hf_file("config.json")], REQUEST, allow=["*.safetensors"])
    assert caught.value.reason == "EmptyManifest"
    assert "spec.allowPatterns ['*.safetensors']" in caught.value.message


def test_patterns_filter_before_the_manifest() -> None:
    items = [hf_file("config.json", 3), hf_file("w.safetensors", 10, lfs="1" * 64)]
    kept = r.hugging_face_manifest(items, REQUEST, ignore=["*.json"])
    assert [e.path for e in kept.entries] == ["w.safetensors"]
    assert (
        kept.digest
        == build_manifest([ManifestEntry("w.safetensors", "sha256", "1" * 64, 10)]).digest
    )


def test_too_many_entries() -> None:
    items = (
        {"type": "directory", "path": f"d{i}", "oid": "b" * 40} for i in range(MAX_ENTRIES + 1)
    )
    with pytest.raises(r.HubProblem) as caught:
        r.hugging_face_manifest(items, REQUEST)
    assert caught.value.reason == "ManifestTooLarge"
    # Exactly the bound is not too many (it is empty here: directories only).
    items = ({"type": "directory", "path": f"d{i}", "oid": "b" * 40} for i in range(MAX_ENTRIES))
    with pytest.raises(r.HubProblem) as caught:
        r.hugging_face_manifest(items, REQUEST)
    assert caught.value.reason == "EmptyManifest"


def ms_file(path: str, size: int = 1, sha: str = "2" * 64) -> dict[str, Any]:
    return {
        "Name": path.rsplit("/", 1)[-1],
        "Path": path,
        "Type": "blob",
        "Size": size,
        "Sha256": sha,
    }


def test_model_scope_listing() -> None:
    items = [{"Path": "sub", "Type": "tree", "Size": 0}, ms_file("sub/a.bin", 4), ms_file("c.json")]
    manifest = r.model_scope_manifest(items, MS_REQUEST)
    text = f"gpustack-manifest v1\nsha256:{'2' * 64} 1 c.json\nsha256:{'2' * 64} 4 sub/a.bin\n"
    assert manifest.digest == "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def test_model_scope_file_without_sha256_or_other_type() -> None:
    with pytest.raises(r.HubProblem) as caught:
        r.model_scope_manifest([{"Path": "x", "Type": "blob", "Size": 1}], MS_REQUEST)
    assert caught.value.reason == "InvalidManifest" and "Sha256" in caught.value.message
    with pytest.raises(r.HubProblem) as caught:
        r.model_scope_manifest([{"Path": "x", "Type": "commit", "Size": 1}], MS_REQUEST)
    assert caught.value.reason == "InvalidManifest"


def test_model_scope_truncation_rule() -> None:
    assert r.model_scope_truncated(3000)
    assert not r.model_scope_truncated(2999)
    assert not r.model_scope_truncated(3001)
    problem = r.model_scope_unenumerable(MS_REQUEST, "big")
    assert problem.reason == "SourceUnavailable" and "'big'" in problem.message


def test_first_root_file() -> None:
    items = [
        hf_file("z/deep.bin"),
        {"type": "directory", "path": "a", "oid": "b" * 40},
        hf_file("config.json"),
        hf_file("README.md"),
    ]
    assert r.first_root_file(items) == "README.md"  # by bytes: upper case first
    assert r.first_root_file([hf_file("z/b"), hf_file("a/c")]) == "a/c"  # no root file
    assert r.first_root_file([{"type": "directory", "path": "a"}]) is None
    ms = [ms_file("b.json"), {"Path": "a", "Type": "tree"}, ms_file("a/x")]
    assert r.first_root_file(ms, path_key="Path", file_type="blob") == "b.json"


# ---- the staircase ----


def artifact(
    *,
    source: dict[str, Any] | None = None,
    status: dict[str, Any] | None = None,
    expected: str | None = None,
    generation: int = 1,
) -> ModelArtifact:
    spec: dict[str, Any] = {
        "source": source or {"huggingFace": {"repository": "org/model", "revision": "main"}}
    }
    if expected:
        spec["expectedDigest"] = expected
    return ModelArtifact.model_validate(
        {
            "apiVersion": "worker.gpustack.ai/v1",
            "kind": "ModelArtifact",
            "metadata": {"name": "m", "namespace": "ns", "uid": "u1", "generation": generation},
            "spec": spec,
            "status": status or {},
        }
    )


MANIFEST = build_manifest([ManifestEntry("config.json", "gitsha1", "a" * 40, 3)])
RESOLUTION = r.Resolution(COMMIT, MANIFEST)
OTHER = build_manifest([ManifestEntry("config.json", "gitsha1", "b" * 40, 3)])


def conds(status: Any) -> dict[str, tuple[str, str, str | None]]:
    return {c.type: (c.status, c.reason, c.last_transition_time) for c in status.conditions or ()}


def advance(a: ModelArtifact, outcome: r.Outcome, now: datetime) -> tuple[ModelArtifact, r.Step]:
    step = r.next_status(a, outcome, now=now, interval=DAY)
    return a.model_copy(update={"status": step.status}), step


def test_resolving_is_written_alone_before_the_first_answer() -> None:
    a = artifact(generation=3)
    status = r.resolving_status(a, now=T0)
    assert status is not None
    assert conds(status) == {"Resolved": ("Unknown", "Resolving", "2026-01-02T03:04:05Z")}
    assert status.observed_generation == 3
    assert status.resolved is None
    # Once an answer is stored, nothing is written before the next one.
    b, _ = advance(a, r.Outcome.passed(RESOLUTION), T0)
    assert r.resolving_status(b, now=at(5)) is None
    c, _ = advance(a.model_copy(update={"status": status}), r.Outcome.unavailable("x"), T0)
    assert r.resolving_status(c, now=at(5)) is None


def test_resolution_passes() -> None:
    a = artifact(status=r.resolving_status(artifact(), now=T0).model_dump(by_alias=True))  # type: ignore[union-attr]
    b, step = advance(a, r.Outcome.passed(RESOLUTION), at(2))
    resolved = b.status.resolved
    assert resolved is not None
    assert resolved.revision == COMMIT
    assert resolved.manifest_digest == MANIFEST.digest
    assert resolved.digest_source == "Hub"
    assert (resolved.file_count, resolved.size_bytes) == (1, 3)
    assert resolved.resolved_time == resolved.last_validated_time == "2026-01-02T03:04:07Z"
    assert conds(b.status) == {
        "Resolved": ("True", "Resolved", "2026-01-02T03:04:07Z"),
        "Degraded": ("False", "Healthy", "2026-01-02T03:04:07Z"),
    }
    assert b.status.observed_generation == 1
    assert step.requeue_after == DAY


def test_resolution_digest_mismatch_names_both_digests() -> None:
    a = artifact(expected=OTHER.digest)
    b, step = advance(a, r.Outcome.passed(RESOLUTION), T0)
    assert b.status.resolved is None
    assert conds(b.status)["Resolved"][:2] == ("False", "DigestMismatch")
    assert conds(b.status)["Degraded"][:2] == ("True", "DigestMismatch")
    message = b.status.conditions[0].message  # type: ignore[index]
    assert MANIFEST.digest in message and OTHER.digest in message
    assert step.requeue_after == 600


def test_resolution_with_the_matching_anchor_passes() -> None:
    b, _ = advance(artifact(expected=MANIFEST.digest), r.Outcome.passed(RESOLUTION), T0)
    assert b.status.resolved is not None and b.status.resolved.digest_source == "Hub"


@pytest.mark.parametrize(
    "reason",
    ["RevisionNotFound", "AccessDenied", "EmptyManifest", "InvalidManifest", "ManifestTooLarge"],
)
def test_resolution_refused(reason: str) -> None:
    b, step = advance(artifact(), r.Outcome.refused(reason, "why"), T0)
    assert conds(b.status) == {
        "Resolved": ("False", reason, "2026-01-02T03:04:05Z"),
        "Degraded": ("True", reason, "2026-01-02T03:04:05Z"),
    }
    assert step.requeue_after == 600
    assert b.status.resolved is None


def test_resolution_secret_missing() -> None:
    outcome = r.secret_missing(artifact(), "tok", "does not exist")
    assert (
        "Secret ns/tok (spec.source.huggingFace.secretRef.name) does not exist" in outcome.message
    )
    b, step = advance(artifact(), outcome, T0)
    assert conds(b.status)["Resolved"][:2] == ("False", "SecretNotFound")
    assert step.requeue_after == 600


def test_resolution_unavailable() -> None:
    b, step = advance(artifact(), r.Outcome.unavailable("busy"), T0)
    assert conds(b.status)["Resolved"][:2] == ("False", "SourceUnavailable")
    assert conds(b.status)["Degraded"][:2] == ("True", "SourceUnavailable")
    assert step.requeue_after == 60


def silent() -> r.Outcome:
    return r.Outcome.of(r.unreachable(REQUEST, "connection refused"))


def test_anchor_stands_in_after_two_silent_passes_a_minute_apart() -> None:
    anchor = "sha256:" + "e" * 64
    a = artifact(expected=anchor)
    b, step = advance(a, silent(), T0)
    assert conds(b.status)["Resolved"][:2] == ("False", "SourceUnavailable")
    assert step.requeue_after == 60
    # An event brings it back 10 s later: not a minute apart yet.
    c, step = advance(b, silent(), at(10))
    assert c.status.resolved is None and step.requeue_after == 60
    d, step = advance(c, silent(), at(61))
    resolved = d.status.resolved
    assert resolved is not None
    assert resolved.digest_source == "Expected"
    assert resolved.manifest_digest == anchor
    assert resolved.revision is None and resolved.file_count is None and resolved.size_bytes is None
    assert conds(d.status)["Resolved"][:2] == ("True", "Resolved")
    assert conds(d.status)["Degraded"][:2] == ("False", "Healthy")
    assert step.requeue_after is None
    # Never asked again.
    assert r.due_in(d, now=at(10 * DAY), interval=DAY) is None


def test_no_anchor_without_expected_digest() -> None:
    b, _ = advance(artifact(), silent(), T0)
    c, step = advance(b, silent(), at(120))
    assert c.status.resolved is None and step.requeue_after == 60


@pytest.mark.parametrize(
    "answered",
    [
        r.Outcome.of(r.hugging_face_problem(REQUEST, 429, {})),  # type: ignore[arg-type]
        r.Outcome.of(r.unusable(REQUEST, "oversized body")),
        r.Outcome.refused("AccessDenied", "no"),
        r.Outcome.unavailable("Secret ns/tok could not be read"),
    ],
)
def test_a_hub_that_answered_never_lets_the_anchor_stand_in(answered: r.Outcome) -> None:
    a = artifact(expected="sha256:" + "e" * 64)
    # Answered first, silent a minute later: not two silent passes.
    b, _ = advance(a, answered, T0)
    c, _ = advance(b, silent(), at(70))
    assert c.status.resolved is None
    # Silent first, answered a minute later.
    d, _ = advance(a, silent(), T0)
    e, _ = advance(d, answered, at(70))
    assert e.status.resolved is None


def test_a_5xx_is_silent_for_the_anchor() -> None:
    anchor = "sha256:" + "e" * 64
    five = r.Outcome.of(r.hugging_face_problem(REQUEST, 502, {}))  # type: ignore[arg-type]
    b, _ = advance(artifact(expected=anchor), five, T0)
    c, _ = advance(b, five, at(60))
    assert c.status.resolved is not None and c.status.resolved.digest_source == "Expected"


def resolved_artifact(**kw: Any) -> ModelArtifact:
    a, _ = advance(artifact(**kw), r.Outcome.passed(RESOLUTION), T0)
    return a


def test_revalidation_passes_moves_only_last_validated_time() -> None:
    a = resolved_artifact()
    before = a.status.resolved
    b, step = advance(a, r.Outcome.passed(), at(DAY))
    after = b.status.resolved
    assert after is not None and before is not None
    assert after.last_validated_time == "2026-01-03T03:04:05Z"
    assert after.model_copy(update={"last_validated_time": None}) == before.model_copy(
        update={"last_validated_time": None}
    )
    assert step.requeue_after == DAY
    # The conditions did not move.
    assert conds(b.status) == conds(a.status)


@pytest.mark.parametrize("reason", ["AccessDenied", "RevisionNotFound"])
def test_revalidation_refusal_staircase(reason: str) -> None:
    a = resolved_artifact()
    # First refusal: Degraded only, stamped; a minute from the stamp.
    b, step = advance(a, r.Outcome.refused(reason, "no"), at(DAY))
    assert conds(b.status)["Resolved"] == ("True", "Resolved", "2026-01-02T03:04:05Z")
    assert conds(b.status)["Degraded"] == ("True", reason, "2026-01-03T03:04:05Z")
    assert step.requeue_after == 60
    assert r.due_in(b, now=at(DAY + 20), interval=DAY) == 40
    # Asked again 20 s later (an event): still the first step; the rest of the minute.
    c, step = advance(b, r.Outcome.refused(reason, "no"), at(DAY + 20))
    assert conds(c.status)["Resolved"][0] == "True"
    assert step.requeue_after == 40
    # The same refusal a minute after the stamp: Resolved=False; ten minutes.
    d, step = advance(c, r.Outcome.refused(reason, "no"), at(DAY + 60))
    assert conds(d.status)["Resolved"] == ("False", reason, "2026-01-03T03:05:05Z")
    assert conds(d.status)["Degraded"] == ("True", reason, "2026-01-03T03:04:05Z")
    assert step.requeue_after == 600
    # The commit and digest stay.
    assert d.status.resolved == a.status.resolved
    # A later pass succeeds: Resolved again, Healthy; commit and digest unchanged.
    e, step = advance(d, r.Outcome.passed(), at(DAY + 700))
    assert conds(e.status)["Resolved"][:2] == ("True", "Resolved")
    assert conds(e.status)["Degraded"][:2] == ("False", "Healthy")
    assert e.status.resolved is not None
    assert e.status.resolved.revision == COMMIT
    assert e.status.resolved.manifest_digest == MANIFEST.digest
    assert step.requeue_after == DAY


def test_a_different_refusal_is_a_first_time_again() -> None:
    a = resolved_artifact()
    b, _ = advance(a, r.Outcome.refused("AccessDenied", "no"), at(DAY))
    c, step = advance(b, r.Outcome.refused("RevisionNotFound", "gone"), at(DAY + 60))
    assert conds(c.status)["Resolved"][0] == "True"
    assert conds(c.status)["Degraded"] == ("True", "RevisionNotFound", "2026-01-03T03:05:05Z")
    assert step.requeue_after == 60


def test_revalidation_unavailable_never_revokes() -> None:
    a = resolved_artifact()
    for i in range(3):
        a, step = advance(a, r.Outcome.unavailable("busy"), at(DAY + 60 * i))
        assert conds(a.status)["Resolved"][:2] == ("True", "Resolved")
        assert conds(a.status)["Degraded"][:2] == ("True", "SourceUnavailable")
        assert step.requeue_after == 60
    # Nor does a Secret that cannot be read.
    b, step = advance(a, r.secret_unreadable(a, "tok", "403 Forbidden"), at(DAY + 300))
    assert conds(b.status)["Resolved"][0] == "True"
    assert step.requeue_after == 60


def test_revalidation_secret_missing_revokes_at_once() -> None:
    a = resolved_artifact()
    b, step = advance(a, r.secret_missing(a, "tok", "has no key token"), at(DAY))
    assert conds(b.status)["Resolved"][:2] == ("False", "SecretNotFound")
    assert conds(b.status)["Degraded"][:2] == ("True", "SecretNotFound")
    assert step.requeue_after == 600
    assert b.status.resolved == a.status.resolved


def test_anchored_revalidation_mismatch_follows_the_staircase() -> None:
    a = resolved_artifact(expected=MANIFEST.digest)
    changed = r.Outcome.passed(r.Resolution(COMMIT, OTHER))
    b, step = advance(a, changed, at(DAY))
    assert conds(b.status)["Degraded"][:2] == ("True", "DigestMismatch")
    assert conds(b.status)["Resolved"][0] == "True"
    assert step.requeue_after == 60
    c, step = advance(b, changed, at(DAY + 60))
    assert conds(c.status)["Resolved"][:2] == ("False", "DigestMismatch")
    assert step.requeue_after == 600
    # The same files again: passes.
    d, _ = advance(c, r.Outcome.passed(RESOLUTION), at(DAY + 700))
    assert conds(d.status)["Resolved"][0] == "True"


# ---- claims and images ----

CLAIM = {"persistentVolumeClaim": {"claimName": "weights", "path": "llama"}}
IMAGE = {"image": {"reference": "registry.test/w@sha256:" + "c" * 64}}


def test_image_resolves_on_its_first_pass() -> None:
    a = artifact(source=IMAGE)
    assert r.source_problem(a) is None
    b, step = advance(a, r.Outcome.passed(), T0)
    assert b.status.resolved is not None
    assert b.status.resolved.model_dump(exclude_none=True) == {
        "resolved_time": "2026-01-02T03:04:05Z"
    }
    assert conds(b.status)["Resolved"][:2] == ("True", "Resolved")
    assert step.requeue_after is None
    assert r.due_in(b, now=at(10 * DAY), interval=DAY) is None


def test_claim_resolves_when_it_exists_and_is_never_revalidated() -> None:
    a = artifact(source=CLAIM)
    missing = r.claim_not_found(a)
    assert "PersistentVolumeClaim ns/weights" in missing.message
    b, step = advance(a, missing, T0)
    assert conds(b.status)["Resolved"][:2] == ("False", "ClaimNotFound")
    assert step.requeue_after == 600
    assert r.due_in(b, now=at(1), interval=DAY) == 0
    c, step = advance(b, r.Outcome.passed(), at(600))
    assert c.status.resolved is not None and c.status.resolved.resolved_time is not None
    assert c.status.resolved.revision is None and c.status.resolved.manifest_digest is None
    assert step.requeue_after is None
    assert r.due_in(c, now=at(10 * DAY), interval=DAY) is None


def test_image_without_digest_is_unsupported() -> None:
    a = artifact(source={"image": {"reference": "registry.test/w:latest"}})
    outcome = r.source_problem(a)
    assert outcome is not None and outcome.reason == "UnsupportedSource"
    assert "spec.source.image.reference" in outcome.message
    b, _ = advance(a, outcome, T0)
    assert conds(b.status)["Resolved"][:2] == ("False", "UnsupportedSource")


def test_two_members_are_unsupported() -> None:
    a = artifact(source={**CLAIM, **IMAGE})
    outcome = r.source_problem(a)
    assert outcome is not None and outcome.reason == "UnsupportedSource"


# ---- due_in: when the source is asked, read from status alone ----


def test_due_in() -> None:
    assert r.due_in(artifact(), now=T0, interval=DAY) == 0
    a = resolved_artifact()
    assert r.due_in(a, now=at(3600), interval=DAY) == DAY - 3600
    assert r.due_in(a, now=at(2 * DAY), interval=DAY) == 0
    b, _ = advance(a, r.Outcome.unavailable("busy"), at(10))
    assert r.due_in(b, now=at(20), interval=DAY) == 0
    c, _ = advance(a, r.secret_missing(a, "t", "does not exist"), at(10))
    assert r.due_in(c, now=at(20), interval=DAY) == 0


def test_observed_generation_follows_the_object() -> None:
    a = artifact(generation=4)
    b, _ = advance(a, r.Outcome.refused("AccessDenied", "no"), T0)
    assert b.status.observed_generation == 4
    assert {c.observed_generation for c in b.status.conditions or ()} == {4}


def test_reasons_list() -> None:
    assert set(r.REASONS) == {
        "RevisionNotFound",
        "AccessDenied",
        "SourceUnavailable",
        "EmptyManifest",
        "InvalidManifest",
        "ManifestTooLarge",
        "DigestMismatch",
        "SecretNotFound",
        "ClaimNotFound",
        "UnsupportedSource",
    }
