"""The ``render`` entry point: the Rendering API, D18's output order, owner references, errors."""

from __future__ import annotations

import copy
import io
import json
from pathlib import Path
from typing import Any

import pytest
from property.strategies import (
    Case,
    deployment,
    input_objects,
    instance_type,
    pool_inputs,
    render_case,
    role,
)

from gpustack_render.cli.parser import build_parser
from gpustack_render.cli.verbs import render as render_verb
from gpustack_render.core.errors import RenderError
from gpustack_render.core.settings import Settings
from gpustack_render.rendering.localqueues import local_queues
from gpustack_render.rendering.renderer import render
from gpustack_render.schema.decoding import decode_deployment
from gpustack_render.schema.lookups import StaticLookups


def _pair_case() -> Case:
    return Case(
        deployment(
            [
                role("prefill", kind="Prefill", replicas=2, resources={"accelerator": 1}),
                role("decode", kind="Decode", replicas=1, size=2, resources={"accelerator": 1}),
            ],
            router="llm-d-router",
            pool_ref="team-a-cache",
            uid="u-1",
        ),
        [instance_type(), *pool_inputs()],
    )


def test_objects_follow_d18_order() -> None:
    rendering = render_case(_pair_case())
    kinds = [o["kind"] for o in rendering.objects()]
    router = ["ServiceAccount", "Role", "RoleBinding", "ConfigMap", "Service", "Deployment"]
    assert kinds == ["LocalQueue"] + ["Service"] * 4 + ["Pod"] * 4 + router
    names = [o["metadata"].get("name") for o in rendering.services()]
    assert names == ["qwen", "qwen-prefill", "qwen-decode", "qwen-decode-r0"]
    seats = [(s.role, s.ordinal, s.member) for s in rendering.iter_seats()]
    assert seats == [("prefill", 0, 0), ("prefill", 1, 0), ("decode", 0, 0), ("decode", 0, 1)]


def test_role_facts_for_the_controller() -> None:
    rendering = render_case(_pair_case())
    prefill, decode = rendering.roles
    assert (prefill.kind, prefill.kind_label, prefill.engine) == ("Prefill", "prefill", "vllm")
    assert prefill.managed and prefill.store_client and prefill.direct_leg
    assert prefill.publishes_kv_events and not prefill.direct_decoder
    assert decode.direct_decoder and not decode.publishes_kv_events
    assert decode.serving_port == 8000 and not decode.https
    assert prefill.parallelism.readable
    assert rendering.cache is not None and rendering.cache.connection is not None
    assert rendering.cache.connection.tenant == "team-a-shared"
    assert rendering.floor == 1 and rendering.render_version == 2


def test_seats_carry_identity_and_currency() -> None:
    rendering = render_case(_pair_case())
    decode = rendering.role("decode")
    assert decode is not None
    seat = decode.seat(0, 1)
    assert seat.name == "qwen-decode-r0-m1" and seat.generate_name is None
    assert seat.pod["metadata"]["name"] == seat.name
    assert seat.pod["metadata"]["annotations"]["modeldeployment.gpustack.ai/pod-spec-hash"] == (
        seat.pod_spec_hash
    )
    assert seat.group_name == decode.groups()[0]
    assert decode.hashes()[(0, 1)] == seat.pod_spec_hash
    assert [s.member for s in decode.instance(0)] == [0, 1]
    prefill = rendering.roles[0]
    assert prefill.seat(1, 0).name is None and prefill.seat(1, 0).generate_name == "qwen-prefill-"
    with pytest.raises(IndexError):
        prefill.seat(2, 0)


def test_owner_references_only_with_a_uid() -> None:
    with_uid = render_case(_pair_case())
    for obj in with_uid.services() + with_uid.pods():
        assert obj["metadata"]["ownerReferences"] == [
            {
                "apiVersion": "worker.gpustack.ai/v1",
                "kind": "ModelDeployment",
                "name": "qwen",
                "uid": "u-1",
                "controller": True,
            }
        ]
    for queue in with_uid.local_queues:
        assert "ownerReferences" not in queue["metadata"]
    case = _pair_case()
    del case.deployment["metadata"]["uid"]
    without = render_case(case)
    assert all("ownerReferences" not in o["metadata"] for o in without.objects())


def test_pods_are_independent_objects() -> None:
    rendering = render_case(_pair_case())
    first, second = rendering.roles[0].pods()
    first["spec"]["containers"][0]["env"].append({"name": "X", "value": "y"})
    assert first["spec"]["containers"][0]["env"] != second["spec"]["containers"][0]["env"]


def test_render_never_mutates_the_deployment() -> None:
    md, _ = decode_deployment(_pair_case().deployment)
    assert md is not None
    before = copy.deepcopy(md.to_dict())
    render(md, lookups=_pair_case().lookups(), settings=Settings())
    assert md.to_dict() == before


def test_raw_and_defaulted_objects_render_identically() -> None:
    raw = Case(deployment([role()]), [instance_type()])
    stated = Case(deployment([role(resources={"accelerator": "1"})]), [instance_type()])
    assert json.dumps(render_case(raw).objects()) == json.dumps(render_case(stated).objects())


def test_lookup_failure_is_a_render_error() -> None:
    case = Case(deployment([role()]), [instance_type()])
    md, _ = decode_deployment(case.deployment)
    assert md is not None
    lookups = StaticLookups.of(input_objects(case.inputs))
    lookups.failing.add(("InstanceType", "", "gpu-a"))
    with pytest.raises(RenderError) as info:
        render(md, lookups=lookups, settings=Settings())
    assert info.value.origin == "render.lookup-failed"


def test_unexpected_failure_is_still_a_render_error() -> None:
    class Broken(StaticLookups):
        def get(self, kind: type[Any], namespace: str, name: str) -> None:
            raise ZeroDivisionError("boom")

    md, _ = decode_deployment(deployment([role()]))
    assert md is not None
    with pytest.raises(RenderError) as info:
        render(md, lookups=Broken(), settings=Settings())
    assert info.value.origin == "render.internal" and "boom" in str(info.value)


def test_local_queues_sorted_and_none_in_system_namespace() -> None:
    queues = local_queues(
        ["b", "a", "b", ""], namespace="team-a", system_namespace="gpustack-system"
    )
    assert [q["metadata"]["name"] for q in queues] == ["a", "b"]
    assert queues[0]["spec"] == {"clusterQueue": "a"}
    assert queues[0]["metadata"]["labels"] == {
        "app.kubernetes.io/managed-by": "gpustack-controller"
    }
    assert (
        local_queues(["a"], namespace="gpustack-system", system_namespace="gpustack-system") == []
    )


def test_fast_admission_and_inject_label_are_never_rendered() -> None:
    text = json.dumps(render_case(_pair_case()).objects())
    assert "pod-group-fast-admission" not in text
    assert "kvcache.gpustack.ai/inject" not in text


def test_cli_prints_render_errors_and_exits_1(tmp_path: Path) -> None:
    path = tmp_path / "md.yaml"
    path.write_text(json.dumps(deployment([role()])))
    out, err = io.StringIO(), io.StringIO()
    code = render_verb.run(build_parser().parse_args(["render", str(path)]), out, err)
    assert code == 1 and out.getvalue() == ""
    assert "role 'server'" in err.getvalue() and "gpu-a" in err.getvalue()
