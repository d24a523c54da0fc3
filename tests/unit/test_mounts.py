"""The node plugin's mount authorization rule (gpustack_render/weights/mounts.py): a mount is
granted only for a Resolved=True hub-source artifact of the Pod's own namespace whose UID and
manifest digest are the volume's; every refusal names what did not match."""

from __future__ import annotations

from typing import Any

import pytest
from support.csi import COMMIT, artifact_object, digest_of, volume_context

from gpustack_render.weights.mounts import (
    ATTR_ARTIFACT,
    ATTR_MANIFEST_DIGEST,
    EPHEMERAL,
    POD_NAMESPACE,
    AttributeProblem,
    MountAttributes,
    MountGrant,
    MountRefusal,
    access_verdict,
    authorize,
    mount_attributes,
    tree_access,
)

DIGEST = digest_of("weights")
OTHER = digest_of("other weights")


def _attrs(**overrides: str) -> MountAttributes:
    context = volume_context(artifact="llama", uid="uid-1", digest=DIGEST, pod_namespace="team-a")
    context.update(overrides)
    attrs = mount_attributes(context)
    assert isinstance(attrs, MountAttributes)
    return attrs


def _artifact(**overrides: Any) -> dict[str, Any]:
    kw: dict[str, Any] = {"uid": "uid-1", "digest": DIGEST}
    kw.update(overrides)
    return artifact_object(kw.pop("namespace", "team-a"), kw.pop("name", "llama"), **kw)


def test_grant_carries_what_the_store_needs() -> None:
    grant = authorize(_attrs(), _artifact(secret="hub-token"))
    assert grant == MountGrant(
        digest=DIGEST,
        hub="huggingFace",
        repository="org/model",
        commit=COMMIT,
        allow_patterns=(),
        ignore_patterns=("*.bin",),
        secret_name="hub-token",
        size_bytes=1000,
        namespace="team-a",
        digest_source="Hub",
    )
    assert grant.source == f"huggingFace:org/model@{COMMIT}"


def test_model_scope_is_a_hub_source() -> None:
    grant = authorize(_attrs(), _artifact(source="modelScope"))
    assert isinstance(grant, MountGrant) and grant.hub == "modelScope"


@pytest.mark.parametrize(
    ("raw", "reason", "named"),
    [
        (None, "ArtifactNotFound", "team-a/llama does not exist"),
        (_artifact(namespace="team-b"), "NamespaceMismatch", "team-b/llama"),
        (_artifact(uid="uid-2"), "UIDMismatch", "'uid-1' is not the uid"),
        (_artifact(digest=OTHER), "DigestMismatch", OTHER),
        (_artifact(resolved="False"), "ArtifactNotResolved", "Resolved=False"),
        (_artifact(source="persistentVolumeClaim"), "NotHubSource", "persistentVolumeClaim"),
        ({"metadata": {"name": "llama"}, "spec": {"source": 3}}, "ArtifactUnreadable", "spec"),
    ],
    ids=["absent", "other-namespace", "uid", "digest", "unresolved", "claim", "unreadable"],
)
def test_refusals_name_what_did_not_match(
    raw: dict[str, Any] | None, reason: str, named: str
) -> None:
    refusal = authorize(_attrs(), raw)
    assert isinstance(refusal, MountRefusal)
    assert refusal.reason == reason
    assert named in refusal.message


def test_another_namespaces_pod_cannot_borrow_an_artifact() -> None:
    """A Pod of team-b naming team-a's artifact (its name, UID and digest copied): the plugin
    reads the name in team-b; whatever is there, team-a's object is never the one granted."""
    attrs = _attrs(**{POD_NAMESPACE: "team-b"})
    assert isinstance(authorize(attrs, None), MountRefusal)
    # Even if a reader handed back team-a's object, the rule refuses it.
    refusal = authorize(attrs, _artifact())
    assert isinstance(refusal, MountRefusal) and refusal.reason == "NamespaceMismatch"
    # team-b's own artifact of the same name has its own UID.
    refusal = authorize(attrs, _artifact(namespace="team-b", uid="uid-b"))
    assert isinstance(refusal, MountRefusal) and refusal.reason == "UIDMismatch"


def test_anchored_artifact_downloads_the_spec_revision() -> None:
    raw = _artifact()
    raw["status"]["resolved"] = {"manifestDigest": DIGEST, "digestSource": "Expected"}
    grant = authorize(_attrs(), raw)
    assert isinstance(grant, MountGrant)
    assert (grant.commit, grant.size_bytes) == ("main", None)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({ATTR_ARTIFACT: ""}, ATTR_ARTIFACT),
        ({ATTR_MANIFEST_DIGEST: "sha256:XYZ"}, ATTR_MANIFEST_DIGEST),
        ({POD_NAMESPACE: ""}, POD_NAMESPACE),
        ({EPHEMERAL: "false"}, EPHEMERAL),
    ],
)
def test_attribute_problems_name_the_key(change: dict[str, str], field: str) -> None:
    context = volume_context(artifact="llama", uid="uid-1", digest=DIGEST, pod_namespace="team-a")
    context.update(change)
    problem = mount_attributes(context)
    assert isinstance(problem, AttributeProblem)
    assert problem.field == field and field in problem.message


def test_missing_pod_info_points_at_pod_info_on_mount() -> None:
    context = volume_context(artifact="llama", uid="uid-1", digest=DIGEST, pod_namespace="team-a")
    del context[POD_NAMESPACE]
    problem = mount_attributes(context)
    assert isinstance(problem, AttributeProblem) and "podInfoOnMount" in problem.message


def test_an_anchored_grant_downloads_at_the_spec_revision() -> None:
    grant = authorize(_attrs(), _artifact(digest_source="Expected", revision="v1.0"))
    assert isinstance(grant, MountGrant)
    assert (grant.commit, grant.digest_source, grant.namespace) == ("v1.0", "Expected", "team-a")


@pytest.mark.parametrize(
    ("namespace", "source", "proven", "access"),
    [
        # The controller listed the repository with the namespace's token and got the digest.
        ("team-b", "Hub", set(), "Granted"),
        ("team-b", "Hub", {"team-a"}, "Granted"),
        # An anchor is the spec's word: granted only to a namespace already proven.
        ("team-b", "Expected", set(), "Prove"),
        ("team-b", "Expected", {"team-a"}, "Prove"),
        ("team-b", "Expected", {"team-a", "team-b"}, "Granted"),
        # Not on behalf of a Pod (the store's own tests, the benchmark).
        (None, "Expected", set(), "Granted"),
    ],
)
def test_tree_access(namespace: str | None, source: str, proven: set[str], access: str) -> None:
    assert tree_access(namespace, source, proven) == access


@pytest.mark.parametrize(
    ("listed", "problem", "granted", "reason", "retry", "says"),
    [
        (DIGEST, "", True, "", False, ""),
        (OTHER, "", False, "AccessRefused", False, f"the hub lists {OTHER}"),
        (None, "AccessDenied", False, "AccessRefused", False, "the hub refuses namespace team-b"),
        (None, "RevisionNotFound", False, "AccessRefused", False, "RevisionNotFound"),
        (None, "SourceUnavailable", False, "AccessUnproven", True, "kubelet retries"),
        (None, "", False, "AccessUnproven", True, "could not be asked"),
    ],
)
def test_access_verdict(
    listed: str | None, problem: str, granted: bool, reason: str, retry: bool, says: str
) -> None:
    verdict = access_verdict(
        digest=DIGEST,
        namespace="team-b",
        repository="org/model",
        revision="main",
        listed_digest=listed,
        problem_reason=problem,
        problem_message="401",
    )
    assert (verdict.granted, verdict.reason, verdict.retry) == (granted, reason, retry)
    assert says in verdict.message
    if not granted:
        assert "org/model@main" in verdict.message
