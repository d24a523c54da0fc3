"""Admission of the autoscaling configuration (D27, docs/autoscaling.md): ``roles[].scaling`` and
``spec.scalingGroups[]``, each refusal naming its field and rule; the pod-spec-hash ignores who
sets the count; names must fit at a scaled role's upper bound."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from admission_support import causes, default_objects, deployment, pd, review, role

from gpustack_render.core.settings import Settings
from gpustack_render.rendering.renderer import render
from gpustack_render.schema.decoding import decode_deployment
from gpustack_render.schema.lookups import StaticLookups


def external(**bounds: Any) -> dict[str, Any]:
    return {"mode": "External", **bounds}


def group(name: str = "pd", *members: tuple[str, int], **bounds: Any) -> dict[str, Any]:
    roles = [{"name": n, "perUnit": p} for n, p in members or (("prefill", 1), ("decode", 2))]
    return {"name": name, "roles": roles, **bounds}


def pd_pair(prefill: int = 1, decode: int = 2, **spec: Any) -> dict[str, Any]:
    return pd(
        roles=[
            role("prefill", kind="Prefill", replicas=prefill),
            role("decode", kind="Decode", replicas=decode),
        ],
        **spec,
    )


def test_an_external_role_and_a_ratio_group_are_allowed() -> None:
    one = deployment(role(replicas=2, scaling=external(minReplicas=1, maxReplicas=8)))
    assert review(one).allowed, causes(review(one))
    two = pd_pair(2, 4, scalingGroups=[group(minUnits=0, maxUnits=4)])
    assert review(two).allowed, causes(review(two))


@pytest.mark.parametrize(
    ("obj", "origin", "field", "words"),
    [
        (
            deployment(role(scaling=external(minReplicas=5, maxReplicas=2))),
            "scaling.bounds-inverted",
            "spec.roles[0].scaling.minReplicas",
            "minReplicas 5 exceeds maxReplicas 2",
        ),
        (
            deployment(role(replicas=9, scaling=external(maxReplicas=8))),
            "scaling.start-outside-bounds",
            "spec.roles[0].replicas",
            "outside its scaling bounds 1..8",
        ),
        (
            pd_pair(scalingGroups=[group("pd", ("prefill", 1), ("decoder", 2))]),
            "scaling.group-role-unknown",
            "spec.scalingGroups[0].roles[1].name",
            "names role 'decoder', which spec.roles does not declare (prefill, decode)",
        ),
        (
            pd_pair(
                1,
                1,
                scalingGroups=[
                    group("a", ("prefill", 1), ("decode", 1)),
                    group("b", ("decode", 1)),
                ],
            ),
            "scaling.role-in-two-groups",
            "spec.scalingGroups[1].roles[0].name",
            "already scaled by group 'a'",
        ),
        (
            pd(
                roles=[
                    role("prefill", kind="Prefill"),
                    role("decode", kind="Decode", replicas=2, scaling=external()),
                ],
                scalingGroups=[group()],
            ),
            "scaling.grouped-role-has-scaling",
            "spec.roles[1].scaling",
            "remove roles[].scaling",
        ),
        (
            pd_pair(1, 3, scalingGroups=[group()]),
            "scaling.group-not-in-ratio",
            "spec.scalingGroups[0]",
            "not whole units of group 'pd' (prefill 1:decode 2)",
        ),
        (
            pd_pair(1, 2, scalingGroups=[group("decode", ("prefill", 1), ("decode", 2))]),
            "scaling.group-name-taken",
            "spec.scalingGroups[0].name",
            "named like a role",
        ),
        (
            pd_pair(1, 2, scalingGroups=[group(maxUnits=600)]),
            "scaling.group-too-large",
            "spec.scalingGroups[0].maxUnits",
            "600 units hold 1200 replicas of role 'decode', above the 1024",
        ),
        (
            pd_pair(1, 2, scalingGroups=[group(minUnits=3, maxUnits=2)]),
            "scaling.bounds-inverted",
            "spec.scalingGroups[0].minUnits",
            "minUnits 3 exceeds maxUnits 2",
        ),
        (
            pd_pair(3, 6, scalingGroups=[group(maxUnits=2)]),
            "scaling.start-outside-bounds",
            "spec.scalingGroups[0]",
            "starts at 3 units",
        ),
    ],
    ids=lambda v: v if isinstance(v, str) and v.startswith("scaling.") else "",
)
def test_a_bad_scaling_configuration_is_refused_naming_its_field(
    obj: dict[str, Any], origin: str, field: str, words: str
) -> None:
    verdict = review(obj)
    assert not verdict.allowed
    found = [e for e in verdict.errors if e.origin == origin]
    assert [e.field for e in found] == [field], causes(verdict)
    assert words in found[0].message()


def test_a_replicas_role_may_carry_bounds_it_does_not_use() -> None:
    """Bounds matter only while External: a Replicas role with a count above them is fine (it
    may be the count the role keeps after an autoscaler let go of it)."""
    obj = deployment(role(replicas=9, scaling={"mode": "Replicas", "maxReplicas": 4}))
    assert review(obj).allowed


def test_member_names_must_fit_at_the_scaled_upper_bound() -> None:
    """Above size 1 a member's name carries its ordinal: an External role may reach its
    maximum, so the longest name is judged there."""
    name = "a" * 48  # <name>-server-r9-m1 fits in 63; <name>-server-r1023-m1 does not
    fixed = deployment(role(replicas=10, size=2), name=name)
    assert review(fixed).allowed, causes(review(fixed))
    scaled = deployment(role(replicas=10, size=2, scaling=external()), name=name)
    verdict = review(scaled)
    (err,) = [e for e in verdict.errors if e.origin == "names.member-name-too-long"]
    assert f"{name}-server-r1023-m1" in err.message()
    assert "or a lower scaling bound" in err.message()
    bounded = deployment(role(replicas=10, size=2, scaling=external(maxReplicas=99)), name=name)
    assert review(bounded).allowed, causes(review(bounded))


def _hashes(obj: dict[str, Any]) -> list[str]:
    md, errs = decode_deployment(copy.deepcopy(obj))
    assert md is not None, errs
    rendering = render(md, lookups=StaticLookups.of(default_objects()), settings=Settings())
    return [s.pod_spec_hash for s in rendering.iter_seats()]


def test_who_sets_the_count_moves_no_pod_spec_hash() -> None:
    """Turning External on or off, changing bounds or adding a group restarts nothing."""
    plain = pd_pair(1, 2)
    scaled = pd_pair(1, 2, scalingGroups=[group(minUnits=0, maxUnits=3)])
    single = pd(
        roles=[
            role("prefill", kind="Prefill"),
            role("decode", kind="Decode", replicas=2, scaling=external(maxReplicas=6)),
        ]
    )
    assert _hashes(plain) == _hashes(scaled) == _hashes(single)
