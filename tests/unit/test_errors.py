"""The error model: paths, messages, causes and the AdmissionReview response."""

from __future__ import annotations

import base64
import json

from gpustack_render.core import errors
from gpustack_render.core.errors import ErrorList, ErrorType, Verdict, VerdictKind
from gpustack_render.core.paths import ROLES, FieldPath


def test_paths_render_with_json_names() -> None:
    assert str(ROLES.index(0).child("size")) == "spec.roles[0].size"
    assert str(ROLES.index(2).child("env").index(1)) == "spec.roles[2].env[1]"
    assert str(FieldPath.root("data").key("native-sidecars")) == "data[native-sidecars]"


def test_path_resolve_finds_values_and_misses() -> None:
    obj = {"spec": {"roles": [{"name": "a", "env": [{"name": "X"}]}]}}
    assert ROLES.index(0).child("env").index(0).child("name").resolve(obj) == (True, "X")
    assert ROLES.index(1).resolve(obj) == (False, None)
    assert ROLES.index(0).child("size").resolve(obj) == (False, None)


def test_message_and_cause_follow_kubernetes_shape() -> None:
    e = errors.invalid(ROLES.index(0).child("replicas"), 0, "must be at least 1", origin="x")
    assert e.message() == "spec.roles[0].replicas: Invalid value: 0: must be at least 1"
    assert e.cause() == {
        "reason": "FieldValueInvalid",
        "field": "spec.roles[0].replicas",
        "message": "Invalid value: 0: must be at least 1",
    }
    r = errors.required("spec.model")
    assert r.message() == "spec.model: Required value"


def test_invalid_verdict_response_has_422_and_causes() -> None:
    errs = ErrorList(
        [
            errors.invalid("spec.roles[0].name", "Bad", "not a DNS label"),
            errors.forbidden("spec.model.artifactRef", "not delivered in this release"),
        ]
    )
    v = Verdict.from_errors(errs, group_kind="ModelDeployment.worker.gpustack.ai", name="md")
    assert v.kind is VerdictKind.INVALID
    resp = v.to_response("uid-1")
    assert resp["uid"] == "uid-1"
    assert resp["allowed"] is False
    assert resp["status"]["code"] == 422
    assert resp["status"]["reason"] == "Invalid"
    assert resp["status"]["details"]["group"] == "worker.gpustack.ai"
    assert resp["status"]["details"]["kind"] == "ModelDeployment"
    assert [c["field"] for c in resp["status"]["details"]["causes"]] == [
        "spec.roles[0].name",
        "spec.model.artifactRef",
    ]
    assert 'ModelDeployment.worker.gpustack.ai "md" is invalid' in resp["status"]["message"]


def test_internal_error_wins_over_invalid() -> None:
    errs = ErrorList([errors.invalid("a", 1, "x"), errors.internal("b", "read failed")])
    v = Verdict.from_errors(errs, group_kind="X.y", name="n")
    assert v.kind is VerdictKind.INTERNAL
    assert v.to_response()["status"]["code"] == 500


def test_allowed_patch_encodings() -> None:
    patch = [{"op": "add", "path": "/spec/x", "value": 1}]
    v = Verdict.allow(patch=patch, warnings=["w"])
    arr = v.to_response()
    assert arr == {
        "allowed": True,
        "patchType": "JSONPatch",
        "patch": patch,
        "warnings": ["w"],
    }
    wire = v.to_response("u", patch_encoding="base64")
    assert wire["uid"] == "u"
    assert json.loads(base64.b64decode(wire["patch"])) == patch


def test_forbidden_verdict_has_403_and_no_causes() -> None:
    resp = Verdict.forbid("binding missing").to_response()
    assert resp["status"] == {"code": 403, "reason": "Forbidden", "message": "binding missing"}
    assert resp["warnings"] == []


def test_error_types_are_the_kubernetes_reasons() -> None:
    assert ErrorType.NOT_FOUND.value == "FieldValueNotFound"
    assert ErrorType.TOO_MANY.value == "FieldValueTooMany"
