"""Every malformed request is answered ``400`` with a message, never a ``5xx``: the probe's
corpus (nesting, ``userInfo`` types, empty and wrong-typed fields) fed to all four webhooks.

Malformed envelopes are the server's to refuse; a well-formed envelope around an odd object
reaches the library, which answers a verdict (never an internal error) for it.
"""

from __future__ import annotations

import copy
import gzip
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import pytest_asyncio
from aiohttp.test_utils import TestClient, TestServer

from gpustack_webhook.lookups import StaticSources
from gpustack_webhook.server import (
    PATH_MODELDEPLOYMENT_MUTATE,
    PATH_MODELDEPLOYMENT_VALIDATE,
    PATH_POD_FREEZE,
    PATH_POD_INJECT,
    WebhookServer,
)

pytestmark = pytest.mark.asyncio(loop_scope="session")

MD_KIND = {"group": "worker.gpustack.ai", "version": "v1", "kind": "ModelDeployment"}
POD_KIND = {"group": "", "version": "v1", "kind": "Pod"}
PATHS: dict[str, dict[str, str]] = {
    PATH_MODELDEPLOYMENT_MUTATE: MD_KIND,
    PATH_MODELDEPLOYMENT_VALIDATE: MD_KIND,
    PATH_POD_INJECT: POD_KIND,
    PATH_POD_FREEZE: POD_KIND,
}
OBJECTS: dict[str, dict[str, Any]] = {
    "ModelDeployment": {
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "ModelDeployment",
        "metadata": {"name": "m", "namespace": "team-a", "annotations": {}},
        "spec": {
            "model": {"name": "Qwen/Qwen3-8B"},
            "engine": {"name": "vLLM", "image": "vllm/vllm-openai:v0.25.1"},
            "roles": [{"name": "server", "instanceType": "a10g"}],
        },
    },
    "Pod": {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "p",
            "namespace": "team-a",
            "labels": {"kvcache.gpustack.ai/inject": "true"},
            "annotations": {"kvcache.gpustack.ai/binding": "chat"},
        },
        "spec": {"containers": [{"name": "main", "image": "vllm/vllm-openai:v0.25.1"}]},
    },
}


def envelope(path: str, *, operation: str = "UPDATE") -> dict[str, Any]:
    kind = PATHS[path]
    obj = OBJECTS[kind["kind"]]
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u-1",
            "kind": dict(kind),
            "resource": {"group": kind["group"], "version": "v1", "resource": "x"},
            "operation": operation,
            "namespace": "team-a",
            "name": obj["metadata"]["name"],
            "userInfo": {"username": "alice", "groups": ["team-a"], "extra": {"k": ["v"]}},
            "object": copy.deepcopy(obj),
            "oldObject": copy.deepcopy(obj),
            "dryRun": False,
        },
    }


def nested(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


Edit = Callable[[dict[str, Any]], None]


def at(*keys: str, value: Any) -> Edit:
    """Set ``request.<keys>`` (the last key created) to ``value``."""

    def edit(review: dict[str, Any]) -> None:
        node = review["request"]
        for key in keys[:-1]:
            node = node[key]
        node[keys[-1]] = value

    return edit


def drop(*keys: str) -> Edit:
    def edit(review: dict[str, Any]) -> None:
        node = review["request"]
        for key in keys[:-1]:
            node = node[key]
        del node[keys[-1]]

    return edit


#: Envelopes no API server sends: each must be a 400 with a message.
MALFORMED_EDITS: dict[str, Edit] = {
    "user-info-string": at("userInfo", value="alice"),
    "user-info-list": at("userInfo", value=["alice", "team-a"]),
    "user-info-number": at("userInfo", value=7),
    "user-info-username-object": at("userInfo", "username", value={"a": 1}),
    "user-info-groups-string": at("userInfo", "groups", value="team-a"),
    "user-info-groups-numbers": at("userInfo", "groups", value=[1, 2]),
    "user-info-extra-list": at("userInfo", "extra", value=["x"]),
    "user-info-extra-string-values": at("userInfo", "extra", value={"k": "v"}),
    "uid-empty": at("uid", value=""),
    "uid-number": at("uid", value=12),
    "uid-missing": drop("uid"),
    "namespace-list": at("namespace", value=["a"]),
    "namespace-number": at("namespace", value=3),
    "name-object": at("name", value={}),
    "dry-run-string": at("dryRun", value="true"),
    "dry-run-number": at("dryRun", value=1),
    "operation-empty": at("operation", value=""),
    "operation-list": at("operation", value=["UPDATE"]),
    "operation-lowercase": at("operation", value="update"),
    "kind-string": at("kind", value="Pod"),
    "kind-empty": at("kind", value={}),
    "kind-kind-list": at("kind", "kind", value=["Pod"]),
    "kind-group-number": at("kind", "group", value=1),
    "resource-string": at("resource", value="pods"),
    "sub-resource-list": at("subResource", value=["status"]),
    "options-string": at("options", value="x"),
    "object-string": at("object", value="{}"),
    "object-list": at("object", value=[]),
    "object-missing": at("object", value=None),
    "old-object-number": at("oldObject", value=1),
    "old-object-missing": at("oldObject", value=None),
    "request-list": lambda review: review.__setitem__("request", []),
    "request-missing": lambda review: review.pop("request"),
    "api-version-wrong": lambda review: review.__setitem__(
        "apiVersion", "admission.k8s.io/v1beta1"
    ),
    "kind-wrong": lambda review: review.__setitem__("kind", "Pod"),
}

#: Raw bodies that are not an AdmissionReview at all.
MALFORMED_BODIES: dict[str, bytes] = {
    "empty": b"",
    "whitespace": b"  \n",
    "null": b"null",
    "list": b"[]",
    "string": b'"AdmissionReview"',
    "truncated": b'{"apiVersion": "admission.k8s.io/v1", "kind": "Adm',
    "not-utf8": b'{"a": "\xff\xfe"}',
    "nested-1000": nested(1000).encode(),
    "nested-100000": nested(100_000).encode(),
    "nested-lists-5000": b"[" * 5000 + b"]" * 5000,
    "nested-unbalanced": b"[" * 5000,
    "nan": b'{"apiVersion": NaN}',
}


def deep_object_body(path: str, depth: int) -> bytes:
    """A valid envelope whose object nests ``depth`` levels under metadata.annotations."""
    review = envelope(path)
    review["request"]["object"]["metadata"]["annotations"]["deep"] = "DEEP"
    text = json.dumps(review)
    assert text.count('"DEEP"') == 1
    return text.replace('"DEEP"', nested(depth)).encode()


#: Well-formed envelopes around odd objects: the library answers a verdict, not an error.
ODD_OBJECT_EDITS: dict[str, Edit] = {
    "object-empty": at("object", value={}),
    "old-object-empty": at("oldObject", value={}),
    "metadata-string": at("object", "metadata", value="x"),
    "metadata-null": at("object", "metadata", value=None),
    "labels-list": at("object", "metadata", "labels", value=["a"]),
    "spec-string": at("object", "spec", value="x"),
    "spec-list": at("object", "spec", value=[1]),
    "spec-empty": at("object", "spec", value={}),
    "user-info-empty": at("userInfo", value={}),
    "user-info-null": at("userInfo", value=None),
    "name-empty": at("name", value=""),
    "namespace-empty": at("namespace", value=""),
}


@pytest_asyncio.fixture(loop_scope="session")
async def client() -> AsyncIterator[TestClient[Any, Any]]:
    server = WebhookServer(StaticSources(), review_timeout=5.0)
    test_client: TestClient[Any, Any] = TestClient(TestServer(server.app()))
    await test_client.start_server()
    try:
        yield test_client
    finally:
        await test_client.close()


async def _post(client: TestClient[Any, Any], path: str, body: bytes) -> tuple[int, str]:
    resp = await client.post(path, data=body, headers={"Content-Type": "application/json"})
    return resp.status, await resp.text()


@pytest.mark.parametrize("path", sorted(PATHS))
async def test_every_malformed_request_is_a_400_with_a_message(
    client: TestClient[Any, Any], path: str
) -> None:
    bodies: dict[str, bytes] = dict(MALFORMED_BODIES)
    for name, edit in MALFORMED_EDITS.items():
        review = envelope(path)
        edit(review)
        bodies[name] = json.dumps(review).encode()
    for depth in (101, 1000, 1200, 20_000):
        bodies[f"object-nested-{depth}"] = deep_object_body(path, depth)
    answers = {name: await _post(client, path, body) for name, body in bodies.items()}
    wrong = sorted(name for name, answer in answers.items() if answer[0] != 400)
    assert not wrong
    silent = [name for name, (_, text) in answers.items() if len(text.strip()) < 10]
    assert not silent


@pytest.mark.parametrize("path", sorted(PATHS))
async def test_odd_objects_get_a_verdict_never_an_error(
    client: TestClient[Any, Any], path: str
) -> None:
    failures: dict[str, Any] = {}  # case → what came back
    for operation in ("CREATE", "UPDATE"):
        for name, edit in ODD_OBJECT_EDITS.items():
            review = envelope(path, operation=operation)
            edit(review)
            resp = await client.post(path, json=review)
            if resp.status != 200:
                failures[f"{operation}/{name}"] = (resp.status, await resp.text())
                continue
            answer = (await resp.json())["response"]
            code = (answer.get("status") or {}).get("code", 200)
            if code >= 500:
                failures[f"{operation}/{name}"] = answer["status"]
    assert not failures


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
async def test_a_body_whose_content_encoding_does_not_decode_is_a_400(
    client: TestClient[Any, Any], encoding: str
) -> None:
    """aiohttp decodes ``Content-Encoding`` itself; a body that is not what it claims is the
    sender's fault: a 400 naming the encoding (it was a 500 with a traceback), and the
    connection is closed rather than drained."""
    path = PATH_MODELDEPLOYMENT_VALIDATE
    resp = await client.post(
        path,
        data=b"not compressed at all",
        headers={"Content-Type": "application/json", "Content-Encoding": encoding},
    )
    assert resp.status == 400
    assert encoding in await resp.text()
    assert resp.headers.get("Connection", "").lower() == "close"
    # A well-formed compressed review is still read.
    body = gzip.compress(json.dumps(envelope(path, operation="CREATE")).encode())
    resp = await client.post(
        path, data=body, headers={"Content-Type": "application/json", "Content-Encoding": "gzip"}
    )
    assert resp.status == 200
    assert (await resp.json())["response"]["uid"] == "u-1"


async def test_a_refusal_quoting_a_huge_value_is_cut(client: TestClient[Any, Any]) -> None:
    """The wrong-kind refusal quotes the kind the body names: a kind of megabytes made an answer
    and a log line of megabytes; both are cut to a bounded text saying how long it was."""
    path = PATH_MODELDEPLOYMENT_VALIDATE
    review = envelope(path)
    review["request"]["kind"]["kind"] = "K" * 2_000_000
    status, text = await _post(client, path, json.dumps(review).encode())
    assert status == 400
    assert "reviews ModelDeployment" in text
    assert len(text) < 1000 and "characters)" in text
