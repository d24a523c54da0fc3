"""One hostile object stays one unreadable object: bounded JSON nesting and per-object decoding
(the parser, the models, the controller's list and watch decoding, the webhook's live reads)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gpustack_render.api.inputs import KVCachePoolBinding
from gpustack_render.core import nesting
from gpustack_render.schema.decoding import decode_deployment, decode_model
from gpustack_render.schema.lookups import LookupFailed
from gpustack_webhook.lookups import LiveSources, ReadKey

DEEP = 1200


def deep_text(depth: int, leaf: str = "1") -> str:
    return '{"x":' * depth + leaf + "}" * depth


def binding_text(name: str, *, depth: int = 0) -> str:
    extra = f',"unknownField":{deep_text(depth)}' if depth else ""
    return (
        '{"apiVersion":"worker.gpustack.ai/v1","kind":"KVCachePoolBinding",'
        f'"metadata":{{"name":"{name}","namespace":"team-a"}},'
        '"spec":{"poolRef":{"name":"pool"},"domain":{"blockSize":16,"dtype":"bfloat16"}'
        f"{extra}}}}}"
    )


def test_plain_json_is_json_loads() -> None:
    text = '{"a":[1,{"b":"x\\"]}"}],"c":null}'
    assert nesting.loads(text) == json.loads(text)
    assert nesting.loads(text.encode()) == json.loads(text)


def test_nesting_past_the_parser_cuts_only_the_deep_value() -> None:
    # The plain parser gives up near 1,000 levels (RecursionError, not a ValueError).
    with pytest.raises(RecursionError):
        json.loads(deep_text(DEEP))
    text = (
        '{"items":['
        + binding_text("deep", depth=DEEP)
        + ","
        + binding_text("fine")
        + '],"metadata":{"resourceVersion":"7"}}'
    )
    listed = nesting.loads(text)
    deep, fine = listed["items"]
    assert listed["metadata"] == {"resourceVersion": "7"}
    assert fine == json.loads(binding_text("fine"))
    assert deep["metadata"]["name"] == "deep"
    path = nesting.too_deep(deep)
    assert path is not None and str(path).startswith("spec.unknownField.x.x")
    assert nesting.too_deep(fine) is None


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("[" * DEEP + "]" * (DEEP - 1), id="unbalanced"),
        pytest.param('{"a":tru,"b":' + deep_text(DEEP) + "}", id="bad-shallow-value"),
        pytest.param('["' + "[" * DEEP, id="unterminated-string"),
    ],
)
def test_broken_deep_text_is_a_value_error(text: str) -> None:
    with pytest.raises(ValueError):
        nesting.loads(text)


def test_a_broken_value_inside_a_cut_subtree_is_still_unreadable() -> None:
    value = nesting.loads('{"a":' + deep_text(DEEP, leaf="tru") + "}")
    assert nesting.too_deep(value) is not None


def test_strings_with_brackets_do_not_count_as_nesting() -> None:
    text = json.dumps({"s": "[" * 5000 + '\\"{' * 10})
    assert nesting.loads(text) == json.loads(text)


def test_too_deep_walks_any_depth_without_recursion() -> None:
    value: Any = 1
    for _ in range(50_000):
        value = [value]
    path = nesting.too_deep({"spec": value})
    assert path is not None and len(path.parts) == nesting.MAX_DEPTH
    shallow: Any = 1
    for _ in range(nesting.MAX_DEPTH):  # exactly the bound: allowed
        shallow = {"k": shallow}
    assert nesting.too_deep(shallow) is None
    assert nesting.too_deep({"k": shallow}) is not None
    assert nesting.too_deep({"k": {"k": []}}, max_depth=2) is not None


def test_models_never_see_a_deep_object() -> None:
    data = json.loads(binding_text("deep", depth=500))  # parses, but past the bound
    model, errs = decode_model(KVCachePoolBinding, data)
    assert model is None
    (err,) = errs
    assert err.origin == "schema.nesting-too-deep" and err.field.startswith("spec.unknownField.x")
    md, md_errs = decode_deployment({"apiVersion": "x", "spec": {"roles": [data]}})
    assert md is None and [e.origin for e in md_errs] == ["schema.nesting-too-deep"]


@pytest.mark.parametrize("error", [RecursionError, MemoryError, TypeError])
def test_any_model_failure_is_one_error_on_that_object(
    error: type[BaseException], monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom(data: Any) -> Any:
        raise error("boom")

    monkeypatch.setattr(KVCachePoolBinding, "model_validate", boom)
    model, errs = decode_model(KVCachePoolBinding, json.loads(binding_text("b")))
    assert model is None
    (err,) = errs
    assert err.origin == "schema.undecodable" and error.__name__ in err.detail


class DeepReader:
    """Answers the stored deep Binding as the API server's text would decode."""

    async def get_object(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        value = nesting.loads(binding_text(name, depth=DEEP))
        assert isinstance(value, dict)
        return value

    async def get_config_map_data(self, namespace: str, name: str) -> dict[str, str] | None:
        return None


async def test_the_webhook_names_the_unreadable_object() -> None:
    sources = LiveSources(DeepReader(), namespace="ops")
    with pytest.raises(LookupFailed) as info:
        await sources.read(ReadKey("KVCachePoolBinding", "team-a", "deep"))
    assert (info.value.kind, info.value.namespace, info.value.name) == (
        "KVCachePoolBinding",
        "team-a",
        "deep",
    )
    assert "does not decode" in info.value.reason and "nested deeper than" in info.value.reason


def test_the_mutating_review_bounds_nesting_before_it_compares() -> None:
    """Found by the fuzz suite: the mutating webhook compared and diffed the raw object, and a
    999-deep value raised RecursionError there (the validating one decodes first)."""
    from gpustack_render.admission import mutate_deployment
    from gpustack_render.core.review import AdmissionRequest
    from gpustack_render.core.settings import Settings
    from gpustack_render.schema.lookups import StaticLookups

    value: Any = 1
    for _ in range(999):
        value = [value]
    obj = {"apiVersion": "worker.gpustack.ai/v1", "kind": "ModelDeployment", "spec": value}
    verdict = mutate_deployment(
        AdmissionRequest("CREATE", obj, namespace="team-a"),
        lookups=StaticLookups(),
        settings=Settings(),
    )
    assert not verdict.allowed
    assert [e.origin for e in verdict.errors] == ["schema.nesting-too-deep"]


def test_pod_reviews_bound_nesting_before_they_read_the_pod() -> None:
    """Found by the fuzz suite: a 3,000-deep value in ``args`` raised RecursionError where the
    launch check turned a non-string token into text."""
    from gpustack_render.core.review import AdmissionRequest
    from gpustack_render.core.settings import Settings
    from gpustack_render.injection import review_pod
    from gpustack_render.schema.lookups import StaticLookups

    value: Any = 1
    for _ in range(3000):
        value = [value]
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "labels": {"kvcache.gpustack.ai/inject": "true"}},
        "spec": {"containers": [{"name": "main", "command": ["vllm"], "args": [value]}]},
    }
    world: dict[str, Any] = {"lookups": StaticLookups(), "settings": Settings()}
    created = review_pod(AdmissionRequest("CREATE", pod, namespace="team-a"), **world)
    assert not created.allowed and created.origin == "inject.nesting-too-deep"
    assert "nested deeper than" in created.message
    old = {**pod, "spec": {}}
    updated = review_pod(
        AdmissionRequest("UPDATE", pod, old_object=old, namespace="team-a"), **world
    )
    assert not updated.allowed and [e.origin for e in updated.errors] == ["schema.nesting-too-deep"]
    # The long fuzz run: the deep value as the Pod's name, which the verdict names.
    named = {**old, "metadata": {**pod["metadata"], "name": value}}
    renamed = review_pod(
        AdmissionRequest("UPDATE", named, old_object=old, namespace="team-a"), **world
    )
    assert not renamed.allowed and [e.origin for e in renamed.errors] == ["schema.nesting-too-deep"]


@pytest.mark.parametrize("depth", [0, 1, 5, nesting.MAX_DEPTH - 1, nesting.MAX_DEPTH, 200])
@pytest.mark.parametrize("container", ["dict", "list", "mixed"])
def test_the_quick_pass_agrees_with_the_path_walk(depth: int, container: str) -> None:
    # too_deep first walks without building paths; it must say "within" exactly when the walk
    # that names the path finds nothing, at the bound and on either side of it.
    value: Any = "leaf"
    for level in range(depth):
        as_dict = container == "dict" or (container == "mixed" and level % 2 == 0)
        value = {"k": value, "s": 1} if as_dict else [1, value]
    found = nesting.too_deep(value, max_depth=nesting.MAX_DEPTH)
    assert nesting.within(value, nesting.MAX_DEPTH) is (found is None)
    assert (found is None) is (depth <= nesting.MAX_DEPTH)
