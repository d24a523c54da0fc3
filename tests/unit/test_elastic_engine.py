"""The engine's answers (docs/contract/elastic-ep.md §4.4; D29: vLLM 0.33.0). The answer bodies
below are what vLLM 0.33.0's elastic EP routes, scaling middleware and exception handlers answer
(taken from its router run with a stand-in engine client): the readers must read them."""

from __future__ import annotations

import pytest

from gpustack_render.elastic.engine import (
    COMPLETIONS_PATH,
    IS_SCALING_PATH,
    RANK_HEADER,
    SCALE_PATH,
    SCALE_TIMEOUT_SECONDS,
    ScaleVerdict,
    classify_scale,
    completion_request,
    is_scaling_request,
    read_bound,
    read_forward,
    read_is_scaling,
    scale_request,
)

SCALED = b'{"message":"Scaled to 4 data parallel engines"}'
DRAIN_TIMEOUT = (
    b'{"error":{"message":"Scale failed due to request drain timeout after 120 seconds",'
    b'"type":"Request Timeout","param":null,"code":408}}'
)
BAD_VALUE = (
    b'{"error":{"message":"new_data_parallel_size is required","type":"Bad Request",'
    b'"param":null,"code":400}}'
)
FAILED = (
    b'{"error":{"message":"Scale failed","type":"Internal Server Error","param":null,"code":500}}'
)
BUSY = b'{"error":"The model is currently scaling. Please try again later."}'
IDLE = (
    b'{"is_scaling_elastic_ep":false,"phase":"idle","epoch":null,"error":null,'
    b'"requested_data_parallel_size":null}'
)
SCALING = (
    b'{"is_scaling_elastic_ep":true,"phase":"committing","epoch":null,"error":null,'
    b'"requested_data_parallel_size":null}'
)
BOUND = (
    b'{"error":{"message":"data_parallel_rank -1 is out of range [0, 4).",'
    b'"type":"BadRequestError","param":null,"code":400}}'
)
COMPLETION = (
    b'{"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,'
    b'"text":" world","finish_reason":"length"}],"usage":{"prompt_tokens":1,'
    b'"completion_tokens":1,"total_tokens":2}}'
)


def test_the_requests() -> None:
    scale = scale_request(6)
    assert (scale.method, scale.path) == ("POST", SCALE_PATH)
    assert scale.body == {"new_data_parallel_size": 6, "drain_timeout": 120}
    assert scale.timeout_seconds == SCALE_TIMEOUT_SECONDS == 150
    assert is_scaling_request().path == IS_SCALING_PATH and is_scaling_request().body == {}
    bound = completion_request(-1, "qwen")
    assert bound.path == COMPLETIONS_PATH and bound.headers == {RANK_HEADER: "-1"}
    assert bound.body == {"model": "qwen", "prompt": "Hello", "max_tokens": 1, "stream": False}


@pytest.mark.parametrize(
    ("status", "body", "verdict", "detail"),
    [
        (200, SCALED, ScaleVerdict.SCALED, "Scaled to 4 data parallel engines"),
        (400, BAD_VALUE, ScaleVerdict.REFUSED, "new_data_parallel_size is required"),
        (408, DRAIN_TIMEOUT, ScaleVerdict.REFUSED, "drain timeout after 120 seconds"),
        (500, FAILED, ScaleVerdict.REFUSED, "Scale failed"),
        (503, BUSY, ScaleVerdict.REFUSED, "currently scaling"),
        (415, b'{"detail": "Unsupported Media Type"}', ScaleVerdict.REFUSED, "Unsupported"),
        (502, b"bad gateway", ScaleVerdict.REFUSED, "bad gateway"),
        (200, b'{"message": 4}', ScaleVerdict.LOST, "without a string message"),
        (200, b"ok", ScaleVerdict.LOST, "without a string message"),
        (None, b"", ScaleVerdict.LOST, "no answer"),
    ],
)
def test_the_scale_answer(
    status: int | None, body: bytes, verdict: ScaleVerdict, detail: str
) -> None:
    got = classify_scale(status, body)
    assert got.verdict is verdict and detail in got.detail and got.status == status


def test_a_transport_failure_is_a_lost_answer() -> None:
    got = classify_scale(None, transport_error="TimeoutError after 150 s")
    assert got.verdict is ScaleVerdict.LOST and got.detail == "TimeoutError after 150 s"


def test_a_refusal_records_the_status_and_the_engines_words() -> None:
    assert classify_scale(500, FAILED).refusal == "HTTP 500: Scale failed"
    assert classify_scale(503, BUSY).refusal.startswith(
        "HTTP 503 (busy: another resize holds the engine): The model is currently scaling"
    )


@pytest.mark.parametrize(
    ("status", "body", "value", "problem"),
    [
        (200, IDLE, False, ""),
        (200, SCALING, True, ""),
        (200, b'{"is_scaling_elastic_ep": null}', None, "without a boolean"),
        (200, b"{}", None, "without a boolean"),
        (200, b'{"is_scaling_elastic_ep": "false"}', None, "without a boolean"),
        (
            503,
            b'{"error":{"message":"External Elastic EP status is temporarily unavailable"}}',
            None,
            "HTTP 503 (External",
        ),
        (None, b"", None, "did not answer"),
    ],
)
def test_is_scaling(status: int | None, body: bytes, value: bool | None, problem: str) -> None:
    got, why = read_is_scaling(status, body)
    assert got is value and problem in why


@pytest.mark.parametrize(
    ("status", "body", "width", "problem"),
    [
        (400, BOUND, 4, ""),
        (503, BUSY, None, "answered HTTP 503 (The model is currently scaling"),
        (400, BAD_VALUE, None, "answered HTTP 400"),
        (200, COMPLETION, None, "answered HTTP 200"),
        (None, b"", None, "did not answer the bound probe"),
    ],
)
def test_the_bound_probe(status: int | None, body: bytes, width: int | None, problem: str) -> None:
    got, why = read_bound(status, body)
    assert got == width and problem in why


@pytest.mark.parametrize(
    ("status", "body", "problem"),
    [
        (200, COMPLETION, ""),
        (503, BUSY, "answered HTTP 503"),
        (200, COMPLETION.replace(b'"completion_tokens":1', b'"completion_tokens":2'), "one-token"),
        (200, COMPLETION.replace(b"text_completion", b"chat.completion"), "one-token"),
        (None, b"", "did not answer"),
    ],
)
def test_a_forward(status: int | None, body: bytes, problem: str) -> None:
    assert read_forward(status, body) == problem or (
        problem and problem in read_forward(status, body)
    )
