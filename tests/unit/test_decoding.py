"""Schema decoding: defaults, strictness, and pydantic errors translated to field errors."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gpustack_render.core.errors import ErrorType
from gpustack_render.schema.decoding import decode_deployment

BASE: dict[str, Any] = {
    "apiVersion": "worker.gpustack.ai/v1",
    "kind": "ModelDeployment",
    "metadata": {"name": "qwen", "namespace": "team-a"},
    "spec": {
        "model": {"name": "Qwen/Qwen3-8B"},
        "engine": {"name": "vLLM", "image": "vllm/vllm-openai:v0.25.1"},
        "roles": [{"name": "server", "instanceType": "a10g"}],
    },
}


def with_(**role: Any) -> dict[str, Any]:
    md = copy.deepcopy(BASE)
    md["spec"]["roles"][0].update(role)
    return md


def test_schema_defaults_are_applied() -> None:
    md, errs = decode_deployment(
        {**copy.deepcopy(BASE), "spec": {**BASE["spec"], "kvCache": {"poolRef": {"name": "p"}}}}
    )
    assert not errs and md is not None
    out = md.to_dict()
    role = out["spec"]["roles"][0]
    assert role["kind"] == "Server"
    assert role["replicas"] == 1
    assert role["size"] == 1
    assert role["startupTimeoutSeconds"] == 1800
    assert out["spec"]["kvCache"]["connector"] == "Mooncake"
    # values that are only rendered when unset are not defaults
    assert "shmSize" not in role and "terminationGracePeriodSeconds" not in role
    assert "resources" not in role
    assert out["metadata"] == {"name": "qwen", "namespace": "team-a"}


def test_nulls_and_whole_floats_read_as_the_api_server_reads_them() -> None:
    """A null field is pruned, then defaulted (``replicas:`` left empty by a template), and a
    whole float where an integer belongs is that integer: the API server accepts both and
    stores the default or the integer, so ``admit`` and ``render`` must too."""
    md, errs = decode_deployment(
        {
            **copy.deepcopy(BASE),
            "spec": {
                **BASE["spec"],
                "kvCache": {"poolRef": {"name": "p"}, "connector": None},
                "router": None,
                "roles": [
                    {
                        "name": "server",
                        "instanceType": "a10g",
                        "kind": None,
                        "replicas": None,
                        "size": 2.0,
                        "privileged": None,
                        "image": None,
                        "startupTimeoutSeconds": 1e2,
                        "ports": [{"port": 8000.0, "protocol": None}],
                        "resources": {"accelerator": 2.0, "interface": None},
                    }
                ],
            },
        }
    )
    assert not errs and md is not None
    out = md.to_dict()
    assert out["spec"]["kvCache"] == {"poolRef": {"name": "p"}, "connector": "Mooncake"}
    assert "router" not in out["spec"]
    role = out["spec"]["roles"][0]
    assert (role["kind"], role["replicas"], role["size"], role["privileged"]) == (
        "Server",
        1,
        2,
        False,
    )
    assert "image" not in role and role["startupTimeoutSeconds"] == 100
    assert role["ports"] == [{"port": 8000, "protocol": "TCP"}]
    assert role["resources"] == {"accelerator": 2}
    assert isinstance(role["resources"]["accelerator"], int)


def test_defaulting_is_a_fixed_point() -> None:
    md, _ = decode_deployment(copy.deepcopy(BASE))
    assert md is not None
    again, errs = decode_deployment(md.to_dict())
    assert not errs and again is not None
    assert again.to_dict() == md.to_dict()


def test_quantities_keep_their_json_type() -> None:
    md, errs = decode_deployment(with_(resources={"accelerator": 2}, shmSize="32Gi"))
    assert not errs and md is not None
    role = md.to_dict()["spec"]["roles"][0]
    assert role["resources"] == {"accelerator": 2}
    assert role["shmSize"] == "32Gi"


@pytest.mark.parametrize(
    ("role", "field", "etype"),
    [
        pytest.param(
            {"template": {}},
            "spec.roles[0].template",
            ErrorType.FORBIDDEN,
            id="unknown-template-field",
        ),
        pytest.param(
            {"replicas": 1025}, "spec.roles[0].replicas", ErrorType.INVALID, id="replicas-over-1024"
        ),
        pytest.param({"size": 65}, "spec.roles[0].size", ErrorType.INVALID, id="size-over-64"),
        pytest.param({"size": "2"}, "spec.roles[0].size", ErrorType.INVALID, id="size-as-string"),
        pytest.param(
            {"kind": "Router"}, "spec.roles[0].kind", ErrorType.NOT_SUPPORTED, id="bad-kind"
        ),
        pytest.param(
            {"name": "Server"}, "spec.roles[0].name", ErrorType.INVALID, id="role-name-pattern"
        ),
        pytest.param(
            {"resources": {"accelerator": "two"}},
            "spec.roles[0].resources.accelerator",
            ErrorType.INVALID,
            id="accelerator-not-a-quantity",
        ),
        pytest.param(
            {"shmSize": "16Gi\n"},
            "spec.roles[0].shmSize",
            ErrorType.INVALID,
            id="quantity-with-trailing-newline",
        ),
        pytest.param(
            {"resources": {"accelerator": "1\n"}},
            "spec.roles[0].resources.accelerator",
            ErrorType.INVALID,
            id="accelerator-with-trailing-newline",
        ),
        pytest.param(
            {"ports": [{"port": 70000}]},
            "spec.roles[0].ports[0].port",
            ErrorType.INVALID,
            id="port-out-of-range",
        ),
        pytest.param(
            {"instanceType": None},
            "spec.roles[0].instanceType",
            ErrorType.REQUIRED,
            id="instance-type-null",
        ),
        pytest.param(
            {"replicas": 2.5}, "spec.roles[0].replicas", ErrorType.INVALID, id="replicas-fraction"
        ),
        pytest.param(
            {"replicas": 2.0**53 + 2},
            "spec.roles[0].replicas",
            ErrorType.INVALID,
            id="replicas-float-past-2-53",
        ),
        pytest.param(
            {"resources": {"accelerator": 2**63}},
            "spec.roles[0].resources.accelerator",
            ErrorType.INVALID,
            id="accelerator-past-int64",
        ),
        pytest.param(
            {"extraArgs": [None]}, "spec.roles[0].extraArgs[0]", ErrorType.INVALID, id="null-item"
        ),
        pytest.param(
            {"bogus": None}, "spec.roles[0].bogus", ErrorType.FORBIDDEN, id="unknown-field-null"
        ),
    ],
)
def test_schema_refusals_name_the_field(role: dict[str, Any], field: str, etype: ErrorType) -> None:
    md, errs = decode_deployment(with_(**role))
    assert md is None
    assert (field, etype) in [(e.field, e.type) for e in errs]


def test_missing_required_fields_are_required_errors() -> None:
    md = copy.deepcopy(BASE)
    del md["spec"]["engine"]["image"]
    del md["spec"]["roles"][0]["instanceType"]
    _, errs = decode_deployment(md)
    got = {(e.field, e.type) for e in errs}
    assert ("spec.engine.image", ErrorType.REQUIRED) in got
    assert ("spec.roles[0].instanceType", ErrorType.REQUIRED) in got


def test_bad_engine_enum_lists_supported_values() -> None:
    md = copy.deepcopy(BASE)
    md["spec"]["engine"]["name"] = "TGI"
    _, errs = decode_deployment(md)
    (e,) = errs
    assert e.type is ErrorType.NOT_SUPPORTED and e.field == "spec.engine.name"
    assert '"vLLM"' in e.detail and '"SGLang"' in e.detail and e.bad_value == "TGI"


def test_duplicate_list_map_keys_are_duplicates() -> None:
    md = copy.deepcopy(BASE)
    md["spec"]["roles"].append({"name": "server", "instanceType": "b"})
    md["spec"]["roles"][0]["env"] = [{"name": "A", "value": "1"}, {"name": "A", "value": "2"}]
    md["spec"]["roles"][0]["ports"] = [{"port": 8000}, {"port": 8000, "protocol": "TCP"}]
    _, errs = decode_deployment(md)
    dupes = {(e.field, str(e.bad_value)) for e in errs if e.type is ErrorType.DUPLICATE}
    # A role at its name (D22), with the name; env and ports at the entry, with the key.
    assert dupes == {
        ("spec.roles[1].name", "server"),
        ("spec.roles[0].env[1]", "{'name': 'A'}"),
        ("spec.roles[0].ports[1]", "{'port': 8000, 'protocol': 'TCP'}"),
    }


def test_empty_roles_and_non_object_input() -> None:
    md = copy.deepcopy(BASE)
    md["spec"]["roles"] = []
    _, errs = decode_deployment(md)
    assert [e.field for e in errs] == ["spec.roles"]
    none, errs = decode_deployment(["not", "an", "object"])
    assert none is None and errs


@pytest.mark.parametrize(
    ("role", "fragment"),
    [
        pytest.param({"replicas": 1025}, "1024", id="bound-names-the-limit"),
        pytest.param(
            {"name": "Server"}, "lower-case letters, digits and '-'", id="pattern-in-words"
        ),
        pytest.param({"size": "2"}, "integer", id="type-named"),
        pytest.param({"resources": {"accelerator": "two"}}, "'two'", id="own-validator-words"),
    ],
)
def test_schema_messages_name_the_rule_not_the_library(role: dict[str, Any], fragment: str) -> None:
    _, errs = decode_deployment(with_(**role))
    (e,) = errs
    assert fragment in e.detail
    assert "Input should" not in e.detail and "Value error" not in e.detail


#: The role name's rule, in words (issue 37): what a person reads instead of the expression.
ROLE_NAME_WORDS = (
    "must consist of lower-case letters, digits and '-', start and end with a letter or digit, "
    "and be at most 63 characters (a DNS-1123 label)"
)


@pytest.mark.parametrize(
    ("name", "fault"),
    [
        pytest.param(
            "Server", "it has the upper-case letter 'S' ('server' would do)", id="capital"
        ),
        pytest.param(
            "Qwen 7B",
            "it has the upper-case letters 'Q', 'B' and has ' ', neither a lower-case letter, a "
            "digit nor '-' ('qwen-7b' would do)",
            id="capitals-and-a-space",
        ),
        pytest.param("my_role", "it has '_', neither", id="underscore"),
        pytest.param("-x", "it starts with '-' ('x' would do)", id="leading-dash"),
        pytest.param("Prefill-", "'P' and ends with '-' ('prefill' would do)", id="trailing-dash"),
    ],
)
def test_a_role_name_refused_by_its_pattern_says_the_rule_in_words(name: str, fault: str) -> None:
    """A role name with capitals (or anything else a DNS-1123 label refuses) gets the rule in
    words, the value named and a name that would do; never the regular expression alone."""
    _, errs = decode_deployment(with_(name=name))
    (e,) = errs
    assert e.field == "spec.roles[0].name" and e.type is ErrorType.INVALID
    assert e.message().startswith(f'spec.roles[0].name: Invalid value: "{name}": {ROLE_NAME_WORDS}')
    assert fault in e.detail
    assert "^[a-z0-9]" not in e.message()


def test_every_pattern_of_the_models_has_words() -> None:
    """Each pattern a model declares (checked by pydantic, or only by the CRD's schema) has an
    entry in PATTERN_WORDS, so no field's refusal is an expression alone; a role-name pattern
    says "at most 63 characters" and every field carrying it is bounded so."""
    from pydantic import BaseModel

    from gpustack_render.api.modeldeployment import ROLE_NAME_PATTERN
    from gpustack_render.schema.decoding import PATTERN_WORDS
    from gpustack_render.schema.kinds import MODELS

    found: dict[str, set[str]] = {}

    def walk(model: type[BaseModel], seen: set[type[BaseModel]]) -> None:
        if model in seen:
            return
        seen.add(model)
        for name, info in model.model_fields.items():
            where = f"{model.__name__}.{name}"
            extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
            patterns = [getattr(m, "pattern", None) for m in info.metadata]
            patterns.append(extra.get("pattern"))
            for pattern in filter(None, patterns):
                found.setdefault(str(pattern), set()).add(where)
                if pattern == ROLE_NAME_PATTERN:
                    bounds = [getattr(m, "max_length", None) for m in info.metadata]
                    assert 63 in bounds, where
            for sub in _models_in(info.annotation):
                walk(sub, seen)

    seen: set[type[BaseModel]] = set()
    for model in MODELS.values():
        walk(model, seen)
    assert ROLE_NAME_PATTERN in found, "the walk finds the role name's pattern"
    assert len(found) >= 4, found
    missing = {p: sorted(w) for p, w in found.items() if p not in PATTERN_WORDS}
    assert not missing


def _models_in(annotation: Any) -> list[type[Any]]:
    """The pydantic models an annotation names (through Optional, list, dict, Annotated)."""
    import typing

    from pydantic import BaseModel

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]


@pytest.mark.parametrize(
    ("volume", "field", "words"),
    [
        pytest.param(
            {"mountPath": "data//x"},
            "mountPath",
            "must be an absolute path: start with '/'",
            id="mount-path",
        ),
        pytest.param(
            {"mountPath": "/data", "subPath": "/x"},
            "subPath",
            "must be a relative path on one line: not empty and not starting with '/'",
            id="sub-path",
        ),
    ],
)
def test_every_pattern_checked_field_is_refused_in_words(
    volume: dict[str, Any], field: str, words: str
) -> None:
    _, errs = decode_deployment(with_(additionalVolumes=[volume]))
    (e,) = [e for e in errs if e.field.endswith(field)]
    assert words in e.detail and "^" not in e.detail, e.message()
