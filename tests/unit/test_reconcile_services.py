"""Service alignment (docs/contract/render.md §19, docs/contract/controller.md §11): a Service is
re-applied when a rendered value differs **or** when the controller's field manager still owns a
field the rendering no longer carries (server-side apply removes such a field only on the next
apply)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gpustack_render.reconcile.applied import apply_aligned as service_aligned
from gpustack_render.reconcile.keys import FIELD_MANAGER

UID = "8a1165f6-a9ff-48a7-8465-26bf46285128"

WANTED: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {
        "name": "qwen-server",
        "namespace": "team-a",
        "labels": {
            "app.kubernetes.io/component": "server",
            "app.kubernetes.io/instance": "qwen",
            "app.kubernetes.io/name": "model-deployment",
            "resource.gpustack.ai/type": "modeldeployments",
        },
        "annotations": {"note.gpustack.ai/role": "server"},
        "ownerReferences": [{"uid": UID, "controller": True, "name": "qwen"}],
    },
    "spec": {
        "type": "ClusterIP",
        "selector": {"app.kubernetes.io/instance": "qwen"},
        "ports": [{"name": "http", "protocol": "TCP", "port": 8000, "targetPort": 8000}],
    },
}

#: What the API server records for an apply of WANTED (copied from a real kube-apiserver).
APPLIED: dict[str, Any] = {
    "f:metadata": {
        "f:annotations": {"f:note.gpustack.ai/role": {}},
        "f:labels": {
            "f:app.kubernetes.io/component": {},
            "f:app.kubernetes.io/instance": {},
            "f:app.kubernetes.io/name": {},
            "f:resource.gpustack.ai/type": {},
        },
        "f:ownerReferences": {f'k:{{"uid":"{UID}"}}': {}},
    },
    "f:spec": {
        "f:ports": {
            'k:{"port":8000,"protocol":"TCP"}': {
                ".": {},
                "f:name": {},
                "f:port": {},
                "f:protocol": {},
                "f:targetPort": {},
            }
        },
        "f:selector": {},
        "f:type": {},
    },
}


def stored(fields: dict[str, Any] | None = APPLIED, **extra_labels: str) -> dict[str, Any]:
    """WANTED as the API server holds it: server defaults added, our apply entry recorded."""
    obj = copy.deepcopy(WANTED)
    obj["metadata"]["labels"].update(extra_labels)
    obj["metadata"]["resourceVersion"] = "42"
    obj["spec"]["clusterIP"] = "10.0.0.7"
    obj["spec"]["sessionAffinity"] = "None"
    managed = [
        {
            "manager": "kube-controller-manager",
            "operation": "Update",
            "apiVersion": "v1",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:labels": {"f:someone.else/label": {}}}},
        }
    ]
    if fields is not None:
        managed.append(
            {
                "manager": FIELD_MANAGER,
                "operation": "Apply",
                "apiVersion": "v1",
                "fieldsType": "FieldsV1",
                "fieldsV1": copy.deepcopy(fields),
            }
        )
    obj["metadata"]["managedFields"] = managed
    return obj


def test_an_applied_service_with_server_defaults_is_aligned() -> None:
    assert service_aligned(stored(), WANTED, FIELD_MANAGER)


def test_a_label_someone_else_owns_does_not_force_an_apply() -> None:
    assert service_aligned(stored(APPLIED, **{"someone.else/label": "x"}), WANTED, FIELD_MANAGER)


def test_a_changed_value_is_not_aligned() -> None:
    wanted = copy.deepcopy(WANTED)
    wanted["spec"]["ports"][0]["targetPort"] = 8001
    assert not service_aligned(stored(), wanted, FIELD_MANAGER)


@pytest.mark.parametrize(
    "path",
    [
        ("metadata", "labels", "app.kubernetes.io/component"),
        ("metadata", "annotations", "note.gpustack.ai/role"),
        ("metadata", "annotations"),
        ("spec", "ports", 0, "name"),
    ],
    ids=["label", "annotation", "all-annotations", "port-field"],
)
def test_a_key_dropped_from_the_rendering_is_not_aligned(path: tuple[Any, ...]) -> None:
    """The gap: the stored Service still covers every rendered field, but it carries a key
    the earlier apply owned and the current rendering dropped."""
    wanted = copy.deepcopy(WANTED)
    parent: Any = wanted
    for step in path[:-1]:
        parent = parent[step]
    del parent[path[-1]]
    assert not service_aligned(stored(), wanted, FIELD_MANAGER)


def test_a_dropped_port_is_not_aligned() -> None:
    wanted = copy.deepcopy(WANTED)
    wanted["spec"]["ports"] = [
        {"name": "http", "protocol": "TCP", "port": 9000, "targetPort": 8000}
    ]
    assert not service_aligned(stored(), wanted, FIELD_MANAGER)


def test_without_our_apply_entry_alignment_is_unknown() -> None:
    assert not service_aligned(stored(fields=None), WANTED, FIELD_MANAGER)
