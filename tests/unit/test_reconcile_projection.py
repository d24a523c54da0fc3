"""What the controller's caches keep (gpustack_render/reconcile/projection.py): every reader
answers the same on the projection as on the whole object, foreign managedFields are gone and
the controller's own apply entries stay (Service alignment reads them)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from gpustack_render.reconcile.applied import apply_aligned
from gpustack_render.reconcile.keys import FIELD_MANAGER
from gpustack_render.reconcile.observed import observe_pod, observe_workload
from gpustack_render.reconcile.ownerindex import controlling_deployment_key
from gpustack_render.reconcile.projection import (
    project_pod,
    project_workload,
    strip_managed_fields,
)

DATA = Path(__file__).parent / "data" / "explain"


def _objects(kind: str) -> list[dict[str, Any]]:
    found = []
    for path in sorted(DATA.glob("*.yaml")):
        # Plain JSON types: what a watch decodes.
        listing = json.loads(json.dumps(YAML(typ="safe").load(path.read_text())))
        found += [o for o in listing["items"] if o.get("kind") == kind]
    assert found, f"no {kind} in {DATA}"
    return found


def _with_managed_fields(obj: dict[str, Any]) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    obj["metadata"]["managedFields"] = [
        {"manager": "kueue", "operation": "Update", "fieldsV1": {"f:status": {}}},
        {"manager": FIELD_MANAGER, "operation": "Apply", "fieldsV1": {"f:metadata": {}}},
    ]
    return obj


@pytest.mark.parametrize("pod", _objects("Pod"), ids=lambda p: p["metadata"].get("name", "?"))
def test_a_projected_pod_is_observed_as_the_whole_pod(pod: dict[str, Any]) -> None:
    uid = next(iter(pod["metadata"].get("ownerReferences") or [{}])).get("uid", "")
    projected = project_pod(_with_managed_fields(pod))
    assert observe_pod(projected, owner_uid=uid) == observe_pod(pod, owner_uid=uid)
    assert controlling_deployment_key(projected) == controlling_deployment_key(pod)
    assert "containers" not in projected.get("spec", {})
    assert "managedFields" not in projected["metadata"]


@pytest.mark.parametrize("wl", _objects("Workload"), ids=lambda w: w["metadata"]["name"])
def test_a_projected_workload_is_observed_as_the_whole_workload(wl: dict[str, Any]) -> None:
    projected = project_workload(_with_managed_fields(wl))
    assert observe_workload(projected) == observe_workload(wl)
    # The PodSets keep their names and counts (the Elastic EP admitted layer), never a template.
    for entry in projected.get("spec", {}).get("podSets", []):
        assert set(entry) <= {"name", "count"}
    assert observe_workload(projected).pod_sets == observe_workload(wl).pod_sets != ()


def test_only_the_named_managers_entries_are_kept() -> None:
    obj = _with_managed_fields({"metadata": {"name": "x"}, "spec": {"a": 1}})
    assert "managedFields" not in strip_managed_fields(obj)["metadata"]
    kept = strip_managed_fields(obj, (FIELD_MANAGER,))["metadata"]["managedFields"]
    assert [e["manager"] for e in kept] == [FIELD_MANAGER]
    assert len(obj["metadata"]["managedFields"]) == 2  # the input is never changed


def test_an_object_of_the_wrong_shape_passes_without_what_is_missing() -> None:
    assert project_pod({"metadata": "nope", "spec": [1], "status": None}) == {"metadata": "nope"}
    assert project_workload({}) == {}


def test_a_stripped_service_is_still_known_aligned() -> None:
    """The alignment check reads the controller's own apply entry, which stripping keeps."""
    wanted = {"metadata": {"name": "s", "labels": {"a": "1"}}, "spec": {"ports": [{"port": 80}]}}
    stored = {
        "metadata": {
            "name": "s",
            "labels": {"a": "1", "other": "2"},
            "managedFields": [
                {
                    "manager": FIELD_MANAGER,
                    "operation": "Apply",
                    "fieldsV1": {
                        "f:metadata": {"f:labels": {"f:a": {}}},
                        "f:spec": {"f:ports": {'k:{"port":80}': {".": {}}}},
                    },
                },
                {"manager": "other", "operation": "Update", "fieldsV1": {"f:metadata": {}}},
            ],
        },
        "spec": {"ports": [{"port": 80, "protocol": "TCP"}]},
    }
    assert apply_aligned(stored, wanted, FIELD_MANAGER)
    assert apply_aligned(strip_managed_fields(stored, (FIELD_MANAGER,)), wanted, FIELD_MANAGER)
    assert not apply_aligned(strip_managed_fields(stored), wanted, FIELD_MANAGER)
