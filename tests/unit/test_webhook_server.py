"""The webhook server's HTTP layer: decoding, encoding, bounds, errors, probes, metrics, logs.

Reviews are decided by the library's own entry points with :class:`StaticLookups` injected (no
API server at all); a few tests put a stand-in library call behind a webhook to reach paths the
library cannot (a crash, a read that never answers).
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from aiohttp.test_utils import TestClient, TestServer

from gpustack_render.api.inputs import InputObject, InstanceType
from gpustack_render.cli.yamlio import load_documents
from gpustack_render.core.errors import Verdict
from gpustack_render.core.review import AdmissionRequest
from gpustack_render.core.settings import Settings
from gpustack_render.schema.kinds import INPUT_MODELS
from gpustack_render.schema.lookups import Lookups, StaticLookups
from gpustack_webhook import logs
from gpustack_webhook.lookups import ReadKey, StaticSources
from gpustack_webhook.server import (
    PATH_MODELARTIFACT_MUTATE,
    PATH_MODELARTIFACT_VALIDATE,
    PATH_MODELDEPLOYMENT_MUTATE,
    PATH_MODELDEPLOYMENT_VALIDATE,
    PATH_POD_FREEZE,
    PATH_POD_INJECT,
    Webhook,
    WebhookServer,
    default_webhooks,
)

MD_KIND = {"group": "worker.gpustack.ai", "version": "v1", "kind": "ModelDeployment"}
POD_KIND = {"group": "", "version": "v1", "kind": "Pod"}
SECRET_VALUE = "s3cr3t-value-never-logged"
GOLDEN = Path(__file__).resolve().parents[2] / "golden"


def review(
    obj: dict[str, Any] | None,
    *,
    kind: dict[str, str] = MD_KIND,
    operation: str = "CREATE",
    old: dict[str, Any] | None = None,
    namespace: str = "team-a",
    uid: str | None = None,
) -> dict[str, Any]:
    meta = (obj or old or {}).get("metadata", {})
    request: dict[str, Any] = {
        "uid": str(uuid.uuid4()) if uid is None else uid,
        "kind": kind,
        "resource": {"group": kind["group"], "version": "v1", "resource": "x"},
        "operation": operation,
        "namespace": namespace,
        "name": meta.get("name", ""),
        "userInfo": {"username": "alice", "groups": ["team-a"]},
        "object": obj,
        "oldObject": old,
        "dryRun": False,
    }
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def deployment(name: str = "qwen-chat", **role: Any) -> dict[str, Any]:
    return {
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "ModelDeployment",
        "metadata": {"name": name, "namespace": "team-a"},
        "spec": {
            "model": {"name": "Qwen/Qwen2.5-72B-Instruct"},
            "engine": {"name": "vLLM", "image": "vllm/vllm-openai:v0.25.1"},
            "roles": [{"name": "server", "instanceType": "a10g", **role}],
        },
    }


def instance_type(name: str = "a10g") -> InstanceType:
    return InstanceType.model_validate(
        {
            "apiVersion": "worker.gpustack.ai/v1",
            "kind": "InstanceType",
            "metadata": {"name": name},
            "spec": {"acceleratable": True, "unitResources": {"cpu": "8", "ram": "32Gi"}},
            "status": {
                "entrance": "a10g",
                "detail": {"manufacturer": "nvidia", "memory": "24Gi"},
                "accelerator": {"capacity": 16},
            },
        }
    )


def allow_all(request: AdmissionRequest, *, lookups: Lookups, settings: Settings) -> Verdict:
    return Verdict.allow(patch=[{"op": "add", "path": "/metadata/labels", "value": {"a": "b"}}])


#: Warnings as a rule may write them: one quoting a stored condition reason with a newline, an
#: empty one, a terminal escape, a C1 control, and a plain one.
RAW_WARNINGS = (
    "spec.kvCache.poolRef: no KV cache: pool reports (LedgerUnreachable\nretrying)",
    "",
    "tab\there \x1b[31mred\x85",
    "plain, accents é ü kept",
)


def warn(request: AdmissionRequest, *, lookups: Lookups, settings: Settings) -> Verdict:
    return Verdict.allow(warnings=RAW_WARNINGS)


def crash(request: AdmissionRequest, *, lookups: Lookups, settings: Settings) -> Verdict:
    raise KeyError(SECRET_VALUE)


def reads_instance_type(
    request: AdmissionRequest, *, lookups: Lookups, settings: Settings
) -> Verdict:
    lookups.get(InstanceType, "", "a10g")
    return Verdict.allow()


@dataclass
class CountingSources(StaticSources):
    """StaticSources that count reads and can take their time answering."""

    stall: float = 0.0
    reads: list[ReadKey] = field(default_factory=list)

    async def read(self, key: ReadKey, *, since: float | None = None) -> InputObject | None:
        self.reads.append(key)
        if self.stall:
            await asyncio.sleep(self.stall)
        return await super().read(key, since=since)


STANDIN_HOOKS = (
    Webhook("allow", "/allow", "worker.gpustack.ai", "v1", "ModelDeployment", allow_all),
    Webhook("warn", "/warn", "worker.gpustack.ai", "v1", "ModelDeployment", warn),
    Webhook("crash", "/crash", "worker.gpustack.ai", "v1", "ModelDeployment", crash),
    Webhook("hang", "/hang", "worker.gpustack.ai", "v1", "ModelDeployment", reads_instance_type),
)


@pytest.fixture
def log_stream() -> Iterator[io.StringIO]:
    """Every log line the server writes, as configured in production (JSON)."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logs.JSONFormatter())
    logger = logging.getLogger(logs.LOGGER_NAME)
    logger.addHandler(handler)
    previous = logger.level
    logger.setLevel(logging.INFO)
    try:
        yield stream
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous)


async def _client(server: WebhookServer) -> TestClient[Any, Any]:
    client: TestClient[Any, Any] = TestClient(TestServer(server.app()))
    await client.start_server()
    return client


@pytest_asyncio.fixture(loop_scope="session")
async def standin() -> AsyncIterator[tuple[WebhookServer, TestClient[Any, Any]]]:
    server = WebhookServer(
        CountingSources(stall=1.0),
        webhooks=STANDIN_HOOKS,
        review_timeout=0.2,
        max_body_bytes=64 * 1024,
    )
    client = await _client(server)
    try:
        yield server, client
    finally:
        await client.close()
        await server.stop()


# ---- decoding and encoding -----------------------------------------------------------------


async def test_answer_echoes_uid_and_encodes_patch_as_base64(
    standin: tuple[WebhookServer, TestClient[Any, Any]],
) -> None:
    _, client = standin
    resp = await client.post("/allow", json=review(deployment(), uid="u-1"))
    assert resp.status == 200
    body = await resp.json()
    assert body["apiVersion"] == "admission.k8s.io/v1"
    assert body["kind"] == "AdmissionReview"
    answer = body["response"]
    assert answer["uid"] == "u-1"
    assert answer["allowed"] is True
    assert answer["patchType"] == "JSONPatch"
    assert json.loads(base64.b64decode(answer["patch"])) == [
        {"op": "add", "path": "/metadata/labels", "value": {"a": "b"}}
    ]
    assert answer["warnings"] == []


async def test_warnings_reach_the_api_server_with_control_characters_escaped(
    standin: tuple[WebhookServer, TestClient[Any, Any]],
) -> None:
    """The API server drops a warning holding a control character (its Warning header cannot
    carry one) and ignores an empty one: each is escaped, or left out, so none vanishes."""
    _, client = standin
    resp = await client.post("/warn", json=review(deployment(), uid="u-1"))
    warnings = (await resp.json())["response"]["warnings"]
    assert warnings == [
        "spec.kvCache.poolRef: no KV cache: pool reports (LedgerUnreachable\\nretrying)",
        "tab\\there \\x1b[31mred\\x85",
        "plain, accents é ü kept",
    ]
    assert not any(ch < " " or "\x7f" <= ch <= "\x9f" for w in warnings for ch in w)


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        pytest.param(b"{not json", "not JSON", id="not-json"),
        pytest.param(b"[1, 2]", "not a JSON object", id="not-an-object"),
        pytest.param(
            json.dumps({**review(deployment()), "apiVersion": "admission.k8s.io/v1beta1"}).encode(),
            "admission.k8s.io/v1",
            id="v1beta1",
        ),
        pytest.param(
            json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}).encode(),
            "request is missing",
            id="no-request",
        ),
        pytest.param(
            json.dumps(review(deployment(), uid="")).encode(), "uid is missing", id="no-uid"
        ),
        pytest.param(
            json.dumps(review(deployment(), operation="PATCH")).encode(),
            "not an operation",
            id="bad-operation",
        ),
        pytest.param(
            json.dumps(review({"metadata": {"name": "p"}}, kind=POD_KIND)).encode(),
            "not Pod",
            id="wrong-kind",
        ),
        pytest.param(
            json.dumps(review(None, operation="CREATE")).encode(),
            "object is missing",
            id="create-without-object",
        ),
        pytest.param(
            json.dumps(review(deployment(), operation="UPDATE")).encode(),
            "oldObject is missing",
            id="update-without-old-object",
        ),
    ],
)
async def test_malformed_review_is_a_bad_request(
    standin: tuple[WebhookServer, TestClient[Any, Any]], body: bytes, problem: str
) -> None:
    server, client = standin
    resp = await client.post("/allow", data=body, headers={"Content-Type": "application/json"})
    assert resp.status == 400
    assert problem in await resp.text()
    assert _sample(server, "gpustack_webhook_reviews_total", webhook="allow", verdict="malformed")


async def test_body_over_the_limit_is_refused_with_413(
    standin: tuple[WebhookServer, TestClient[Any, Any]],
) -> None:
    _, client = standin
    big = deployment()
    big["metadata"]["annotations"] = {"pad": "x" * (80 * 1024)}
    resp = await client.post("/allow", json=review(big))
    assert resp.status == 413
    # Also without a Content-Length (chunked upload).

    async def chunks() -> AsyncIterator[bytes]:
        data = json.dumps(review(big)).encode()
        for i in range(0, len(data), 8192):
            yield data[i : i + 8192]

    resp = await client.post("/allow", data=chunks())
    assert resp.status == 413


async def test_only_post_on_webhook_paths(
    standin: tuple[WebhookServer, TestClient[Any, Any]],
) -> None:
    _, client = standin
    assert (await client.get("/allow")).status == 405
    assert (await client.post("/nowhere", json=review(deployment()))).status == 404


# ---- failures are internal errors, never verdicts ------------------------------------------


async def test_library_exception_is_an_internal_error_and_logged_without_data(
    standin: tuple[WebhookServer, TestClient[Any, Any]], log_stream: io.StringIO
) -> None:
    server, client = standin
    resp = await client.post("/crash", json=review(deployment(), uid="u-crash"))
    assert resp.status == 200
    answer = (await resp.json())["response"]
    assert answer["uid"] == "u-crash"
    assert answer["allowed"] is False
    assert answer["status"]["code"] == 500
    assert answer["status"]["reason"] == "InternalError"
    assert "KeyError" in answer["status"]["message"]
    assert SECRET_VALUE not in answer["status"]["message"]
    lines = [json.loads(line) for line in log_stream.getvalue().splitlines()]
    failed = [line for line in lines if line["msg"].startswith("review failed")]
    assert failed and failed[0]["level"] == "error" and failed[0]["uid"] == "u-crash"
    # Where it failed, never what the exception said: its message may quote the object.
    assert failed[0]["error"] == "KeyError"
    assert any(frame.endswith(" in crash") for frame in failed[0]["frames"])
    assert SECRET_VALUE not in log_stream.getvalue()
    assert _sample(server, "gpustack_webhook_reviews_total", webhook="crash", verdict="internal")


async def test_a_read_over_the_reviews_budget_is_an_internal_error(
    standin: tuple[WebhookServer, TestClient[Any, Any]],
) -> None:
    _, client = standin
    started = time.monotonic()
    resp = await client.post("/hang", json=review(deployment()))
    answer = (await resp.json())["response"]
    assert time.monotonic() - started < 0.45
    assert answer["allowed"] is False
    assert answer["status"]["reason"] == "InternalError"
    assert "reading InstanceType a10g failed" in answer["status"]["message"]
    assert "no answer within" in answer["status"]["message"]


# ---- probes, metrics, logs -----------------------------------------------------------------


async def test_probes_follow_readiness(
    standin: tuple[WebhookServer, TestClient[Any, Any]],
) -> None:
    server, client = standin
    assert (await client.get("/healthz")).status == 200
    server.ready = False
    assert (await client.get("/readyz")).status == 503
    server.ready = True
    assert (await client.get("/readyz")).status == 200


async def test_metrics_count_reviews_and_latency_per_webhook_and_verdict(
    standin: tuple[WebhookServer, TestClient[Any, Any]],
) -> None:
    _, client = standin
    for _ in range(3):
        await client.post("/allow", json=review(deployment()))
    resp = await client.get("/metrics")
    assert resp.status == 200
    assert resp.headers["Content-Type"].startswith("text/plain")
    text = await resp.text()
    assert 'gpustack_webhook_reviews_total{verdict="allowed",webhook="allow"} 3.0' in text
    assert (
        'gpustack_webhook_review_duration_seconds_count{verdict="allowed",webhook="allow"} 3.0'
        in text
    )
    assert 'gpustack_webhook_review_duration_seconds_bucket{le="0.02",verdict="allowed"' in text


async def test_review_log_line_is_json_and_carries_no_object_data(
    standin: tuple[WebhookServer, TestClient[Any, Any]], log_stream: io.StringIO
) -> None:
    _, client = standin
    obj = deployment(env=[{"name": "HF_TOKEN", "value": SECRET_VALUE}])
    await client.post("/allow", json=review(obj, uid="u-log"))
    text = log_stream.getvalue()
    assert SECRET_VALUE not in text
    line = json.loads(text.splitlines()[-1])
    assert line["msg"] == "review"
    assert line["uid"] == "u-log"
    assert line["webhook"] == "allow"
    assert line["name"] == "qwen-chat"
    assert line["namespace"] == "team-a"
    assert line["operation"] == "CREATE"
    assert line["allowed"] is True
    assert line["patchOps"] == 1
    assert isinstance(line["durationMs"], float)


async def test_a_review_log_line_does_not_grow_with_the_causes(
    library: tuple[WebhookServer, TestClient[Any, Any], StaticLookups], log_stream: io.StringIO
) -> None:
    """One refusal cause per entry of a long list (here 3,000 volumes on one mount path) made a
    log line naming every one; it names the first ones and counts them all."""
    _, client, _ = library
    volumes = [
        {"name": f"v{i}", "mountPath": "/data", "configMap": {"name": "c"}} for i in range(3000)
    ]
    resp = await client.post(
        PATH_MODELDEPLOYMENT_VALIDATE, json=review(deployment(additionalVolumes=volumes))
    )
    causes = (await resp.json())["response"]["status"]["details"]["causes"]
    assert len(causes) >= 3000
    line = json.loads(log_stream.getvalue().splitlines()[-1])
    assert line["msg"] == "review"
    assert len(line["causes"]) == 20
    assert line["causesTotal"] == len(causes)


# ---- the library behind the server (StaticLookups) -----------------------------------------


@pytest_asyncio.fixture(loop_scope="session")
async def library() -> AsyncIterator[tuple[WebhookServer, TestClient[Any, Any], StaticLookups]]:
    objects = StaticLookups(instance_types={"a10g": instance_type()})
    server = WebhookServer(CountingSources(objects=objects), webhooks=default_webhooks())
    client = await _client(server)
    try:
        yield server, client, objects
    finally:
        await client.close()
        await server.stop()


def test_default_webhooks_serve_the_six_paths() -> None:
    hooks = {h.path: h for h in default_webhooks()}
    assert set(hooks) == {
        PATH_MODELDEPLOYMENT_MUTATE,
        PATH_MODELDEPLOYMENT_VALIDATE,
        PATH_MODELARTIFACT_MUTATE,
        PATH_MODELARTIFACT_VALIDATE,
        PATH_POD_INJECT,
        PATH_POD_FREEZE,
    }
    assert hooks[PATH_POD_INJECT].kind == hooks[PATH_POD_FREEZE].kind == "Pod"
    assert hooks[PATH_POD_INJECT].group == ""
    artifact_hooks = (hooks[PATH_MODELARTIFACT_MUTATE], hooks[PATH_MODELARTIFACT_VALIDATE])
    assert {(h.group, h.version, h.kind) for h in artifact_hooks} == {
        ("worker.gpustack.ai", "v1", "ModelArtifact")
    }
    assert [h.mutating for h in artifact_hooks] == [True, False]


MART_KIND = {"group": "worker.gpustack.ai", "version": "v1", "kind": "ModelArtifact"}


def artifact(**source: Any) -> dict[str, Any]:
    return {
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "ModelArtifact",
        "metadata": {"name": "qwen-weights", "namespace": "team-a"},
        "spec": {"source": source or {"huggingFace": {"repository": "Qwen/Qwen3-8B"}}},
    }


async def test_the_artifact_mutation_defaults_the_revision(
    library: tuple[WebhookServer, TestClient[Any, Any], StaticLookups],
) -> None:
    _, client, _ = library
    body = review(artifact(), kind=MART_KIND, uid="u-a")
    answer = (await (await client.post(PATH_MODELARTIFACT_MUTATE, json=body)).json())["response"]
    assert answer["uid"] == "u-a" and answer["allowed"] is True
    patch = json.loads(base64.b64decode(answer["patch"]))
    assert patch == [{"op": "add", "path": "/spec/source/huggingFace/revision", "value": "main"}]


async def test_the_artifact_validation_refuses_two_sources_at_spec_source(
    library: tuple[WebhookServer, TestClient[Any, Any], StaticLookups],
) -> None:
    _, client, _ = library
    two = artifact(
        huggingFace={"repository": "Qwen/Qwen3-8B", "revision": "main"},
        modelScope={"repository": "Qwen/Qwen3-8B", "revision": "master"},
    )
    body = review(two, kind=MART_KIND)
    answer = (await (await client.post(PATH_MODELARTIFACT_VALIDATE, json=body)).json())["response"]
    assert answer["allowed"] is False
    assert answer["status"]["code"] == 422
    assert answer["status"]["details"]["kind"] == "ModelArtifact"
    (cause,) = answer["status"]["details"]["causes"]
    assert cause["field"] == "spec.source" and cause["reason"] == "FieldValueInvalid"
    assert "huggingFace, modelScope" in cause["message"]


async def test_an_artifact_sent_to_the_deployment_path_is_a_bad_request(
    library: tuple[WebhookServer, TestClient[Any, Any], StaticLookups],
) -> None:
    _, client, _ = library
    resp = await client.post(PATH_MODELDEPLOYMENT_VALIDATE, json=review(artifact(), kind=MART_KIND))
    assert resp.status == 400
    assert "reviews ModelDeployment" in await resp.text()


async def test_mutation_sets_the_accelerator_default(
    library: tuple[WebhookServer, TestClient[Any, Any], StaticLookups],
) -> None:
    _, client, _ = library
    resp = await client.post(PATH_MODELDEPLOYMENT_MUTATE, json=review(deployment(), uid="u-m"))
    answer = (await resp.json())["response"]
    assert answer["uid"] == "u-m"
    assert answer["allowed"] is True
    assert answer["patchType"] == "JSONPatch"
    patch = json.loads(base64.b64decode(answer["patch"]))
    assert {"op": "add", "path": "/spec/roles/0/resources", "value": {"accelerator": "1"}} in patch


async def test_each_object_is_read_once_per_review_and_again_for_the_next(
    library: tuple[WebhookServer, TestClient[Any, Any], StaticLookups],
) -> None:
    server, client, _ = library
    sources = server.sources
    assert isinstance(sources, CountingSources)
    obj = deployment(resources={"accelerator": 1})
    obj["spec"]["roles"].append(
        {"name": "other", "instanceType": "a10g", "resources": {"accelerator": 2}}
    )
    for _ in range(2):
        resp = await client.post(PATH_MODELDEPLOYMENT_VALIDATE, json=review(obj))
        assert (await resp.json())["response"]["allowed"] is True
    assert sources.reads == [ReadKey("InstanceType", "", "a10g")] * 2


async def test_validation_refusal_carries_field_causes(
    library: tuple[WebhookServer, TestClient[Any, Any], StaticLookups],
) -> None:
    _, client, _ = library
    obj = deployment(env=[{"name": "GPUSTACK_REPLICA_SIZE", "value": "2"}])
    resp = await client.post(PATH_MODELDEPLOYMENT_VALIDATE, json=review(obj))
    answer = (await resp.json())["response"]
    assert answer["allowed"] is False
    assert answer["status"]["code"] == 422
    assert answer["status"]["reason"] == "Invalid"
    assert answer["status"]["details"]["kind"] == "ModelDeployment"
    assert answer["status"]["details"]["name"] == "qwen-chat"
    causes = answer["status"]["details"]["causes"]
    assert ("spec.roles[0].env[0]", "FieldValueInvalid") in [
        (c["field"], c["reason"]) for c in causes
    ]


async def test_a_failed_read_is_an_internal_error_not_a_verdict(
    library: tuple[WebhookServer, TestClient[Any, Any], StaticLookups],
) -> None:
    server, client, objects = library
    objects.failing.add(("InstanceType", "", "a10g"))
    resp = await client.post(PATH_MODELDEPLOYMENT_MUTATE, json=review(deployment()))
    answer = (await resp.json())["response"]
    assert answer["allowed"] is False
    assert answer["status"]["code"] == 500
    assert answer["status"]["reason"] == "InternalError"
    assert _sample(
        server,
        "gpustack_webhook_reviews_total",
        webhook="modeldeployment-mutate",
        verdict="internal",
    )


async def test_pod_without_binding_is_refused_with_the_reason(
    library: tuple[WebhookServer, TestClient[Any, Any], StaticLookups],
) -> None:
    _, client, _ = library
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": "bench-",
            "namespace": "team-a",
            "labels": {"kvcache.gpustack.ai/inject": "true"},
            "annotations": {"kvcache.gpustack.ai/engine": "vLLM"},
        },
        "spec": {"containers": [{"name": "server", "image": "x", "command": ["vllm"]}]},
    }
    resp = await client.post(PATH_POD_INJECT, json=review(pod, kind=POD_KIND))
    answer = (await resp.json())["response"]
    assert answer["allowed"] is False
    assert answer["status"]["code"] == 403
    assert answer["status"]["reason"] == "Forbidden"
    assert "kvcache.gpustack.ai/binding" in answer["status"]["message"]


async def test_a_validating_path_never_answers_with_a_patch() -> None:
    """The API server refuses a validating webhook's answer that carries a patch (and then
    applies the failure policy, Ignore on the freeze path). The freeze path shares the
    injection's entry point, so a CREATE sent to it (a registration listing CREATE) is judged
    there but answered without the injection's patch; the mutating path still carries it."""
    docs = load_documents((GOLDEN / "inject-binding-default-domain" / "input.yaml").read_text())
    pod = next(d for d in docs if d["kind"] == "Pod")
    objects = StaticLookups.of(
        [INPUT_MODELS[d["kind"]].model_validate(d) for d in docs if d["kind"] in INPUT_MODELS],
        default_namespace=pod["metadata"]["namespace"],
    )
    server = WebhookServer(StaticSources(objects=objects))
    client = await _client(server)
    try:
        answers = {}
        for path in (PATH_POD_INJECT, PATH_POD_FREEZE):
            body = review(pod, kind=POD_KIND, namespace=pod["metadata"]["namespace"])
            answers[path] = (await (await client.post(path, json=body)).json())["response"]
    finally:
        await client.close()
    assert answers[PATH_POD_INJECT]["allowed"] is True
    assert answers[PATH_POD_INJECT]["patchType"] == "JSONPatch"
    assert answers[PATH_POD_FREEZE]["allowed"] is True
    assert "patch" not in answers[PATH_POD_FREEZE]
    assert "patchType" not in answers[PATH_POD_FREEZE]
    assert {h.path for h in default_webhooks() if not h.mutating} == {
        PATH_MODELDEPLOYMENT_VALIDATE,
        PATH_MODELARTIFACT_VALIDATE,
        PATH_POD_FREEZE,
    }


async def test_freeze_refuses_removing_the_opt_in_label(
    library: tuple[WebhookServer, TestClient[Any, Any], StaticLookups],
) -> None:
    _, client, _ = library
    old = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "bench",
            "namespace": "team-a",
            "labels": {"kvcache.gpustack.ai/inject": "true"},
        },
        "spec": {"containers": [{"name": "server", "image": "x"}]},
    }
    new = json.loads(json.dumps(old))
    new["metadata"]["labels"]["kvcache.gpustack.ai/inject"] = "false"
    resp = await client.post(
        PATH_POD_FREEZE, json=review(new, old=old, operation="UPDATE", kind=POD_KIND)
    )
    answer = (await resp.json())["response"]
    assert answer["allowed"] is False
    assert answer["status"]["code"] == 422
    assert [c["field"] for c in answer["status"]["details"]["causes"]] == [
        "metadata.labels[kvcache.gpustack.ai/inject]"
    ]
    # An unrelated edit passes.
    other = json.loads(json.dumps(old))
    other["metadata"]["finalizers"] = ["example.com/x"]
    resp = await client.post(
        PATH_POD_FREEZE, json=review(other, old=old, operation="UPDATE", kind=POD_KIND)
    )
    assert (await resp.json())["response"]["allowed"] is True


# ---- helpers -------------------------------------------------------------------------------


def _sample(server: WebhookServer, name: str, **labels: str) -> float:
    value = server.metrics.registry.get_sample_value(name, labels)
    return float(value or 0.0)
