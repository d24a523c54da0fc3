"""Object-only rules (docs/contract/admission.md §5, §12) on CREATE, one accepting and one refusing
case each."""

from __future__ import annotations

from typing import Any

import pytest
from admission_support import (
    CPU,
    cache_chain,
    causes,
    default_objects,
    deployment,
    pd,
    review,
    role,
)

from gpustack_render.admission import validate_model_deployment
from gpustack_render.api.modeldeployment import ModelDeployment
from gpustack_render.core.settings import Settings
from gpustack_render.schema.lookups import StaticLookups

INV, REQ, FORB, DUP, NSUP = (
    "FieldValueInvalid",
    "FieldValueRequired",
    "FieldValueForbidden",
    "FieldValueDuplicate",
    "FieldValueNotSupported",
)
CACHE: dict[str, Any] = {"kvCache": {"poolRef": {"name": "team-a-dram"}}}
LONG = "a" * 50


def _with_cache(**spec: Any) -> dict[str, Any]:
    return {**CACHE, **spec}


def _with_engine_image(obj: dict[str, Any], image: str) -> dict[str, Any]:
    obj["spec"]["engine"]["image"] = image
    return obj


CASES = [
    # §12 release scope (artifactRef is delivered since D28: admitted, its artifact unread)
    pytest.param(
        deployment(model={"name": "m", "artifactRef": {"name": "w"}}),
        [],
        id="artifact-ref-admitted",
    ),
    pytest.param(
        deployment(role(elasticEp={"width": 2})),
        [],
        id="elastic-ep-delivered",
    ),
    # args.owned-flag
    pytest.param(
        deployment(role(extraArgs=["--kv-transfer-config", "{}"])),
        [("args.owned-flag", "spec.roles[0].extraArgs[0]", INV)],
        id="args.owned-flag-vllm-exact",
    ),
    pytest.param(
        deployment(role(extraArgs=["--max-model-len", "4096", "--kv_events_config.topic=x"])),
        [("args.owned-flag", "spec.roles[0].extraArgs[2]", INV)],
        id="args.owned-flag-vllm-dotted-underscores",
    ),
    pytest.param(
        deployment(role(extraArgs=["--disaggregation-mo", "prefill"]), engine="SGLang"),
        [("args.owned-flag", "spec.roles[0].extraArgs[0]", INV)],
        id="args.owned-flag-sglang-prefix",
    ),
    pytest.param(
        deployment(role(extraArgs=["--kv-transfer-config", "{}"]), engine="SGLang"),
        [],
        id="args.owned-flag-owned-per-engine",
    ),
    pytest.param(
        deployment(role(command=["vllm", "serve", "m"], extraArgs=["--kv-transfer-config=x"])),
        [],
        id="args.owned-flag-inert-beside-command",
    ),
    pytest.param(
        deployment(role(command=["vllm", "serve", "m", "--kv-transfer-config", "{}"])),
        [],
        id="args.owned-flag-take-over-owns-the-line",
    ),
    # degrees.unreadable
    pytest.param(
        deployment(role(extraArgs=["-tp", "two"])),
        [("degrees.unreadable", "spec.roles[0]", INV)],
        id="degrees.unreadable-value",
    ),
    pytest.param(
        deployment(role(command=["vllm", "serve", "m", "-t=2"])),
        [("degrees.unreadable", "spec.roles[0]", INV)],
        id="degrees.unreadable-command-abbreviation",
    ),
    pytest.param(
        deployment(role(env=[{"name": "VLLM_DP_SIZE", "value": "x"}])),
        [("degrees.unreadable", "spec.roles[0]", INV)],
        id="degrees.unreadable-env",
    ),
    pytest.param(
        deployment(role(resources={"accelerator": 4}, extraArgs=["-tp", "4"])),
        [],
        id="degrees.unreadable-ok",
    ),
    # degrees.cards-mismatch (width over cards)
    pytest.param(
        deployment(role(extraArgs=["-tp", "2"])),
        [("degrees.cards-mismatch", "spec.roles[0].resources.accelerator", INV)],
        id="degrees.cards-mismatch-defaulted-one-card",
    ),
    pytest.param(
        deployment(role(size=2, resources={"accelerator": 2}, extraArgs=["-tp", "2", "-pp", "2"])),
        [("degrees.cards-mismatch", "spec.roles[0].resources.accelerator", INV)],
        id="degrees.cards-mismatch-size-does-not-rescue",
    ),
    pytest.param(
        deployment(role(resources={"accelerator": 2}, extraArgs=["-tp", "2", "--nnodes", "2"])),
        [],
        id="degrees.cards-mismatch-wiring-skips",
    ),
    pytest.param(
        deployment(role(instanceType=CPU, extraArgs=["-tp", "2"])),
        [],
        id="degrees.cards-mismatch-no-cards-skips",
    ),
    # env.owned-name
    pytest.param(
        deployment(role(env=[{"name": "MOONCAKE_CONFIG_PATH", "value": "/x"}])),
        [("env.owned-name", "spec.roles[0].env[0]", INV)],
        id="env.owned-name-vllm",
    ),
    pytest.param(
        deployment(role(env=[{"name": "MOONCAKE_TENANT_ID", "value": "t"}]), engine="SGLang"),
        [("env.owned-name", "spec.roles[0].env[0]", INV)],
        id="env.owned-name-sglang-tenant",
    ),
    pytest.param(
        deployment(role(command=["x"], env=[{"name": "GPUSTACK_MEMBER_INDEX", "value": "0"}])),
        [("env.owned-name", "spec.roles[0].env[0]", INV)],
        id="env.owned-name-take-over-included",
    ),
    pytest.param(
        deployment(
            role(
                env=[
                    {"name": "MOONCAKE_TENANT_ID", "value": "t"},
                    {"name": "MC_TE_METRIC", "value": "0"},
                    {"name": "VLLM_CACHE_ROOT", "value": "/c"},
                ]
            )
        ),
        [],
        id="env.owned-name-other-engine-and-defaulted",
    ),
    # resources.*
    pytest.param(
        deployment(role(resources={"interface": "1.5"})),
        [("resources.interface-not-whole", "spec.roles[0].resources.interface", INV)],
        id="resources.interface-not-whole-fractional",
    ),
    pytest.param(
        deployment(role(resources={"interface": -1})),
        [("resources.interface-not-whole", "spec.roles[0].resources.interface", INV)],
        id="resources.interface-not-whole-negative",
    ),
    pytest.param(
        deployment(role(resources={"interface": 0})), [], id="resources.interface-not-whole-zero"
    ),
    pytest.param(
        deployment(role(resources={"accelerator": "500m"})),
        [("resources.cards-not-whole", "spec.roles[0].resources.accelerator", INV)],
        id="resources.cards-not-whole-fractional-cards",
    ),
    pytest.param(
        deployment(
            role(
                resources={
                    "acceleratorPartitionedProfile": "3g.40gb",
                    "acceleratorSlicedCoresPercentage": 50,
                }
            )
        ),
        [
            (
                "resources.partition-with-slice",
                "spec.roles[0].resources.acceleratorPartitionedProfile",
                INV,
            )
        ],
        id="resources.partition-with-slice-partition-and-slice",
    ),
    pytest.param(
        deployment(
            role(
                resources={
                    "acceleratorPartitionedProfile": "3g.40gb",
                    "acceleratorSlicedMemoryPercentage": 0,
                }
            )
        ),
        [],
        id="resources.partition-with-slice-zero-percentage",
    ),
    *[
        pytest.param(
            deployment(role(env=[{"name": "OK", "value": "1"}, {"name": name, "value": "x"}])),
            [("env.name-invalid", "spec.roles[0].env[1].name", INV)],
            id=f"R4b-env-name-{k}",
        )
        for k, name in enumerate(("A=B", "É", "TAB\t", "NEW\nLINE"))
    ],
    pytest.param(
        deployment(role(env=[{"name": "1st.var-x y", "value": "1"}])),
        [],
        id="env.name-invalid-relaxed",
    ),
    # shm.size-not-positive
    *[
        pytest.param(
            deployment(role(shmSize=size)),
            [("shm.size-not-positive", "spec.roles[0].shmSize", INV)],
            id=f"R5c-shm-size-{size!r}",
        )
        for size in ("-1Gi", "0", 0, -1, "0Mi")
    ],
    *[
        pytest.param(deployment(role(shmSize=size)), [], id=f"R5c-shm-size-{size!r}")
        for size in ("32Gi", "1", 1, "1Mi")
    ],
    # volumes.* (additional volumes)
    pytest.param(
        deployment(role(additionalVolumes=[{"mountPath": "/data"}])),
        [("volumes.no-source", "spec.roles[0].additionalVolumes[0]", REQ)],
        id="volumes.no-source-no-source",
    ),
    pytest.param(
        deployment(
            role(
                additionalVolumes=[
                    {"mountPath": "/data", "configMap": {"name": "c"}, "secret": {"name": "s"}}
                ]
            )
        ),
        [("volumes.several-sources", "spec.roles[0].additionalVolumes[0]", FORB)],
        id="volumes.several-sources-two-sources",
    ),
    pytest.param(
        deployment(
            role(
                additionalVolumes=[
                    {"mountPath": "/data", "configMap": {"name": "c"}},
                    {"mountPath": "/data", "secret": {"name": "s"}},
                ]
            )
        ),
        [("volumes.duplicate-mount-path", "spec.roles[0].additionalVolumes[1].mountPath", DUP)],
        id="volumes.duplicate-mount-path-duplicate-mount",
    ),
    pytest.param(
        deployment(
            role(
                additionalVolumes=[
                    {"mountPath": "/d", "subPath": "a/../b", "secret": {"name": "s"}}
                ]
            )
        ),
        [("volumes.path-traversal", "spec.roles[0].additionalVolumes[0].subPath", INV)],
        id="volumes.path-traversal-dotdot",
    ),
    *[
        pytest.param(
            deployment(role(additionalVolumes=[{"mountPath": "/d", **source}])),
            [("volumes.source-unusable", f"spec.roles[0].additionalVolumes[0].{field}", kind)],
            id=f"R7f-{field}",
        )
        for source, field, kind in (
            ({"configMap": {"name": ""}}, "configMap.name", REQ),
            ({"secret": {"name": ""}}, "secret.name", REQ),
            ({"hostPath": {"path": ""}}, "hostPath.path", REQ),
            ({"hostPath": {"path": "/srv/../etc"}}, "hostPath.path", INV),
            ({"hostPath": {"path": "/srv", "type": "directory"}}, "hostPath.type", NSUP),
        )
    ],
    pytest.param(
        deployment(
            role(
                additionalVolumes=[
                    {"mountPath": "/a", "hostPath": {"path": "/srv/a..b", "type": ""}},
                    {"mountPath": "/b", "hostPath": {"path": "/srv", "type": "DirectoryOrCreate"}},
                ]
            )
        ),
        [],
        id="volumes.source-unusable-host-paths",
    ),
    pytest.param(
        deployment(
            role(
                additionalVolumes=[
                    {"mountPath": "/d", "subPath": "a..b", "secret": {"name": "s"}},
                    {"mountPath": "/dev/shm", "hostPath": {"path": "/dev/shm"}},
                    {"mountPath": "/var/lib/gpustack/cache", "hostPath": {"path": "/c"}},
                    {"mountPath": "/etc/gpustack/kvcache", "configMap": {"name": "c"}},
                ]
            )
        ),
        [],
        id="volumes-allowed-paths",
    ),
    pytest.param(
        deployment(
            role(
                additionalVolumes=[{"mountPath": "/etc/gpustack/kvcache", "secret": {"name": "s"}}]
            ),
            **CACHE,
        ),
        [("volumes.operator-mount-path", "spec.roles[0].additionalVolumes[0].mountPath", INV)],
        id="volumes.operator-mount-path-client-config-path",
    ),
    # D22 amended: only a mount *at* the operator's path is refused. A subPath file inside it
    # (a warning, tested below), a parent and a sibling with a similar name are all admitted;
    # paths compare as paths (a trailing slash or a ``.`` is the same path).
    pytest.param(
        deployment(
            role(
                additionalVolumes=[
                    {"mountPath": "/etc/gpustack/./kvcache", "secret": {"name": "s"}}
                ]
            ),
            **CACHE,
        ),
        [("volumes.operator-mount-path", "spec.roles[0].additionalVolumes[0].mountPath", INV)],
        id="volumes.operator-mount-path-same-path-spelt-differently",
    ),
    pytest.param(
        deployment(
            role(
                additionalVolumes=[
                    {
                        "mountPath": "/etc/gpustack/kvcache/mooncake.json",
                        "subPath": "mooncake.json",
                        "secret": {"name": "s"},
                    },
                    {"mountPath": "/etc/gpustack", "configMap": {"name": "c"}},
                    {"mountPath": "/etc/gpustack-kvcache", "configMap": {"name": "d"}},
                ]
            ),
            **CACHE,
        ),
        [],
        id="volumes.operator-mount-path-inside-and-above-admitted",
    ),
    # ports.reserved-port-declared
    pytest.param(
        pd(
            router={"name": "llm-d-router"},
            roles=[
                role("prefill", kind="Prefill", ports=[{"port": 5557}]),
                role("decode", kind="Decode", ports=[{"port": 5557}]),
            ],
        ),
        [("ports.reserved-port-declared", "spec.router", INV)],
        id="ports.reserved-port-declared-kv-events-port",
    ),
    pytest.param(
        pd(
            **CACHE,
            roles=[
                role("prefill", kind="Prefill", ports=[{"port": 8998}]),
                role("decode", kind="Decode", ports=[{"port": 8998}]),
            ],
        ),
        [("ports.reserved-port-declared", "spec.roles[0].ports", INV)],
        id="ports.reserved-port-declared-bootstrap-port-with-cache",
    ),
    pytest.param(
        pd(
            roles=[
                role("prefill", kind="Prefill", ports=[{"port": 8998}]),
                role("decode", kind="Decode", ports=[{"port": 5557}]),
            ]
        ),
        [],
        id="ports.reserved-port-declared-nothing-reserved-without-router-or-cache",
    ),
    # kv-cache.empty-pool-ref
    pytest.param(
        deployment(kvCache={"poolRef": {"name": ""}}),
        [("kv-cache.empty-pool-ref", "spec.kvCache.poolRef.name", REQ)],
        id="kv-cache.empty-pool-ref-empty-pool-ref",
    ),
    # roles.too-many
    pytest.param(
        deployment(*[role(f"s{i}") for i in range(11)]),
        [("roles.too-many", "spec.roles", INV)],
        id="roles.too-many-eleven-roles",
    ),
    pytest.param(
        deployment(*[role(f"s{i}") for i in range(10)]), [], id="roles.too-many-ten-roles"
    ),
    # names.*
    pytest.param(
        deployment(role("r" * 20), name=LONG),
        [("names.invalid-service-name", "spec.roles[0].name", INV)],
        id="names.invalid-service-name-service-name-too-long",
    ),
    pytest.param(
        deployment(role("server"), name="qwen.chat"),
        [("names.invalid-service-name", "spec.roles[0].name", INV)],
        id="names.invalid-service-name-dotted-deployment-name",
    ),
    pytest.param(
        deployment(role("router"), router={"name": "llm-d-router"}),
        [("names.service-name-claimed-twice", "spec.roles[0].name", INV)],
        id="names.service-name-claimed-twice-router-service",
    ),
    pytest.param(
        deployment(role("x", size=2), role("x-r0")),
        [("names.service-name-claimed-twice", "spec.roles[1].name", INV)],
        id="names.service-name-claimed-twice-instance-service",
    ),
    pytest.param(
        deployment(role("x-r0"), role("x", size=2)),
        [("names.service-name-claimed-twice", "spec.roles[1].name", INV)],
        id="names.service-name-claimed-twice-later-claimant",
    ),
    pytest.param(
        deployment(role("x", size=2), role("x-r1")),
        [],
        id="names.service-name-claimed-twice-no-overlap",
    ),
    pytest.param(
        deployment(role("x", size=2, replicas=3), role("x-r02"), role("x-r3"), role("x-r1-r0")),
        [],
        id="names.service-name-claimed-twice-ordinal-not-an-instance",
    ),
    pytest.param(
        deployment(role("x-r1", size=2), role("x", size=2, replicas=2), role("x-r1-r0")),
        [
            ("names.service-name-claimed-twice", "spec.roles[1].name", INV),
            ("names.service-name-claimed-twice", "spec.roles[2].name", INV),
        ],
        id="names.service-name-claimed-twice-instance-of-an-instance-shaped-role",
    ),
    pytest.param(
        deployment(role("r" * 8, size=2, replicas=100), name="d" * 50),
        [("names.member-name-too-long", "spec.roles[0]", INV)],
        id="names.member-name-too-long-member-name",
    ),
    pytest.param(
        deployment(role("r" * 8, size=2, replicas=10), name="d" * 45),
        [],
        id="names.member-name-too-long-fits",
    ),
    # kinds.*
    pytest.param(
        deployment(role("a"), role("b", kind="Prefill")),
        [
            ("kinds.server-mixed", "spec.roles[0].kind", INV),
            ("kinds.server-mixed", "spec.roles[1].kind", INV),
        ],
        id="kinds.server-mixed-server-beside-prefill",
    ),
    pytest.param(
        deployment(role("a", kind="Prefill"), role("b", kind="Prefill"), role("c", kind="Decode")),
        [("kinds.repeated", "spec.roles[1].kind", INV)],
        id="kinds.repeated-second-prefill",
    ),
    pytest.param(deployment(role("a"), role("b")), [], id="kinds-servers-repeat"),
    pytest.param(
        deployment(role(kind="Encode"), engine="SGLang"),
        [("kinds.not-rendered-by-engine", "spec.roles[0].kind", INV)],
        id="kinds.not-rendered-by-engine-encode",
    ),
    # image.whitespace
    pytest.param(
        _with_engine_image(deployment(role(image=" runner:2")), "runner:1 "),
        [
            ("image.whitespace", "spec.engine.image", INV),
            ("image.whitespace", "spec.roles[0].image", INV),
        ],
        id="image.whitespace-image-whitespace",
    ),
    pytest.param(deployment(role(image="")), [], id="image.whitespace-empty-role-image-falls-back"),
    # topology.*
    pytest.param(
        deployment(role(topology={"requiredLevel": "bad level"})),
        [("topology.invalid-level-key", "spec.roles[0].topology.requiredLevel", INV)],
        id="topology.invalid-level-key-not-a-label-key",
    ),
    pytest.param(
        deployment(role(topology={"requiredLevel": "kubernetes.io/hostname"})),
        [("topology.hostname-level", "spec.roles[0].topology.requiredLevel", FORB)],
        id="topology.hostname-level-hostname",
    ),
    *[
        pytest.param(
            deployment(role(topology={"requiredLevel": level})),
            [("topology.invalid-level-key", "spec.roles[0].topology.requiredLevel", INV)],
            id=f"R16a-trailing-newline-{level!r}",
        )
        for level in ("rack\n", "example.com\n/rack", "kubernetes.io/hostname\n")
    ],
    pytest.param(
        deployment(
            role("a", topology={"requiredLevel": "topology.kubernetes.io/zone"}),
            role("b", topology={"requiredLevel": "rack"}),
            role("c", topology={"requiredLevel": ""}),
        ),
        [],
        id="topology-levels",
    ),
]


@pytest.mark.parametrize(("obj", "expected"), CASES)
def test_object_rules(obj: dict[str, Any], expected: list[tuple[str, str, str]]) -> None:
    verdict = review(obj, [*default_objects(), *cache_chain()])
    assert causes(verdict) == expected
    assert verdict.allowed is (not expected)


def test_a_mount_inside_an_operator_path_is_admitted_with_a_warning() -> None:
    """D22 amended: the seed documents the hazard of a volume over the client configuration; it is
    admitted, and the warning names the field, the operator's path and what it replaces. A parent
    and an unrelated path get no warning; without a pool nothing is mounted there, so no warning."""
    volumes = [
        {
            "mountPath": "/etc/gpustack/kvcache/mooncake.json",
            "subPath": "m",
            "secret": {"name": "s"},
        },
        {"mountPath": "/etc/gpustack", "configMap": {"name": "c"}},
        {"mountPath": "/etc/gpustack-kvcache", "configMap": {"name": "d"}},
    ]
    verdict = review(
        deployment(role(additionalVolumes=volumes), **CACHE), [*default_objects(), *cache_chain()]
    )
    assert verdict.allowed
    (warning,) = [w for w in verdict.warnings if "additionalVolumes" in w]
    assert warning.startswith("spec.roles[0].additionalVolumes[0].mountPath: ")
    assert "/etc/gpustack/kvcache" in warning and "KV-cache client configuration" in warning
    plain = review(deployment(role(additionalVolumes=volumes)), default_objects())
    assert plain.allowed and not [w for w in plain.warnings if "additionalVolumes" in w]


@pytest.mark.parametrize(
    ("volume", "warned"),
    [
        pytest.param({"hostPath": {"path": "/srv/gp"}, "readOnly": True}, True, id="ro-hostpath"),
        pytest.param({"hostPath": {"path": "/srv/gp"}}, False, id="writable-hostpath"),
        # kubelet creates nested mount points in API-data volumes itself (nested_volumes.go).
        pytest.param({"configMap": {"name": "c"}, "readOnly": True}, False, id="configmap"),
        pytest.param({"secret": {"name": "s"}}, False, id="secret"),
    ],
)
def test_a_parent_of_an_operator_path_is_admitted(volume: dict[str, Any], warned: bool) -> None:
    """D22 amended: a mount above /etc/gpustack/kvcache is admitted; only a read-only hostPath,
    where the runtime cannot create the nested mount point, gets a warning naming the node path
    that must exist."""
    vol = {"mountPath": "/etc/gpustack", **volume}
    verdict = review(
        deployment(role(additionalVolumes=[vol]), **CACHE), [*default_objects(), *cache_chain()]
    )
    assert verdict.allowed, causes(verdict)
    found = [w for w in verdict.warnings if "additionalVolumes" in w]
    if warned:
        (warning,) = found
        assert warning.startswith("spec.roles[0].additionalVolumes[0].mountPath: ")
        assert "/srv/gp/kvcache" in warning and "read-only" in warning
    else:
        assert found == []


def test_duplicate_role_name_backstop() -> None:
    """The schema refuses a duplicate role name first; the webhook rule stays as a backstop."""
    md = ModelDeployment.model_validate(deployment(role("a"), role("a")))
    errs = validate_model_deployment(
        md, old=None, lookups=StaticLookups.of(default_objects()), settings=Settings()
    )
    assert [(e.origin, e.field, e.type.value) for e in errs][:1] == [
        ("roles.duplicate-name", "spec.roles[1].name", DUP)
    ]
    # D22: one Duplicate cause, at the later role's name (the API server names the entry).
    assert causes(review(deployment(role("a"), role("a")))) == [
        ("schema.violation", "spec.roles[1].name", DUP)
    ]


def _claims_by_enumeration(md: ModelDeployment) -> list[tuple[str, str]]:
    """``names.service-name-claimed-twice`` as its definition reads: every claim of every role,
    in order (the reference)."""
    claims = {"qwen": "md"}
    out = []
    for i, r in enumerate(md.spec.roles):
        mine = [f"qwen-{r.name}"]
        if r.size > 1:
            mine += [f"qwen-{r.name}-r{o}" for o in range(r.replicas)]
        hits = [n for n in mine if n in claims]
        for n in mine:
            claims.setdefault(n, r.name)
        if hits:
            out.append((f"spec.roles[{i}].name", hits[0]))
    return out


@pytest.mark.parametrize(
    "names",
    [
        ["a", "a-r0", "a-r1", "a-r12", "a-r012"],
        ["a-r1", "a", "a-r1-r0", "a-r1-r1", "b-r0"],
        ["a-r0-r0", "a-r0", "a", "a-r3"],
    ],
)
def test_service_name_claims_only_contested_instances(names: list[str]) -> None:
    """Claiming only the instance Services another role can contest finds exactly the
    collisions that enumerating every instance finds, and names the same Service."""
    for size in (1, 2):
        md = ModelDeployment.model_validate(
            deployment(
                *[role(n, size=size if k % 2 else 2, replicas=3) for k, n in enumerate(names)]
            )
        )
        errs = validate_model_deployment(
            md, old=None, lookups=StaticLookups.of(default_objects()), settings=Settings()
        ).by_origin("names.service-name-claimed-twice")
        found = [(e.field, e.detail.split("'")[1]) for e in errs]
        assert found == _claims_by_enumeration(md)


def test_service_name_claims_do_not_grow_with_replicas(monkeypatch: pytest.MonkeyPatch) -> None:
    """Roles of 1024 replicas (the API server accepts thousands of them) are judged without
    building every instance Service's name: enumerating them took over a minute for 20,000
    roles, past the webhook's timeout. No two of these roles can contest a name, so none is
    built."""
    from gpustack_render.admission import names
    from gpustack_render.admission.context import Context, memoised
    from gpustack_render.core.naming import instance_name

    built: list[str] = []

    def counting(md: str, role: str, ordinal: int) -> str:
        name = instance_name(md, role, ordinal)
        built.append(name)
        return name

    # The names rules imported the name: counted where it is called.
    monkeypatch.setattr(names, "instance_name", counting)
    roles = [role(f"r{i}", size=2, replicas=1024) for i in range(200)]
    md = ModelDeployment.model_validate(deployment(*roles))
    ctx = Context(
        md=md,
        lookups=memoised(StaticLookups.of(default_objects())),
        settings=Settings(),
        name="qwen",
        namespace="team-a",
    )
    assert not names.validate_service_collisions(ctx)
    assert built == []  # the full enumeration builds 204,800


LONG_DIGITS = "9" * 5000  # more digits than int() converts


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        pytest.param(
            {"resources": {"accelerator": LONG_DIGITS}},
            ("resources.cards-not-whole", "spec.roles[0].resources.accelerator", INV),
            id="accelerator",
        ),
        pytest.param(
            {"resources": {"interface": LONG_DIGITS}},
            ("resources.interface-not-whole", "spec.roles[0].resources.interface", INV),
            id="interface",
        ),
        pytest.param(
            {"shmSize": LONG_DIGITS},
            ("shm.size-not-positive", "spec.roles[0].shmSize", INV),
            id="shm-size",
        ),
        pytest.param(
            {"shmSize": "1e99999999"},
            ("shm.size-not-positive", "spec.roles[0].shmSize", INV),
            id="shm-size-exponent",
        ),
        pytest.param(
            {"resources": {"accelerator": "1e-99999999"}},
            ("resources.cards-not-whole", "spec.roles[0].resources.accelerator", INV),
            id="accelerator-exponent",
        ),
        pytest.param(
            {"extraArgs": ["--tensor-parallel-size", LONG_DIGITS]},
            ("degrees.unreadable", "spec.roles[0]", INV),
            id="degree",
        ),
        pytest.param(
            {"env": [{"name": "VLLM_DP_SIZE", "value": LONG_DIGITS}]},
            ("degrees.unreadable", "spec.roles[0]", INV),
            id="vllm-dp-size",
        ),
        pytest.param(
            {"extraArgs": ["--port", LONG_DIGITS], "ports": [{"port": 8000}]},
            ("port-flag.differs-from-declared", "spec.roles[0].extraArgs", INV),
            id="port-flag",
        ),
    ],
)
def test_long_numbers_get_a_verdict(fields: dict[str, Any], expected: tuple[str, str, str]) -> None:
    """A number of thousands of digits (or a quantity of a huge exponent, which expanded for
    minutes) passes the schema; the rules refuse it at its field instead of crashing."""
    verdict = review(deployment(role(**fields)))
    assert expected in causes(verdict)


@pytest.mark.parametrize("text", ["9" * 1001, "1e1001", "1e-1001"])
def test_a_quantity_past_the_read_bounds_is_refused_unexpanded(text: str) -> None:
    """The bounds that keep a hostile quantity cheap: each of these is cheap to expand, so
    without the bound it would be read as a number."""
    from gpustack_render.core.quantity import MAX_DIGITS, QuantityError, parse_quantity

    assert MAX_DIGITS == 1000
    with pytest.raises(QuantityError):
        parse_quantity(text)
    assert parse_quantity("9" * 1000) == int("9" * 1000)
    assert parse_quantity("1e1000") == 10**1000


def test_every_rule_collects() -> None:
    """Rules do not short-circuit each other: one object, many refusals."""
    obj = deployment(
        role(
            "a",
            kind="Encode",
            extraArgs=["--kv-transfer-config", "-tp", "x", "--revision", "r"],
            env=[{"name": "MOONCAKE_CONFIG_PATH"}],
            topology={"requiredLevel": "kubernetes.io/hostname"},
            elasticEp={"width": 2},
            # Stated: an elastic role's default would need the unreadable TP (the mutation
            # would refuse before any validating rule ran).
            resources={"accelerator": 1},
        ),
        model={"name": "m", "artifactRef": {"name": "w"}},
    )
    origins = [c[0] for c in causes(review(obj))]
    assert origins == [
        "elastic.degrees-unreadable",
        "elastic.kind-not-server",
        "args.owned-flag",
        "degrees.unreadable",
        "env.owned-name",
        "weights.owned-flag",
        "kinds.not-rendered-by-engine",
        "topology.hostname-level",
    ]
