"""Fuzzing the library entry points and the webhook's request parser: no input crashes them.

Every golden case seeds a mutation stream (:mod:`fuzz.corpus`); each entry point must answer
as it documents for any input: ``render`` a Rendering or a ``RenderError`` that names a real
problem (``render`` wraps any crash as ``render.internal``, which fails here), the reviews a
verdict (never an internal error: no lookup fails here), the request parser a decoded review
or ``BadReview``, the JSON reader a value or ``ValueError``. The default budget is derandomized
and runs in CI; ``make fuzz`` runs a long random one.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from gpustack_render.admission import mutate_deployment, validate_deployment
from gpustack_render.core import nesting
from gpustack_render.core.errors import RenderError, VerdictKind
from gpustack_render.core.review import AdmissionRequest
from gpustack_render.injection import review_pod
from gpustack_render.rendering.renderer import render
from gpustack_render.schema.decoding import decode_deployment
from gpustack_webhook.server import BadReview, default_webhooks, parse_review

from .corpus import FUZZ, Seed, deep, json_values, mutated, seeds

pytestmark = pytest.mark.fuzz

DEPLOYMENTS = seeds("ModelDeployment")
PODS = seeds("Pod")


@st.composite
def mangled(draw: st.DrawFn, kind: str) -> tuple[Seed, dict[str, Any], dict[str, Any]]:
    """A seed, a mutation of its subject, and a second one (an UPDATE's old object)."""
    seed = draw(st.sampled_from(DEPLOYMENTS if kind == "ModelDeployment" else PODS))
    return seed, draw(mutated(seed.subject)), draw(mutated(seed.subject))


def _request(operation: Any, obj: dict[str, Any], old: dict[str, Any]) -> AdmissionRequest:
    """A request as the API server sends it: an old object on UPDATE and DELETE only."""
    stored = old if operation in ("UPDATE", "DELETE") else None
    return AdmissionRequest(operation=operation, object=obj, old_object=stored, namespace="team-a")


def _judged(verdict: Any) -> None:
    assert verdict.kind is not VerdictKind.INTERNAL, verdict.message


def renders_or_refuses(seed: Seed, obj: dict[str, Any]) -> str:
    """``obj`` renders, or ``render`` refuses it with a ``RenderError`` naming a problem of the
    input: an internal error (a crash ``render`` wrapped, origin ``render.internal``) fails.
    Returns what happened, for the run's statistics."""
    md, _errs = decode_deployment(obj)
    if md is None:
        return "refused by the schema"
    try:
        render(md, lookups=seed.lookups(), settings=seed.bundle.settings)
    except RenderError as exc:
        assert exc.origin != INTERNAL_RENDER_ERROR, str(exc)
        return f"render error {exc.origin}"
    return "rendered"


#: The origin ``render`` gives a crash it wrapped (``rendering/renderer.py``).
INTERNAL_RENDER_ERROR = "render.internal"


@FUZZ
@given(case=mangled("ModelDeployment"))
def test_render_answers_a_rendering_or_a_render_error(
    case: tuple[Seed, dict[str, Any], dict[str, Any]],
) -> None:
    seed, obj, _ = case
    event(renders_or_refuses(seed, obj))


def test_a_crash_inside_render_fails_the_render_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check above can fail: a crash injected into the renderer (as a bug would be) comes
    back from ``render`` as a ``RenderError`` and the check rejects it."""
    from gpustack_render.rendering import renderer

    def crash(*_: Any, **__: Any) -> Any:
        raise ZeroDivisionError("injected")

    seed = DEPLOYMENTS[0]
    renders_or_refuses(seed, seed.subject)  # the seed itself renders
    monkeypatch.setattr(renderer, "_render", crash)
    with pytest.raises(AssertionError, match="internal error: ZeroDivisionError"):
        renders_or_refuses(seed, seed.subject)


@FUZZ
@given(case=mangled("ModelDeployment"), operation=st.sampled_from(["CREATE", "UPDATE", "DELETE"]))
def test_admission_answers_a_verdict(
    case: tuple[Seed, dict[str, Any], dict[str, Any]], operation: Any
) -> None:
    seed, obj, old = case
    request = _request(operation, obj, old)
    for review in (mutate_deployment, validate_deployment):
        _judged(review(request, lookups=seed.lookups(), settings=seed.bundle.settings))


@FUZZ
@given(case=mangled("Pod"), operation=st.sampled_from(["CREATE", "UPDATE"]))
def test_injection_and_the_freeze_answer_a_verdict(
    case: tuple[Seed, dict[str, Any], dict[str, Any]], operation: Any
) -> None:
    seed, obj, old = case
    request = _request(operation, obj, old)
    _judged(review_pod(request, lookups=seed.lookups(), settings=seed.bundle.settings))


def _envelope(request: Any) -> dict[str, Any]:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def _good_request(seed: Seed) -> dict[str, Any]:
    return {
        "uid": "u-1",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "operation": "CREATE",
        "namespace": "team-a",
        "userInfo": {"username": "alice", "groups": ["team-a"]},
        "object": seed.subject,
    }


@st.composite
def bodies(draw: st.DrawFn) -> bytes:
    """Request bodies: raw bytes, arbitrary JSON, and mutated well-formed reviews."""
    choice = draw(st.integers(min_value=0, max_value=3))
    if choice == 0:
        return draw(st.binary(max_size=200))
    if choice == 1:
        return json.dumps(draw(json_values)).encode()
    if choice == 2:
        depth = draw(st.integers(min_value=90, max_value=3000))
        return (("[" * depth) + ("]" * draw(st.sampled_from([depth, depth - 1])))).encode()
    seed = draw(st.sampled_from(PODS))
    review = draw(mutated(_envelope(_good_request(seed)), most=4))
    return nesting_safe_dumps(review)


def nesting_safe_dumps(value: Any) -> bytes:
    """JSON text of ``value`` even when a mutation nested it past the encoder's limit."""
    try:
        return json.dumps(value).encode()
    except (RecursionError, ValueError):
        return json.dumps({"deep": "dropped", "value": str(type(value))}).encode()


@FUZZ
@given(body=bodies(), hook=st.sampled_from(default_webhooks()))
def test_the_request_parser_answers_a_review_or_bad_review(body: bytes, hook: Any) -> None:
    try:
        review = parse_review(body, hook)
    except BadReview as exc:
        assert str(exc)
        return
    request = AdmissionRequest.from_review(review)
    assert request.uid


@FUZZ
@given(
    text=st.one_of(
        st.text(max_size=300),
        st.builds(
            lambda d, s: json.dumps(deep(d, s)) if d < 900 else "[" * d + "]" * d,
            st.integers(min_value=0, max_value=5000),
            st.text(max_size=5),
        ),
    )
)
def test_the_bounded_reader_answers_a_value_or_value_error(text: str) -> None:
    try:
        value = nesting.loads(text)
    except ValueError:
        return
    nesting.too_deep(value)
