"""deploy/: the API server accepts every manifest, and the shipped RBAC is exactly enough.

* Every object of ``kubectl kustomize deploy/<dir>`` (every kustomization under deploy/, the CRDs
  and the webhook among them) passes a server-side dry run (``dryRun=All``, strict field
  validation), and nothing is persisted.
* The ServiceAccount, ClusterRoles, Roles and bindings, applied for real, allow ``get``, ``list``
  and ``watch`` on the four input kinds and on the Settings ConfigMap (by name: the Pod hooks'
  watch-fed cache), and for self-managed certificates get/update of the
  one Secret (shipped empty: no ``create``, which cannot be limited by name, and no ``patch``)
  and get/patch of the two webhook configurations by name, and nothing more
  (SubjectAccessReview).
* The server, authenticated as that ServiceAccount (a TokenRequest token), answers reviews that
  need every read; before the RBAC exists the same reviews are internal errors, not verdicts.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from .controlplane import APIError, ControlPlane, load_yaml_documents
from .webhook_fixtures import (
    GROUP,
    SCOPE_LABEL,
    SETTLE_SECONDS,
    VERSION,
    InstalledWebhooks,
    WebhookProcess,
    create_inputs,
    create_namespace,
    delete_inputs,
    deployment,
    labelled_pod,
    scoped_configurations,
    token_kubeconfig,
    wait_until_called,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
DEPLOY = REPO_ROOT / "deploy"
SYSTEM_NAMESPACE = "gpustack-system"
SERVICE_ACCOUNT = f"system:serviceaccount:{SYSTEM_NAMESPACE}:gpustack-webhook"
FIELD_MANAGER = "gpustack-deploy-test"


def kustomize(directory: Path) -> list[dict[str, Any]]:
    """The objects ``kubectl kustomize`` builds from ``directory``.

    Without kubectl, the listed resources are loaded as they are (the manifests name their
    namespace explicitly, so the result is the same but for kustomize's common labels).
    """
    kubectl = shutil.which("kubectl")
    if kubectl:
        out = subprocess.run(
            [kubectl, "kustomize", str(directory)],
            check=True,
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout
        return [dict(doc) for doc in YAML(typ="safe", pure=True).load_all(out) if doc]
    kustomization = load_yaml_documents(directory / "kustomization.yaml")[0]
    return [
        doc for name in kustomization["resources"] for doc in load_yaml_documents(directory / name)
    ]


_DISCOVERY: dict[str, dict[str, tuple[str, bool]]] = {}


def rest_path(cp: ControlPlane, obj: dict[str, Any]) -> str:
    """The object's REST path, from the API server's discovery (so any kind deploy/ ships)."""
    api_version = obj["apiVersion"]
    prefix = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    if api_version not in _DISCOVERY:
        _, listing = cp.request("GET", prefix)
        _DISCOVERY[api_version] = {
            r["kind"]: (r["name"], bool(r["namespaced"]))
            for r in listing["resources"]
            if "/" not in r["name"]
        }
    plural, namespaced = _DISCOVERY[api_version][obj["kind"]]
    name = obj["metadata"]["name"]
    if namespaced:
        namespace = obj["metadata"].get("namespace") or "default"
        return f"{prefix}/namespaces/{namespace}/{plural}/{name}"
    return f"{prefix}/{plural}/{name}"


def apply(cp: ControlPlane, obj: dict[str, Any], *, dry_run: bool) -> dict[str, Any]:
    query = {"fieldManager": FIELD_MANAGER, "force": "true", "fieldValidation": "Strict"}
    if dry_run:
        query["dryRun"] = "All"
    _, stored = cp.request(
        "PATCH", rest_path(cp, obj), obj, query=query, content_type="application/apply-patch+yaml"
    )
    assert isinstance(stored, dict)
    return stored


def delete(cp: ControlPlane, obj: dict[str, Any]) -> None:
    try:
        cp.request("DELETE", rest_path(cp, obj))
    except APIError as exc:
        if exc.status != 404:
            raise


@pytest.fixture(scope="module")
def system_namespace(control_plane: ControlPlane) -> str:
    create_namespace(control_plane, SYSTEM_NAMESPACE, {})
    return SYSTEM_NAMESPACE


def test_every_manifest_passes_a_server_side_dry_run(
    control_plane: ControlPlane, system_namespace: str
) -> None:
    directories = sorted(p.parent for p in DEPLOY.glob("*/kustomization.yaml"))
    assert {DEPLOY / "crds", DEPLOY / "webhook"} <= set(directories)
    objects = [o for directory in directories for o in kustomize(directory)]
    # CRDs first, then Namespaces: what the other objects need to exist.
    objects.sort(key=lambda o: {"CustomResourceDefinition": 0, "Namespace": 1}.get(o["kind"], 2))
    kinds = {o["kind"] for o in objects}
    assert {
        "CustomResourceDefinition",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "Deployment",
        "PodDisruptionBudget",
        "Service",
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    } <= kinds
    problems = []
    for obj in objects:
        try:
            stored = apply(control_plane, obj, dry_run=True)
        except APIError as exc:
            problems.append(f"{obj['kind']} {obj['metadata']['name']}: {exc}")
            continue
        assert stored["kind"] == obj["kind"]
    assert not problems, "\n".join(problems)
    # A dry run persists nothing.
    deployment_obj = next(o for o in objects if o["kind"] == "Deployment")
    with pytest.raises(APIError) as info:
        control_plane.request("GET", rest_path(control_plane, deployment_obj))
    assert info.value.status == 404


def access(
    cp: ControlPlane,
    verb: str,
    resource: str,
    *,
    group: str = GROUP,
    namespace: str = "",
    name: str = "",
    subresource: str = "",
) -> bool:
    attributes = {
        "verb": verb,
        "group": group,
        "resource": resource,
        "namespace": namespace,
        "name": name,
        "subresource": subresource,
    }
    _, review = cp.request(
        "POST",
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": SERVICE_ACCOUNT,
                "groups": [
                    "system:serviceaccounts",
                    f"system:serviceaccounts:{SYSTEM_NAMESPACE}",
                    "system:authenticated",
                ],
                "resourceAttributes": {k: v for k, v in attributes.items() if v},
            },
        },
    )
    return bool(review["status"].get("allowed"))


@pytest.fixture(scope="module")
def identity(control_plane: ControlPlane, system_namespace: str) -> Iterator[list[dict[str, Any]]]:
    """The ServiceAccount applied for real; yields the RBAC objects (not yet applied) and
    removes everything afterwards."""
    objects = kustomize(DEPLOY / "webhook")
    account = next(o for o in objects if o["kind"] == "ServiceAccount")
    rbac = [
        o
        for o in objects
        if o["kind"] in ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
    ]
    apply(control_plane, account, dry_run=False)
    try:
        yield rbac
    finally:
        for obj in [*rbac, account]:
            delete(control_plane, obj)


def service_account_kubeconfig(cp: ControlPlane, path: Path) -> Path:
    """A kubeconfig authenticating as the webhook's ServiceAccount (a TokenRequest token)."""
    return token_kubeconfig(cp, SYSTEM_NAMESPACE, "gpustack-webhook", path)


def _create_md(cp: ControlPlane, body: dict[str, Any]) -> dict[str, Any]:
    ns = body["metadata"]["namespace"]
    _, stored = cp.request(
        "POST", f"/apis/{GROUP}/{VERSION}/namespaces/{ns}/modeldeployments", body
    )
    assert isinstance(stored, dict)
    return stored


def test_the_shipped_rbac_is_exactly_enough(
    control_plane: ControlPlane, identity: list[dict[str, Any]], tmp_path: Path
) -> None:
    cp = control_plane
    scope = uuid.uuid4().hex[:8]
    namespace = f"wh-{scope}"
    create_namespace(cp, namespace, {SCOPE_LABEL: scope})
    instance_type, binding, _ = create_inputs(cp, scope, namespace)
    kubeconfig = service_account_kubeconfig(cp, tmp_path / "kubeconfig")
    server = WebhookProcess(
        kubeconfig=kubeconfig, ca=cp.ca, namespace=SYSTEM_NAMESPACE, workdir=tmp_path / "server"
    )
    server.start()
    try:
        with InstalledWebhooks(cp, scoped_configurations(scope), server.port):
            wait_until_called(cp, namespace, instance_type)
            # No RBAC yet: the reads are forbidden, so the review is an internal error.
            with pytest.raises(APIError) as info:
                _create_md(cp, deployment(f"md-{scope}", namespace, instance_type))
            status = json.loads(info.value.body)
            assert status["code"] == 500, status
            assert "gpustack-settings" in status["message"]
            assert "403" in status["message"]

            # Settings readable (the Role), the input kinds not yet (the ClusterRole): a failed
            # read is reported where the rule asked, never as a verdict on the object.
            namespaced = [o for o in identity if o["kind"] in ("Role", "RoleBinding")]
            for obj in namespaced:
                apply(cp, obj, dry_run=False)
            deadline = time.monotonic() + SETTLE_SECONDS
            while True:
                with pytest.raises(APIError) as info:
                    _create_md(cp, deployment(f"md-{scope}", namespace, instance_type))
                status = json.loads(info.value.body)
                if "gpustack-settings" not in status["message"]:
                    break
                assert time.monotonic() < deadline, status
                time.sleep(0.2)
            assert status["code"] == 500, status
            assert status["reason"] == "InternalError"
            assert [(c["field"], c["reason"]) for c in status["details"]["causes"]] == [
                ("spec.roles[0].instanceType", "InternalError")
            ]
            assert "403" in status["message"]
            with pytest.raises(APIError) as info:
                cp.request(
                    "POST",
                    f"/api/v1/namespaces/{namespace}/pods",
                    labelled_pod(f"pod-{scope}", binding),
                )
            status = json.loads(info.value.body)
            # docs/contract/injection-notes.md B4: the Pod is refused naming the Binding and the
            # read error.
            assert status["code"] == 403, status
            assert binding in status["message"] and "403" in status["message"]

            for obj in identity:
                apply(cp, obj, dry_run=False)

            # With the shipped RBAC (picked up within moments) the same request is judged.
            deadline = time.monotonic() + SETTLE_SECONDS
            while True:
                try:
                    stored = _create_md(cp, deployment(f"md-{scope}", namespace, instance_type))
                    break
                except APIError as exc:
                    assert time.monotonic() < deadline, exc.body
                    time.sleep(0.2)
            assert str(stored["spec"]["roles"][0]["resources"]["accelerator"]) == "1"
            pod_body = labelled_pod(f"pod-{scope}", binding)
            _, pod = cp.request("POST", f"/api/v1/namespaces/{namespace}/pods", pod_body)
            assert "kvcache.gpustack.ai/injected" in pod["metadata"]["annotations"]
            cp.request(
                "DELETE", f"/api/v1/namespaces/{namespace}/pods/{pod_body['metadata']['name']}"
            )
    finally:
        server.close()
        delete_inputs(cp, scope)

    allowed = [
        (verb, resource, ns)
        for verb in ("get", "list", "watch")
        for resource, ns in (
            ("instancetypes", ""),
            ("kvcachepools", ""),
            ("kvcachebackends", ""),
            ("kvcachepoolbindings", "team-a"),
        )
    ]
    for verb, resource, ns in allowed:
        assert access(cp, verb, resource, namespace=ns), (verb, resource)
    for verb in ("get", "list", "watch"):
        assert access(
            cp, verb, "configmaps", group="", namespace=SYSTEM_NAMESPACE, name="gpustack-settings"
        ), verb
    registrations = "admissionregistration.k8s.io"
    for verb in ("get", "update"):
        assert access(
            cp, verb, "secrets", group="", namespace=SYSTEM_NAMESPACE, name="gpustack-webhook-tls"
        ), verb
    for verb in ("get", "patch"):
        for resource, name in (
            ("mutatingwebhookconfigurations", "gpustack-worker-mutation"),
            ("validatingwebhookconfigurations", "gpustack-worker-validation"),
        ):
            assert access(cp, verb, resource, group=registrations, name=name), (verb, resource)
    denied = [
        # The Secret is shipped: creating Secrets (any name: create cannot be limited to one)
        # is not granted, nor patching the one the server rewrites with update.
        dict(verb="create", resource="secrets", group="", namespace=SYSTEM_NAMESPACE),
        dict(
            verb="create",
            resource="secrets",
            group="",
            namespace=SYSTEM_NAMESPACE,
            name="gpustack-webhook-tls",
        ),
        dict(
            verb="patch",
            resource="secrets",
            group="",
            namespace=SYSTEM_NAMESPACE,
            name="gpustack-webhook-tls",
        ),
        dict(
            verb="delete",
            resource="secrets",
            group="",
            namespace=SYSTEM_NAMESPACE,
            name="gpustack-webhook-tls",
        ),
        dict(verb="get", resource="secrets", group="", namespace=SYSTEM_NAMESPACE, name="other"),
        dict(verb="list", resource="secrets", group="", namespace=SYSTEM_NAMESPACE),
        dict(verb="create", resource="secrets", group="", namespace="team-a"),
        dict(
            verb="get",
            resource="mutatingwebhookconfigurations",
            group=registrations,
            name="someone-elses",
        ),
        dict(verb="list", resource="validatingwebhookconfigurations", group=registrations),
        # The caBundle is patched; the configurations are never rewritten whole.
        dict(
            verb="update",
            resource="mutatingwebhookconfigurations",
            group=registrations,
            name="gpustack-worker-mutation",
        ),
        dict(
            verb="delete",
            resource="validatingwebhookconfigurations",
            group=registrations,
            name="gpustack-worker-validation",
        ),
        dict(verb="update", resource="kvcachepools"),
        dict(verb="delete", resource="kvcachepoolbindings", namespace="team-a"),
        dict(verb="patch", resource="kvcachepools", subresource="status"),
        dict(verb="get", resource="modeldeployments", namespace="team-a"),
        dict(verb="get", resource="modelartifacts", namespace="team-a"),
        dict(verb="get", resource="configmaps", group="", namespace=SYSTEM_NAMESPACE, name="x"),
        dict(verb="list", resource="configmaps", group="", namespace=SYSTEM_NAMESPACE),
        dict(verb="watch", resource="configmaps", group="", namespace=SYSTEM_NAMESPACE),
        dict(
            verb="get",
            resource="configmaps",
            group="",
            namespace="team-a",
            name="gpustack-settings",
        ),
        dict(verb="get", resource="secrets", group="", namespace=SYSTEM_NAMESPACE),
        dict(verb="create", resource="pods", group="", namespace="team-a"),
    ]
    for attributes in denied:
        assert not access(cp, **attributes), attributes
