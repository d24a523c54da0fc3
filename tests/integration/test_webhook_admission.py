"""End-to-end admission: the API server calls ``python -m gpustack_webhook`` over TLS.

The server runs as a process on 127.0.0.1 with a serving certificate from the test CA and reads
through an admin kubeconfig; the registrations are deploy/webhook/webhooks.yaml, pointed at it
by URL and scoped to this module's namespaces. Every object a rule reads (InstanceType, Binding,
pool, backend, the Settings ConfigMap) is a real object the server GETs live.
"""

from __future__ import annotations

import asyncio
import copy
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, cast

import pytest
import pytest_asyncio
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio.client.exceptions import ApiException
from prometheus_client.parser import text_string_to_metric_families

from .controlplane import ControlPlane
from .webhook_fixtures import (
    GROUP,
    INJECT_LABEL,
    SCOPE_LABEL,
    VERSION,
    InstalledWebhooks,
    WebhookProcess,
    create_cluster_object,
    create_inputs,
    create_namespace,
    delete_inputs,
    deployment,
    labelled_pod,
    scoped_configurations,
    wait_until_called,
)

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

T = TypeVar("T")

INJECTED = "kvcache.gpustack.ai/injected"
CLIENT_CONFIG = "kvcache.gpustack.ai/client-config"


def _unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@dataclass
class Env:
    """What the module's server and registrations were set up with."""

    control_plane: ControlPlane
    server: WebhookProcess
    namespace: str  # where the test objects live (in scope of the registrations)
    system_namespace: str  # the server's own namespace (Settings)
    instance_type: str  # acceleratable, capacity 16
    binding: str  # Binding → pool → backend, ready for injection
    pool: str


@pytest.fixture(scope="module")
def env(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    scope = uuid.uuid4().hex[:8]
    namespace, system_namespace = f"wh-{scope}", f"wh-{scope}-system"
    create_namespace(control_plane, namespace, {SCOPE_LABEL: scope})
    create_namespace(control_plane, system_namespace, {})
    control_plane.request(
        "POST",
        f"/api/v1/namespaces/{system_namespace}/configmaps",
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "gpustack-settings"},
            "data": {"instance-privileged-allowed": "false"},
        },
    )
    instance_type, binding, pool = create_inputs(control_plane, scope, namespace)
    server = WebhookProcess(
        kubeconfig=control_plane.kubeconfig,
        ca=control_plane.ca,
        namespace=system_namespace,
        workdir=tmp_path_factory.mktemp("webhook"),
    )
    server.start()
    try:
        with InstalledWebhooks(control_plane, scoped_configurations(scope), server.port):
            wait_until_called(control_plane, namespace, instance_type)
            yield Env(
                control_plane,
                server,
                namespace,
                system_namespace,
                instance_type,
                binding,
                pool,
            )
    finally:
        server.close()
        delete_inputs(control_plane, scope)


@pytest_asyncio.fixture(loop_scope="session")
async def api(k8s_client: k8s.ApiClient) -> AsyncIterator[k8s.CustomObjectsApi]:
    yield k8s.CustomObjectsApi(k8s_client)


def _status(exc: ApiException) -> dict[str, Any]:
    body = json.loads(exc.body or b"{}")
    assert isinstance(body, dict)
    return body


def _causes(exc: ApiException) -> list[tuple[str, str]]:
    status = _status(exc)
    return [(c["field"], c["reason"]) for c in status.get("details", {}).get("causes", [])]


async def refused(call: Awaitable[T]) -> ApiException:
    """The API server's refusal of ``call`` (which must be refused)."""
    with pytest.raises(ApiException) as info:
        await call
    return info.value


def create_pod(core: k8s.CoreV1Api, namespace: str, body: dict[str, Any]) -> Awaitable[Any]:
    """POST a Pod given as a plain dict (the client serialises dicts as they are)."""
    return core.create_namespaced_pod(namespace, cast(k8s.V1Pod, body))


async def create_md(api: k8s.CustomObjectsApi, body: dict[str, Any]) -> dict[str, Any]:
    ns = body["metadata"]["namespace"]
    out = await api.create_namespaced_custom_object(GROUP, VERSION, ns, "modeldeployments", body)
    assert isinstance(out, dict)
    return out


# ---- ModelDeployment -----------------------------------------------------------------------


async def test_create_gets_the_accelerator_default(env: Env, api: k8s.CustomObjectsApi) -> None:
    stored = await create_md(api, deployment(_unique("md"), env.namespace, env.instance_type))
    role = stored["spec"]["roles"][0]
    assert str(role["resources"]["accelerator"]) == "1"
    # A stated count is never touched.
    stated = await create_md(
        api,
        deployment(_unique("md"), env.namespace, env.instance_type, resources={"accelerator": 4}),
    )
    assert str(stated["spec"]["roles"][0]["resources"]["accelerator"]) == "4"


async def test_invalid_deployment_is_refused_with_field_causes(
    env: Env, api: k8s.CustomObjectsApi
) -> None:
    owned_env = deployment(
        _unique("md"),
        env.namespace,
        env.instance_type,
        env=[{"name": "GPUSTACK_REPLICA_SIZE", "value": "2"}],
        resources={"accelerator": 32},
    )
    exc = await refused(create_md(api, owned_env))
    assert exc.status == 422
    status = _status(exc)
    assert status["reason"] == "Invalid"
    causes = _causes(exc)
    assert ("spec.roles[0].env[0]", "FieldValueInvalid") in causes
    # Read live from the InstanceType: 32 cards is over its capacity of 16.
    assert ("spec.roles[0].resources.accelerator", "FieldValueInvalid") in causes
    assert "16" in status["message"]

    unknown_type = deployment(_unique("md"), env.namespace, f"missing-{uuid.uuid4().hex[:6]}")
    exc = await refused(create_md(api, unknown_type))
    assert exc.status == 422
    assert _causes(exc) == [("spec.roles[0].instanceType", "FieldValueNotFound")]


async def test_a_role_name_with_capitals_is_told_the_rule_in_words(
    env: Env, api: k8s.CustomObjectsApi
) -> None:
    """Issue 37 item 8 on the real API server: the mutating webhook answers before the CRD's own
    pattern check, whose message is the bare regular expression."""
    capitals = deployment(_unique("md"), env.namespace, env.instance_type)
    capitals["spec"]["roles"][0]["name"] = "Server"
    exc = await refused(create_md(api, capitals))
    assert exc.status == 422
    assert ("spec.roles[0].name", "FieldValueInvalid") in _causes(exc)
    message = _status(exc)["message"]
    assert "lower-case letters, digits and '-'" in message, message
    assert "'server' would do" in message
    assert "[a-z0-9]" not in message


async def test_a_create_without_a_name_is_named_before_the_validating_webhook(
    env: Env, api: k8s.CustomObjectsApi
) -> None:
    """What the command line's name rules stand on (docs/decisions.md): the API server refuses
    a create naming neither ``name`` nor ``generateName`` itself, and names one from
    ``generateName`` before the validating webhook, which judges the generated name."""
    nameless = deployment("", env.namespace, env.instance_type)
    del nameless["metadata"]["name"]
    exc = await refused(create_md(api, nameless))
    assert exc.status == 422
    assert ("metadata.name", "FieldValueRequired") in _causes(exc)

    generated = deployment("", env.namespace, env.instance_type)
    del generated["metadata"]["name"]
    generated["metadata"]["generateName"] = "gen-"
    stored = await create_md(api, generated)
    name = stored["metadata"]["name"]
    assert name.startswith("gen-") and len(name) == len("gen-") + 5

    # 52 + 5 generated characters + "-server" is 64: the webhook refuses the Service name,
    # which it can only do with the generated name in hand.
    long = deployment("", env.namespace, env.instance_type)
    del long["metadata"]["name"]
    long["metadata"]["generateName"] = "g" * 51 + "-"
    exc = await refused(create_md(api, long))
    assert exc.status == 422
    assert ("spec.roles[0].name", "FieldValueInvalid") in _causes(exc)
    assert "64 characters" in _status(exc)["message"]


async def test_settings_come_from_the_config_map_in_the_servers_namespace(
    env: Env, api: k8s.CustomObjectsApi, k8s_client: k8s.ApiClient
) -> None:
    privileged = deployment(_unique("md"), env.namespace, env.instance_type, privileged=True)
    exc = await refused(create_md(api, privileged))
    assert exc.status == 422
    assert ("spec.roles[0].privileged", "FieldValueForbidden") in _causes(exc)
    assert "instance-privileged-allowed" in _status(exc)["message"]
    core = k8s.CoreV1Api(k8s_client)
    await core.patch_namespaced_config_map(
        "gpustack-settings",
        env.system_namespace,
        {"data": {"instance-privileged-allowed": "true"}},
    )
    try:
        # The server reuses a Settings read for up to --settings-max-age (2 s by default).
        deadline = asyncio.get_running_loop().time() + 10
        while True:
            try:
                stored = await create_md(api, privileged)
                break
            except ApiException as exc:
                assert ("spec.roles[0].privileged", "FieldValueForbidden") in _causes(exc)
                assert asyncio.get_running_loop().time() < deadline, "the edit never applied"
                await asyncio.sleep(0.2)
        assert stored["spec"]["roles"][0]["privileged"] is True
    finally:
        await core.patch_namespaced_config_map(
            "gpustack-settings",
            env.system_namespace,
            {"data": {"instance-privileged-allowed": "false"}},
        )


async def test_update_of_a_frozen_field_is_refused(env: Env, api: k8s.CustomObjectsApi) -> None:
    name = _unique("md")
    await create_md(api, deployment(name, env.namespace, env.instance_type))
    exc = await refused(
        api.patch_namespaced_custom_object(
            GROUP,
            VERSION,
            env.namespace,
            "modeldeployments",
            name,
            {"spec": {"model": {"name": "Qwen/Qwen3-32B"}}},
            _content_type="application/merge-patch+json",
        )
    )
    assert exc.status == 422
    assert _causes(exc) == [("spec.model", "FieldValueInvalid")]
    # An editable field is accepted.
    await api.patch_namespaced_custom_object(
        GROUP,
        VERSION,
        env.namespace,
        "modeldeployments",
        name,
        {"spec": {"engine": {"image": "vllm/vllm-openai:v0.26.0"}}},
        _content_type="application/merge-patch+json",
    )


async def test_update_while_deleting_is_not_blocked_by_a_deleted_instance_type(
    env: Env, api: k8s.CustomObjectsApi
) -> None:
    cp = env.control_plane
    instance_type = _unique("it-gone")
    create_cluster_object(
        cp,
        "instancetypes",
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "InstanceType",
            "metadata": {"name": instance_type},
            "spec": {"acceleratable": True},
            "status": {"detail": {"manufacturer": "nvidia"}, "accelerator": {"capacity": 8}},
        },
    )
    name = _unique("md")
    body = deployment(name, env.namespace, instance_type)
    body["metadata"]["finalizers"] = ["test.gpustack.ai/hold"]
    await create_md(api, body)
    cp.request("DELETE", f"/apis/{GROUP}/{VERSION}/instancetypes/{instance_type}")

    def patch(obj: dict[str, Any]) -> Awaitable[Any]:
        return api.patch_namespaced_custom_object(
            GROUP,
            VERSION,
            env.namespace,
            "modeldeployments",
            name,
            obj,
            _content_type="application/merge-patch+json",
        )

    roles = {"spec": {"roles": [{"name": "server", "instanceType": instance_type, "replicas": 2}]}}
    # Alive, the deployment's update is judged against its (now missing) InstanceType.
    exc = await refused(patch(roles))
    assert ("spec.roles[0].instanceType", "FieldValueNotFound") in _causes(exc)
    # Being deleted, the same update, and then the finalizer removal, go through.
    await api.delete_namespaced_custom_object(
        GROUP, VERSION, env.namespace, "modeldeployments", name
    )
    await patch(roles)
    await patch({"metadata": {"finalizers": None}})
    with pytest.raises(ApiException) as gone:
        await api.get_namespaced_custom_object(
            GROUP, VERSION, env.namespace, "modeldeployments", name
        )
    assert gone.value.status == 404


# ---- Pod injection -------------------------------------------------------------------------


async def test_labelled_pod_gets_the_injection(env: Env, k8s_client: k8s.ApiClient) -> None:
    core = k8s.CoreV1Api(k8s_client)
    name = _unique("pod")
    await create_pod(core, env.namespace, labelled_pod(name, env.binding))
    pod = await core.read_namespaced_pod(name, env.namespace)
    annotations = pod.metadata.annotations
    record = json.loads(annotations[INJECTED])
    assert record["binding"] == env.binding
    assert record["engine"] == "vllm"
    assert record["vehicle"] == "file"
    assert record["domain"] == "team-a-chat"
    client_config = json.loads(annotations[CLIENT_CONFIG])
    assert client_config["master_server_address"] == f"{env.pool}-master.gpustack-system.svc:50051"
    assert client_config["protocol"] == "tcp"
    container = pod.spec.containers[0]
    assert "--kv-transfer-config" in container.args
    assert any(e.name == "MOONCAKE_CONFIG_PATH" for e in container.env)
    assert any(v.name == "gpustack-kvcache-config" for v in pod.spec.volumes)
    await core.delete_namespaced_pod(name, env.namespace, grace_period_seconds=0)


async def test_unlabelled_pod_is_not_touched(env: Env, k8s_client: k8s.ApiClient) -> None:
    core = k8s.CoreV1Api(k8s_client)
    body = labelled_pod(_unique("pod"), None)
    del body["metadata"]["labels"]
    created = await create_pod(core, env.namespace, body)
    assert INJECTED not in (created.metadata.annotations or {})
    await core.delete_namespaced_pod(created.metadata.name, env.namespace, grace_period_seconds=0)


@pytest.mark.parametrize(
    ("binding", "annotations", "names"),
    [
        pytest.param(None, {}, "kvcache.gpustack.ai/binding", id="no-binding"),
        pytest.param("nope", {}, "nope", id="binding-not-found"),
        pytest.param(
            "chat", {"kvcache.gpustack.ai/engine": "vllm-ascend"}, "vllm-ascend", id="bad-engine"
        ),
    ],
)
async def test_refused_pod_is_refused_with_the_reason(
    env: Env,
    k8s_client: k8s.ApiClient,
    binding: str | None,
    annotations: dict[str, str],
    names: str,
) -> None:
    core = k8s.CoreV1Api(k8s_client)
    exc = await refused(
        create_pod(core, env.namespace, labelled_pod(_unique("pod"), binding, **annotations))
    )
    assert exc.status == 403
    status = _status(exc)
    assert status["reason"] == "Forbidden"
    assert "denied the request" in status["message"]
    assert names in status["message"]


async def test_frozen_label_and_annotations_are_refused(
    env: Env, k8s_client: k8s.ApiClient
) -> None:
    core = k8s.CoreV1Api(k8s_client)
    name = _unique("pod")
    await create_pod(core, env.namespace, labelled_pod(name, env.binding))

    def patch(obj: dict[str, Any]) -> Awaitable[Any]:
        return core.patch_namespaced_pod(name, env.namespace, obj)

    exc = await refused(patch({"metadata": {"labels": {INJECT_LABEL: "false"}}}))
    assert exc.status == 422
    assert _causes(exc) == [(f"metadata.labels[{INJECT_LABEL}]", "FieldValueForbidden")]
    exc = await refused(patch({"metadata": {"annotations": {INJECTED: "{}", CLIENT_CONFIG: None}}}))
    assert exc.status == 422
    assert sorted(_causes(exc)) == [
        (f"metadata.annotations[{CLIENT_CONFIG}]", "FieldValueForbidden"),
        (f"metadata.annotations[{INJECTED}]", "FieldValueForbidden"),
    ]
    # Everything else about the Pod stays editable, finalizers included.
    await patch({"metadata": {"labels": {"team": "a"}, "finalizers": ["test.gpustack.ai/x"]}})
    await patch({"metadata": {"finalizers": None}})
    await core.delete_namespaced_pod(name, env.namespace, grace_period_seconds=0)


async def test_the_freeze_covers_the_status_subresource(
    env: Env, k8s_client: k8s.ApiClient
) -> None:
    """``PATCH pods/NAME/status`` writes metadata too: the frozen tenant must not change there.
    ``pods/ephemeralcontainers`` keeps the stored metadata, so the freeze has nothing to see."""
    core = k8s.CoreV1Api(k8s_client)
    name = _unique("pod")
    await create_pod(core, env.namespace, labelled_pod(name, env.binding))
    stored = (await core.read_namespaced_pod(name, env.namespace)).metadata.annotations
    swapped = json.loads(stored[CLIENT_CONFIG])
    swapped["tenant_id"] = "team-b-chat"
    exc = await refused(
        core.patch_namespaced_pod_status(
            name,
            env.namespace,
            {"metadata": {"annotations": {CLIENT_CONFIG: json.dumps(swapped)}}},
        )
    )
    assert exc.status == 422
    assert _causes(exc) == [(f"metadata.annotations[{CLIENT_CONFIG}]", "FieldValueForbidden")]
    # Status itself stays writable through the subresource.
    await core.patch_namespaced_pod_status(
        name, env.namespace, {"status": {"conditions": [{"type": "Ready", "status": "False"}]}}
    )
    await core.patch_namespaced_pod_ephemeralcontainers(
        name,
        env.namespace,
        {
            "metadata": {"annotations": {CLIENT_CONFIG: json.dumps(swapped), INJECTED: "{}"}},
            "spec": {"ephemeralContainers": [{"name": "debug", "image": "busybox"}]},
        },
    )
    after = (await core.read_namespaced_pod(name, env.namespace)).metadata.annotations
    assert after[CLIENT_CONFIG] == stored[CLIENT_CONFIG] and after[INJECTED] == stored[INJECTED]
    await core.delete_namespaced_pod(name, env.namespace, grace_period_seconds=0)


async def test_metrics_and_logs_of_the_running_server(
    env: Env, api: k8s.CustomObjectsApi, k8s_client: k8s.ApiClient
) -> None:
    await create_md(api, deployment(_unique("md"), env.namespace, env.instance_type))
    core = k8s.CoreV1Api(k8s_client)
    pod = await create_pod(core, env.namespace, labelled_pod(_unique("pod"), "chat"))
    await core.delete_namespaced_pod(pod.metadata.name, env.namespace, grace_period_seconds=0)
    metrics = env.server.get("/metrics")
    allowed = {
        sample.labels["webhook"]: sample.value
        for family in text_string_to_metric_families(metrics)
        for sample in family.samples
        if sample.name == "gpustack_webhook_reviews_total" and sample.labels["verdict"] == "allowed"
    }
    # Every pair exists from start-up at 0: the reviews above counted.
    for webhook in ("modeldeployment-mutate", "modeldeployment-validate", "pod-inject"):
        assert allowed[webhook] >= 1, (webhook, allowed)
    assert 'gpustack_webhook_lookups_total{kind="InstanceType",result="found"}' in metrics
    lines = [json.loads(line) for line in env.server.log_lines() if line.startswith("{")]
    reviews = [line for line in lines if line.get("msg") == "review"]
    assert reviews and all(line["uid"] for line in reviews)
    assert {"pod-inject", "modeldeployment-validate"} <= {line["webhook"] for line in reviews}
    assert not any("hf-secret-never-logged" in line for line in env.server.log_lines())


# ---- ModelArtifact and a deployment naming one ----------------------------------------------


def artifact(name: str, namespace: str, source: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ModelArtifact",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"source": source},
    }


async def create_artifact(api: k8s.CustomObjectsApi, body: dict[str, Any]) -> dict[str, Any]:
    ns = body["metadata"]["namespace"]
    out = await api.create_namespaced_custom_object(GROUP, VERSION, ns, "modelartifacts", body)
    assert isinstance(out, dict)
    return out


async def test_a_good_artifact_is_stored_with_its_revision_defaulted(
    env: Env, api: k8s.CustomObjectsApi
) -> None:
    hf = await create_artifact(
        api, artifact(_unique("mart"), env.namespace, {"huggingFace": {"repository": "gpt2"}})
    )
    assert hf["spec"]["source"]["huggingFace"] == {"repository": "gpt2", "revision": "main"}
    ms = await create_artifact(
        api,
        artifact(_unique("mart"), env.namespace, {"modelScope": {"repository": "Qwen/Qwen3-8B"}}),
    )
    assert ms["spec"]["source"]["modelScope"]["revision"] == "master"
    # Restating the stored artifact without its revision (a re-applied manifest) is no spec
    # change: the default is filled on UPDATE too, before the CRD compares the spec.
    name = hf["metadata"]["name"]
    restated = artifact(name, env.namespace, {"huggingFace": {"repository": "gpt2"}})
    restated["metadata"]["resourceVersion"] = hf["metadata"]["resourceVersion"]
    restated["metadata"]["labels"] = {"team": "a"}
    out = await api.replace_namespaced_custom_object(
        GROUP, VERSION, env.namespace, "modelartifacts", name, restated
    )
    assert out["metadata"]["labels"] == {"team": "a"}
    assert out["spec"]["source"]["huggingFace"]["revision"] == "main"


async def test_a_two_source_artifact_is_refused_at_spec_source(
    env: Env, api: k8s.CustomObjectsApi
) -> None:
    two = artifact(
        _unique("mart"),
        env.namespace,
        {
            "huggingFace": {"repository": "gpt2"},
            "persistentVolumeClaim": {"claimName": "weights"},
        },
    )
    exc = await refused(create_artifact(api, two))
    assert exc.status == 422
    assert _causes(exc) == [("spec.source", "FieldValueInvalid")]
    status = _status(exc)
    assert status["details"]["kind"] == "ModelArtifact"
    assert "huggingFace, persistentVolumeClaim" in status["message"]
    tag = artifact(_unique("mart"), env.namespace, {"image": {"reference": "qwen:latest"}})
    exc = await refused(create_artifact(api, tag))
    assert _causes(exc) == [("spec.source.image.reference", "FieldValueInvalid")]
    assert "tags are mutable" in _status(exc)["message"]


async def test_a_spec_change_is_refused_at_spec(env: Env, api: k8s.CustomObjectsApi) -> None:
    name = _unique("mart")
    await create_artifact(
        api, artifact(name, env.namespace, {"huggingFace": {"repository": "gpt2"}})
    )
    exc = await refused(
        api.patch_namespaced_custom_object(
            GROUP,
            VERSION,
            env.namespace,
            "modelartifacts",
            name,
            {"spec": {"source": {"huggingFace": {"revision": "v2"}}}},
            _content_type="application/merge-patch+json",
        )
    )
    assert exc.status == 422
    assert _causes(exc) == [("spec", "FieldValueInvalid")]
    assert "an artifact is an identity" in _status(exc)["message"]
    # Metadata stays editable.
    await api.patch_namespaced_custom_object(
        GROUP,
        VERSION,
        env.namespace,
        "modelartifacts",
        name,
        {"metadata": {"labels": {"team": "a"}}},
        _content_type="application/merge-patch+json",
    )


async def test_a_deployment_naming_a_missing_artifact_is_stored_and_its_flags_judged(
    env: Env, api: k8s.CustomObjectsApi
) -> None:
    body = deployment(_unique("md"), env.namespace, env.instance_type)
    body["spec"]["model"]["artifactRef"] = {"name": _unique("not-there")}
    stored = await create_md(api, body)
    assert stored["spec"]["model"]["artifactRef"] == body["spec"]["model"]["artifactRef"]
    flagged = copy.deepcopy(body)
    flagged["metadata"]["name"] = _unique("md")
    flagged["spec"]["roles"][0]["extraArgs"] = ["--max-model-len", "4096", "--revision=v2"]
    exc = await refused(create_md(api, flagged))
    assert exc.status == 422
    assert _causes(exc) == [("spec.roles[0].extraArgs[2]", "FieldValueInvalid")]
    assert "spec.model.artifactRef" in _status(exc)["message"]


# ---- failure policies ----------------------------------------------------------------------


async def test_with_the_server_stopped_freeze_fails_open_and_injection_fails_closed(
    control_plane: ControlPlane, k8s_client: k8s.ApiClient, tmp_path: Path
) -> None:
    scope = uuid.uuid4().hex[:8]
    namespace = f"wh-{scope}"
    create_namespace(control_plane, namespace, {SCOPE_LABEL: scope})
    instance_type, binding, _ = create_inputs(control_plane, scope, namespace)
    core = k8s.CoreV1Api(k8s_client)
    server = WebhookProcess(
        kubeconfig=control_plane.kubeconfig,
        ca=control_plane.ca,
        namespace=namespace,
        workdir=tmp_path,
    )
    server.start()
    try:
        with InstalledWebhooks(control_plane, scoped_configurations(scope), server.port):
            wait_until_called(control_plane, namespace, instance_type)
            name = _unique("pod")
            await create_pod(core, namespace, labelled_pod(name, binding))
            exc = await refused(
                core.patch_namespaced_pod(
                    name, namespace, {"metadata": {"labels": {INJECT_LABEL: "false"}}}
                )
            )
            assert exc.status == 422

            assert server.stop() == 0  # SIGTERM: a graceful, clean exit
            assert not server.ready()

            # Freeze (Ignore): the same edit now goes through.
            patched = await core.patch_namespaced_pod(
                name, namespace, {"metadata": {"labels": {INJECT_LABEL: "false"}}}
            )
            assert patched.metadata.labels[INJECT_LABEL] == "false"
            # Injection (Fail): a labelled Pod cannot be created without the webhook.
            exc = await refused(create_pod(core, namespace, labelled_pod(_unique("pod"), binding)))
            assert exc.status == 500
            assert "failed calling webhook" in _status(exc)["message"]
            assert "mutate.gpustack-worker-kvcache.core.v1.pod" in _status(exc)["message"]
            # ModelDeployment admission (Fail) is closed too.
            exc = await refused(
                k8s.CustomObjectsApi(k8s_client).create_namespaced_custom_object(
                    GROUP,
                    VERSION,
                    namespace,
                    "modeldeployments",
                    deployment(_unique("md"), namespace, instance_type),
                )
            )
            assert exc.status == 500
            await core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
    finally:
        server.close()
        delete_inputs(control_plane, scope)
