"""The UPDATE freeze (docs/contract/injection-notes.md §10) and the injection record (§9)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gpustack_render.core.errors import ErrorType
from gpustack_render.core.vocabulary import Engine
from gpustack_render.injection import InjectionRecord, freeze_pod, parse_record

P = "kvcache.gpustack.ai/"
LABEL = P + "inject"
RECORD = '{"binding":"chat","engine":"vllm","vehicle":"file","tenantInjected":true}'
CONFIG = '{"metadata_server":"P2PHANDSHAKE"}'


def pod(
    *, label: str | None = "true", notes: dict[str, str | None] | None = None, **meta: Any
) -> dict[str, Any]:
    labels = {"app": "chat"}
    if label is not None:
        labels[LABEL] = label
    annotations = {P + "binding": "chat", P + "injected": RECORD, P + "client-config": CONFIG}
    for key, value in (notes or {}).items():
        if value is None:
            annotations.pop(key, None)
        else:
            annotations[key] = value
    metadata = {"name": "chat-0", "labels": labels, "annotations": annotations, **meta}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": {}}


INJECTED = pod()
TERMINATING = pod(deletionTimestamp="2025-01-01T00:00:00Z", finalizers=["x/y"])
PLAIN = pod(label=None, notes={P + "injected": None, P + "client-config": None})

CASES = [
    pytest.param(INJECTED, pod(), [], id="unchanged"),
    pytest.param(INJECTED, pod(finalizers=["a/b"]), [], id="finalizer-added"),
    pytest.param(
        TERMINATING,
        pod(deletionTimestamp="2025-01-01T00:00:00Z"),
        [],
        id="finalizer-removed-while-terminating",
    ),
    pytest.param(
        INJECTED, pod(notes={"other/x": "y", P + "binding": "other"}), [], id="other-annotations"
    ),
    pytest.param(
        PLAIN,
        pod(label=None, notes={P + "injected": None, P + "client-config": None, "a": "b"}),
        [],
        id="never-opted-in",
    ),
    pytest.param(
        PLAIN,
        pod(label=None, notes={P + "client-config": None}),
        [],
        id="record-on-a-pod-without-label",
    ),
    pytest.param(
        PLAIN,
        pod(notes={P + "injected": None, P + "client-config": None}),
        [("metadata.labels[kvcache.gpustack.ai/inject]", "freeze.inject-label-added")],
        id="label-added",
    ),
    pytest.param(
        INJECTED,
        pod(label=None),
        [("metadata.labels[kvcache.gpustack.ai/inject]", "freeze.inject-label-removed")],
        id="label-removed",
    ),
    pytest.param(
        INJECTED,
        pod(label="false"),
        [("metadata.labels[kvcache.gpustack.ai/inject]", "freeze.inject-label-removed")],
        id="label-changed",
    ),
    pytest.param(
        INJECTED,
        pod(notes={P + "injected": RECORD.replace("true", "false")}),
        [
            (
                "metadata.annotations[kvcache.gpustack.ai/injected]",
                "freeze.written-annotation-changed",
            )
        ],
        id="record-edited",
    ),
    pytest.param(
        INJECTED,
        pod(notes={P + "client-config": None}),
        [
            (
                "metadata.annotations[kvcache.gpustack.ai/client-config]",
                "freeze.written-annotation-changed",
            )
        ],
        id="client-config-removed",
    ),
    pytest.param(
        pod(notes={P + "client-config": None}),
        pod(),
        [
            (
                "metadata.annotations[kvcache.gpustack.ai/client-config]",
                "freeze.written-annotation-changed",
            )
        ],
        id="client-config-added",
    ),
    pytest.param(
        TERMINATING,
        pod(
            deletionTimestamp="2025-01-01T00:00:00Z",
            finalizers=[],
            notes={P + "client-config": "{}"},
        ),
        [
            (
                "metadata.annotations[kvcache.gpustack.ai/client-config]",
                "freeze.written-annotation-changed",
            )
        ],
        id="terminating-still-frozen",
    ),
    pytest.param(
        INJECTED,
        pod(label="no", notes={P + "injected": None, P + "client-config": "{}"}),
        [
            ("metadata.labels[kvcache.gpustack.ai/inject]", "freeze.inject-label-removed"),
            (
                "metadata.annotations[kvcache.gpustack.ai/client-config]",
                "freeze.written-annotation-changed",
            ),
            (
                "metadata.annotations[kvcache.gpustack.ai/injected]",
                "freeze.written-annotation-changed",
            ),
        ],
        id="all-violations-together",
    ),
]


@pytest.mark.parametrize(("old", "new", "expected"), CASES)
def test_freeze(old: dict[str, Any], new: dict[str, Any], expected: list[tuple[str, str]]) -> None:
    before = copy.deepcopy((old, new))
    errs = freeze_pod(old, new)
    assert [(e.field, e.origin) for e in errs] == expected
    assert all(e.type is ErrorType.FORBIDDEN for e in errs)
    assert (old, new) == before


def test_freeze_messages() -> None:
    errs = freeze_pod(INJECTED, pod(notes={P + "client-config": "{}"}))
    assert "/etc/gpustack/kvcache/mooncake.json" in errs[0].detail
    added = freeze_pod(PLAIN, pod(notes={P + "injected": None, P + "client-config": None}))
    assert "CREATE" in added[0].detail


@pytest.mark.parametrize("junk", [None, {}, {"metadata": "x"}, {"metadata": {"labels": ["a"]}}])
def test_freeze_tolerates_malformed_objects(junk: Any) -> None:
    assert [e.origin for e in freeze_pod(INJECTED, junk)] == [
        "freeze.inject-label-removed",
        "freeze.written-annotation-changed",
        "freeze.written-annotation-changed",
    ]
    assert freeze_pod(junk, junk) == []


def test_record_round_trip_and_order() -> None:
    record = InjectionRecord("chat", Engine.SGLANG, "environment", "", False, "", True)
    assert record.to_json() == (
        '{"binding":"chat","engine":"sglang","vehicle":"environment","tenantInjected":false,'
        '"launchProgram":"","launchArgsForwarded":true}'
    )
    assert parse_record(record.to_json()) == record


def test_record_escapes_and_ignores_legacy_keys() -> None:
    record = InjectionRecord("a&b", Engine.VLLM, "file", "d", True, "<x>", False)
    assert '"binding":"a\\u0026b"' in record.to_json() and "\\u003cx\\u003e" in record.to_json()
    legacy = (
        '{"binding":"c","engine":"vllm","engineVersion":"v0.9","vehicle":"file",'
        '"tenantInjected":true}'
    )
    parsed = parse_record(legacy)
    assert parsed is not None and parsed.binding == "c" and parsed.tenant_injected
    assert parse_record("not json") is None
    assert parse_record("[1]") is None
