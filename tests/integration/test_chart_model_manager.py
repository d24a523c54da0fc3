"""The node plugin in the chart (``modelManager.enabled``) and in deploy/model-manager:

* ``helm lint --strict`` passes with the switch on;
* with the switch on, the chart renders exactly the objects of ``kubectl kustomize
  deploy/model-manager`` on top of its defaults (less Helm's own labels), and nothing of it with
  the switch off;
* what the CSI node plugin needs is there: the CSIDriver with podInfoOnMount, attachRequired false
  and Ephemeral only; node-driver-registrar beside the plugin with kubelet's registration path;
  the pods directory with Bidirectional propagation; no Secret in the RBAC;
* the values reach the objects (kubelet directory, store root, registrar image);
* the API server accepts every object (a server-side dry run on a real kube-apiserver).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .cluster import ClusterBinaries
from .controlplane import ControlPlane, started_control_plane
from .manifests import Objects, kustomize_overlay, run
from .test_chart import CHART, DEPLOY, KUBE_VERSION, NAMESPACE, by_id, template

pytestmark = [pytest.mark.integration]

ON = ["--set", "modelManager.enabled=true"]
PART = DEPLOY / "model-manager"


@pytest.fixture(scope="module")
def helm(envtest_binaries: ClusterBinaries) -> Path:
    path = envtest_binaries.path("helm")
    assert path.exists(), f"no helm in {envtest_binaries.bin_dir} (hack/envtest/build.sh)"
    return path


@pytest.fixture(scope="module")
def plane() -> Iterator[ControlPlane]:
    with started_control_plane() as cp:
        yield cp


def _added(helm: Path, *args: str) -> Objects:
    base = by_id(template(helm))
    return [o for o in template(helm, *ON, *args) if _key(o) not in base]


def _key(o: dict[str, Any]) -> tuple[str, str, str]:
    return (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"])


def _one(objects: Objects, kind: str) -> dict[str, Any]:
    (found,) = [o for o in objects if o["kind"] == kind]
    return found


def test_helm_lint_with_the_plugin(helm: Path) -> None:
    out = run(helm, "lint", "--strict", CHART, "--kube-version", KUBE_VERSION, *ON)
    assert "1 chart(s) linted, 0 chart(s) failed" in out, out


def test_the_switch_renders_what_deploy_model_manager_renders(
    helm: Path, envtest_binaries: ClusterBinaries, tmp_path: Path
) -> None:
    kustomized = kustomize_overlay(envtest_binaries.kubectl, tmp_path / "mm", [PART])
    added = _added(helm)
    assert by_id(added) == by_id(kustomized)
    assert sorted(o["kind"] for o in added) == [
        "CSIDriver",
        "ClusterRole",
        "ClusterRoleBinding",
        "DaemonSet",
        "Role",
        "RoleBinding",
        "ServiceAccount",
    ]
    # Off (the default): none of it.
    assert not [o for o in template(helm) if o["metadata"]["name"].endswith("model-manager")]


def test_what_kubelet_and_the_plugin_need(helm: Path) -> None:
    added = _added(helm)
    driver = _one(added, "CSIDriver")
    assert driver["metadata"]["name"] == "model.csi.gpustack.ai"
    assert driver["spec"]["podInfoOnMount"] is True
    assert driver["spec"]["attachRequired"] is False
    assert driver["spec"]["volumeLifecycleModes"] == ["Ephemeral"]
    pod = _one(added, "DaemonSet")["spec"]["template"]["spec"]
    plugin, registrar = pod["containers"]
    assert plugin["command"] == ["python", "-m", "gpustack_modelmanager"]
    mounts = {m["name"]: m for m in plugin["volumeMounts"]}
    assert mounts["mountpoint-dir"] == {
        "name": "mountpoint-dir",
        "mountPath": "/var/lib/kubelet/pods",
        "mountPropagation": "Bidirectional",
    }
    assert plugin["securityContext"]["privileged"] is True
    assert registrar["name"] == "node-driver-registrar"
    assert (
        "--kubelet-registration-path=/var/lib/kubelet/plugins/model.csi.gpustack.ai/csi.sock"
        in (registrar["args"])
    )
    rules = [r for o in added if o["kind"] in ("ClusterRole", "Role") for r in o["rules"]]
    assert not [r for r in rules if "secrets" in r["resources"]]
    assert {"get", "create"} == set(
        next(r for r in rules if r["resources"] == ["nodemodelstores"])["verbs"]
    )


def test_values_reach_the_objects(helm: Path) -> None:
    added = _added(
        helm,
        *("--set", "modelManager.kubeletDir=/data/kubelet/"),
        *("--set", "modelManager.storeRoot=/data/models"),
        *("--set", "modelManager.registrarImage=mirror.example/registrar:v9"),
    )
    pod = _one(added, "DaemonSet")["spec"]["template"]["spec"]
    paths = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"]}
    assert paths == {
        "socket-dir": "/data/kubelet/plugins/model.csi.gpustack.ai",
        "registration-dir": "/data/kubelet/plugins_registry",
        "mountpoint-dir": "/data/kubelet/pods",
        "store": "/data/models",
    }
    plugin, registrar = pod["containers"]
    assert "--store-root=/data/models" in plugin["args"]
    assert registrar["image"] == "mirror.example/registrar:v9"


def test_a_relative_kubelet_dir_is_refused(helm: Path) -> None:
    result = subprocess.run(
        [str(helm), "template", "x", str(CHART), *ON, "--set", "modelManager.kubeletDir=var/k"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode != 0 and "kubeletDir" in result.stderr, result.stderr


def test_the_api_server_accepts_every_object(helm: Path, plane: ControlPlane) -> None:
    plane.request("POST", "/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
    paths = {
        "CSIDriver": "/apis/storage.k8s.io/v1/csidrivers",
        "ServiceAccount": f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts",
        "ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        "Role": f"/apis/rbac.authorization.k8s.io/v1/namespaces/{NAMESPACE}/roles",
        "RoleBinding": f"/apis/rbac.authorization.k8s.io/v1/namespaces/{NAMESPACE}/rolebindings",
        "DaemonSet": f"/apis/apps/v1/namespaces/{NAMESPACE}/daemonsets",
    }
    for obj in _added(helm):
        status, _ = plane.request("POST", paths[obj["kind"]], obj, query={"dryRun": "All"})
        assert status == 201, obj["kind"]
