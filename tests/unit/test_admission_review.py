"""The review pipeline (docs/contract/admission.md §1–§4): schema, mutation, validation, the two
webhooks, and every example under ``examples/`` admitted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from admission_support import (
    NAMESPACE,
    causes,
    deployment,
    lookups_of,
    review,
    role,
    stored,
)

from gpustack_render.admission import GROUP_KIND, validate_deployment
from gpustack_render.cli.verbs.admit import admit_review
from gpustack_render.core.errors import VerdictKind
from gpustack_render.core.review import AdmissionRequest
from gpustack_render.core.settings import Settings

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.yaml"))


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        pytest.param(
            lambda d: d["spec"]["roles"][0].update(replicas=2000),
            [("schema.violation", "spec.roles[0].replicas", "FieldValueInvalid")],
            id="bound",
        ),
        pytest.param(
            lambda d: d["spec"]["roles"][0].update(template={}),
            [("schema.violation", "spec.roles[0].template", "FieldValueForbidden")],
            id="unknown-field",
        ),
        pytest.param(
            lambda d: d["spec"]["engine"].update(name="TGI"),
            [("schema.violation", "spec.engine.name", "FieldValueNotSupported")],
            id="enum",
        ),
        pytest.param(
            lambda d: d["spec"]["engine"].pop("image"),
            [("schema.violation", "spec.engine.image", "FieldValueRequired")],
            id="required",
        ),
    ],
)
def test_schema_errors_refuse_like_the_api_server(
    mutate: Any, expected: list[tuple[str, str, str]]
) -> None:
    obj = deployment()
    mutate(obj)
    verdict = review(obj)
    assert causes(verdict) == expected
    assert verdict.status_code() == 422
    response = verdict.to_response()
    assert response["status"]["details"]["kind"] == "ModelDeployment"
    assert response["status"]["details"]["group"] == "worker.gpustack.ai"


def test_an_unreadable_min_render_version_warns_instead_of_crashing() -> None:
    """A 5000-digit annotation (the API server takes it) is more than Python's int() reads."""
    obj = deployment()
    obj["metadata"]["annotations"] = {"modeldeployment.gpustack.ai/min-render-version": "9" * 5000}
    verdict = review(obj)
    assert verdict.allowed
    assert any("is read as 1" in w for w in verdict.warnings)


@pytest.mark.parametrize(
    ("labels", "annotations", "field"),
    [
        pytest.param({"a": "b c"}, {}, "metadata.labels", id="label-value-space"),
        pytest.param({"a": "x" * 64}, {}, "metadata.labels", id="label-value-too-long"),
        pytest.param({"app/version": "0.25.1+cu12"}, {}, "metadata.labels", id="label-value-plus"),
        pytest.param({"Example.com/x": "1"}, {}, "metadata.labels", id="label-prefix-upper"),
        pytest.param({}, {"a/b/c": "1"}, "metadata.annotations", id="annotation-key"),
        pytest.param({}, {"a": "x" * (256 * 1024)}, "metadata.annotations", id="annotations-size"),
    ],
)
def test_metadata_the_api_server_refuses_is_refused(
    labels: dict[str, str], annotations: dict[str, str], field: str
) -> None:
    """The API server validates labels and annotations before the validating webhooks, so the
    review of the whole request refuses what it refuses."""
    obj = deployment()
    obj["metadata"]["labels"] = labels
    obj["metadata"]["annotations"] = annotations
    verdict = review(obj)
    assert [(c[0], c[1]) for c in causes(verdict)] == [("metadata.invalid", field)]


def test_metadata_the_api_server_accepts_is_accepted() -> None:
    obj = deployment()
    obj["metadata"]["labels"] = {"app.kubernetes.io/version": "0.25.1", "empty": "", "A_b": "X.y"}
    obj["metadata"]["annotations"] = {"Example.COM/Note": "any text: at all"}
    assert review(obj).allowed


def test_no_object() -> None:
    verdict = review(None, operation="CREATE")
    assert causes(verdict) == [("schema.violation", "", "FieldValueRequired")]


def test_refusal_shape() -> None:
    verdict = review(deployment(role(env=[{"name": "MOONCAKE_CONFIG_PATH"}])))
    assert verdict.kind is VerdictKind.INVALID
    assert verdict.group_kind == GROUP_KIND and verdict.name == "qwen"
    cause = verdict.to_response()["status"]["details"]["causes"][0]
    assert cause["field"] == "spec.roles[0].env[0]"
    assert "MOONCAKE_CONFIG_PATH" in cause["message"]
    assert "vllm" in cause["message"]
    assert "spec.roles[0].command" in cause["message"]


def test_generate_name_uses_a_placeholder_suffix() -> None:
    obj = deployment(role("r" * 20))
    obj["metadata"] = {"generateName": "d" * 36 + "-", "namespace": NAMESPACE}
    assert review(obj).allowed  # 37 + 5 + 1 + 20 = 63
    obj["metadata"]["generateName"] = "d" * 37 + "-"
    assert [c[0] for c in causes(review(obj))] == ["names.invalid-service-name"]


def test_validating_webhook_matches_review_on_stored_objects() -> None:
    obj = deployment(role("a"), role("b", extraArgs=["--kv-events-config", "{}"]))
    request = AdmissionRequest(operation="CREATE", object=obj, namespace=NAMESPACE, name="qwen")
    verdict = validate_deployment(request, lookups=lookups_of(), settings=Settings())
    assert [(e.origin, e.field) for e in verdict.errors] == [
        ("args.owned-flag", "spec.roles[1].extraArgs[0]")
    ]
    good = stored(deployment(role("a")))
    request = AdmissionRequest(operation="UPDATE", object=good, old_object=good)
    assert validate_deployment(request, lookups=lookups_of(), settings=Settings()).allowed
    request = AdmissionRequest(operation="DELETE", object=None, old_object=good)
    assert validate_deployment(request, lookups=lookups_of(), settings=Settings()).allowed


def test_admitted_object_is_a_fixed_point() -> None:
    once = stored(deployment(role("a"), role("b", instanceType="cpu-only")))
    again = review(once)
    assert again.allowed and again.patch == []


def test_lookups_are_memoised_per_request() -> None:
    reads: list[str] = []
    inner = lookups_of()

    class Counting:
        def get(self, kind: type[Any], namespace: str, name: str) -> Any:
            reads.append(kind.__name__)
            return inner.get(kind, namespace, name)

    obj = deployment(*[role(f"r{i}") for i in range(5)])
    request = AdmissionRequest(operation="CREATE", object=obj, namespace=NAMESPACE)
    from gpustack_render.admission import review_deployment

    assert review_deployment(request, lookups=Counting(), settings=Settings()).allowed
    assert reads == ["InstanceType"]


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_every_example_is_admitted(example: Path) -> None:
    verdict, _ = admit_review([str(example)])
    assert verdict.allowed, [e.message() for e in verdict.errors]
