"""The artifact's protection finalizer, a policy of the owned-object path
(gpustack_render/reconcile/owned.py, ``plan_finalizer``), and which artifact a deployment's event
concerns (gpustack_render/reconcile/artifacts.py)."""

from __future__ import annotations

from typing import Any

from gpustack_render.api.artifact import ARTIFACT_FINALIZER
from gpustack_render.reconcile.artifacts import artifacts_to_recheck, naming
from gpustack_render.reconcile.owned import ARTIFACT_FINALIZER_POLICY, plan_finalizer


def artifact(*, finalizers: list[str] | None = None, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "a", "namespace": "ns", "resourceVersion": "42"}
    if finalizers is not None:
        meta["finalizers"] = finalizers
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta}


def test_added_on_the_first_pass_with_the_resource_version() -> None:
    patch = plan_finalizer(ARTIFACT_FINALIZER_POLICY, artifact(finalizers=["other"]), held=False)
    assert patch == {
        "metadata": {"finalizers": ["other", ARTIFACT_FINALIZER], "resourceVersion": "42"}
    }
    assert plan_finalizer(ARTIFACT_FINALIZER_POLICY, artifact(), held=True) == {
        "metadata": {"finalizers": [ARTIFACT_FINALIZER], "resourceVersion": "42"}
    }


def test_present_and_not_deleting_writes_nothing() -> None:
    obj = artifact(finalizers=[ARTIFACT_FINALIZER])
    assert plan_finalizer(ARTIFACT_FINALIZER_POLICY, obj, held=False) is None


def test_kept_while_held_removed_once_not() -> None:
    obj = artifact(finalizers=["other", ARTIFACT_FINALIZER], deleting=True)
    assert plan_finalizer(ARTIFACT_FINALIZER_POLICY, obj, held=True) is None
    assert plan_finalizer(ARTIFACT_FINALIZER_POLICY, obj, held=False) == {
        "metadata": {"finalizers": ["other"], "resourceVersion": "42"}
    }


def test_never_added_to_an_object_being_deleted() -> None:
    obj = artifact(finalizers=["other"], deleting=True)
    assert plan_finalizer(ARTIFACT_FINALIZER_POLICY, obj, held=True) is None
    assert plan_finalizer(ARTIFACT_FINALIZER_POLICY, obj, held=False) is None


def md(name: str, ref: str | None, namespace: str = "ns") -> dict[str, Any]:
    model: dict[str, Any] = {"name": "m"}
    if ref is not None:
        model["artifactRef"] = {"name": ref}
    return {"metadata": {"name": name, "namespace": namespace}, "spec": {"model": model}}


def test_naming_counts_deployments_of_the_namespace_only() -> None:
    deployments = [md("b", "w"), md("a", "w"), md("c", "x"), md("d", "w", "other"), md("e", None)]
    assert naming(deployments, "ns", "w") == ["a", "b"]
    assert naming(deployments, "ns", "z") == []
    assert naming([{"metadata": {}}, {"spec": "hostile"}], "ns", "w") == []


def test_which_artifact_an_event_concerns() -> None:
    assert artifacts_to_recheck("DELETED", md("a", "w"), None) == ["ns/w"]
    assert artifacts_to_recheck("DELETED", md("a", None), None) == []
    assert artifacts_to_recheck("MODIFIED", md("a", "x"), md("a", "w")) == ["ns/w"]
    assert artifacts_to_recheck("MODIFIED", md("a", "w"), md("a", "w")) == []
    assert artifacts_to_recheck("ADDED", md("a", "w"), None) == []
