"""The router's command line: exactly the router-owned flags of docs/contract/admission.md §7
(each one that applies), the flag a spec field asks for, then ``spec.router.extraArgs``.

The flags are the pinned routers' own (docs/routers.md, "Command lines"; each router's
``--help`` is checked by tests/integration/test_router_binaries.py):

- ``vllm-router`` and ``sglang-gateway`` (the SGLang Model Gateway, ``sglang-router launch``)
  discover the engine Pods themselves through the Kubernetes API: ``--service-discovery`` in the
  deployment's namespace, a label selector matching only this deployment's serving Pods (the
  leader of a larger instance; :func:`~gpustack_render.core.labels.serving_selector`) and, for a
  prefill/decode pair, one selector per half on the role-kind label with the router's P/D flag.
  The Pods are dialled on their container-side listener (``--service-discovery-port``);
  vllm-router is told the pair's transfer is Mooncake. The router serves on the engines'
  serving port on every interface and its metrics on a fixed port.
- ``llm-d-router`` is an endpoint picker (an Envoy external processor) in standalone mode: the
  same serving Pods by ``--endpoint-selector``, their listener by ``--endpoint-target-ports``,
  its scheduling by ``--config-file`` (``llmd.py``), TLS on its gRPC port (the proxy beside it
  and a gateway speak TLS to it), its health on a fixed gRPC port, its metrics without token
  review (which needs cluster-wide RBAC a namespaced Role cannot grant).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from gpustack_render.engines.owned import LLM_D_ROUTER, SGLANG_GATEWAY, VLLM_ROUTER

#: The routers' metrics port (vllm-router's and the gateway's own default, made explicit).
METRICS_PORT: Final = 29000
#: llm-d-router's endpoint picker: the external-processor (gRPC), health (gRPC) and metrics
#: ports (its defaults; the health port is synthesized).
EPP_GRPC_PORT: Final = 9002
EPP_HEALTH_PORT: Final = 9003
EPP_METRICS_PORT: Final = 9090
#: Where the picker reads its scheduling configuration (a key of the router's ConfigMap).
EPP_CONFIG_DIR: Final = "/etc/llm-d-router"
EPP_CONFIG_KEY: Final = "config.yaml"
#: vllm-router's timeout flag; the gateway spells it the same.
REQUEST_TIMEOUT_FLAG: Final = "--request-timeout-secs"
#: Every flag a spec field (not the operator) puts on the router's line, by router: refused in
#: ``extraArgs`` while the field is set (``router.timeout-flag-twice``).
FIELD_FLAGS: Final[Mapping[str, tuple[str, ...]]] = {
    VLLM_ROUTER: (REQUEST_TIMEOUT_FLAG,),
    SGLANG_GATEWAY: (REQUEST_TIMEOUT_FLAG,),
    LLM_D_ROUTER: (),
}
#: The executable each router image runs (the PyPI packages' console scripts; the gateway takes
#: the ``launch`` subcommand to start the router alone).
COMMANDS: Final[Mapping[str, tuple[str, ...]]] = {
    VLLM_ROUTER: ("vllm-router",),
    SGLANG_GATEWAY: ("sglang-router", "launch"),
}
#: Each router's prefill/decode flag.
PD_FLAGS: Final[Mapping[str, str]] = {
    VLLM_ROUTER: "--vllm-pd-disaggregation",
    SGLANG_GATEWAY: "--pd-disaggregation",
}


def selector_words(selector: Mapping[str, str]) -> list[str]:
    """A selector as the discovery routers take it: one ``key=value`` word per label."""
    return [f"{k}={v}" for k, v in selector.items()]


def discovery_command(
    router: str,
    *,
    namespace: str,
    port: int,
    target_port: int,
    serving: Mapping[str, str] | None,
    prefill: Mapping[str, str] | None,
    decode: Mapping[str, str] | None,
    mooncake: bool,
    timeout: int | None,
    extra_args: Sequence[str],
) -> list[str]:
    """The whole command of ``vllm-router`` or ``sglang-gateway``.

    ``serving`` is the selector of a plain deployment; ``prefill`` and ``decode`` those of a
    pair's halves (then ``serving`` is ``None``). ``mooncake``: the pair's transfer is
    Mooncake (vllm-router only; the gateway has no such flag).
    """
    argv = [
        *COMMANDS[router],
        "--host",
        "0.0.0.0",
        "--port",
        str(port),
        "--prometheus-host",
        "0.0.0.0",
        "--prometheus-port",
        str(METRICS_PORT),
        "--service-discovery",
        "--service-discovery-namespace",
        namespace,
        "--service-discovery-port",
        str(target_port),
    ]
    if prefill is not None and decode is not None:
        argv += [PD_FLAGS[router]]
        argv += ["--prefill-selector", *selector_words(prefill)]
        argv += ["--decode-selector", *selector_words(decode)]
        if mooncake and router == VLLM_ROUTER:
            argv += ["--kv-connector", "mooncake"]
    elif serving is not None:
        argv += ["--selector", *selector_words(serving)]
    if timeout is not None:
        argv += [REQUEST_TIMEOUT_FLAG, str(timeout)]
    return [*argv, *extra_args]


def endpoint_picker_args(
    *, serving: Mapping[str, str], target_port: int, extra_args: Sequence[str]
) -> list[str]:
    """The arguments of llm-d-router's endpoint picker (the image's entry point runs it)."""
    selector = ",".join(selector_words(serving))
    return [
        f"--endpoint-selector={selector}",
        f"--endpoint-target-ports={target_port}",
        f"--config-file={EPP_CONFIG_DIR}/{EPP_CONFIG_KEY}",
        "--secure-serving=true",
        f"--grpc-health-port={EPP_HEALTH_PORT}",
        "--metrics-endpoint-auth=false",
        *extra_args,
    ]
