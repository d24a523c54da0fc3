"""The project's CRDs and Kueue's, served by a real kube-apiserver.

These tests pin what the API server itself enforces from the shipped CRD schemas (defaults,
bounds, enums, list-map keys, strict unknown-field rejection) and the server-side-apply
semantics the controller relies on for Kueue Workload status, plus the webhook-by-URL plumbing
that the admission tests build on.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio.client.exceptions import ApiException

from .controlplane import (
    KUEUE_CRD_FILES,
    CertificateAuthority,
    ControlPlane,
    load_yaml_documents,
    project_crd_files,
)

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

GROUP = "worker.gpustack.ai"
VERSION = "v1"
KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_VERSION = "v1beta2"
NAMESPACE = "default"
APPLY = "application/apply-patch+yaml"

# Kinds the project's CRDs must define (docs/contract/api-notes.md §1, §11;
# docs/contract/spec-decisions.md D1).
PROJECT_KINDS = {
    "ModelDeployment": "Namespaced",
    "InstanceType": "Cluster",
    "KVCachePoolBinding": "Namespaced",
    "KVCachePool": "Cluster",
    "KVCacheBackend": "Cluster",
    "ModelArtifact": "Namespaced",
}


def _unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


async def _resolve_short_name(api: k8s.ApiClient, short_name: str) -> str:
    """The plural resource name behind ``short_name`` in worker.gpustack.ai/v1 (discovery)."""
    resources = await k8s.CustomObjectsApi(api).get_api_resources(GROUP, VERSION)
    for resource in resources.resources:
        if short_name in (resource.short_names or []):
            return str(resource.name)
    raise AssertionError(f"no resource with short name {short_name!r} in {GROUP}/{VERSION}")


def _minimal_deployment(name: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ModelDeployment",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "model": {"name": "Qwen/Qwen3-8B"},
            "engine": {"name": "vLLM", "image": "vllm/vllm-openai:v0.25.1"},
            "roles": [{"name": "server", "instanceType": "gpustack-nvidia-a10g-linux-amd64"}],
        },
    }


def _causes(exc: ApiException) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    status: dict[str, Any] = json.loads(exc.body or b"{}")
    return status, list(status.get("details", {}).get("causes", []))


# --------------------------------------------------------------------------------------------
# CRDs
# --------------------------------------------------------------------------------------------


async def test_project_and_kueue_crds_are_established(k8s_client: k8s.ApiClient) -> None:
    ext = k8s.ApiextensionsV1Api(k8s_client)
    crds = {crd.metadata.name: crd for crd in (await ext.list_custom_resource_definition()).items}

    project = [
        doc
        for path in project_crd_files()
        for doc in load_yaml_documents(path)
        if doc.get("kind") == "CustomResourceDefinition"
    ]
    kinds = {doc["spec"]["names"]["kind"]: doc for doc in project}
    assert set(PROJECT_KINDS) <= set(kinds), f"deploy/crds lacks {set(PROJECT_KINDS) - set(kinds)}"
    for kind, scope in PROJECT_KINDS.items():
        assert kinds[kind]["spec"]["group"] == GROUP
        assert kinds[kind]["spec"]["scope"] == scope, kind

    expected = {str(doc["metadata"]["name"]) for doc in project}
    expected |= {
        f"{name.removeprefix('kueue.x-k8s.io_').removesuffix('.yaml')}.{KUEUE_GROUP}"
        for name in KUEUE_CRD_FILES
    }
    for name in sorted(expected):
        assert name in crds, f"CRD {name} not installed"
        conditions = {c.type: c.status for c in crds[name].status.conditions or []}
        assert conditions.get("Established") == "True", (name, conditions)

    served = await k8s.CustomObjectsApi(k8s_client).get_api_resources(GROUP, VERSION)
    by_kind = {r.kind: r for r in served.resources if "/" not in r.name}
    assert set(PROJECT_KINDS) <= set(by_kind)
    md = by_kind["ModelDeployment"]
    assert md.namespaced and "md" in (md.short_names or [])
    assert "gpustack" in (md.categories or [])
    assert any(r.name == f"{md.name}/status" for r in served.resources)


async def test_kueue_kinds_are_served(k8s_client: k8s.ApiClient) -> None:
    objects = k8s.CustomObjectsApi(k8s_client)
    for version in ("v1beta1", KUEUE_VERSION):
        served = await objects.get_api_resources(KUEUE_GROUP, version)
        kinds = {r.kind for r in served.resources}
        assert {"Workload", "LocalQueue", "ClusterQueue", "AdmissionCheck"} <= kinds, version


# --------------------------------------------------------------------------------------------
# ModelDeployment schema enforced by the API server
# --------------------------------------------------------------------------------------------


async def test_minimal_deployment_round_trips_with_defaults(k8s_client: k8s.ApiClient) -> None:
    plural = await _resolve_short_name(k8s_client, "md")
    objects = k8s.CustomObjectsApi(k8s_client)
    name = _unique("md-min")
    created = await objects.create_namespaced_custom_object(
        GROUP, VERSION, NAMESPACE, plural, _minimal_deployment(name)
    )
    try:
        fetched = await objects.get_namespaced_custom_object(
            GROUP, VERSION, NAMESPACE, plural, name
        )
        for obj in (created, fetched):
            assert obj["kind"] == "ModelDeployment"
            spec = obj["spec"]
            assert spec["model"] == {"name": "Qwen/Qwen3-8B"}
            assert spec["engine"]["name"] == "vLLM"
            (role,) = spec["roles"]
            assert role["name"] == "server"
            assert role["kind"] == "Server"
            assert role["replicas"] == 1
            assert role["size"] == 1
            assert role["instanceType"] == "gpustack-nvidia-a10g-linux-amd64"
        assert fetched["metadata"]["uid"] == created["metadata"]["uid"]
    finally:
        await objects.delete_namespaced_custom_object(GROUP, VERSION, NAMESPACE, plural, name)


def _duplicate_role(spec: dict[str, Any]) -> None:
    spec["roles"].append(dict(spec["roles"][0]))


def _set_role(field: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(spec: dict[str, Any]) -> None:
        spec["roles"][0][field] = value

    return mutate


def _bad_engine(spec: dict[str, Any]) -> None:
    spec["engine"]["name"] = "TGI"


REFUSALS: list[tuple[str, Callable[[dict[str, Any]], None], str, str]] = [
    # (id, mutation, field path the server names, cause reason)
    ("duplicate-role-name", _duplicate_role, "spec.roles[1]", "FieldValueDuplicate"),
    ("replicas-1025", _set_role("replicas", 1025), "spec.roles[0].replicas", "FieldValueInvalid"),
    ("size-65", _set_role("size", 65), "spec.roles[0].size", "FieldValueInvalid"),
    ("engine-TGI", _bad_engine, "spec.engine.name", "FieldValueNotSupported"),
]


@pytest.mark.parametrize(
    ("mutate", "field", "reason"),
    [pytest.param(m, f, r, id=i) for i, m, f, r in REFUSALS],
)
async def test_schema_refusals_are_field_causes(
    k8s_client: k8s.ApiClient,
    mutate: Callable[[dict[str, Any]], None],
    field: str,
    reason: str,
) -> None:
    plural = await _resolve_short_name(k8s_client, "md")
    body = _minimal_deployment(_unique("md-bad"))
    mutate(body["spec"])
    with pytest.raises(ApiException) as err:
        await k8s.CustomObjectsApi(k8s_client).create_namespaced_custom_object(
            GROUP, VERSION, NAMESPACE, plural, body
        )
    assert err.value.status == 422, err.value.body
    status, causes = _causes(err.value)
    assert status["reason"] == "Invalid"
    assert (field, reason) in {(c.get("field"), c.get("reason")) for c in causes}, causes


async def test_unknown_role_field_refused_under_strict_validation(
    k8s_client: k8s.ApiClient,
) -> None:
    # A real API server answers a strict-decoding failure with 400 BadRequest and names the
    # field path in the message (it carries no details.causes), unlike schema violations (422).
    plural = await _resolve_short_name(k8s_client, "md")
    objects = k8s.CustomObjectsApi(k8s_client)
    body = _minimal_deployment(_unique("md-strict"))
    body["spec"]["roles"][0]["template"] = {"spec": {"containers": []}}
    with pytest.raises(ApiException) as err:
        await objects.create_namespaced_custom_object(
            GROUP, VERSION, NAMESPACE, plural, body, field_validation="Strict"
        )
    assert err.value.status == 400, err.value.body
    status, _ = _causes(err.value)
    assert status["reason"] == "BadRequest"
    assert 'unknown field "spec.roles[0].template"' in status["message"]

    # Without strict validation the structural schema prunes the field instead.
    created = await objects.create_namespaced_custom_object(
        GROUP, VERSION, NAMESPACE, plural, body, field_validation="Ignore"
    )
    try:
        assert "template" not in created["spec"]["roles"][0]
    finally:
        await objects.delete_namespaced_custom_object(
            GROUP, VERSION, NAMESPACE, plural, body["metadata"]["name"]
        )


# --------------------------------------------------------------------------------------------
# Kueue Workload status through server-side apply
# --------------------------------------------------------------------------------------------


def _workload(name: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{KUEUE_GROUP}/{KUEUE_VERSION}",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "queueName": "gpustack-fnv64-0123456789abcdef",
            "podSets": [
                {
                    "name": "server",
                    "count": 1,
                    "template": {
                        "spec": {
                            "containers": [{"name": "main", "image": "vllm/vllm-openai:v0.25.1"}]
                        }
                    },
                }
            ],
        },
    }


def _check_verdict(workload: str, check: str, state: str, message: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{KUEUE_GROUP}/{KUEUE_VERSION}",
        "kind": "Workload",
        "metadata": {"name": workload, "namespace": NAMESPACE},
        "status": {
            "admissionChecks": [
                {"name": check, "state": state, "lastTransitionTime": _now(), "message": message}
            ]
        },
    }


async def test_workload_status_server_side_apply_by_field_manager(
    k8s_client: k8s.ApiClient,
) -> None:
    objects = k8s.CustomObjectsApi(k8s_client)
    name = _unique("wl")
    await objects.create_namespaced_custom_object(
        KUEUE_GROUP, KUEUE_VERSION, NAMESPACE, "workloads", _workload(name)
    )
    try:

        async def apply(manager: str, check: str, state: str, message: str) -> Any:
            return await objects.patch_namespaced_custom_object_status(
                KUEUE_GROUP,
                KUEUE_VERSION,
                NAMESPACE,
                "workloads",
                name,
                body=_check_verdict(name, check, state, message),
                field_manager=manager,
                force=True,
                _content_type=APPLY,
            )

        await apply("gpustack-admission-check", "gpustack-model-deployment-joint", "Pending", "")
        await apply("other-check-controller", "other-check", "Ready", "fine")
        stored = await apply(
            "gpustack-admission-check", "gpustack-model-deployment-joint", "Ready", "all admitted"
        )

        checks = {c["name"]: c for c in stored["status"]["admissionChecks"]}
        assert set(checks) == {"gpustack-model-deployment-joint", "other-check"}
        assert checks["gpustack-model-deployment-joint"]["state"] == "Ready"
        assert checks["gpustack-model-deployment-joint"]["message"] == "all admitted"
        assert checks["other-check"]["state"] == "Ready"
        # The spec is untouched by status applies.
        assert stored["spec"]["podSets"][0]["name"] == "server"

        managers = {
            (m["manager"], m["operation"], m.get("subresource"))
            for m in stored["metadata"]["managedFields"]
        }
        assert ("gpustack-admission-check", "Apply", "status") in managers
        assert ("other-check-controller", "Apply", "status") in managers

    finally:
        await objects.delete_namespaced_custom_object(
            KUEUE_GROUP, KUEUE_VERSION, NAMESPACE, "workloads", name
        )


# --------------------------------------------------------------------------------------------
# Webhooks by URL
# --------------------------------------------------------------------------------------------


@pytest.fixture
async def denying_webhook(
    webhook_ssl_context: Any,
) -> AsyncIterator[tuple[int, list[Mapping[str, Any]]]]:
    """A local validating webhook that refuses every request with a 422 field cause."""
    seen: list[Mapping[str, Any]] = []

    async def review(request: web.Request) -> web.Response:
        payload = await request.json()
        seen.append(payload["request"])
        return web.json_response(
            {
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "response": {
                    "uid": payload["request"]["uid"],
                    "allowed": False,
                    "status": {
                        "code": 422,
                        "reason": "Invalid",
                        "message": "data.forbidden: refused by the test webhook",
                        "details": {
                            "causes": [
                                {
                                    "reason": "FieldValueForbidden",
                                    "field": "data.forbidden",
                                    "message": "refused by the test webhook",
                                }
                            ]
                        },
                    },
                },
            }
        )

    app = web.Application()
    app.router.add_post("/validate-configmap", review)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=webhook_ssl_context)
    await site.start()
    port = int(runner.addresses[0][1])
    try:
        yield port, seen
    finally:
        await runner.cleanup()


async def test_webhook_by_url_is_called_with_test_ca(
    k8s_client: k8s.ApiClient,
    control_plane: ControlPlane,
    envtest_ca: CertificateAuthority,
    install_webhooks: Callable[[Mapping[str, Any], int], dict[str, Any]],
    denying_webhook: tuple[int, list[Mapping[str, Any]]],
) -> None:
    port, seen = denying_webhook
    label = _unique("webhook-test")
    stored = install_webhooks(
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": label},
            "webhooks": [
                {
                    "name": "configmaps.test.gpustack.ai",
                    "clientConfig": {
                        "service": {
                            "name": "gpustack-webhook",
                            "namespace": "gpustack-system",
                            "path": "/validate-configmap",
                        }
                    },
                    "rules": [
                        {
                            "apiGroups": [""],
                            "apiVersions": ["v1"],
                            "operations": ["CREATE"],
                            "resources": ["configmaps"],
                        }
                    ],
                    "objectSelector": {"matchLabels": {"test.gpustack.ai/webhook": label}},
                    "sideEffects": "None",
                    "admissionReviewVersions": ["v1"],
                    "failurePolicy": "Fail",
                    "timeoutSeconds": 5,
                }
            ],
        },
        port,
    )
    client_config = stored["webhooks"][0]["clientConfig"]
    assert client_config["url"] == f"https://127.0.0.1:{port}/validate-configmap"
    assert client_config["caBundle"] == envtest_ca.ca_bundle
    assert "service" not in client_config

    core = k8s.CoreV1Api(k8s_client)
    body = k8s.V1ConfigMap(
        metadata=k8s.V1ObjectMeta(
            generate_name="webhook-", labels={"test.gpustack.ai/webhook": label}
        ),
        data={"forbidden": "yes"},
    )
    # The API server picks up new webhook configurations asynchronously: retry until it calls us.
    deadline = asyncio.get_running_loop().time() + 15
    while True:
        try:
            created = await core.create_namespaced_config_map(NAMESPACE, body)
        except ApiException as exc:
            assert exc.status == 422, exc.body
            status, causes = _causes(exc)
            assert status["reason"] == "Invalid"
            assert [(c["field"], c["reason"]) for c in causes] == [
                ("data.forbidden", "FieldValueForbidden")
            ]
            break
        await core.delete_namespaced_config_map(created.metadata.name, NAMESPACE)
        assert asyncio.get_running_loop().time() < deadline, "webhook never called"
        await asyncio.sleep(0.2)
    assert seen and seen[-1]["kind"]["kind"] == "ConfigMap"
    assert seen[-1]["userInfo"]["groups"][:1] == ["system:masters"]


async def test_kubeconfig_loads_with_kubernetes_asyncio(kubeconfig_path: Path) -> None:
    from kubernetes_asyncio import config as k8s_config

    configuration = k8s.Configuration()
    await k8s_config.load_kube_config(
        config_file=str(kubeconfig_path), client_configuration=configuration
    )
    async with k8s.ApiClient(configuration) as api:
        version = await k8s.VersionApi(api).get_code()
        assert version.major == "1"
        # RBAC is the authorizer: the admin is allowed everything through system:masters.
        review = await k8s.AuthorizationV1Api(api).create_self_subject_access_review(
            k8s.V1SelfSubjectAccessReview(
                spec=k8s.V1SelfSubjectAccessReviewSpec(
                    resource_attributes=k8s.V1ResourceAttributes(verb="create", resource="pods")
                )
            )
        )
        assert review.status.allowed


async def test_rbac_authorizes_other_identities(control_plane: ControlPlane) -> None:
    from kubernetes_asyncio import config as k8s_config

    user = _unique("jane")
    kubeconfig = control_plane.user_kubeconfig(user)
    async with await k8s_config.new_client_from_config(config_file=str(kubeconfig)) as api:
        with pytest.raises(ApiException) as err:
            await k8s.CoreV1Api(api).list_namespaced_config_map(NAMESPACE)
        assert err.value.status == 403
        status, _ = _causes(err.value)
        assert status["reason"] == "Forbidden"
        assert f'User "{user}"' in status["message"]
