"""Which copy of an object is the newer (gpustack_render/reconcile/freshness.py): Kubernetes
1.35's resource-version order (KEP-5504), and the choice between the cache's copy and the answer
to the controller's own write."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpustack_render.reconcile.claims import FINALIZER, with_finalizers
from gpustack_render.reconcile.freshness import compare_resource_versions, newer


@pytest.mark.parametrize(
    ("a", "b", "order"),
    [
        ("9", "10", -1),  # as integers, not as strings
        ("10", "9", 1),
        ("123", "123", 0),
        ("123", "124", -1),
        ("99999999999999999999", "100000000000000000000", -1),  # no length limit
    ],
)
def test_well_formed_versions_compare_as_integers(a: str, b: str, order: int) -> None:
    assert compare_resource_versions(a, b) == order


@pytest.mark.parametrize("bad", ["", "0", "012", "12a", "-3", " 12", "١٢"])
def test_a_version_not_of_the_promised_form_cannot_be_ordered(bad: str) -> None:
    assert compare_resource_versions(bad, "5") is None
    assert compare_resource_versions("5", bad) is None


@given(st.integers(min_value=1), st.integers(min_value=1))
def test_the_order_is_the_integers_order(a: int, b: int) -> None:
    assert compare_resource_versions(str(a), str(b)) == (a > b) - (a < b)


def _copy(rv: str, uid: str = "u1", **status: Any) -> dict[str, Any]:
    return {"metadata": {"name": "m", "uid": uid, "resourceVersion": rv}, "status": status}


def test_the_answer_to_our_write_wins_until_the_cache_catches_up() -> None:
    cached, written = _copy("41"), _copy("42", replacing="embed")
    assert newer(cached, written) is written
    caught_up = _copy("42", replacing="embed")
    assert newer(caught_up, written) is caught_up
    later = _copy("57")
    assert newer(later, written) is later


def test_without_a_write_or_of_another_object_the_cache_answers() -> None:
    cached = _copy("41")
    assert newer(cached, None) is cached
    # The deployment was deleted and created again since our write: another uid.
    assert newer(cached, _copy("90", uid="u0")) is cached


def test_versions_that_cannot_be_ordered_answer_none() -> None:
    assert newer(_copy("41"), _copy("x-42")) is None


def test_a_finalizer_update_body_carries_no_managed_fields() -> None:
    cached: dict[str, Any] = {
        "metadata": {
            "name": "m",
            "resourceVersion": "7",
            "finalizers": ["other"],
            "managedFields": [{"manager": "gpustack-controller"}],
        },
        "spec": {"roles": []},
    }
    body = with_finalizers(cached, ["other", FINALIZER])
    assert body["metadata"] == {
        "name": "m",
        "resourceVersion": "7",
        "finalizers": ["other", FINALIZER],
    }
    assert body["spec"] == cached["spec"]
    assert "managedFields" in cached["metadata"]  # the input is never changed
