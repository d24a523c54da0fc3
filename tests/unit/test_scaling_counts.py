"""Where each role's count comes from (``reconcile/scaling.py``), the scalers the renderer emits
(``rendering/scalers.py``) and the scaler writes of a pass (D27, docs/autoscaling.md)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from admission_support import default_objects, deployment, pd, role

from gpustack_render.api.modeldeployment import ModelDeployment
from gpustack_render.core.settings import Settings
from gpustack_render.deployment.scaling import scale_targets, serving_selector
from gpustack_render.reconcile.owned import SCALER_POLICY, OwnedPlan, Owner, plan_owned
from gpustack_render.reconcile.scaling import (
    ObservedScaler,
    resolve_scaling,
    scaler_candidates,
)
from gpustack_render.rendering.renderer import render
from gpustack_render.schema.decoding import decode_deployment
from gpustack_render.schema.lookups import StaticLookups

UID = "5d1e0000-0000-4000-8000-000000000001"


def decoded(obj: dict[str, Any], status: dict[str, Any] | None = None) -> ModelDeployment:
    obj = copy.deepcopy(obj)
    obj["metadata"]["uid"] = UID
    if status is not None:
        obj["status"] = status
    md, errs = decode_deployment(obj)
    assert md is not None, errs
    return md


def scaled_decode(decode: int = 2, **bounds: Any) -> dict[str, Any]:
    return pd(
        roles=[
            role("prefill", kind="Prefill"),
            role(
                "decode",
                kind="Decode",
                replicas=decode,
                scaling={"mode": "External", **bounds},
            ),
        ]
    )


def pd_group(prefill: int = 1, decode: int = 2, **bounds: Any) -> dict[str, Any]:
    return pd(
        roles=[
            role("prefill", kind="Prefill", replicas=prefill),
            role("decode", kind="Decode", replicas=decode),
        ],
        scalingGroups=[
            {
                "name": "pd",
                "roles": [{"name": "prefill", "perUnit": 1}, {"name": "decode", "perUnit": 2}],
                **bounds,
            }
        ],
    )


def role_status(name: str, desired: int, **scaling: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "desired": desired}
    if scaling:
        out["scaling"] = scaling
    return out


def scaler(name: str, replicas: int, *, owned: bool = True) -> ObservedScaler:
    return ObservedScaler(name=name, uid="s-uid", replicas=replicas, owned=owned)


# ---- counts ------------------------------------------------------------------------------


def test_an_external_role_runs_its_scalers_count_within_the_bounds() -> None:
    md = decoded(scaled_decode(2, maxReplicas=6))
    state = resolve_scaling(md, scalers={"qwen-decode": scaler("qwen-decode", 5)})
    assert state.counts() == {"prefill": 1, "decode": 5}
    assert state.roles["decode"].source == "Scaler"
    assert state.status_of("decode") is not None
    assert state.status_of("prefill") is None
    # A count outside the bounds (the bounds were narrowed after the autoscaler wrote it) is
    # applied within them; the scaler's own count is left as it is.
    state = resolve_scaling(md, scalers={"qwen-decode": scaler("qwen-decode", 9)})
    assert state.counts()["decode"] == 6 and state.applied == {"decode": 6}


def test_before_its_scaler_exists_a_role_runs_the_count_it_runs() -> None:
    """A new scaler starts where the role is: status.roles[].desired, else roles[].replicas."""
    fresh = decoded(scaled_decode(3))
    assert resolve_scaling(fresh, scalers={}).counts()["decode"] == 3
    running = decoded(
        scaled_decode(3), status={"roles": [role_status("prefill", 1), role_status("decode", 4)]}
    )
    assert resolve_scaling(running, scalers={}).counts()["decode"] == 4
    # A scaler held by someone else is neither read nor written: the role stays where it is.
    assert (
        resolve_scaling(
            running, scalers={"qwen-decode": scaler("qwen-decode", 9, owned=False)}
        ).counts()["decode"]
        == 4
    )


def test_turning_external_off_keeps_the_count_until_replicas_is_edited() -> None:
    was_scaled = {
        "roles": [
            role_status("prefill", 1),
            role_status("decode", 5, source="Scaler", scaler="qwen-decode"),
        ]
    }
    off = decoded(
        pd(roles=[role("prefill", kind="Prefill"), role("decode", kind="Decode", replicas=2)]),
        was_scaled,
    )
    state = resolve_scaling(off, scalers={})
    held = state.roles["decode"]
    assert (held.count, held.source, held.spec_replicas) == (5, "Held", 2)
    # The next pass reads its own status: still held while replicas reads 2.
    written = {
        "roles": [
            role_status("prefill", 1),
            role_status("decode", 5, source="Held", specReplicas=2),
        ]
    }
    again = decoded(
        pd(roles=[role("prefill", kind="Prefill"), role("decode", kind="Decode", replicas=2)]),
        written,
    )
    assert resolve_scaling(again).roles["decode"].count == 5
    # Editing replicas ends the hold: the deployment's own count applies.
    edited = decoded(
        pd(roles=[role("prefill", kind="Prefill"), role("decode", kind="Decode", replicas=3)]),
        written,
    )
    rc = resolve_scaling(edited).roles["decode"]
    assert (rc.count, rc.source) == (3, "Spec")
    assert rc.status() is None


def test_turning_external_off_at_the_deployments_own_count_holds_nothing() -> None:
    status = {"roles": [role_status("server", 2, source="Scaler", scaler="qwen-server")]}
    md = decoded(deployment(role(replicas=2)), status)
    assert resolve_scaling(md).roles["server"].source == "Spec"


def test_a_ratio_group_moves_every_role_in_its_ratio() -> None:
    md = decoded(pd_group(1, 2, maxUnits=4))
    state = resolve_scaling(md, scalers={"qwen-pd": scaler("qwen-pd", 3)})
    assert state.counts() == {"prefill": 3, "decode": 6}
    assert state.applied == {"pd": 3}
    assert {r.scaler for r in state.roles.values()} == {"qwen-pd"}


def test_a_new_group_starts_at_the_fewest_units_holding_what_runs() -> None:
    """No role loses a replica when a group is formed: each role's count is rounded up to
    whole units, and the largest wins (prefill 2 of 1 per unit, decode 2 of 2 → 2 units)."""
    status = {"roles": [role_status("prefill", 2), role_status("decode", 2)]}
    md = decoded(pd_group(1, 2), status)
    state = resolve_scaling(md, scalers={})
    assert state.applied == {"pd": 2}
    assert state.counts() == {"prefill": 2, "decode": 4}


def test_the_targets_and_their_selectors_never_share_a_role() -> None:
    md = decoded(pd_group())
    (target,) = scale_targets(md)
    assert (target.name, target.group, target.roles) == (
        "pd",
        True,
        (("prefill", 1), ("decode", 2)),
    )
    assert (target.min_replicas, target.max_replicas) == (1, 512)  # 1024 decode replicas
    # One Pod per unit: the leaders of the role with the fewest replicas per unit (prefill, 1),
    # so the HPA, which sizes its answer by the Pods it finds, counts units.
    assert serving_selector("qwen", target) == (
        "app.kubernetes.io/name=model-deployment,app.kubernetes.io/instance=qwen,"
        "app.kubernetes.io/component=prefill,modeldeployment.gpustack.ai/member-index=0"
    )
    single = decoded(scaled_decode())
    (target,) = scale_targets(single)
    assert serving_selector("qwen", target).endswith(
        "app.kubernetes.io/component=decode,modeldeployment.gpustack.ai/member-index=0"
    )


# ---- render ------------------------------------------------------------------------------


def _render(md: ModelDeployment, counts: dict[str, int] | None = None) -> Any:
    return render(
        md, lookups=StaticLookups.of(default_objects()), settings=Settings(), counts=counts
    )


def test_the_renderer_emits_one_owned_scaler_per_target_at_the_running_count() -> None:
    md = decoded(pd_group(1, 2, minUnits=0, maxUnits=4))
    rendering = _render(md, {"prefill": 3, "decode": 6})
    (obj,) = rendering.scalers
    assert obj["kind"] == "ModelDeploymentScaler"
    assert obj["metadata"]["name"] == "qwen-pd"
    assert obj["metadata"]["ownerReferences"][0]["uid"] == UID
    assert obj["spec"] == {
        "replicas": 3,
        "minReplicas": 0,
        "maxReplicas": 4,
        "modelDeployment": "qwen",
        "scalingGroup": "pd",
    }
    assert rendering.objects()[-1] is obj
    assert [r.replicas for r in rendering.roles] == [3, 6]


def test_a_role_scaled_to_zero_renders_no_seat_but_keeps_its_service() -> None:
    md = decoded(scaled_decode(2, minReplicas=0))
    rendering = _render(md, {"decode": 0})
    decode = rendering.role("decode")
    assert decode is not None and decode.seats == () and decode.groups() == []
    assert decode.service["metadata"]["name"] == "qwen-decode"
    assert rendering.scalers[0]["spec"]["replicas"] == 0


# ---- writes --------------------------------------------------------------------------------


def sync_scalers(
    wanted: list[dict[str, Any]], *, stored: dict[str, dict[str, Any] | None], owner_uid: str
) -> OwnedPlan:
    """The scalers on the owned-object path (``reconcile/owned.py``, ``SCALER_POLICY``)."""
    return plan_owned(
        SCALER_POLICY,
        wanted,
        stored=stored,
        owner=Owner("team-a", "qwen", owner_uid),
        manager="gpustack-controller",
    )


def _owned(obj: dict[str, Any]) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    obj["metadata"]["uid"] = "s-uid"
    return obj


def test_a_missing_scaler_is_created_and_a_stored_one_keeps_its_count() -> None:
    md = decoded(scaled_decode(2, maxReplicas=8))
    (wanted,) = _render(md).scalers
    sync = sync_scalers([wanted], stored={"qwen-decode": None}, owner_uid=UID)
    assert [c["metadata"]["name"] for c in sync.creates] == ["qwen-decode"]
    # Stored with the autoscaler's count and older bounds: only the bounds are patched.
    stored = _owned(wanted)
    stored["spec"].update(replicas=7, maxReplicas=10)
    sync = sync_scalers([wanted], stored={"qwen-decode": stored}, owner_uid=UID)
    assert sync.creates == () and sync.patches == (("qwen-decode", {"spec": {"maxReplicas": 8}}),)
    # Aligned: nothing to write (a converged deployment writes nothing).
    stored["spec"]["maxReplicas"] = 8
    aligned = sync_scalers([wanted], stored={"qwen-decode": stored}, owner_uid=UID)
    assert aligned.writes == 0 and aligned.conflicts == ()


def test_a_scaler_no_target_renders_is_deleted_and_a_foreign_one_is_left_alone() -> None:
    md = decoded(scaled_decode())
    (wanted,) = _render(md).scalers
    old = _owned(wanted)
    old["metadata"]["name"] = "qwen-gone"
    foreign = copy.deepcopy(wanted)
    foreign["metadata"]["ownerReferences"] = []
    sync = sync_scalers([wanted], stored={"qwen-decode": foreign, "qwen-gone": old}, owner_uid=UID)
    assert [c.name for c in sync.conflicts] == ["qwen-decode"]
    assert sync.prunes == (("qwen-gone", "s-uid"),)
    assert sync.creates == () and sync.patches == ()


def test_the_candidates_cover_every_name_a_scaler_has_or_had() -> None:
    status = {"roles": [role_status("prefill", 1, source="Scaler", scaler="qwen-old")]}
    md = decoded(pd_group(), status)
    assert scaler_candidates(md) == ["qwen-prefill", "qwen-decode", "qwen-pd", "qwen-old"]


def test_the_command_line_says_a_scaler_is_no_input() -> None:
    from gpustack_render.cli.documents import read_bundle
    from gpustack_render.cli.yamlio import DocumentError, dump_yaml_one

    md = decoded(scaled_decode())
    (obj,) = _render(md).scalers
    with pytest.raises(DocumentError) as info:
        read_bundle([("scaler.yaml", dump_yaml_one(obj))])
    assert "a ModelDeploymentScaler is not an input" in str(info.value)
