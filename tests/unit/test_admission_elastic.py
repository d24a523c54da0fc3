"""Admission of the Elastic EP profile (docs/contract/elastic-ep.md §2, D29; docs/elastic-ep.md
"Admission"): the accelerator default (TP), the shape rules S1–S18, the owned keys matched by
the profile's own rule, the UPDATE rules, and the decoding refusal of the retired fields.

The profile is delivered (D29): no release-scope refusal stands beside these rules."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from admission_support import CPU, causes, deployment, lookups_of, review, role

from gpustack_render.admission.elastic import (
    ELASTIC_OWNED_ENV,
    ELASTIC_OWNED_FLAGS,
    elastic_owned_flag,
    validate_elastic,
    validate_elastic_update,
)
from gpustack_render.api.modeldeployment import ElasticEPSpec, ModelDeployment
from gpustack_render.core.errors import ErrorList, FieldError, Verdict
from gpustack_render.deployment.defaulting import default_accelerators, default_deployment
from gpustack_render.schema.decoding import decode_deployment

INV, FORB = "FieldValueInvalid", "FieldValueForbidden"
R0 = "spec.roles[0]"


def elastic_role(width: int = 2, **fields: Any) -> dict[str, Any]:
    return role("server", elasticEp={"width": width}, **fields)


def elastic_md(*roles: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return deployment(*(roles or (elastic_role(),)), **spec)


def decoded(obj: dict[str, Any]) -> ModelDeployment:
    md, errs = decode_deployment(obj)
    assert md is not None, errs
    return md


def triples(errs: ErrorList | list[FieldError]) -> list[tuple[str, str, str]]:
    return [(e.origin, e.field, e.type.value) for e in errs]


def elastic_causes(verdict: Verdict) -> list[tuple[str, str, str]]:
    return [c for c in causes(verdict) if c[0].startswith("elastic.")]


# --- §2.1 the mutating default ------------------------------------------------------------------


def _defaulted(obj: dict[str, Any]) -> tuple[Any, ErrorList]:
    out, errs = default_accelerators(obj, lookups=lookups_of())
    return (out["spec"]["roles"][0].get("resources") or {}).get("accelerator"), errs


@pytest.mark.parametrize(
    ("args", "env", "expected"),
    [
        pytest.param([], [], "1", id="no-tp-reads-1"),
        pytest.param(["--tensor-parallel-size", "2"], [], "2", id="canonical"),
        pytest.param(["--tensor-parallel-size=4"], [], "4", id="equals"),
        pytest.param(["-tp", "3"], [], "3", id="alias"),
        pytest.param(["-t", "2"], [], "2", id="abbreviation"),
        pytest.param(["--tensor_parallel_size", "8"], [], "8", id="underscore"),
        pytest.param(["--tensor-parallel", "2"], [], "2", id="unique-prefix"),
        pytest.param(["-tp", "2", "-tp", "4"], [], "4", id="last-wins"),
        pytest.param(["-tp", "+2"], [], "2", id="sign"),
        pytest.param(["-tp", "2"], [{"name": "VLLM_DP_SIZE", "value": "4"}], "2", id="env-dp"),
    ],
)
def test_the_default_is_the_tensor_parallel_degree(
    args: list[str], env: list[dict[str, str]], expected: str
) -> None:
    obj = elastic_md(elastic_role(extraArgs=args, env=env))
    before = copy.deepcopy(obj)
    value, errs = _defaulted(obj)
    assert (value, triples(errs)) == (expected, [])
    assert obj == before, "the input is never modified"


def test_an_ordinary_role_still_defaults_to_one() -> None:
    value, _ = _defaulted(deployment(role(extraArgs=["-tp", "4"])))
    assert value == "1"


def test_sglang_reads_its_own_tensor_parallel_flag() -> None:
    value, _ = _defaulted(elastic_md(elastic_role(extraArgs=["--tp-size", "2"]), engine="SGLang"))
    assert value == "2"


@pytest.mark.parametrize(
    "resources", [{"accelerator": 1}, {"accelerator": "1.5"}, {"accelerator": 0}]
)
def test_an_explicit_count_is_kept(resources: dict[str, Any]) -> None:
    value, errs = _defaulted(elastic_md(elastic_role(extraArgs=["-tp", "2"], resources=resources)))
    assert (value, errs) == (resources["accelerator"], [])


def test_a_type_without_accelerators_gets_no_count() -> None:
    value, errs = _defaulted(elastic_md(elastic_role(instanceType=CPU, extraArgs=["-tp", "2"])))
    assert (value, errs) == (None, [])


@pytest.mark.parametrize(
    ("args", "env", "named"),
    [
        pytest.param(["--tensor-parallel-size", "two"], [], "'two'", id="not-integer"),
        pytest.param(["-tp", "0"], [], "minimum 1", id="below-minimum"),
        pytest.param(["-t2"], [], "-t", id="glued-abbreviation"),
        pytest.param(["--tensor-parallel-size"], [], "no value", id="no-value"),
        pytest.param([], [{"name": "VLLM_DP_SIZE", "value": "x"}], "VLLM_DP_SIZE", id="env"),
    ],
)
def test_an_unreadable_degree_fails_the_default_naming_the_parse_error(
    args: list[str], env: list[dict[str, str]], named: str
) -> None:
    value, errs = _defaulted(elastic_md(elastic_role(extraArgs=args, env=env)))
    assert value is None
    assert triples(errs) == [("accelerator.default-tp-unreadable", f"{R0}.extraArgs", INV)]
    assert named in errs[0].message()


def test_the_review_refuses_at_the_mutation_with_the_parse_error() -> None:
    verdict = review(elastic_md(elastic_role(extraArgs=["-tp", "x"])))
    assert causes(verdict) == [("accelerator.default-tp-unreadable", f"{R0}.extraArgs", INV)]


def test_the_renderer_sees_the_same_default() -> None:
    md, errs = default_deployment(
        decoded(elastic_md(elastic_role(extraArgs=["-tp", "2"]))), lookups=lookups_of()
    )
    assert not errs and md.spec.roles[0].resources is not None
    assert md.spec.roles[0].resources.accelerator == "2"


# --- §2.2 shape rules ----------------------------------------------------------------------------


def test_an_admissible_profile_is_admitted_with_its_default() -> None:
    verdict = review(elastic_md(elastic_role(extraArgs=["-tp", "2"])))
    assert verdict.allowed, causes(verdict)


@pytest.mark.parametrize(
    "obj",
    [
        pytest.param(elastic_md(), id="tp-1"),
        pytest.param(elastic_md(elastic_role(extraArgs=["-tp", "3"])), id="tp-3-defaulted"),
        pytest.param(
            elastic_md(elastic_role(extraArgs=["-tp", "3"], resources={"accelerator": 3})),
            id="tp-3-stated",
        ),
        pytest.param(
            elastic_md(elastic_role(64, extraArgs=["--elastic-ep-max-dp-size", "64"])),
            id="width-64-at-ceiling",
        ),
        pytest.param(
            elastic_md(elastic_role(extraArgs=["--elastic_ep_max_dp_size", "+4"])),
            id="ceiling-underscore-sign",
        ),
        pytest.param(
            elastic_md(elastic_role(extraArgs=["--eplb-config.window_size=500", "-ep"])),
            id="dotted-eplb-key-and-ep-alias",
        ),
        pytest.param(
            elastic_md(
                elastic_role(
                    env=[
                        {"name": "RAY_LOG_TO_STDERR", "value": "0"},
                        {"name": "RAY_LOGGER_LEVEL", "value": "debug"},
                        {"name": "RAY_BACKEND_LOG_LEVEL", "value": "debug"},
                    ],
                    resources={
                        "acceleratorSlicedMemoryPercentage": 0,
                        "acceleratorSlicedCoresPercentage": 0,
                        "interface": 0,
                    },
                    scaling={"mode": "Replicas"},
                )
            ),
            id="ray-log-env-zero-slices-replicas-mode",
        ),
    ],
)
def test_admitted(obj: dict[str, Any]) -> None:
    verdict = review(obj)
    assert verdict.allowed, causes(verdict)


SHAPE = [
    pytest.param(
        elastic_md(engine="SGLang"),
        [("elastic.engine-not-vllm", "spec.engine.name", INV)],
        "SGLang",
        id="S1-engine",
    ),
    pytest.param(
        elastic_md(elastic_role(), role("other", elasticEp={"width": 2})),
        [
            ("elastic.several-roles", "spec.roles", FORB),
        ],
        "'other'",
        id="S2-two-elastic-roles",
    ),
    pytest.param(
        elastic_md(elastic_role(), role("plain")),
        [("elastic.not-only-role", "spec.roles", FORB)],
        "'plain'",
        id="S3-beside-another-role",
    ),
    pytest.param(
        elastic_md(elastic_role(4, extraArgs=["--elastic-ep-max-dp-size", "3"])),
        [("elastic.width-above-ceiling", f"{R0}.elasticEp.width", INV)],
        "=3",
        id="S6-above-ceiling",
    ),
    pytest.param(
        elastic_md(elastic_role(extraArgs=["-pp", "2"])),
        [("elastic.pipeline-or-context-degree", f"{R0}.extraArgs", INV)],
        "--pipeline-parallel-size=2",
        id="S7-pipeline",
    ),
    pytest.param(
        elastic_md(elastic_role(extraArgs=["-pcp", "2"])),
        [("elastic.pipeline-or-context-degree", f"{R0}.extraArgs", INV)],
        "--prefill-context-parallel-size=2",
        id="S7-prefill-context",
    ),
    pytest.param(
        elastic_md(elastic_role(kind="Decode")),
        [("elastic.kind-not-server", f"{R0}.kind", INV)],
        "decode",
        id="S8-kind",
    ),
    pytest.param(
        elastic_md(elastic_role(replicas=2)),
        [("elastic.replicas-not-one", f"{R0}.replicas", INV)],
        "replicas",
        id="S9-replicas",
    ),
    pytest.param(
        elastic_md(elastic_role(size=2)),
        [("elastic.size-not-one", f"{R0}.size", INV)],
        "size",
        id="S10-size",
    ),
    pytest.param(
        elastic_md(elastic_role(command=["vllm", "serve", "m"])),
        [("elastic.command-set", f"{R0}.command", FORB)],
        "extraArgs",
        id="S11-command",
    ),
    pytest.param(
        elastic_md(elastic_role(extraArgs=["-tp", "2"], resources={"accelerator": "1.5"})),
        [("elastic.cards-not-tp", f"{R0}.resources.accelerator", INV)],
        "degree 2",
        id="S12-tp2-accelerator-1.5",
    ),
    pytest.param(
        elastic_md(elastic_role(extraArgs=["-tp", "2"], resources={"accelerator": 4})),
        [("elastic.cards-not-tp", f"{R0}.resources.accelerator", INV)],
        "degree 2",
        id="S12-more-cards",
    ),
    pytest.param(
        elastic_md(
            elastic_role(resources={"accelerator": 1, "acceleratorSlicedMemoryPercentage": 50})
        ),
        [("elastic.sliced-cards", f"{R0}.resources.acceleratorSlicedMemoryPercentage", FORB)],
        "50",
        id="S13-memory-slice",
    ),
    pytest.param(
        elastic_md(
            elastic_role(resources={"accelerator": 1, "acceleratorSlicedCoresPercentage": 25})
        ),
        [("elastic.sliced-cards", f"{R0}.resources.acceleratorSlicedCoresPercentage", FORB)],
        "25",
        id="S13-cores-slice",
    ),
    pytest.param(
        elastic_md(
            elastic_role(resources={"accelerator": 1, "acceleratorPartitionedProfile": "3g.40gb"})
        ),
        [("elastic.partitioned-cards", f"{R0}.resources.acceleratorPartitionedProfile", FORB)],
        "3g.40gb",
        id="S14-partition",
    ),
    pytest.param(
        elastic_md(elastic_role(resources={"accelerator": 1, "interface": 2})),
        [("elastic.fabric-interface", f"{R0}.resources.interface", FORB)],
        "2 fabric",
        id="S15-interface",
    ),
    pytest.param(
        elastic_md(elastic_role(scaling={"mode": "External"})),
        [("elastic.external-scaling", f"{R0}.scaling.mode", FORB)],
        "shrink",
        id="S18-external",
    ),
    pytest.param(
        elastic_md(
            elastic_role(),
            scalingGroups=[{"name": "g", "roles": [{"name": "server", "perUnit": 1}]}],
        ),
        [("elastic.external-scaling", "spec.scalingGroups[0].roles[0].name", FORB)],
        "shrink",
        id="S18-scaling-group",
    ),
]


@pytest.mark.parametrize(("obj", "expected", "named"), SHAPE)
def test_each_shape_rule_refuses(
    obj: dict[str, Any], expected: list[tuple[str, str, str]], named: str
) -> None:
    errs = validate_elastic(decoded(obj))
    assert triples(errs) == expected
    assert named in errs[0].message()
    verdict = review(obj)
    assert not verdict.allowed
    assert elastic_causes(verdict) == expected


def test_s4_width_bounds_are_rechecked_behind_the_schema() -> None:
    """The schema bounds ``width`` to 2..64, so S4 only meets an object built past it."""
    for width in (1, 65):
        md = decoded(elastic_md())
        spec = ElasticEPSpec.model_construct(width=width)
        roles = [md.spec.roles[0].model_copy(update={"elastic_ep": spec})]
        md = md.model_copy(update={"spec": md.spec.model_copy(update={"roles": roles})})
        errs = validate_elastic(md)
        assert triples(errs) == [("elastic.width-out-of-range", f"{R0}.elasticEp.width", INV)]
        assert "2..64" in errs[0].detail and errs[0].bad_value == width
    for width in (1, 65):
        verdict = review(elastic_md(elastic_role(width)))
        assert causes(verdict) == [("schema.violation", f"{R0}.elasticEp.width", INV)]


def test_s2_and_s3_together() -> None:
    obj = elastic_md(elastic_role(), role("b", elasticEp={"width": 2}), role("plain"))
    got = [t for t in triples(validate_elastic(decoded(obj))) if t[1] == "spec.roles"]
    assert got == [
        ("elastic.several-roles", "spec.roles", FORB),
        ("elastic.not-only-role", "spec.roles", FORB),
    ]


@pytest.mark.parametrize(
    ("args", "env", "named"),
    [
        pytest.param(["--elastic-ep-max-dp-size", "0"], [], "minimum 1", id="ceiling-0"),
        pytest.param(["-tp", "x"], [], "'x'", id="tp-not-integer"),
        pytest.param(["-pp"], [], "no value", id="pp-no-value"),
        pytest.param([], [{"name": "VLLM_DP_SIZE", "value": "0"}], "VLLM_DP_SIZE", id="env"),
    ],
)
def test_s5_unreadable_degrees(args: list[str], env: list[dict[str, str]], named: str) -> None:
    errs = validate_elastic(decoded(elastic_md(elastic_role(extraArgs=args, env=env))))
    s5 = [e for e in errs if e.origin == "elastic.degrees-unreadable"]
    assert triples(s5) == [("elastic.degrees-unreadable", f"{R0}.extraArgs", INV)]
    assert named in s5[0].detail


def test_s5_suppresses_s6_s7_and_s12() -> None:
    """Width 4 over a ceiling of 3, pipeline 2 and 1.5 cards would each refuse; an unreadable
    TP leaves them all unjudged (the degrees they compare are unknown)."""
    readable = ["--elastic-ep-max-dp-size", "3", "-pp", "2"]
    base = elastic_role(4, extraArgs=readable, resources={"accelerator": "1.5"})
    assert [t[0] for t in triples(validate_elastic(decoded(elastic_md(base))))] == [
        "elastic.width-above-ceiling",
        "elastic.pipeline-or-context-degree",
        "elastic.cards-not-tp",
    ]
    broken = elastic_role(4, extraArgs=[*readable, "-tp", "x"], resources={"accelerator": "1.5"})
    assert triples(validate_elastic(decoded(elastic_md(broken)))) == [
        ("elastic.degrees-unreadable", f"{R0}.extraArgs", INV)
    ]


def test_s12_to_s15_need_resources() -> None:
    """On a type without accelerators no default creates ``resources``: nothing to judge."""
    verdict = review(elastic_md(elastic_role(instanceType=CPU, extraArgs=["-tp", "2"])))
    assert elastic_causes(verdict) == []


def test_the_test_vectors() -> None:
    tp2 = elastic_md(elastic_role(extraArgs=["-tp", "2"], resources={"accelerator": "1.5"}))
    assert ("elastic.cards-not-tp", f"{R0}.resources.accelerator", INV) in causes(review(tp2))
    tp3 = elastic_md(elastic_role(extraArgs=["-tp", "3"]))
    assert review(tp3).allowed
    ceiling0 = elastic_role(extraArgs=["--elastic-ep-max-dp-size", "0"])
    stated = elastic_md({**ceiling0, "resources": {"accelerator": 1}})
    assert elastic_causes(review(stated)) == [
        ("elastic.degrees-unreadable", f"{R0}.extraArgs", INV)
    ]
    # With no count stated, the default needs the degrees first: the mutation refuses.
    assert causes(review(elastic_md(ceiling0))) == [
        ("accelerator.default-tp-unreadable", f"{R0}.extraArgs", INV)
    ]


def test_tp3_is_admitted_with_three_cards() -> None:
    verdict = review(elastic_md(elastic_role(extraArgs=["-tp", "3"])))
    assert verdict.allowed, causes(verdict)
    assert verdict.patch == [
        {"op": "add", "path": "/spec/roles/0/resources", "value": {"accelerator": "3"}}
    ]


# --- §2.3 owned keys -----------------------------------------------------------------------------

REFERENCE_FLAGS = {
    "--data-parallel-size",
    "--data-parallel-size-local",
    "--data-parallel-backend",
    "--data-parallel-address",
    "--enable-expert-parallel",
    "--enable-elastic-ep",
    "--enable-eplb",
    "--distributed-executor-backend",
    "--ray-address",
}


def test_the_owned_flags_hold_the_reference_set_and_vllm_0_33_s_eplb_config() -> None:
    assert REFERENCE_FLAGS <= ELASTIC_OWNED_FLAGS
    assert {"--eplb-config", "--eplb-config.use_async"} == ELASTIC_OWNED_FLAGS - REFERENCE_FLAGS


@pytest.mark.parametrize(
    ("token", "key"),
    [
        *[pytest.param(f, f, id=f) for f in sorted(ELASTIC_OWNED_FLAGS)],
        *[pytest.param(f"{f}=x", f, id=f"{f}=x") for f in sorted(ELASTIC_OWNED_FLAGS)],
        pytest.param("-dp", "--data-parallel-size", id="-dp"),
        pytest.param("--dp=4", "--data-parallel-size", id="--dp=4"),
        pytest.param("-dpl", "--data-parallel-size-local", id="-dpl"),
        pytest.param("-dpb=ray", "--data-parallel-backend", id="-dpb=ray"),
        pytest.param("-dpa", "--data-parallel-address", id="-dpa"),
        pytest.param("---enable-eplb", "--enable-eplb", id="three-dashes"),
        pytest.param("-enable-eplb", "--enable-eplb", id="one-dash"),
        pytest.param("enable-elastic-ep", "--enable-elastic-ep", id="value-token"),
        pytest.param("dp", "--data-parallel-size", id="value-token-short"),
    ],
)
def test_owned_flag_matching(token: str, key: str) -> None:
    assert elastic_owned_flag(token) == key


@pytest.mark.parametrize(
    "token",
    [
        "--data-parallel",  # no prefix matching
        "--data-parallel-size-locals",
        "--data_parallel_size",  # no _ folding
        "--enable_eplb",
        "-ep",  # not expanded
        "-tp",  # expands to a flag this version does not own
        "-pp",
        "--tensor-parallel-size",
        "--eplb-config.window_size=500",  # the other dotted keys merge with the renderer's
        "--eplb-config.use-async=false",  # no '_'/'-' folding
        "--elastic-ep-max-dp-size",
        "--disable-eplb",
        "2",
        "-",
        "--",
    ],
)
def test_not_owned(token: str) -> None:
    assert elastic_owned_flag(token) is None


@pytest.mark.parametrize(
    ("args", "keys"),
    [
        pytest.param(["--data-parallel-size", "2"], ["--data-parallel-size"], id="canonical"),
        pytest.param(
            ["-dpb", "ray", "--ray-address=x"],
            ["--data-parallel-backend", "--ray-address"],
            id="two",
        ),
        pytest.param(
            ["--served-model-name", "enable-eplb", "--enable-eplb"],
            ["--enable-eplb", "--enable-eplb"],
            id="once-per-token-value-too",
        ),
        pytest.param(
            ["--eplb-config", '{"window_size": 500}'], ["--eplb-config"], id="eplb-config"
        ),
        pytest.param(
            ["--eplb-config.use_async", "true", "--eplb-config.window_size=500"],
            ["--eplb-config.use_async"],
            id="eplb-use-async-owned-window-free",
        ),
    ],
)
def test_s16_once_per_token(args: list[str], keys: list[str]) -> None:
    errs = [
        e
        for e in validate_elastic(decoded(elastic_md(elastic_role(extraArgs=args))))
        if e.origin == "elastic.owned-flag"
    ]
    assert triples(errs) == [("elastic.owned-flag", f"{R0}.extraArgs", FORB)] * len(keys)
    assert [e.detail.split(" ")[0] for e in errs] == keys


def test_s16_names_the_spelling_as_written() -> None:
    (err,) = validate_elastic(decoded(elastic_md(elastic_role(extraArgs=["-dpb=ray"]))))
    assert "--data-parallel-backend" in err.detail and "'-dpb=ray'" in err.detail


@pytest.mark.parametrize("name", sorted(ELASTIC_OWNED_ENV))
def test_s17_each_owned_env_name(name: str) -> None:
    obj = elastic_md(elastic_role(env=[{"name": "OK", "value": "1"}, {"name": name, "value": "1"}]))
    errs = [e for e in validate_elastic(decoded(obj)) if e.origin == "elastic.owned-env"]
    assert triples(errs) == [("elastic.owned-env", f"{R0}.env[1].name", FORB)]
    assert name in errs[0].detail


def test_the_owned_env_is_the_reference_set() -> None:
    assert {
        "VLLM_DP_SIZE",
        "VLLM_DATA_PARALLEL_SIZE_LOCAL",
        "VLLM_ENABLE_ELASTIC_EP",
        "VLLM_ENABLE_EPLB",
        "VLLM_TENSOR_PARALLEL_SIZE",
        "VLLM_PIPELINE_PARALLEL_SIZE",
        "VLLM_RAY_ADDRESS",
        "RAY_ADDRESS",
        "GPUSTACK_ELASTIC_POD_UID",
        "GPUSTACK_ELASTIC_POD_IP",
        "VLLM_RAY_DP_PACK_STRATEGY",
        "RAY_OVERRIDE_LABELS",
    } == ELASTIC_OWNED_ENV


def test_no_role_is_elastic_no_rule_runs() -> None:
    obj = deployment(role(replicas=3, extraArgs=["-dp", "2"], env=[{"name": "RAY_ADDRESS"}]))
    assert validate_elastic(decoded(obj)) == []


# --- §2.4 UPDATE ---------------------------------------------------------------------------------


STORED = elastic_md(elastic_role(2, extraArgs=["-tp", "2"], resources={"accelerator": 2}))


def with_role(**changes: Any) -> dict[str, Any]:
    out = copy.deepcopy(STORED)
    out["spec"]["roles"][0].update(changes)
    for key in [k for k, v in changes.items() if v is None]:
        del out["spec"]["roles"][0][key]
    return out


UPDATE = [
    pytest.param(
        STORED,
        deployment(role(resources={"accelerator": 2}, extraArgs=["-tp", "2"])),
        [("elastic.profile-changed", "spec.roles.elasticEp", FORB)],
        "created with elasticEp",
        id="profile-removed",
    ),
    pytest.param(
        deployment(role(resources={"accelerator": 2}, extraArgs=["-tp", "2"])),
        STORED,
        [("elastic.profile-changed", "spec.roles.elasticEp", FORB)],
        "adds elasticEp",
        id="profile-added",
    ),
    pytest.param(
        STORED,
        with_role(extraArgs=["-tp", "4"]),
        [("elastic.tp-changed", f"{R0}.extraArgs", INV)],
        "was 2",
        id="tp-changed",
    ),
    pytest.param(
        STORED,
        with_role(extraArgs=["-tp", "x"]),
        [("elastic.tp-changed", f"{R0}.extraArgs", INV)],
        "new object",
        id="tp-new-unreadable",
    ),
    pytest.param(
        with_role(extraArgs=["-tp", "x"]),
        STORED,
        [("elastic.tp-changed", f"{R0}.extraArgs", INV)],
        "stored object",
        id="tp-old-unreadable",
    ),
    pytest.param(
        STORED,
        with_role(extraArgs=["-tp", "2", "--elastic-ep-max-dp-size=4"]),
        [("elastic.ceiling-changed", f"{R0}.extraArgs", FORB)],
        "none",
        id="ceiling-added",
    ),
    pytest.param(
        with_role(extraArgs=["-tp", "2", "--elastic-ep-max-dp-size=4"]),
        STORED,
        [("elastic.ceiling-changed", f"{R0}.extraArgs", FORB)],
        "--elastic-ep-max-dp-size=4",
        id="ceiling-removed",
    ),
    pytest.param(
        with_role(extraArgs=["-tp", "2", "--elastic-ep-max-dp-size=4"]),
        with_role(extraArgs=["-tp", "2", "--elastic-ep-max-dp-size=8"]),
        [("elastic.ceiling-changed", f"{R0}.extraArgs", FORB)],
        "=8",
        id="ceiling-changed",
    ),
    pytest.param(
        STORED,
        with_role(name="engine"),
        [("elastic.role-renamed", f"{R0}.name", FORB)],
        "'server'",
        id="role-renamed",
    ),
    pytest.param(
        STORED,
        with_role(instanceType="gpu-other"),
        [("elastic.instance-type-changed", f"{R0}.instanceType", INV)],
        "'gpu-8x'",
        id="instance-type-changed",
    ),
    pytest.param(
        STORED,
        with_role(resources={"accelerator": 2, "acceleratorPartitionedProfile": "x"}),
        [("elastic.resources-changed", f"{R0}.resources", INV)],
        "acceleratorPartitionedProfile",
        id="resources-changed",
    ),
    pytest.param(
        elastic_md(elastic_role(4, extraArgs=["-tp", "2"], resources={"accelerator": 2})),
        STORED,
        [("elastic.width-lowered", f"{R0}.elasticEp.width", FORB)],
        "from 4 to 2",
        id="width-lowered",
    ),
]


@pytest.mark.parametrize(("old", "new", "expected", "named"), UPDATE)
def test_each_update_rule_refuses(
    old: dict[str, Any], new: dict[str, Any], expected: list[tuple[str, str, str]], named: str
) -> None:
    errs = validate_elastic_update(decoded(new), decoded(old))
    assert triples(errs) == expected
    assert named in errs[0].message()
    got = [c for c in causes(review(new, old=old)) if c in expected]
    assert got == expected, "the review reports it too"


@pytest.mark.parametrize(
    "new",
    [
        pytest.param(STORED, id="unchanged"),
        pytest.param(with_role(elasticEp={"width": 5}), id="width-raised"),
        pytest.param(with_role(extraArgs=["--tensor_parallel_size=2"]), id="tp-respelled"),
        pytest.param(with_role(resources={"accelerator": "2"}), id="same-count-as-string"),
        pytest.param(with_role(env=[{"name": "RAY_DEDUP_LOGS", "value": "0"}]), id="other-edit"),
    ],
)
def test_allowed_updates(new: dict[str, Any]) -> None:
    assert validate_elastic_update(decoded(new), decoded(STORED)) == []


def test_a_ceiling_respelled_is_unchanged() -> None:
    old = with_role(extraArgs=["-tp", "2", "--elastic_ep_max_dp_size", "+4"])
    new = with_role(extraArgs=["-tp", "2", "--elastic-ep-max-dp-size=4"])
    assert validate_elastic_update(decoded(new), decoded(old)) == []


def test_raising_the_width_is_admitted() -> None:
    verdict = review(with_role(elasticEp={"width": 6}), old=STORED)
    assert verdict.allowed, causes(verdict)


def test_a_lowered_width_is_refused_by_the_update_rule_alone() -> None:
    verdict = review(with_role(elasticEp={"width": 2}), old=with_role(elasticEp={"width": 3}))
    assert causes(verdict) == [("elastic.width-lowered", f"{R0}.elasticEp.width", FORB)]


# --- D29: the retired fields ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        pytest.param("headInstanceType", "cpu-only", "needs no InstanceType", id="head-type"),
        pytest.param("tensorParallelSize", 2, "extraArgs", id="tensor-parallel-size"),
    ],
)
def test_retired_fields_do_not_decode_and_say_where_they_went(
    field: str, value: Any, named: str
) -> None:
    obj = elastic_md(role("server", elasticEp={"width": 2, field: value}))
    verdict = review(obj)
    assert causes(verdict) == [("schema.violation", f"{R0}.elasticEp.{field}", FORB)]
    assert named in verdict.errors[0].detail


def test_other_unknown_fields_keep_the_plain_message() -> None:
    verdict = review(elastic_md(role("server", elasticEp={"width": 2, "ceiling": 4})))
    assert verdict.errors[0].detail == (
        'unknown field "spec.roles[0].elasticEp.ceiling": this API has no such field'
    )


# --- D29: the Ray head's Service name -----------------------------------------------------------


def test_a_head_service_name_over_63_characters_names_the_longest_deployment_name() -> None:
    obj = elastic_md()
    obj["metadata"]["name"] = "m" * 51  # "-elastic-head" makes 64
    errs = validate_elastic(decoded(obj))
    assert triples(errs) == [("elastic.head-name", "metadata.name", INV)]
    assert "64 characters" in errs[0].detail and "at most 50 characters" in errs[0].detail
    obj["metadata"]["name"] = "m" * 50
    assert validate_elastic(decoded(obj)) == []


def test_a_role_named_elastic_head_is_refused_at_its_name() -> None:
    obj = elastic_md(role("elastic-head", elasticEp={"width": 2}))
    errs = validate_elastic(decoded(obj))
    assert triples(errs) == [("elastic.head-name", f"{R0}.name", INV)]
    assert "rename the role" in errs[0].detail
    assert elastic_causes(review(obj)) == [("elastic.head-name", f"{R0}.name", INV)]
