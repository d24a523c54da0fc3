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

from gpustack_render.core.settings import Settings

INV = "FieldValueInvalid"
REQ = "FieldValueRequired"
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
        id="port-flag.differs-from-declared-extra-args",
    ),
    pytest.param(
        deployment(role(ports=[{"port": 9000}], extraArgs=["--po=9001"])),
        [("port-flag.differs-from-declared", "spec.roles[0].extraArgs", INV)],
        id="port-flag.differs-from-declared-abbreviated",
    ),
    pytest.param(
        deployment(role(ports=[{"port": 9000}], command=["vllm", "serve", "m", "--port=9001"])),
        [("port-flag.differs-from-declared", "spec.roles[0].command", INV)],
        id="port-flag.differs-from-declared-command",
    ),
    pytest.param(
        deployment(role(ports=[{"port": 9000}], extraArgs=["--port", "9000"])),
        [],
        id="port-flag.differs-from-declared-equal",
    ),
    pytest.param(
        deployment(role(extraArgs=["--port", "9001"])),
        [],
        id="port-flag.differs-from-declared-no-ports",
    ),
    pytest.param(
        _pair(
            {"ports": [{"port": 9000}]},
            {"ports": [{"port": 9000}], "extraArgs": ["--port", "8300"]},
            router=LLMD,
        ),
        [],
        id="port-flag.differs-from-declared-direct-decoder-exempt",
    ),
    # §6.2 --port inside the reserved set on a role without ports
    # A prefiller on its own --port while the decoder serves on 8000 also leaves the router
    # unrendered (router.listener-ports-differ), which is a warning, not a refusal (D26 amended).
    pytest.param(
        _pair({"extraArgs": ["--port", "5557"]}, {}, router=LLMD),
        [("port-flag.reserved", "spec.router", INV)],
        id="port-flag.reserved-kv-events-with-router",
    ),
    pytest.param(
        _pair({"extraArgs": ["--port=8998"]}, {}, **CACHE),
        [("port-flag.reserved", "spec.roles[0].extraArgs", INV)],
        id="port-flag.reserved-bootstrap-with-cache",
    ),
    pytest.param(
        # Both halves listen on 5557, so a router dials them on one port.
        _pair(
            {"command": ["vllm", "serve", "m", "--port", "5557"]},
            {"command": ["vllm", "serve", "m", "--port", "5557"]},
            router=LLMD,
        ),
        [],
        id="port-flag.reserved-take-over-exempt",
    ),
    pytest.param(
        _pair(
            {"extraArgs": ["--port", "5557"]},
            {"extraArgs": ["--port", "5557"]},
            router=LLMD,
            engine="SGLang",
        ),
        [],
        id="port-flag.reserved-sglang-publishes-nothing",
    ),
    # §7 router
    pytest.param(
        deployment(router={"name": "vllm-router", "extraArgs": ["--port=1", "--po=2"]}),
        [("router.owned-flag", "spec.router.extraArgs[0]", INV)],
        id="router.owned-flag-owned-exact-only",
    ),
    pytest.param(
        deployment(router={"name": "llm-d-router", "extraArgs": ["--port=1"]}),
        [],
        id="router.owned-flag-owned-per-router",
    ),
    pytest.param(
        deployment(router={"name": "vllm-router", "disaggregationThresholdTokens": 0}),
        [("router.field-llm-d-only", "spec.router.disaggregationThresholdTokens", INV)],
        id="router.field-llm-d-only-threshold-elsewhere",
    ),
    pytest.param(
        deployment(router={"name": "llm-d-router", "disaggregationThresholdTokens": 0}),
        [],
        id="router.field-llm-d-only-threshold-llm-d",
    ),
    pytest.param(
        deployment(router={"name": "vllm-router"}, engine="SGLang"),
        [("router.engine-not-fronted", "spec.router.name", INV)],
        id="router.engine-not-fronted-vllm-router-sglang",
    ),
    pytest.param(
        deployment(router={"name": "sglang-gateway"}),
        [("router.engine-not-fronted", "spec.router.name", INV)],
        id="router.engine-not-fronted-gateway-vllm",
    ),
    pytest.param(
        deployment(router=LLMD, engine="SGLang"),
        [],
        id="router.engine-not-fronted-7.4-llm-d-sglang",
    ),
    pytest.param(
        deployment(role(ports=[{"port": 8000, "protocol": "UDP"}]), router=LLMD),
        [("router.port-not-tcp", "spec.router", INV)],
        id="router.port-not-tcp-udp",
    ),
    pytest.param(
        deployment(role(extraArgs=["--ssl-keyfile", "/k"]), router=LLMD),
        [("router.tls-endpoint", "spec.router", INV)],
        id="router.tls-endpoint-tls",
    ),
    pytest.param(
        deployment(role(extraArgs=["--ssl-keyfile", "/k"])), [], id="router.tls-endpoint-no-router"
    ),
    pytest.param(
        _pair({}, {"extraArgs": ["--port", "8000"]}, router=LLMD),
        [("router.decoder-own-port", "spec.router", INV)],
        id="router.decoder-own-port-decoder-own-port",
    ),
    pytest.param(
        _pair({}, {"extraArgs": ["--port", "8000"]}, router=LLMD, engine="SGLang"),
        [],
        id="router.decoder-own-port-sglang-decoder",
    ),
    pytest.param(
        _pair(
            {"instanceType": ASCEND},
            {"instanceType": ASCEND, "extraArgs": ["--port", "8000"]},
            router=LLMD,
        ),
        [],
        id="router.decoder-own-port-vllm-ascend-decoder",
    ),
    pytest.param(
        deployment(role("a", ports=[{"port": 9000}]), role("b"), router=LLMD),
        [("router.serving-ports-differ", "spec.router", INV)],
        id="router.serving-ports-differ-ports-differ",
    ),
    pytest.param(
        deployment(role("a", ports=[{"port": 8000}]), role("b"), router=LLMD),
        [],
        id="router.serving-ports-differ-default-port-equal",
    ),
    # The router's own objects (D26 amended): what would leave them unrendered is a warning
    # (test_router_object_problems_are_warnings), never a refusal.
    pytest.param(
        deployment(router={"name": "vllm-router", "image": None}),
        [],
        id="router.image-missing-default-image",
    ),
    pytest.param(
        deployment(role("a", extraArgs=["--port", "9000"]), role("b"), router=LLMD),
        [],
        id="router.listener-ports-differ",
    ),
    pytest.param(
        deployment(
            role("a", extraArgs=["--port", "9000"]),
            role("b", extraArgs=["--port=9000"]),
            router=LLMD,
        ),
        [],
        id="router.listener-ports-differ-same-own-port",
    ),
    pytest.param(
        _pair({"ports": [{"port": 9000}]}, {"ports": [{"port": 9000}]}, router=LLMD),
        [],
        id="router.listener-ports-differ-direct-decoder-behind-its-proxy",
    ),
    pytest.param(
        deployment(
            router={
                "name": "sglang-gateway",
                "requestTimeoutSeconds": 30,
                "extraArgs": ["--request-timeout-secs=60", "--request-timeout-secs-x"],
            },
            engine="SGLang",
        ),
        [("router.timeout-flag-twice", "spec.router.extraArgs[0]", INV)],
        id="router.timeout-flag-twice",
    ),
    pytest.param(
        deployment(router={"name": "vllm-router", "extraArgs": ["--request-timeout-secs", "60"]}),
        [],
        id="router.timeout-flag-twice-field-unset",
    ),
]


@pytest.mark.parametrize(("obj", "expected"), CASES)
def test_port_and_router_rules(obj: dict[str, Any], expected: list[tuple[str, str, str]]) -> None:
    objects = [*default_objects(), instance_type(ASCEND, manufacturer="ascend"), *cache_chain()]
    verdict = review(obj, objects)
    assert causes(verdict) == expected


@pytest.mark.parametrize(
    ("obj", "settings", "origin", "field"),
    [
        pytest.param(
            deployment(router={"name": "vllm-router", "image": None}),
            Settings(router_image_vllm_router=""),
            "router.image-missing",
            "spec.router.image",
            id="image-missing",
        ),
        pytest.param(
            deployment(role("a", extraArgs=["--port", "9000"]), role("b"), router=LLMD),
            Settings(),
            "router.listener-ports-differ",
            "spec.router",
            id="listener-ports-differ",
        ),
    ],
)
def test_router_object_problems_are_warnings(
    obj: dict[str, Any], settings: Settings, origin: str, field: str
) -> None:
    """D26 amended: the deployment is admitted; one warning names the field, the rule and the way
    out; the same document with the problem gone has no warning."""
    verdict = review(obj, default_objects(), settings=settings)
    assert verdict.allowed and causes(verdict) == []
    (warning,) = [w for w in verdict.warnings if origin in w]
    assert warning.startswith(f"{field}: ")
    if origin == "router.image-missing":
        assert "spec.router.image" in warning
        assert "model-deployment-router-image-vllm-router" in warning
    clean = review(deployment(router={"name": "vllm-router", "image": None}), default_objects())
    assert clean.allowed and list(clean.warnings) == []
