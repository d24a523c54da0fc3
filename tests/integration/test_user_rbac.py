"""deploy/rbac: tenants get ModelDeployments through the built-in roles.

On the simulated cluster (its kube-controller-manager runs the clusterrole-aggregation
controller), with ``deploy/rbac`` applied by the real kubectl:

* the built-in ``edit`` and ``admin`` roles gain ModelDeployment writes, ``view`` only reads;
* a user bound to ``edit`` in a namespace creates, reads and deletes a ModelDeployment there and
  cannot write the input kinds (a KVCachePoolBinding);
* a user bound to ``view`` in that namespace reads it and cannot create one;
* neither reaches another namespace.

Each user is a client-certificate identity with no other permission.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .cluster import Cluster
from .controlplane import APIError
from .manifests import yaml_stream

REPO_ROOT = Path(__file__).resolve().parents[2]
RBAC = REPO_ROOT / "deploy" / "rbac"
GROUP = "worker.gpustack.ai"


def model_deployment(namespace: str) -> dict[str, Any]:
    """The bundled example's ModelDeployment, moved into ``namespace``."""
    docs = yaml_stream((REPO_ROOT / "examples" / "qwen-chat.yaml").read_text())
    (md,) = [d for d in docs if d["kind"] == "ModelDeployment"]
    md["metadata"]["namespace"] = namespace
    return md


def binding(name: str, role: str, user: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": name, "namespace": namespace},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
    }


def _grants(cluster: Cluster, role: str, verb: str) -> bool:
    _, body = cluster.control_plane.request(
        "GET", f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{role}"
    )
    return any(
        GROUP in rule.get("apiGroups", [])
        and "modeldeployments" in rule.get("resources", [])
        and verb in rule.get("verbs", [])
        for rule in body.get("rules") or []
    )


@pytest.fixture(scope="module")
def aggregated(cluster: Cluster) -> Iterator[None]:
    """deploy/rbac applied, and aggregated into view/edit/admin; removed afterwards."""
    cluster.kubectl("apply", "--server-side", "--field-manager=gpustack-rbac-test", "-k", str(RBAC))
    deadline = time.monotonic() + 60
    while not (
        _grants(cluster, "edit", "create")
        and _grants(cluster, "admin", "create")
        and _grants(cluster, "view", "list")
    ):
        assert time.monotonic() < deadline, "deploy/rbac was not aggregated into edit/admin/view"
        time.sleep(0.5)
    yield
    cluster.kubectl("delete", "--ignore-not-found", "-k", str(RBAC))


@pytest.fixture
def tenant(cluster: Cluster, aggregated: None) -> Iterator[str]:
    """A fresh namespace where alice has ``edit`` and bob has ``view``."""
    ns = f"rbac-{uuid.uuid4().hex[:8]}"
    cp = cluster.control_plane
    cp.request("POST", "/api/v1/namespaces", {"metadata": {"name": ns}})
    for user, role in (("alice", "edit"), ("bob", "view")):
        cp.request(
            "POST",
            f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
            binding(f"{user}-{role}", role, user, ns),
        )
    yield ns
    try:
        cp.request("DELETE", f"/api/v1/namespaces/{ns}")
    except APIError as exc:
        if exc.status != 404:
            raise


def as_user(cluster: Cluster, user: str, *args: str, stdin: str | None = None) -> tuple[int, str]:
    """Run kubectl as ``user`` (a kubeconfig of its own, no admin rights); (exit code, output)."""
    kubeconfig = cluster.control_plane.user_kubeconfig(user)
    # A later --kubeconfig wins over the admin one cluster.kubectl puts first.
    result = cluster.kubectl(f"--kubeconfig={kubeconfig}", *args, check=False, input=stdin)
    return result.returncode, result.stdout + result.stderr


def test_the_built_in_roles_aggregate_model_deployments(cluster: Cluster, aggregated: None) -> None:
    for role in ("edit", "admin"):
        for verb in ("create", "update", "patch", "delete", "get", "list", "watch"):
            assert _grants(cluster, role, verb), (role, verb)
    assert _grants(cluster, "view", "get") and _grants(cluster, "view", "watch")
    for verb in ("create", "update", "patch", "delete"):
        assert not _grants(cluster, "view", verb), verb


def test_edit_creates_and_view_only_reads(cluster: Cluster, tenant: str) -> None:
    body = json.dumps(model_deployment(tenant))
    code, out = as_user(cluster, "bob", "create", "-f", "-", stdin=body)
    assert code != 0 and "forbidden" in out.lower(), out

    code, out = as_user(cluster, "alice", "create", "-f", "-", stdin=body)
    assert code == 0, out
    for user in ("alice", "bob"):
        code, out = as_user(cluster, user, "get", "modeldeployments", "-n", tenant, "-o", "name")
        assert code == 0 and "modeldeployment.worker.gpustack.ai/qwen-chat" in out, (user, out)
    code, out = as_user(
        cluster, "bob", "delete", "modeldeployment", "qwen-chat", "-n", tenant, "--wait=false"
    )
    assert code != 0 and "forbidden" in out.lower(), out
    code, out = as_user(
        cluster, "alice", "delete", "modeldeployment", "qwen-chat", "-n", tenant, "--wait=false"
    )
    assert code == 0, out


def test_input_kinds_are_read_only_and_namespaces_stay_apart(cluster: Cluster, tenant: str) -> None:
    pool_binding = {
        "apiVersion": f"{GROUP}/v1",
        "kind": "KVCachePoolBinding",
        "metadata": {"name": "b", "namespace": tenant},
        "spec": {},
    }
    for user in ("alice", "bob"):
        code, out = as_user(cluster, user, "get", "kvcachepoolbindings", "-n", tenant)
        assert code == 0, (user, out)
        code, out = as_user(cluster, user, "create", "-f", "-", stdin=json.dumps(pool_binding))
        assert code != 0 and "forbidden" in out.lower(), (user, out)
        code, out = as_user(cluster, user, "get", "modeldeployments", "-n", "default")
        assert code != 0 and "forbidden" in out.lower(), (user, out)
