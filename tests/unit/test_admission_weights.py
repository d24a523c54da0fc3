"""A deployment naming a ModelArtifact (docs/weights.md "Admission", D28): ``artifactRef`` is
admitted without reading the artifact, frozen with ``spec.model``; while it is set a managed role
may not pass the flags or env the artifact owns, and no role mounts over the delivery's paths.
The served-name rule holds with and without an artifact."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from admission_support import causes, deployment, review, role, stored

from gpustack_render.admission import validate_deployment
from gpustack_render.admission.weights import RESERVED_PATHS, reserved_overlap
from gpustack_render.core.errors import ErrorType, FieldError
from gpustack_render.core.review import AdmissionRequest
from gpustack_render.core.settings import Settings
from gpustack_render.core.vocabulary import Engine
from gpustack_render.engines.owned import artifact_args, artifact_env
from gpustack_render.schema.lookups import StaticLookups

MODEL = "Qwen/Qwen3-8B"
REF = {"name": MODEL, "artifactRef": {"name": "qwen-weights"}}
P, C = "/var/lib/gpustack/model", "/var/lib/gpustack/model-cache"


def with_ref(*roles: dict[str, Any], engine: str = "vLLM") -> dict[str, Any]:
    return deployment(*roles, engine=engine, model=dict(REF))


def only(verdict: Any, origin: str) -> list[FieldError]:
    return [e for e in verdict.errors if e.origin == origin]


def test_a_reference_to_an_artifact_that_does_not_exist_is_admitted() -> None:
    """Object-only: nothing is read for the artifact, so a missing one is no refusal (the
    controller waits for it); no release-scope refusal remains for the field."""
    verdict = review(with_ref())
    assert verdict.allowed, causes(verdict)


def test_the_validating_webhook_admits_it_too() -> None:
    obj = stored(with_ref())
    request = AdmissionRequest("CREATE", obj, namespace="team-a", name="qwen")
    verdict = validate_deployment(
        request, lookups=StaticLookups.of([]), settings=Settings()
    )  # no InstanceType either: the rules that read one report it, none reads the artifact
    assert not [e for e in verdict.errors if "artifactRef" in e.field]


# --- weights.owned-flag -------------------------------------------------------------------------

VLLM_SPELLINGS = [
    (["--model", "x"], "--model"),
    (["--model=x"], "--model"),
    (["--revision", "r1"], "--revision"),
    (["--revision=r1"], "--revision"),
    (["--rev", "r1"], "--revision"),
    (["--tokenizer-revision", "r1"], "--tokenizer-revision"),
    (["--tokenizer_revision=r1"], "--tokenizer-revision"),
    (["--download-dir", "/d"], "--download-dir"),
    (["--download_dir=/d"], "--download-dir"),
    (["--download-d", "/d"], "--download-dir"),
]
SGLANG_SPELLINGS = [
    (["--model-path", "x"], "--model-path"),
    (["--model-path=x"], "--model-path"),
    (["--model", "x"], "--model-path"),
    (["--revision", "r1"], "--revision"),
    (["--revision=r1"], "--revision"),
    (["--download-dir", "/d"], "--download-dir"),
    (["--download-dir=/d"], "--download-dir"),
]


@pytest.mark.parametrize(
    ("engine", "args", "flag"),
    [("vLLM", a, f) for a, f in VLLM_SPELLINGS] + [("SGLang", a, f) for a, f in SGLANG_SPELLINGS],
    ids=lambda v: v if isinstance(v, str) else " ".join(v),
)
def test_an_artifact_owned_flag_is_refused_in_any_spelling(
    engine: str, args: list[str], flag: str
) -> None:
    extra = ["--max-model-len", "4096", *args]
    verdict = review(with_ref(role(extraArgs=extra), engine=engine))
    (err,) = only(verdict, "weights.owned-flag")
    assert err.type is ErrorType.INVALID
    assert err.field == "spec.roles[0].extraArgs[2]"
    assert err.bad_value == args[0]
    assert flag in err.detail
    assert "spec.model.artifactRef" in err.detail
    assert "spec.roles[0].command" in err.detail
    # Without an artifact the same line is the role's own business.
    assert not only(review(deployment(role(extraArgs=extra), engine=engine)), "weights.owned-flag")


@pytest.mark.parametrize(
    ("engine", "args"),
    [
        ("vLLM", ["--tokenizer", "Qwen/Qwen3-8B"]),  # a flag of its own, not --tokenizer-revision
        ("vLLM", ["--tokenizer-mode", "auto"]),
        ("vLLM", ["--model-impl", "vllm"]),
        ("vLLM", ["--code-revision", "r"]),
        ("vLLM", ["--served-model-name", MODEL]),
        ("vLLM", ["-m", "x"]),  # a single dash is never a long flag
        ("SGLang", ["--download_dir=/d"]),  # SGLang reads no underscore spelling
        ("SGLang", ["--tokenizer-path", "t"]),
        ("SGLang", ["--model-impl", "sglang"]),
    ],
    ids=lambda v: v if isinstance(v, str) else " ".join(v),
)
def test_neighbouring_flags_are_not_read_as_owned(engine: str, args: list[str]) -> None:
    verdict = review(with_ref(role(extraArgs=args), engine=engine))
    assert not only(verdict, "weights.owned-flag"), causes(verdict)


def test_every_owned_flag_is_named_for_each_engine() -> None:
    assert artifact_args(Engine.VLLM) == (
        "--model",
        "--revision",
        "--tokenizer-revision",
        "--download-dir",
    )
    assert artifact_args(Engine.VLLM_ASCEND) == artifact_args(Engine.VLLM)
    assert artifact_args(Engine.SGLANG) == ("--model-path", "--revision", "--download-dir")


def test_a_take_over_role_owns_its_flags_and_env() -> None:
    taken = role(
        command=["python", "-m", "serve"],
        extraArgs=["--model", "x"],
        env=[{"name": "HF_TOKEN", "value": "t"}],
    )
    verdict = review(with_ref(taken))
    assert not only(verdict, "weights.owned-flag")
    assert not only(verdict, "weights.owned-env")


def test_every_owned_flag_of_a_line_is_named_once() -> None:
    extra = ["--model", "x", "--revision", "r", "--download-dir=/d", "--tokenizer-revision", "t"]
    verdict = review(with_ref(role(extraArgs=extra)))
    assert [e.field for e in only(verdict, "weights.owned-flag")] == [
        "spec.roles[0].extraArgs[0]",
        "spec.roles[0].extraArgs[2]",
        "spec.roles[0].extraArgs[4]",
        "spec.roles[0].extraArgs[5]",
    ]


# --- weights.owned-env --------------------------------------------------------------------------

HUB_ENV = [
    "HF_TOKEN",
    "HF_ENDPOINT",
    "HF_HOME",
    "MODELSCOPE_API_TOKEN",
    "MODELSCOPE_DOMAIN",
    "MODELSCOPE_CACHE",
]


@pytest.mark.parametrize(
    ("engine", "name"),
    [("vLLM", n) for n in [*HUB_ENV, "VLLM_USE_MODELSCOPE"]]
    + [("SGLang", n) for n in [*HUB_ENV, "SGLANG_USE_MODELSCOPE"]],
)
def test_an_artifact_owned_env_name_is_refused(engine: str, name: str) -> None:
    env = [{"name": "OMP_NUM_THREADS", "value": "4"}, {"name": name, "value": "x"}]
    verdict = review(with_ref(role(env=env), engine=engine))
    (err,) = only(verdict, "weights.owned-env")
    assert err.type is ErrorType.INVALID
    assert err.field == "spec.roles[0].env[1]"
    assert err.bad_value == name
    assert name in err.detail and "spec.model.artifactRef" in err.detail
    assert "spec.roles[0].command" in err.detail
    assert not only(review(deployment(role(env=env), engine=engine)), "weights.owned-env")


@pytest.mark.parametrize(
    ("engine", "name"),
    [("vLLM", "SGLANG_USE_MODELSCOPE"), ("SGLang", "VLLM_USE_MODELSCOPE"), ("vLLM", "HF_HUB_X")],
)
def test_another_engines_switch_is_not_owned(engine: str, name: str) -> None:
    verdict = review(with_ref(role(env=[{"name": name, "value": "1"}]), engine=engine))
    assert not only(verdict, "weights.owned-env")


def test_an_entry_without_a_value_is_refused_as_well() -> None:
    verdict = review(with_ref(role(env=[{"name": "HF_HOME"}])))
    assert [e.field for e in only(verdict, "weights.owned-env")] == ["spec.roles[0].env[0]"]


def test_the_owned_env_lists() -> None:
    assert artifact_env(Engine.VLLM) == (*HUB_ENV, "VLLM_USE_MODELSCOPE")
    assert artifact_env(Engine.SGLANG) == (*HUB_ENV, "SGLANG_USE_MODELSCOPE")


# --- weights.reserved-mount-path ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("mount", "reserved"),
    [
        (P, P),
        (C, C),
        (f"{P}/shards", P),
        (f"{C}/hub/models--x", C),
        ("/var/lib/gpustack", P),  # contains both: the first is named
        ("/var/lib", P),
        ("/var/lib/gpustack/model/../model-cache", C),  # as the container runtime resolves it
    ],
)
def test_a_mount_at_inside_or_above_a_reserved_path_is_refused(mount: str, reserved: str) -> None:
    vol = {"mountPath": mount, "configMap": {"name": "extra"}}
    verdict = review(
        with_ref(role(additionalVolumes=[{"mountPath": "/opt/x", "secret": {"name": "s"}}, vol]))
    )
    (err,) = only(verdict, "weights.reserved-mount-path")
    assert err.type is ErrorType.INVALID
    assert err.field == "spec.roles[0].additionalVolumes[1].mountPath"
    assert err.bad_value == mount
    assert reserved in err.detail and "spec.model.artifactRef" in err.detail
    assert f"overlaps {reserved}," in err.detail
    assert reserved_overlap(mount) == reserved


def test_the_root_contains_both_and_names_the_first() -> None:
    """The schema refuses a mount at ``/`` itself; the comparison still reads it as containing
    both paths."""
    assert reserved_overlap("/") == P
    assert list(RESERVED_PATHS) == [P, C]


@pytest.mark.parametrize(
    "mount",
    [
        "/var/lib/gpustack/modelx",
        "/var/lib/gpustack/model-cachex",
        "/var/lib/gpustack/models",
        "/var/lib/gpustack/cache",  # the compile cache: another path
        "/var/lib/gpustack-model",
    ],
)
def test_a_near_miss_is_admitted(mount: str) -> None:
    vol = {"mountPath": mount, "configMap": {"name": "extra"}}
    verdict = review(with_ref(role(additionalVolumes=[vol])))
    assert verdict.allowed, causes(verdict)
    assert reserved_overlap(mount) is None


def test_the_mount_rule_holds_on_every_role_and_only_with_an_artifact() -> None:
    vol = {"mountPath": P, "configMap": {"name": "extra"}}
    taken = role("b", command=["serve"], additionalVolumes=[vol])
    obj = with_ref(role("a"), taken)
    verdict = review(obj)
    assert [e.field for e in only(verdict, "weights.reserved-mount-path")] == [
        "spec.roles[1].additionalVolumes[0].mountPath"
    ]
    without = copy.deepcopy(obj)
    del without["spec"]["model"]["artifactRef"]
    assert not only(review(without), "weights.reserved-mount-path")


# --- served name, with and without an artifact (docs/contract/admission.md §8.1) ----------------


@pytest.mark.parametrize("artifact", [True, False], ids=["artifact", "no-artifact"])
@pytest.mark.parametrize(
    ("names", "refused"),
    [
        ([MODEL], False),
        (["chat"], True),
        ([MODEL, "chat"], True),
    ],
)
def test_the_served_name_rule_is_the_same_with_and_without_an_artifact(
    artifact: bool, names: list[str], refused: bool
) -> None:
    r = role(extraArgs=["--served-model-name", *names])
    obj = with_ref(r) if artifact else deployment(r)
    errs = only(review(obj), "served-name.mismatch")
    if not refused:
        assert errs == []
        return
    (err,) = errs
    assert err.field == "spec.roles[0].extraArgs"
    assert err.bad_value == ", ".join(names)
    assert MODEL in err.detail and "--served-model-name" in err.detail


def test_a_stored_served_name_is_grandfathered_with_an_artifact() -> None:
    r = role(extraArgs=["--served-model-name", "chat"])
    old = copy.deepcopy(with_ref(r))
    new = copy.deepcopy(old)
    new["spec"]["roles"][0]["replicas"] = 2
    assert not only(review(new, old=old), "served-name.mismatch")
    changed = copy.deepcopy(new)
    changed["spec"]["roles"][0]["extraArgs"] = ["--served-model-name", "other"]
    assert only(review(changed, old=old), "served-name.mismatch")


# --- frozen with spec.model ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ({"name": MODEL}, REF),
        (REF, {"name": MODEL}),
        (REF, {"name": MODEL, "artifactRef": {"name": "other-weights"}}),
    ],
    ids=["added", "removed", "renamed"],
)
def test_the_reference_is_frozen_with_the_model(
    before: dict[str, Any], after: dict[str, Any]
) -> None:
    old = deployment(model=dict(before))
    new = deployment(model=dict(after))
    (err,) = only(review(new, old=old), "identity.field-changed")
    assert err.field == "spec.model" and err.type is ErrorType.INVALID
    assert review(old, old=copy.deepcopy(old)).allowed


def test_weights_rules_all_collect_in_role_order() -> None:
    obj = with_ref(
        role(
            "a",
            extraArgs=["--kv-transfer-config", "{}", "--revision", "r"],
            env=[{"name": "HF_TOKEN", "value": "t"}],
            additionalVolumes=[{"mountPath": C, "configMap": {"name": "c"}}],
        ),
        role("b", extraArgs=["--download-dir", "/d"]),
    )
    assert [(o, f) for o, f, _ in causes(review(obj))] == [
        ("args.owned-flag", "spec.roles[0].extraArgs[0]"),
        ("weights.owned-flag", "spec.roles[0].extraArgs[2]"),
        ("weights.owned-env", "spec.roles[0].env[0]"),
        ("weights.reserved-mount-path", "spec.roles[0].additionalVolumes[0].mountPath"),
        ("weights.owned-flag", "spec.roles[1].extraArgs[0]"),
    ]
