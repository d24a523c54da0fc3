"""The shipped ModelDeploymentScaler CRD on the real API server (D27, docs/autoscaling.md,
"Bounds"): its CEL rules run on every write, the ``scale`` subresource included, so an
autoscaler or ``kubectl scale`` asking for a count outside the role's bounds gets a clear
refusal; narrowing the bounds never needs the count touched; ``/scale`` reports the status's
selector. No controller runs here: the objects are written as the controller and an autoscaler
would write them."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from .cluster import Cluster
from .controlplane import APIError, ControlPlane
from .webhook_fixtures import create_namespace

pytestmark = pytest.mark.integration

GROUP_PATH = "/apis/worker.gpustack.ai/v1"
SELECTOR = "app.kubernetes.io/instance=qwen,app.kubernetes.io/component=decode"


def scaler(
    name: str, replicas: int, *, low: int = 1, high: int = 4, **target: str
) -> dict[str, Any]:
    return {
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "ModelDeploymentScaler",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "minReplicas": low,
            "maxReplicas": high,
            "modelDeployment": "qwen",
            **(target or {"role": "decode"}),
        },
    }


def refused(call: Any, *args: Any, **kwargs: Any) -> str:
    with pytest.raises(APIError) as info:
        call(*args, **kwargs)
    assert info.value.status == 422, info.value
    return info.value.body


@pytest.fixture
def namespace(control_plane: ControlPlane) -> str:
    ns = f"scaler-{uuid.uuid4().hex[:6]}"
    create_namespace(control_plane, ns, {})
    return ns


def test_the_count_is_checked_against_the_bounds_on_every_write(
    control_plane: ControlPlane, namespace: str
) -> None:
    path = f"{GROUP_PATH}/namespaces/{namespace}/modeldeploymentscalers"
    request = control_plane.request

    body = refused(request, "POST", path, scaler("too-many", 5))
    assert "spec.replicas" in body
    assert "replicas is above maxReplicas: the ModelDeployment sets this scaler's bounds" in body
    body = refused(request, "POST", path, scaler("too-few", 1, low=2))
    assert "replicas is below minReplicas" in body
    body = refused(request, "POST", path, scaler("both", 2, role="decode", scalingGroup="pd"))
    assert "exactly one of role and scalingGroup is set" in body
    body = refused(request, "POST", path, scaler("inverted", 2, low=3, high=2))
    assert "minReplicas must not exceed maxReplicas" in body

    request("POST", path, scaler("decode", 2))
    request(
        "PATCH",
        f"{path}/decode/status",
        {"status": {"replicas": 1, "selector": SELECTOR}},
        content_type="application/merge-patch+json",
    )
    scale_path = f"{path}/decode/scale"
    _, scale = request("GET", scale_path)
    assert scale["kind"] == "Scale"
    assert scale["spec"] == {"replicas": 2}
    assert scale["status"] == {"replicas": 1, "selector": SELECTOR}

    # An autoscaler writes the count through /scale: the CEL rules run there too.
    def set_scale(replicas: int) -> Any:
        return request(
            "PATCH",
            scale_path,
            {"spec": {"replicas": replicas}},
            content_type="application/merge-patch+json",
        )

    set_scale(4)
    body = refused(set_scale, 5)
    assert "spec.replicas" in body and "replicas is above maxReplicas" in body
    body = refused(set_scale, 0)
    assert "scale to zero is not allowed: minReplicas is above 0" in body

    # The controller narrows the bounds below the count without touching it: allowed (the
    # count is unchanged), and the next write of a count must fit the new bounds.
    request(
        "PATCH",
        f"{path}/decode",
        {"spec": {"maxReplicas": 3}},
        content_type="application/merge-patch+json",
    )
    _, stored = request("GET", f"{path}/decode")
    assert (stored["spec"]["replicas"], stored["spec"]["maxReplicas"]) == (4, 3)
    assert "replicas is above maxReplicas" in refused(set_scale, 4 + 1)
    set_scale(3)

    # Scale to zero where the bounds allow it.
    request(
        "PATCH",
        f"{path}/decode",
        {"spec": {"minReplicas": 0}},
        content_type="application/merge-patch+json",
    )
    set_scale(0)
    _, stored = request("GET", f"{path}/decode")
    assert stored["spec"]["replicas"] == 0


def test_kubectl_scale_and_get_speak_the_scaler(cluster: Cluster, namespace: str) -> None:
    control_plane = cluster.control_plane
    path = f"{GROUP_PATH}/namespaces/{namespace}/modeldeploymentscalers"
    control_plane.request("POST", path, scaler("qwen-pd", 1, high=3, scalingGroup="pd"))

    done = cluster.kubectl("scale", "-n", namespace, "mdscaler/qwen-pd", "--replicas=3")
    assert "scaled" in done.stdout
    _, stored = control_plane.request("GET", f"{path}/qwen-pd")
    assert stored["spec"]["replicas"] == 3

    failed = cluster.kubectl(
        "scale", "-n", namespace, "mdscaler/qwen-pd", "--replicas=7", check=False
    )
    assert failed.returncode != 0
    assert "replicas is above maxReplicas" in failed.stderr

    header, row = cluster.kubectl("get", "mdscaler", "qwen-pd", "-n", namespace).stdout.splitlines()
    assert header.split() == [
        "NAME",
        "DEPLOYMENT",
        "ROLE",
        "GROUP",
        "DESIRED",
        "MIN",
        "MAX",
        "READY",
        "ADMITTED",
        "PENDING",
        "AGE",
    ]
    # No role (a group) and no status yet: those cells are blank.
    assert row.split()[:6] == ["qwen-pd", "qwen", "pd", "3", "1", "3"]
