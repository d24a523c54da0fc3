"""UPDATE: identity and frozen fields (docs/contract/admission.md §11), grandfathered stored state,
deletion exemptions (§16) and DELETE."""

from __future__ import annotations

import copy
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
from property.strategies import ROUTER_IMAGES

from gpustack_render.core.settings import Settings
from gpustack_render.schema.decoding import decode_deployment

INV, FORB = "FieldValueInvalid", "FieldValueForbidden"
CACHE: dict[str, Any] = {"kvCache": {"poolRef": {"name": "team-a-dram"}}}
LLMD = {"name": "llm-d-router", "image": ROUTER_IMAGES["llm-d-router"]}
OBJECTS = [*default_objects(), *cache_chain()]


def as_stored(obj: dict[str, Any]) -> dict[str, Any]:
    """Schema defaults applied, without asking whether today's rules admit it."""
    md, errs = decode_deployment(obj)
    assert md is not None, errs
    return md.to_dict()


def edit(obj: dict[str, Any], **changes: Any) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["spec"].update(changes)
    return out


def edit_role(obj: dict[str, Any], i: int, **changes: Any) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["spec"]["roles"][i].update(changes)
    for key in [k for k, v in changes.items() if v is None]:
        del out["spec"]["roles"][i][key]
    return out


BASE = deployment(role("server", resources={"accelerator": 1}))
PAIR = pd(
    roles=[
        role("prefill", kind="Prefill", resources={"accelerator": 1}),
        role("decode", kind="Decode", resources={"accelerator": 1}),
    ]
)

IDENTITY = [
    pytest.param(
        BASE,
        edit(BASE, model={"name": "other"}),
        [("identity.field-changed", "spec.model", INV)],
        id="model",
    ),
    pytest.param(
        BASE,
        edit(BASE, model={"name": "Qwen/Qwen3-8B", "artifactRef": {"name": "w"}}),
        [("identity.field-changed", "spec.model", INV)],
        id="model-deep",
    ),
    pytest.param(
        edit(BASE, model={"name": "Qwen/Qwen3-8B", "artifactRef": {"name": "w"}}),
        edit(BASE, model={"name": "Qwen/Qwen3-8B", "artifactRef": {"name": "w2"}}),
        [("identity.field-changed", "spec.model", INV)],
        id="artifact-ref-changed",
    ),
    pytest.param(
        edit(BASE, model={"name": "Qwen/Qwen3-8B", "artifactRef": {"name": "w"}}),
        BASE,
        [("identity.field-changed", "spec.model", INV)],
        id="artifact-ref-removed",
    ),
    pytest.param(
        BASE,
        edit(BASE, engine={"name": "SGLang", "image": "runner:1"}),
        [("identity.field-changed", "spec.engine.name", INV)],
        id="engine-name",
    ),
    pytest.param(
        BASE,
        edit(BASE, **CACHE),
        [("identity.field-changed", "spec.kvCache", INV)],
        id="kv-cache-added",
    ),
    pytest.param(
        edit(BASE, **CACHE),
        BASE,
        [("identity.field-changed", "spec.kvCache", INV)],
        id="kv-cache-removed",
    ),
    pytest.param(
        edit(BASE, **CACHE),
        edit(BASE, kvCache={"poolRef": {"name": "other"}}),
        [("identity.field-changed", "spec.kvCache", INV)],
        id="kv-cache-pool-ref",
    ),
    pytest.param(
        edit(BASE, router=LLMD),
        edit(BASE, router={"name": "vllm-router", "image": ROUTER_IMAGES["vllm-router"]}),
        [("identity.field-changed", "spec.router.name", INV)],
        id="router-renamed",
    ),
    pytest.param(BASE, edit(BASE, router=LLMD), [], id="router-added"),
    pytest.param(edit(BASE, router=LLMD), BASE, [], id="router-removed"),
    pytest.param(
        BASE,
        deployment(role("server", resources={"accelerator": 1}), role("extra")),
        [("identity.field-changed", "spec.roles[1].name", INV)],
        id="role-added",
    ),
    pytest.param(
        deployment(
            role("a", resources={"accelerator": 1}), role("b", resources={"accelerator": 1})
        ),
        deployment(role("a", resources={"accelerator": 1})),
        [("identity.field-changed", "spec.roles", INV)],
        id="role-removed",
    ),
    pytest.param(
        BASE,
        deployment(role("renamed", resources={"accelerator": 1})),
        [
            ("identity.field-changed", "spec.roles[0].name", INV),
            ("identity.field-changed", "spec.roles", INV),
        ],
        id="role-renamed",
    ),
    pytest.param(
        PAIR,
        edit_role(PAIR, 0, kind=None),
        [
            ("kinds.server-mixed", "spec.roles[0].kind", INV),
            ("kinds.server-mixed", "spec.roles[1].kind", INV),
            ("identity.field-changed", "spec.roles[0].kind", INV),
        ],
        id="kind-restated-without-kind",
    ),
    pytest.param(
        BASE,
        edit_role(
            BASE,
            0,
            size=2,
            replicas=3,
            instanceType=CPU,
            resources={"accelerator": 0},
            command=["vllm", "serve", "m"],
            image="other:2",
            extraArgs=["--max-model-len", "8"],
            env=[{"name": "A", "value": "1"}],
            ports=[{"port": 9000}],
            shmSize="32Gi",
            privileged=True,
        ),
        [],
        id="role-fields-editable",
    ),
    pytest.param(
        BASE,
        edit(BASE, engine={"name": "vLLM", "image": "new:2"}, kvTransfer={"protocol": "RDMA"}),
        [],
        id="engine-image-and-transfer-editable",
    ),
]


@pytest.mark.parametrize(("old", "new", "expected"), IDENTITY)
def test_identity(
    old: dict[str, Any], new: dict[str, Any], expected: list[tuple[str, str, str]]
) -> None:
    assert causes(review(new, OBJECTS, old=as_stored(old))) == expected


NO_PRIVILEGE = Settings(privileged_allowed=False, host_path_volume_allowed=False)
HOST = {"mountPath": "/data", "hostPath": {"path": "/srv"}}


@pytest.mark.parametrize(
    ("old_role", "new_role", "expected"),
    [
        pytest.param(
            {},
            {"privileged": True},
            [("host-access.not-allowed", "spec.roles[0].privileged", FORB)],
            id="p",
        ),
        pytest.param({"privileged": True}, {"privileged": True}, [], id="privilege-kept"),
        pytest.param(
            {},
            {"additionalVolumes": [HOST]},
            [("host-access.not-allowed", "spec.roles[0].additionalVolumes[0].hostPath", FORB)],
            id="host-path-new",
        ),
        pytest.param(
            {"additionalVolumes": [HOST]},
            {
                "additionalVolumes": [
                    {"mountPath": "/x", "readOnly": True, "hostPath": {"path": "/srv/sub"}}
                ]
            },
            [],
            id="host-path-narrower",
        ),
        pytest.param(
            {"additionalVolumes": [{**HOST, "readOnly": True}]},
            {"additionalVolumes": [HOST]},
            [("host-access.not-allowed", "spec.roles[0].additionalVolumes[0].hostPath", FORB)],
            id="host-path-broader-write",
        ),
        pytest.param(
            {"additionalVolumes": [HOST]},
            {"additionalVolumes": [{"mountPath": "/d", "hostPath": {"path": "/srvx"}}]},
            [("host-access.not-allowed", "spec.roles[0].additionalVolumes[0].hostPath", FORB)],
            id="host-path-sibling",
        ),
    ],
)
def test_host_access_grandfathered(
    old_role: dict[str, Any], new_role: dict[str, Any], expected: list[tuple[str, str, str]]
) -> None:
    old = deployment(role(resources={"accelerator": 1}, **old_role))
    new = deployment(role(resources={"accelerator": 1}, **new_role))
    assert causes(review(new, OBJECTS, old=as_stored(old), settings=NO_PRIVILEGE)) == expected


def test_host_access_on_create() -> None:
    obj = deployment(role(privileged=True, additionalVolumes=[HOST]))
    assert [c[1] for c in causes(review(obj, OBJECTS, settings=NO_PRIVILEGE))] == [
        "spec.roles[0].privileged",
        "spec.roles[0].additionalVolumes[0].hostPath",
    ]
    assert review(obj, OBJECTS).allowed


def test_service_name_exemption_for_stored_roles() -> None:
    name = "d" * 50
    old = deployment(role("r" * 20, resources={"accelerator": 1}), name=name)
    new = edit_role(old, 0, replicas=2)
    assert review(new, OBJECTS, old=as_stored(old)).allowed
    assert causes(review(new, OBJECTS)) == [
        ("names.invalid-service-name", "spec.roles[0].name", INV)
    ]


def test_port_flag_grandfathered_until_edited() -> None:
    old = deployment(
        role(resources={"accelerator": 1}, ports=[{"port": 9000}], extraArgs=["--port", "1"])
    )
    assert review(edit_role(old, 0, replicas=2), OBJECTS, old=as_stored(old)).allowed
    changed = edit_role(old, 0, extraArgs=["--port", "2"])
    assert causes(review(changed, OBJECTS, old=as_stored(old))) == [
        ("port-flag.differs-from-declared", "spec.roles[0].extraArgs", INV)
    ]


def test_reserved_port_collision_stored_vs_created() -> None:
    stored = pd(
        router=LLMD,
        roles=[
            role(
                "prefill", kind="Prefill", resources={"accelerator": 1}, extraArgs=["--port=5557"]
            ),
            role("decode", kind="Decode", resources={"accelerator": 1}),
        ],
    )
    assert review(edit_role(stored, 0, replicas=3), OBJECTS, old=as_stored(stored)).allowed
    bare = edit(stored)
    del bare["spec"]["router"]
    assert review(bare, OBJECTS).allowed
    # Adding the router collides with the reserved port; it also leaves the roles listening on
    # two ports (the prefiller on its own 5557, the decoder's proxy on 8000), which is only a
    # warning: the router would not be rendered, the engines would run (D26 amended).
    added = review(stored, OBJECTS, old=as_stored(bare))
    assert causes(added) == [("port-flag.reserved", "spec.router", INV)]
    assert any("router.listener-ports-differ" in w for w in added.warnings)


def test_served_name_grandfathered_when_unchanged() -> None:
    old = deployment(role(resources={"accelerator": 1}, extraArgs=["--served-model-name", "x"]))
    assert review(edit_role(old, 0, replicas=2), OBJECTS, old=as_stored(old)).allowed
    changed = edit_role(old, 0, extraArgs=["--served-model-name", "y"])
    assert causes(review(changed, OBJECTS, old=as_stored(old))) == [
        ("served-name.mismatch", "spec.roles[0].extraArgs", INV)
    ]
    assert causes(review(old, OBJECTS)) == [
        ("served-name.mismatch", "spec.roles[0].extraArgs", INV)
    ]


def test_kv_cache_dtype_not_grandfathered_except_deletion() -> None:
    old = deployment(
        role(resources={"accelerator": 1}, extraArgs=["--kv-cache-dtype", "fp8"]), **CACHE
    )
    new = edit_role(old, 0, replicas=2)
    assert causes(review(new, OBJECTS, old=as_stored(old))) == [
        ("kv-cache.dtype-flag-owned", "spec.roles[0].extraArgs[0]", INV)
    ]
    deleting = copy.deepcopy(new)
    deleting["metadata"]["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    assert review(deleting, OBJECTS, old=as_stored(old)).allowed
    off = Settings(kv_cache_dtype_owned=False)
    assert review(new, OBJECTS, old=as_stored(old), settings=off).allowed


def test_deleting_object_skips_instance_type_rules() -> None:
    old = deployment(role(instanceType="gone", resources={"accelerator": 1}))
    deleting = copy.deepcopy(old)
    deleting["metadata"]["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    deleting["metadata"]["finalizers"] = []
    assert causes(review(old, OBJECTS)) == [
        ("instance-type.must-exist", "spec.roles[0].instanceType", "FieldValueNotFound")
    ]
    verdict = review(deleting, OBJECTS, old=as_stored(old))
    assert verdict.allowed and not verdict.patch
    no_resources = deployment(role(instanceType="gone"))
    no_resources["metadata"]["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    assert review(no_resources, OBJECTS, old=as_stored(no_resources)).allowed


def test_deleting_object_still_runs_object_rules() -> None:
    old = deployment(role(resources={"accelerator": 1}, env=[{"name": "MOONCAKE_CONFIG_PATH"}]))
    deleting = copy.deepcopy(old)
    deleting["metadata"]["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    assert causes(review(deleting, OBJECTS, old=as_stored(old))) == [
        ("env.owned-name", "spec.roles[0].env[0]", INV)
    ]


def test_delete_always_allowed() -> None:
    broken = deployment(role(instanceType="gone", extraArgs=["--kv-transfer-config"]))
    assert review(None, OBJECTS, old=broken, operation="DELETE").allowed
    assert review(broken, OBJECTS, operation="CONNECT").allowed


def test_undecodable_stored_object_is_treated_as_absent() -> None:
    old = deployment(role(resources={"accelerator": 1}))
    old["spec"]["unknown"] = 1
    assert review(edit(BASE, model={"name": "other"}), OBJECTS, old=old).allowed


def test_a_router_without_an_image_is_never_refused() -> None:
    """D26 amended: the seed's router block names no image. Under the default Settings each router
    has one; with the Setting emptied the deployment is still admitted (a warning names the field
    and the Setting), on create, on an edit, and when the router is added by an UPDATE."""
    bare = pd(router={"name": "vllm-router", "image": None})
    verdict = review(bare, OBJECTS)
    assert verdict.allowed and list(verdict.warnings) == []
    emptied = Settings(router_image_vllm_router="")
    without = edit(bare)
    del without["spec"]["router"]
    for obj, old in (
        (bare, None),
        (edit_role(bare, 0, replicas=2), as_stored(bare)),
        (bare, as_stored(without)),
    ):
        verdict = review(obj, OBJECTS, old=old, settings=emptied)
        assert verdict.allowed, causes(verdict)
        (warning,) = verdict.warnings
        assert warning.startswith("spec.router.image: ")
        assert "model-deployment-router-image-vllm-router" in warning


def test_router_timeout_flag_left_alone_when_stored_refused_when_created() -> None:
    stored = pd(router={"name": "vllm-router", "extraArgs": ["--request-timeout-secs", "5"]})
    timed = edit(stored, router={**stored["spec"]["router"], "requestTimeoutSeconds": 60})
    assert causes(review(timed, OBJECTS, old=as_stored(stored))) == [
        ("router.timeout-flag-twice", "spec.router.extraArgs[0]", INV)
    ]
    assert review(edit_role(timed, 0, replicas=2), OBJECTS, old=as_stored(timed)).allowed


def test_deleting_skips_the_router_object_warnings() -> None:
    stored = pd(router={"name": "vllm-router"})
    deleting = edit(stored, router={"name": "vllm-router"})
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    deleting["metadata"]["finalizers"] = ["gpustack.ai/controlled"]
    assert "image" not in deleting["spec"]["router"]
    emptied = Settings(router_image_vllm_router="")
    verdict = review(deleting, OBJECTS, old=as_stored(stored), settings=emptied)
    assert verdict.allowed and list(verdict.warnings) == []
    deleting["metadata"].pop("deletionTimestamp")
    verdict = review(deleting, OBJECTS, old=as_stored(stored), settings=emptied)
    assert verdict.allowed and len(verdict.warnings) == 1
