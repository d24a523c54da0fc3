"""Port rules (docs/contract/admission.md §6) and router rules (§7) on CREATE."""

from __future__ import annotations

from typing import Any

import pytest
from admission_support import (
    cache_chain,
    causes,
    default_objects,
    deployment,
    instance_type,
    pd,
    review,
    role,
)

INV = "FieldValueInvalid"
LLMD = {"name": "llm-d-router"}
CACHE: dict[str, Any] = {"kvCache": {"poolRef": {"name": "team-a-dram"}}}
ASCEND = "ascend-8x"


def _pair(prefill: dict[str, Any], decode: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return pd(
        roles=[role("prefill", kind="Prefill", **prefill), role("decode", kind="Decode", **decode)],
        **spec,
    )


CASES = [
    # §6.1 --port against the first declared port
    pytest.param(
        deployment(role(ports=[{"port": 9000}], extraArgs=["--port", "9001"])),
        [("port-flag.differs-from-declared", "spec.roles[0].extraArgs", INV)],
        id="6.1-extra-args",
    ),
    pytest.param(
        deployment(role(ports=[{"port": 9000}], extraArgs=["--po=9001"])),
        [("port-flag.differs-from-declared", "spec.roles[0].extraArgs", INV)],
        id="6.1-abbreviated",
    ),
    pytest.param(
        deployment(role(ports=[{"port": 9000}], command=["vllm", "serve", "m", "--port=9001"])),
        [("port-flag.differs-from-declared", "spec.roles[0].command", INV)],
        id="6.1-command",
    ),
    pytest.param(
        deployment(role(ports=[{"port": 9000}], extraArgs=["--port", "9000"])), [], id="6.1-equal"
    ),
    pytest.param(deployment(role(extraArgs=["--port", "9001"])), [], id="6.1-no-ports"),
    pytest.param(
        _pair(
            {"ports": [{"port": 9000}]},
            {"ports": [{"port": 9000}], "extraArgs": ["--port", "8300"]},
            router=LLMD,
        ),
        [],
        id="6.1-direct-decoder-exempt",
    ),
    # §6.2 --port inside the reserved set on a role without ports
    pytest.param(
        _pair({"extraArgs": ["--port", "5557"]}, {}, router=LLMD),
        [("port-flag.reserved", "spec.router", INV)],
        id="6.2-kv-events-with-router",
    ),
    pytest.param(
        _pair({"extraArgs": ["--port=8998"]}, {}, **CACHE),
        [("port-flag.reserved", "spec.roles[0].extraArgs", INV)],
        id="6.2-bootstrap-with-cache",
    ),
    pytest.param(
        _pair({"command": ["vllm", "serve", "m", "--port", "5557"]}, {}, router=LLMD),
        [],
        id="6.2-take-over-exempt",
    ),
    pytest.param(
        _pair({"extraArgs": ["--port", "5557"]}, {}, router=LLMD, engine="SGLang"),
        [],
        id="6.2-sglang-publishes-nothing",
    ),
    # §7 router
    pytest.param(
        deployment(router={"name": "vllm-router", "extraArgs": ["--port=1", "--po=2"]}),
        [("router.owned-flag", "spec.router.extraArgs[0]", INV)],
        id="7.1-owned-exact-only",
    ),
    pytest.param(
        deployment(router={"name": "llm-d-router", "extraArgs": ["--port=1"]}),
        [],
        id="7.1-owned-per-router",
    ),
    pytest.param(
        deployment(router={"name": "vllm-router", "disaggregationThresholdTokens": 0}),
        [("router.field-llm-d-only", "spec.router.disaggregationThresholdTokens", INV)],
        id="7.2-threshold-elsewhere",
    ),
    pytest.param(
        deployment(router={"name": "llm-d-router", "disaggregationThresholdTokens": 0}),
        [],
        id="7.2-threshold-llm-d",
    ),
    pytest.param(
        deployment(router={"name": "vllm-router"}, engine="SGLang"),
        [("router.engine-not-fronted", "spec.router.name", INV)],
        id="7.3-vllm-router-sglang",
    ),
    pytest.param(
        deployment(router={"name": "sglang-gateway"}),
        [("router.engine-not-fronted", "spec.router.name", INV)],
        id="7.3-gateway-vllm",
    ),
    pytest.param(deployment(router=LLMD, engine="SGLang"), [], id="7.3-7.4-llm-d-sglang"),
    pytest.param(
        deployment(role(ports=[{"port": 8000, "protocol": "UDP"}]), router=LLMD),
        [("router.port-not-tcp", "spec.router", INV)],
        id="7.5a-udp",
    ),
    pytest.param(
        deployment(role(extraArgs=["--ssl-keyfile", "/k"]), router=LLMD),
        [("router.tls-endpoint", "spec.router", INV)],
        id="7.5b-tls",
    ),
    pytest.param(deployment(role(extraArgs=["--ssl-keyfile", "/k"])), [], id="7.5b-no-router"),
    pytest.param(
        _pair({}, {"extraArgs": ["--port", "8000"]}, router=LLMD),
        [("router.decoder-own-port", "spec.router", INV)],
        id="7.5c-decoder-own-port",
    ),
    pytest.param(
        _pair({}, {"extraArgs": ["--port", "8000"]}, router=LLMD, engine="SGLang"),
        [],
        id="7.5c-sglang-decoder",
    ),
    pytest.param(
        _pair(
            {"instanceType": ASCEND},
            {"instanceType": ASCEND, "extraArgs": ["--port", "8000"]},
            router=LLMD,
        ),
        [],
        id="7.5c-vllm-ascend-decoder",
    ),
    pytest.param(
        deployment(role("a", ports=[{"port": 9000}]), role("b"), router=LLMD),
        [("router.serving-ports-differ", "spec.router", INV)],
        id="7.6-ports-differ",
    ),
    pytest.param(
        deployment(role("a", ports=[{"port": 8000}]), role("b"), router=LLMD),
        [],
        id="7.6-default-port-equal",
    ),
]


@pytest.mark.parametrize(("obj", "expected"), CASES)
def test_port_and_router_rules(obj: dict[str, Any], expected: list[tuple[str, str, str]]) -> None:
    objects = [*default_objects(), instance_type(ASCEND, manufacturer="ascend"), *cache_chain()]
    verdict = review(obj, objects)
    assert causes(verdict) == expected
