"""ModelArtifact admission (docs/weights.md "Admission", docs/contract/admission.md §17): the
default revision, one source, well-formed members, hub-only fields, a pinned image, an immutable
spec; and ``gpustack-render admit`` judging an artifact."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from gpustack_render.admission import (
    ARTIFACT_GROUP_KIND,
    mutate_artifact,
    review_artifact,
    validate_artifact,
    validate_model_artifact,
)
from gpustack_render.admission.artifact import (
    claim_path_problem,
    default_revisions,
    repository_problem,
    revision_problem,
)
from gpustack_render.api.artifact import (
    ArtifactSource,
    ClaimSource,
    HubSource,
    ModelArtifact,
    ModelArtifactSpec,
    ModelArtifactStatus,
)
from gpustack_render.cli import __main__ as cli
from gpustack_render.cli import yamlio
from gpustack_render.core.errors import ErrorType, FieldError, Verdict
from gpustack_render.core.review import AdmissionRequest
from gpustack_render.core.settings import Settings
from gpustack_render.schema.lookups import StaticLookups

DIGEST = "sha256:" + "0123456789abcdef" * 4
IMAGE = f"registry.example/models/qwen3-8b@{DIGEST}"
HF = {"huggingFace": {"repository": "Qwen/Qwen3-8B"}}
MS = {"modelScope": {"repository": "Qwen/Qwen3-8B"}}
PVC = {"persistentVolumeClaim": {"claimName": "qwen-weights", "path": "models/qwen3-8b"}}
IMG = {"image": {"reference": IMAGE}}


def artifact(source: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "ModelArtifact",
        "metadata": {"name": "qwen-weights", "namespace": "team-a"},
        "spec": {"source": copy.deepcopy(HF if source is None else source), **spec},
    }


def request(
    obj: dict[str, Any] | None, *, old: dict[str, Any] | None = None, operation: str = ""
) -> AdmissionRequest:
    op = operation or ("UPDATE" if old is not None else "CREATE")
    return AdmissionRequest(
        op,  # type: ignore[arg-type]
        copy.deepcopy(obj),
        copy.deepcopy(old),
        namespace="team-a",
        name=((obj or old or {}).get("metadata") or {}).get("name", ""),
    )


def review(obj: dict[str, Any] | None, **kw: Any) -> Verdict:
    return review_artifact(request(obj, **kw), lookups=StaticLookups.of([]), settings=Settings())


def validate(obj: dict[str, Any] | None, **kw: Any) -> Verdict:
    return validate_artifact(request(obj, **kw), lookups=StaticLookups.of([]), settings=Settings())


def mutate(obj: dict[str, Any] | None, **kw: Any) -> Verdict:
    return mutate_artifact(request(obj, **kw), lookups=StaticLookups.of([]), settings=Settings())


def causes(verdict: Verdict) -> list[tuple[str, str, str]]:
    return [(e.origin, e.field, e.type.value) for e in verdict.errors]


def one(verdict: Verdict, origin: str) -> FieldError:
    (err,) = [e for e in verdict.errors if e.origin == origin]
    return err


def stored(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` as the API server stores it: the default applied."""
    import jsonpatch

    verdict = review(obj)
    assert verdict.allowed, causes(verdict)
    out: dict[str, Any] = jsonpatch.apply_patch(copy.deepcopy(obj), verdict.patch)
    return out


# --- each source, and the default revision ------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "patch"),
    [
        (HF, [{"op": "add", "path": "/spec/source/huggingFace/revision", "value": "main"}]),
        (MS, [{"op": "add", "path": "/spec/source/modelScope/revision", "value": "master"}]),
        (
            {"huggingFace": {"repository": "gpt2", "revision": ""}},
            [{"op": "replace", "path": "/spec/source/huggingFace/revision", "value": "main"}],
        ),
        ({"huggingFace": {"repository": "gpt2", "revision": "v1.0"}}, []),
        (PVC, []),
        ({"persistentVolumeClaim": {"claimName": "w"}}, []),
        (IMG, []),
    ],
    ids=["hf", "ms", "hf-empty-revision", "hf-revision-kept", "claim", "claim-root", "image"],
)
def test_each_source_is_admitted_with_its_default(
    source: dict[str, Any], patch: list[dict[str, Any]]
) -> None:
    verdict = review(artifact(source))
    assert verdict.allowed, causes(verdict)
    assert verdict.patch == patch
    assert mutate(artifact(source)).patch == patch


def test_the_default_is_filled_on_update_too() -> None:
    """Re-applying the manifest without its revision restates the stored spec."""
    old = stored(artifact())
    assert old["spec"]["source"]["huggingFace"]["revision"] == "main"
    new = artifact()
    new["metadata"]["labels"] = {"team": "a"}
    for verdict in (review(new, old=old), mutate(new, old=old)):
        assert verdict.allowed, causes(verdict)
        assert verdict.patch == [
            {"op": "add", "path": "/spec/source/huggingFace/revision", "value": "main"}
        ]


def test_a_source_stored_without_a_revision_keeps_none_on_update() -> None:
    """An artifact stored while the mutating webhook was not installed: filling the default on
    its next update would change the spec, and the CRD's own rule would refuse it (its
    finalizer's removal included)."""
    old = artifact()
    new = copy.deepcopy(old)
    new["metadata"]["finalizers"] = []
    verdict = review(new, old=old)
    assert verdict.allowed, causes(verdict)
    assert verdict.patch == []
    assert mutate(new, old=old).patch == []


@pytest.mark.parametrize(
    "obj",
    [
        {"spec": "x"},
        {"spec": {"source": ["x"]}},
        {"spec": {"source": {"huggingFace": "x"}}},
        {},
    ],
)
def test_defaulting_never_raises_on_odd_data(obj: dict[str, Any]) -> None:
    assert default_revisions(obj) is obj


def test_defaulting_does_not_touch_its_input() -> None:
    obj = artifact({**HF, **MS})
    before = copy.deepcopy(obj)
    out = default_revisions(obj)
    assert obj == before
    assert out["spec"]["source"]["huggingFace"]["revision"] == "main"
    assert out["spec"]["source"]["modelScope"]["revision"] == "master"


# --- one source ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "value"),
    [
        ({**HF, **MS}, "huggingFace, modelScope"),
        ({**HF, **IMG}, "huggingFace, image"),
        ({**PVC, **IMG}, "persistentVolumeClaim, image"),
        ({}, ""),
    ],
    ids=["two-hubs", "hub-and-image", "claim-and-image", "none"],
)
def test_not_exactly_one_source_is_refused_at_spec_source(
    source: dict[str, Any], value: str
) -> None:
    err = one(review(artifact(source)), "artifact.source-not-one")
    assert (err.field, err.type, err.bad_value) == ("spec.source", ErrorType.INVALID, value)
    for member in ("huggingFace", "modelScope", "persistentVolumeClaim", "image"):
        assert member in err.detail


def test_each_member_of_a_two_source_object_is_judged() -> None:
    verdict = review(artifact({"image": {"reference": "qwen:latest"}, **HF}))
    assert causes(verdict) == [
        ("artifact.source-not-one", "spec.source", "FieldValueInvalid"),
        ("artifact.image-not-pinned", "spec.source.image.reference", "FieldValueInvalid"),
    ]


# --- repository and revision --------------------------------------------------------------------

GOOD_REPOSITORIES = [
    "Qwen/Qwen3-8B",
    "gpt2",
    "_private",
    "a",
    "meta-llama/Llama-3.1-8B-Instruct",
    "org_1/model.v2_final",
    "x" * 96,
    "x" * 96 + "/" + "y" * 96,
]
BAD_REPOSITORIES = [
    "a/b/c",
    "-leading",
    "trailing-",
    "trailing.",
    ".hidden/model",
    "owner/",
    "/name",
    "a--b",
    "a..b",
    "has space",
    "ümlaut/model",
    "x" * 97,
    "owner/" + "y" * 97,
]


@pytest.mark.parametrize("repository", GOOD_REPOSITORIES)
def test_a_well_formed_repository_is_admitted(repository: str) -> None:
    assert repository_problem(repository) is None
    verdict = review(artifact({"modelScope": {"repository": repository}}))
    assert verdict.allowed, causes(verdict)


@pytest.mark.parametrize("repository", BAD_REPOSITORIES)
def test_a_malformed_repository_is_refused_at_its_path(repository: str) -> None:
    assert repository_problem(repository) is not None
    for hub in ("huggingFace", "modelScope"):
        err = one(
            review(artifact({hub: {"repository": repository}})), "artifact.repository-invalid"
        )
        assert err.field == f"spec.source.{hub}.repository"
        assert err.type is ErrorType.INVALID and err.bad_value == repository
        assert "owner/name" in err.detail


def test_a_repository_over_256_characters_is_refused() -> None:
    assert repository_problem("o" * 96 + "/" + "n" * 96) is None  # 193: within the bound
    assert "257 characters" in (repository_problem("a" * 257) or "")
    # Through the schema (maxLength 256), which answers first.
    verdict = review(artifact({"huggingFace": {"repository": "a" * 257}}))
    assert causes(verdict) == [
        ("schema.violation", "spec.source.huggingFace.repository", "FieldValueTooLong")
    ]


@pytest.mark.parametrize("revision", ["main", "v1.0.0", "a" * 40, "refs/pr/12", "release-2024_1"])
def test_a_well_formed_revision_is_admitted(revision: str) -> None:
    assert revision_problem(revision) is None
    verdict = review(artifact({"huggingFace": {"repository": "gpt2", "revision": revision}}))
    assert verdict.allowed and verdict.patch == []


@pytest.mark.parametrize(
    ("revision", "char"),
    [("a b", "U+0020"), ("main\n", "U+000A"), ("a\tb", "U+0009"), ("x\x7fy", "U+007F"),
     ("x\u2028y", "U+2028"), ("x\u00a0y", "U+00A0")],
)  # fmt: skip
def test_a_revision_with_whitespace_or_a_control_character_is_refused(
    revision: str, char: str
) -> None:
    err = one(
        review(artifact({"modelScope": {"repository": "a/b", "revision": revision}})),
        "artifact.revision-invalid",
    )
    assert err.field == "spec.source.modelScope.revision" and err.type is ErrorType.INVALID
    assert err.bad_value == revision and char in err.detail


def test_an_empty_revision_reaching_validation_is_required() -> None:
    """Only when the mutating webhook did not run: the validating one is told nothing else."""
    obj = artifact({"huggingFace": {"repository": "gpt2", "revision": ""}})
    err = one(validate(obj), "artifact.revision-invalid")
    assert (err.field, err.type) == ("spec.source.huggingFace.revision", ErrorType.REQUIRED)
    assert "main" in err.detail


def _constructed(source: ArtifactSource) -> ModelArtifact:
    """An artifact built without the schema (whose ``minLength`` answers an empty name first,
    before any webhook), so the rules' own answer to an empty one is seen."""
    spec = ModelArtifactSpec.model_construct(source=source)
    return ModelArtifact.model_construct(spec=spec, status=ModelArtifactStatus())


def test_an_empty_repository_is_required() -> None:
    hub = HubSource.model_construct(repository="", revision="main", secret_ref=None)
    art = _constructed(ArtifactSource.model_construct(hugging_face=hub))
    errs = validate_model_artifact(art, old=None)
    assert [(e.origin, e.field, e.type) for e in errs] == [
        ("artifact.repository-invalid", "spec.source.huggingFace.repository", ErrorType.REQUIRED)
    ]
    # Through the schema, an empty repository meets minLength first.
    verdict = review(artifact({"huggingFace": {"repository": ""}}))
    assert causes(verdict) == [
        ("schema.violation", "spec.source.huggingFace.repository", "FieldValueInvalid")
    ]


# --- claim --------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/models/qwen", "/", "a/../b", "..", "a/.."])
def test_a_claim_path_outside_the_volume_root_is_refused(path: str) -> None:
    err = one(
        review(artifact({"persistentVolumeClaim": {"claimName": "w", "path": path}})),
        "artifact.claim-invalid",
    )
    assert err.field == "spec.source.persistentVolumeClaim.path"
    assert err.type is ErrorType.INVALID and err.bad_value == path
    assert "relative to the volume root" in err.detail


@pytest.mark.parametrize("path", ["", "a..b", "models/qwen3-8b", "./models", "a/b/"])
def test_a_claim_path_inside_the_volume_is_admitted(path: str) -> None:
    assert claim_path_problem(path) is None
    assert review(artifact({"persistentVolumeClaim": {"claimName": "w", "path": path}})).allowed


def test_an_empty_claim_name_is_required() -> None:
    claim = ClaimSource.model_construct(claim_name="", path="")
    art = _constructed(ArtifactSource.model_construct(persistent_volume_claim=claim))
    errs = validate_model_artifact(art, old=None)
    assert [(e.origin, e.field, e.type) for e in errs] == [
        (
            "artifact.claim-invalid",
            "spec.source.persistentVolumeClaim.claimName",
            ErrorType.REQUIRED,
        )
    ]


# --- hub-only fields ----------------------------------------------------------------------------


@pytest.mark.parametrize("source", [PVC, IMG], ids=["claim", "image"])
@pytest.mark.parametrize(
    ("field", "value", "shown"),
    [
        ("allowPatterns", ["*.safetensors", "*.json"], "*.safetensors, *.json"),
        ("ignorePatterns", ["original/"], "original/"),
        ("expectedDigest", DIGEST, DIGEST),
    ],
)
def test_patterns_and_the_anchor_are_refused_beside_a_claim_or_image(
    source: dict[str, Any], field: str, value: Any, shown: str
) -> None:
    err = one(review(artifact(source, **{field: value})), "artifact.hub-only-field")
    assert err.field == f"spec.{field}" and err.type is ErrorType.INVALID
    assert err.bad_value == shown
    assert "hub sources only" in err.detail


def test_all_three_are_named_together() -> None:
    obj = artifact(PVC, allowPatterns=["*.json"], ignorePatterns=["x"], expectedDigest=DIGEST)
    assert [c[1] for c in causes(review(obj))] == [
        "spec.allowPatterns",
        "spec.ignorePatterns",
        "spec.expectedDigest",
    ]


@pytest.mark.parametrize("source", [HF, MS], ids=["hf", "ms"])
def test_patterns_and_the_anchor_are_admitted_on_a_hub(source: dict[str, Any]) -> None:
    obj = artifact(
        source, allowPatterns=["*.safetensors"], ignorePatterns=["original/"], expectedDigest=DIGEST
    )
    assert review(obj).allowed


def test_an_empty_pattern_list_beside_a_claim_says_nothing() -> None:
    assert review(artifact(PVC, allowPatterns=[])).allowed


# --- image --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "reference",
    [
        "registry.example/models/qwen3-8b:v1",
        "qwen3-8b",
        "registry.example/qwen@sha256:abc",
        "registry.example/qwen@sha256:" + "0123456789ABCDEF" * 4,
        "registry.example/qwen@sha512:" + "0" * 128,
        "@" + DIGEST,
    ],
)
def test_an_image_not_pinned_by_digest_is_refused(reference: str) -> None:
    err = one(review(artifact({"image": {"reference": reference}})), "artifact.image-not-pinned")
    assert err.field == "spec.source.image.reference" and err.type is ErrorType.INVALID
    assert err.bad_value == reference
    assert "tags are mutable" in err.detail


@pytest.mark.parametrize("reference", [IMAGE, f"registry.example:5000/qwen:v1@{DIGEST}"])
def test_an_image_pinned_by_digest_is_admitted(reference: str) -> None:
    assert review(artifact({"image": {"reference": reference}})).allowed


# --- the spec is the artifact's identity --------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "changed"),
    [
        ({"source": {"huggingFace": {"repository": "Qwen/Qwen3-8B", "revision": "v2"}}}, "source"),
        ({"source": {"huggingFace": {"repository": "Qwen/Qwen3-4B"}}}, "source"),
        ({"source": {"modelScope": {"repository": "Qwen/Qwen3-8B"}}}, "source"),
        ({"allowPatterns": ["*.json"]}, "allowPatterns"),
        ({"expectedDigest": DIGEST}, "expectedDigest"),
    ],
    ids=["revision", "repository", "hub", "patterns-added", "anchor-added"],
)
def test_an_update_changing_the_spec_is_refused_at_spec(
    change: dict[str, Any], changed: str
) -> None:
    old = stored(artifact())
    new = copy.deepcopy(old)
    new["spec"].update(change)
    for verdict in (review(new, old=old), validate(stored_update(new, old), old=old)):
        err = one(verdict, "artifact.spec-changed")
        assert (err.field, err.type, err.bad_value) == ("spec", ErrorType.INVALID, changed)
        assert "identity" in err.detail and "create a new" in err.detail.lower()


def stored_update(new: dict[str, Any], old: dict[str, Any]) -> dict[str, Any]:
    """``new`` as the validating webhook receives it: after the mutating one."""
    import jsonpatch

    patch = mutate(new, old=old).patch
    out: dict[str, Any] = jsonpatch.apply_patch(copy.deepcopy(new), patch)
    return out


def test_an_unchanged_spec_is_not_judged_again() -> None:
    """A stored artifact today's rules refuse (a tag-only image, say, written before a rule
    existed) stays editable in its metadata."""
    old = artifact({"image": {"reference": "qwen:latest"}})
    new = copy.deepcopy(old)
    new["metadata"]["labels"] = {"team": "a"}
    assert review(new, old=old).allowed
    assert validate(new, old=old).allowed
    assert not review(new).allowed  # the same object is refused as a create


def test_a_changed_spec_is_judged_as_well() -> None:
    old = stored(artifact())
    new = artifact({"image": {"reference": "qwen:latest"}})
    assert [c[0] for c in causes(review(new, old=old))] == [
        "artifact.spec-changed",
        "artifact.image-not-pinned",
    ]


def test_a_stored_object_that_no_longer_decodes_is_compared_as_written() -> None:
    old = artifact()
    old["spec"]["futureField"] = True
    new = stored(artifact())
    err = one(review(new, old=old), "artifact.spec-changed")
    assert "futureField" in str(err.bad_value) and "source" in str(err.bad_value)


# --- the review as a whole ----------------------------------------------------------------------


@pytest.mark.parametrize("operation", ["DELETE", "CONNECT"])
def test_delete_and_connect_are_allowed(operation: str) -> None:
    old = artifact({})
    for call in (review, validate, mutate):
        assert call(None, old=old, operation=operation).allowed


def test_a_schema_refusal_names_the_field_in_both_webhooks() -> None:
    obj = artifact({"huggingFace": {"repository": "gpt2", "branch": "main"}})
    for verdict in (review(obj), validate(obj), mutate(obj)):
        assert causes(verdict) == [
            ("schema.violation", "spec.source.huggingFace.branch", "FieldValueForbidden")
        ]


def test_a_create_naming_nothing_is_refused_as_the_api_server_does() -> None:
    obj = artifact()
    del obj["metadata"]["name"]
    assert causes(review(obj)) == [
        ("metadata.name-required", "metadata.name", "FieldValueRequired")
    ]


def test_a_refusal_names_the_artifact_kind() -> None:
    verdict = review(artifact({}))
    status = verdict.to_response()["status"]
    assert verdict.group_kind == ARTIFACT_GROUP_KIND
    assert status["details"]["kind"] == "ModelArtifact"
    assert status["details"]["name"] == "qwen-weights"
    assert status["code"] == 422


def test_no_object_on_a_create_is_required() -> None:
    assert causes(validate(None)) == [("schema.violation", "", "FieldValueRequired")]
    assert mutate(None).allowed  # nothing to default


# --- gpustack-render admit ----------------------------------------------------------------------


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli.main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def write(tmp_path: Path, name: str, *docs: dict[str, Any]) -> str:
    path = tmp_path / name
    path.write_text(yamlio.dump_yaml(list(docs)))
    return str(path)


def test_admit_judges_an_artifact_alone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["admit", write(tmp_path, "a.yaml", artifact()), "-o", "json"], capsys)
    assert code == 0
    answer = json.loads(out)
    assert answer["allowed"] is True
    assert answer["patch"][0]["path"] == "/spec/source/huggingFace/revision"
    code, out, _ = run(
        ["admit", write(tmp_path, "a.yaml", artifact()), "--print", "object", "-o", "json"],
        capsys,
    )
    assert code == 0 and json.loads(out)["spec"]["source"]["huggingFace"]["revision"] == "main"


def test_admit_gives_a_verdict_for_an_artifact_the_schema_refuses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = artifact({"huggingFace": {"repository": ""}})
    code, out, _ = run(["admit", write(tmp_path, "a.yaml", bad), "-o", "json"], capsys)
    assert code == 1
    (cause,) = json.loads(out)["status"]["details"]["causes"]
    assert cause["field"] == "spec.source.huggingFace.repository"


def test_beside_a_deployment_an_artifact_is_an_input_that_must_decode(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    md = yamlio.load_documents(
        (Path(__file__).resolve().parents[2] / "examples" / "qwen-chat.yaml").read_text()
    )
    bad = artifact({"huggingFace": {"repository": ""}})
    code, _, err = run(["admit", write(tmp_path, "m.yaml", *md, bad)], capsys)
    assert code == 2 and "ModelArtifact cannot be read" in err


def test_admit_judges_an_artifact_update_against_old(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = write(tmp_path, "old.yaml", stored(artifact()))
    changed = artifact({"huggingFace": {"repository": "Qwen/Qwen3-8B", "revision": "v2"}})
    code, out, _ = run(
        ["admit", write(tmp_path, "n.yaml", changed), "--old", old, "-o", "json"], capsys
    )
    assert code == 1
    (cause,) = json.loads(out)["status"]["details"]["causes"]
    assert cause["field"] == "spec"
    code, out, _ = run(["admit", write(tmp_path, "n.yaml", artifact()), "--old", old], capsys)
    assert code == 0
    code, _, _ = run(["admit", "--operation", "DELETE", "--old", old], capsys)
    assert code == 0


def test_admit_judges_each_artifact_of_a_batch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    two = write(tmp_path, "two.yaml", artifact(), artifact({}))
    code, out, _ = run(["admit", two, "--summary"], capsys)
    assert code == 1
    assert [line.split("\t")[2] for line in out.splitlines()] == ["allowed", "refused"]
    code, out, _ = run(["admit", "-R", str(tmp_path), "--summary"], capsys)
    assert code == 1 and out.count("\trefused") == 1
