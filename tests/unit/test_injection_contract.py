"""The Pod contract (docs/contract/injection-notes.md §1, steps 1–6 of §2): label, annotation
vocabulary, values."""

from __future__ import annotations

import pytest

from gpustack_render.core.vocabulary import Engine, RoleKind
from gpustack_render.injection.contract import Contract, opted_in, read_contract
from gpustack_render.injection.refusal import Refusal

P = "kvcache.gpustack.ai/"
BASE = {P + "binding": "chat", P + "engine": "vLLM"}


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        pytest.param({P + "inject": "true"}, True, id="true"),
        pytest.param({P + "inject": "True"}, False, id="case-sensitive"),
        pytest.param({P + "inject": "false"}, False, id="false"),
        pytest.param({P + "inject": True}, False, id="not-a-string"),
        pytest.param({}, False, id="absent"),
    ],
)
def test_label_gate(labels: dict[str, object], expected: bool) -> None:
    assert opted_in(labels) is expected


REFUSED = [
    pytest.param(
        {P + "client-config": "{}"},
        "inject.written-key-submitted",
        id="inject.written-key-submitted-client-config",
    ),
    pytest.param(
        {P + "injected": "{}"},
        "inject.written-key-submitted",
        id="inject.written-key-submitted-injected",
    ),
    pytest.param({P + "bindings": "x"}, "inject.unknown-key", id="inject.unknown-key-typo"),
    pytest.param(
        {P + "inject": "true"},
        "inject.unknown-key",
        id="inject.unknown-key-label-key-as-annotation",
    ),
    pytest.param(
        {P + "zzz": "x", P + "injected": "{}"},
        "inject.written-key-submitted",
        id="sorted-first-written",
    ),
    pytest.param(
        {P + "aaa": "x", P + "injected": "{}"}, "inject.unknown-key", id="sorted-first-unknown"
    ),
    pytest.param(
        {"KVCache.gpustack.ai/domain": "team-b"},
        "inject.unknown-key",
        id="inject.unknown-key-prefix-case-domain",
    ),
    pytest.param(
        {"KVCACHE.GPUSTACK.AI/role": "Decode"},
        "inject.unknown-key",
        id="inject.unknown-key-prefix-case-role",
    ),
    pytest.param(
        {P + "domain": ""}, "inject.domain-annotation", id="inject.domain-annotation-empty-value"
    ),
    pytest.param(
        {P + "domain": "x", P + "engine": None},
        "inject.domain-annotation",
        id="inject.domain-annotation-before-engine",
    ),
    pytest.param({P + "engine": None}, "inject.engine-invalid", id="inject.engine-invalid-missing"),
    pytest.param(
        {P + "engine": "vllm"}, "inject.engine-invalid", id="inject.engine-invalid-lowercase"
    ),
    pytest.param(
        {P + "engine": "SGlang"}, "inject.engine-invalid", id="inject.engine-invalid-case"
    ),
    pytest.param(
        {P + "engine": " vLLM"}, "inject.engine-invalid", id="inject.engine-invalid-not-trimmed"
    ),
    pytest.param(
        {P + "engine": "vllm-ascend"},
        "inject.engine-ascend-spelled",
        id="inject.engine-ascend-spelled-ascend-spelling",
    ),
    pytest.param(
        {P + "engine": "SGLang", P + "manufacturer": "ascend"},
        "inject.manufacturer-without-vllm",
        id="inject.manufacturer-without-vllm-sglang",
    ),
    pytest.param(
        {P + "manufacturer": "Ascend"},
        "inject.manufacturer-invalid",
        id="inject.manufacturer-invalid-case",
    ),
    pytest.param(
        {P + "manufacturer": "nvidia"},
        "inject.manufacturer-invalid",
        id="inject.manufacturer-invalid-nvidia",
    ),
    pytest.param(
        {P + "manufacturer": ""},
        "inject.manufacturer-invalid",
        id="inject.manufacturer-invalid-empty",
    ),
    pytest.param({P + "role": "Server"}, "inject.role-invalid", id="inject.role-invalid-server"),
    pytest.param(
        {P + "role": "prefill"}, "inject.role-invalid", id="inject.role-invalid-lowercase"
    ),
    pytest.param(
        {P + "role": "Server", P + "engine": "SGLang"},
        "inject.role-invalid",
        id="inject.role-invalid-sglang-too",
    ),
]


@pytest.mark.parametrize(("changes", "rule"), REFUSED)
def test_refused(changes: dict[str, object], rule: str) -> None:
    notes = {**BASE, **changes}
    notes = {k: v for k, v in notes.items() if v is not None}
    out = read_contract(notes)
    assert isinstance(out, Refusal), out
    assert out.rule == rule, out.message


def test_messages_name_key_and_values() -> None:
    k2 = read_contract({**BASE, P + "bindng": "x"})
    assert isinstance(k2, Refusal)
    assert P + "bindng" in k2.message and P + "launch-args-forwarded" in k2.message
    e1 = read_contract({**BASE, P + "engine": "vllm"})
    assert isinstance(e1, Refusal) and "'vllm'" in e1.message and "[vLLM SGLang]" in e1.message
    e2 = read_contract({**BASE, P + "engine": "vllm-ascend"})
    assert isinstance(e2, Refusal) and P + "manufacturer" in e2.message


ACCEPTED = [
    pytest.param({}, Contract(Engine.VLLM, None, "chat", "", None), id="vllm"),
    pytest.param(
        {P + "manufacturer": "ascend"},
        Contract(Engine.VLLM_ASCEND, None, "chat", "", None),
        id="ascend",
    ),
    pytest.param(
        {P + "engine": "SGLang"}, Contract(Engine.SGLANG, None, "chat", "", None), id="sglang"
    ),
    pytest.param(
        {P + "role": "Prefill"},
        Contract(Engine.VLLM, RoleKind.PREFILL, "chat", "", None),
        id="prefill",
    ),
    pytest.param(
        {P + "role": "Decode"},
        Contract(Engine.VLLM, RoleKind.DECODE, "chat", "", None),
        id="decode",
    ),
    pytest.param({P + "role": ""}, Contract(Engine.VLLM, None, "chat", "", None), id="role-empty"),
    pytest.param(
        {P + "container": "server", P + "launch-args-forwarded": "yes"},
        Contract(Engine.VLLM, None, "chat", "server", "yes"),
        id="container-and-forwarding-kept-raw",
    ),
    pytest.param(
        {P + "binding": None}, Contract(Engine.VLLM, None, "", "", None), id="binding-absent-later"
    ),
    pytest.param(
        {"other.io/x": "y", "kvcache.gpustack.ai": "z"},
        Contract(Engine.VLLM, None, "chat", "", None),
        id="other-keys-ignored",
    ),
]


@pytest.mark.parametrize(("changes", "contract"), ACCEPTED)
def test_accepted(changes: dict[str, object], contract: Contract) -> None:
    notes = {k: v for k, v in {**BASE, **changes}.items() if v is not None}
    assert read_contract(notes) == contract
