"""Properties of ``render`` over generated valid deployments (tests/property/strategies.py).

Determinism; unique names; every name a DNS label of at most 63 characters; Pod count =
Σ replicas × size; the pod-spec-hash changes with each input D4/D10 lists and with nothing else.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from gpustack_render.core.naming import is_dns1035_label, is_dns1123_label

from .strategies import Case, cases, instance_type, render_case

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _hashes(case: Case) -> list[dict[tuple[int, int], str]]:
    return [role.hashes() for role in render_case(case).roles]


@SETTINGS
@given(cases())
def test_render_is_deterministic(case: Case) -> None:
    first = json.dumps(render_case(case).objects())
    again = json.dumps(render_case(case.copy()).objects())
    assert first == again


@SETTINGS
@given(cases())
def test_render_does_not_mutate_its_input(case: Case) -> None:
    before = json.dumps(case.deployment, sort_keys=True)
    render_case(case)
    assert json.dumps(case.deployment, sort_keys=True) == before


@SETTINGS
@given(cases())
def test_pod_count_is_replicas_times_size(case: Case) -> None:
    rendering = render_case(case)
    want = sum(r.get("replicas", 1) * r.get("size", 1) for r in case.deployment["spec"]["roles"])
    assert len(rendering.pods()) == want
    for role in rendering.roles:
        assert len(role.seats) == role.replicas * role.size


@SETTINGS
@given(cases())
def test_names_are_unique_dns_labels(case: Case) -> None:
    rendering = render_case(case)
    services = [s["metadata"]["name"] for s in rendering.services()]
    assert len(services) == len(set(services))
    assert all(is_dns1035_label(n) for n in services), services
    pod_names = [p["metadata"]["name"] for p in rendering.pods() if "name" in p["metadata"]]
    assert len(pod_names) == len(set(pod_names))
    for pod in rendering.pods():
        meta, spec = pod["metadata"], pod["spec"]
        for name in (meta.get("name"), spec.get("hostname"), spec.get("subdomain")):
            if name is not None:
                assert is_dns1123_label(name), name
        if "generateName" in meta:
            # the API server appends 5 characters to the prefix
            assert is_dns1123_label(meta["generateName"] + "abcde")
        group = meta["labels"]["kueue.x-k8s.io/pod-group-name"]
        assert is_dns1123_label(group) and len(group) == 31
    groups = [seat.group_name for seat in rendering.iter_seats() if seat.member == 0]
    assert len(groups) == len(set(groups))


@SETTINGS
@given(cases())
def test_every_seat_has_its_own_hash(case: Case) -> None:
    for role in render_case(case).roles:
        hashes = list(role.hashes().values())
        assert len(hashes) == len(set(hashes))


# --- what moves the pod-spec-hash ----------------------------------------------------------------

Mutation = Callable[[Case], bool]
"""Edits a case copy in place; returns False when it does not apply to this case."""


def _roles(case: Case) -> list[dict[str, Any]]:
    roles: list[dict[str, Any]] = case.deployment["spec"]["roles"]
    return roles


def _role0(case: Case) -> dict[str, Any]:
    return _roles(case)[0]


def _type_of(case: Case, name: str) -> dict[str, Any]:
    return next(
        i for i in case.inputs if i["kind"] == "InstanceType" and i["metadata"]["name"] == name
    )


def _input(case: Case, kind: str) -> dict[str, Any] | None:
    return next((i for i in case.inputs if i["kind"] == kind), None)


def _set(path: tuple[str, ...], value: Any) -> Mutation:
    def apply(case: Case) -> bool:
        node = case.deployment
        for key in path[:-1]:
            node = node.setdefault(key, {})
        if node.get(path[-1]) == value:
            return False
        node[path[-1]] = value
        return True

    return apply


def _role_field(key: str, value: Any) -> Mutation:
    def apply(case: Case) -> bool:
        role = _role0(case)
        if role.get(key) == value:
            return False
        role[key] = value
        return True

    return apply


def _managed_extra_args(case: Case) -> bool:
    role = _role0(case)
    if role.get("command"):
        return False
    role["extraArgs"] = [*role.get("extraArgs", []), "--enable-prefix-caching"]
    return True


def _new_instance_type(case: Case) -> bool:
    role = _role0(case)
    old = _type_of(case, role["instanceType"])
    new = json.loads(json.dumps(old))
    new["metadata"]["name"] = "gpu-moved"
    case.inputs.append(new)
    role["instanceType"] = "gpu-moved"
    return True


def _type_edit(edit: Callable[[dict[str, Any]], bool]) -> Mutation:
    def apply(case: Case) -> bool:
        return edit(_type_of(case, _role0(case)["instanceType"]))

    return apply


def _entrance(it: dict[str, Any]) -> bool:
    moved = "gpustack-fnv64-ffffffffffffffff"
    it["status"]["entrance"] = moved if it["status"]["entrance"] != moved else moved[:-1] + "e"
    return True


def _manufacturer(it: dict[str, Any]) -> bool:
    detail = it["status"].get("detail")
    if not it["spec"]["acceleratable"] or detail is None:
        return False
    detail["manufacturer"] = "amd" if detail.get("manufacturer") == "nvidia" else "nvidia"
    return True


def _unit_cpu(it: dict[str, Any]) -> bool:
    unit = it["spec"]["unitResources"]
    unit["cpu"] = "96" if unit["cpu"] != "96" else "97"
    return True


def _local_storage(it: dict[str, Any]) -> bool:
    it["spec"]["localStorage"] = "7Gi" if it["spec"].get("localStorage") != "7Gi" else "9Gi"
    return True


def _pool_edit(edit: Callable[[dict[str, Any], dict[str, Any]], None]) -> Mutation:
    def apply(case: Case) -> bool:
        b, p = _input(case, "KVCachePoolBinding"), _input(case, "KVCachePool")
        if b is None or p is None:
            return False
        edit(b, p)
        return True

    return apply


def _endpoint(b: dict[str, Any], p: dict[str, Any]) -> None:
    p["status"]["clientEndpoint"] = "moved-master.gpustack-system.svc:50051"


def _domain(b: dict[str, Any], p: dict[str, Any]) -> None:
    b["spec"]["domain"]["name"] = "another-domain"


def _dtype(b: dict[str, Any], p: dict[str, Any]) -> None:
    b["spec"]["domain"]["dtype"] = "fp8_e5m2"


def _block_size(b: dict[str, Any], p: dict[str, Any]) -> None:
    b["spec"]["domain"]["blockSize"] = 512


#: (id, mutation, scope): ``spec`` moves every role, ``role`` moves role 0 only, ``type`` moves
#: every role on role 0's InstanceType, ``store`` moves every role with a store client.
INPUTS: list[tuple[str, Mutation, str]] = [
    ("model", _set(("spec", "model", "name"), "another/model"), "spec"),
    ("engine-image", _set(("spec", "engine", "image"), "another/image:1"), "spec"),
    ("kv-transfer", _set(("spec", "kvTransfer"), {"protocol": "EFA"}), "spec"),
    ("size", lambda c: _role_field("size", _role0(c).get("size", 1) + 1)(c), "role"),
    ("image", _role_field("image", "role/image:2"), "role"),
    ("image-pull-policy", _role_field("imagePullPolicy", "Always"), "role"),
    ("image-pull-secrets", _role_field("imagePullSecrets", [{"name": "regcred"}]), "role"),
    (
        "privileged",
        lambda c: _role_field("privileged", not _role0(c).get("privileged", False))(c),
        "role",
    ),
    ("shm-size", _role_field("shmSize", "48Gi"), "role"),
    ("env", _role_field("env", [{"name": "EXTRA", "value": "x"}]), "role"),
    ("topology", _role_field("topology", {"requiredLevel": "example.com/pod"}), "role"),
    ("grace", _role_field("terminationGracePeriodSeconds", 777), "role"),
    ("startup", _role_field("startupTimeoutSeconds", 4321), "role"),
    (
        "volumes",
        _role_field("additionalVolumes", [{"mountPath": "/x", "secret": {"name": "s"}}]),
        "role",
    ),
    ("extra-args", _managed_extra_args, "role"),
    ("command", _role_field("command", ["/bin/serve", "--port", "8000"]), "role"),
    ("instance-type", _new_instance_type, "role"),
    ("it-entrance", _type_edit(_entrance), "type"),
    ("it-manufacturer", _type_edit(_manufacturer), "type"),
    ("it-unit-cpu", _type_edit(_unit_cpu), "type"),
    ("it-local-storage", _type_edit(_local_storage), "type"),
    ("pool-endpoint", _pool_edit(_endpoint), "store"),
    ("binding-domain", _pool_edit(_domain), "store"),
    ("binding-dtype", _pool_edit(_dtype), "store"),
    ("binding-block-size", _pool_edit(_block_size), "store"),
]


@pytest.mark.parametrize(("mutation", "scope"), [pytest.param(m, s, id=i) for i, m, s in INPUTS])
@SETTINGS
@given(case=cases())
def test_hash_moves_with_each_input(case: Case, mutation: Mutation, scope: str) -> None:
    edited = case.copy()
    if not mutation(edited):
        return
    before = render_case(case)
    after = render_case(edited)
    type0 = before.roles[0].instance_type
    for i, (old, new) in enumerate(zip(before.roles, after.roles, strict=True)):
        moved = (
            scope == "spec"
            or (scope == "role" and i == 0)
            or (scope == "type" and old.instance_type == type0)
            or (scope == "store" and old.store_client)
        )
        old_h, new_h = old.hashes(), new.hashes()
        shared = set(old_h) & set(new_h)
        if moved:
            assert all(old_h[s] != new_h[s] for s in shared), (old.name, scope)
        else:
            assert all(old_h[s] == new_h[s] for s in shared), (old.name, scope)


def _replicas(case: Case) -> bool:
    for r in _roles(case):
        r["replicas"] = r.get("replicas", 1) + 2
    return True


def _metadata(case: Case) -> bool:
    meta = case.deployment["metadata"]
    meta["labels"] = {"team": "research", **meta.get("labels", {})}
    meta["annotations"] = {
        "example.com/note": "edited",
        "modeldeployment.gpustack.ai/min-render-version": "1",
    }
    return True


def _router_fields(case: Case) -> bool:
    router = case.deployment["spec"].get("router")
    if router is None:
        return False
    router["replicas"] = 3
    router["image"] = "router/image:2"
    return True


def _takeover_extra_args(case: Case) -> bool:
    role = _role0(case)
    if not role.get("command"):
        return False
    role["extraArgs"] = ["--still-inert"]
    return True


def _settings(case: Case) -> bool:
    case.settings = replace(
        case.settings,
        kv_cache_dtype_owned=False,
        routing_sidecar_image="example.com/proxy:9",
        native_sidecars=False,
    )
    return True


NON_INPUTS: list[tuple[str, Mutation]] = [
    ("replicas", _replicas),
    ("deployment-metadata", _metadata),
    ("router-replicas-and-image", _router_fields),
    ("takeover-extra-args", _takeover_extra_args),
    ("settings", _settings),
]


@pytest.mark.parametrize("mutation", [pytest.param(m, id=i) for i, m in NON_INPUTS])
@SETTINGS
@given(case=cases())
def test_hash_ignores_everything_else(case: Case, mutation: Mutation) -> None:
    edited = case.copy()
    if not mutation(edited):
        return
    for old, new in zip(render_case(case).roles, render_case(edited).roles, strict=True):
        old_h, new_h = old.hashes(), new.hashes()
        assert all(new_h[s] == h for s, h in old_h.items() if s in new_h)


def test_strategies_module_builders_are_usable_alone() -> None:
    """The strategies' InstanceType builder gives an object the project's model reads as given."""
    from gpustack_render.api.inputs import InstanceType

    it = instance_type("x", acceleratable=False)
    assert it["spec"]["acceleratable"] is False
    model = InstanceType.model_validate(it)
    assert model.metadata.name == "x" and model.spec.acceleratable is False
