"""llm-d-router's two configuration files: the endpoint picker's scheduling configuration and
the HTTP proxy (Envoy) in front of it (docs/routers.md, "llm-d-router").

**Scheduling** (``EndpointPickerConfig``, llm-d-inference-scheduler's plugins):

- scoring by prefix-cache locality — by the engines' KV events (``precise-prefix-cache-scorer``,
  subscribing to ``tcp://<Pod>:5557`` of each endpoint, topic ``kv@``, the publisher the
  renderer gives a native-vLLM producer, docs/contract/render.md §17.3) when a role publishes
  them and a tokenizer image is configured, else by the picker's own estimate
  (``prefix-cache-scorer``) — plus queue depth, then the highest score;
- a prefill/decode pair: one scheduling profile per half, each filtered on the role-kind label
  (``by-label``), the ``disagg-headers-handler`` that tells the decoder's routing proxy which
  prefiller to use, and the ``prefix-based-pd-decider`` whose ``nonCachedTokens`` is
  ``spec.router.disaggregationThresholdTokens``;
- SGLang engines: the picker's data layer reads SGLang's gauge names (its default is vLLM's).

**Proxy** (Envoy, as the Gateway API Inference Extension runs it beside a standalone picker):
a listener on the serving port calls the picker on loopback (gRPC over TLS) for every request
and forwards to the endpoint it names (``x-gateway-destination-endpoint``); a readiness
listener answers ``/ready``; the route timeout is ``spec.router.requestTimeoutSeconds`` (the
proxy's own 86400 s when unset).

Both files are JSON text, which both programs read as YAML.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from gpustack_render.core.labels import ROLE_KIND
from gpustack_render.engines.owned import KV_EVENTS_PORT
from gpustack_render.engines.transfer import KV_EVENTS_TOPIC
from gpustack_render.rendering.router.commandline import EPP_GRPC_PORT

#: The picker's configuration kind.
EPP_CONFIG_API_VERSION: Final = "inference.networking.x-k8s.io/v1alpha1"
EPP_CONFIG_KIND: Final = "EndpointPickerConfig"
#: The decider's threshold when ``disaggregationThresholdTokens`` is unset: the value of the
#: prefill/decode sample configuration llm-d-inference-scheduler v0.7.1 ships (its
#: ``pd-epp-config`` sample). The decider's code default, 0, never disaggregates.
DEFAULT_NON_CACHED_TOKENS: Final = 16
#: vLLM's default KV block size, the token block the precise scorer hashes by.
DEFAULT_BLOCK_SIZE: Final = 16
#: Where the picker and its tokenizer meet (the tokenizer's default socket).
TOKENIZER_DIR: Final = "/tmp/tokenizer"
TOKENIZER_SOCKET: Final = f"{TOKENIZER_DIR}/tokenizer-uds.socket"
#: The tokenizer's health port (its ``PROBE_PORT``).
TOKENIZER_PROBE_PORT: Final = 8082
#: The proxy: its admin (loopback only) and readiness listeners, and its configuration key.
PROXY_ADMIN_PORT: Final = 19000
PROXY_READY_PORT: Final = 19001
PROXY_CONFIG_DIR: Final = "/etc/envoy"
PROXY_CONFIG_KEY: Final = "envoy.yaml"
#: The proxy's route timeout when ``requestTimeoutSeconds`` is unset (the Inference Extension's).
PROXY_DEFAULT_TIMEOUT_SECONDS: Final = 86400
#: The header the picker names the chosen endpoint in.
DESTINATION_HEADER: Final = "x-gateway-destination-endpoint"

_PRECISE = "precise-prefix-cache-scorer"
_METRICS_SOURCE = "metrics-data-source"
_METRICS_EXTRACTOR = "model-server-protocol-metrics"
_ESTIMATE = "prefix-cache-scorer"


def _plugin(type_: str, name: str = "", **parameters: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"type": type_}
    if name:
        out["name"] = name
    if parameters:
        out["parameters"] = parameters
    return out


def _profile(name: str, *refs: tuple[str, int | None]) -> dict[str, Any]:
    plugins = []
    for ref, weight in refs:
        entry: dict[str, Any] = {"pluginRef": ref}
        if weight is not None:
            entry["weight"] = weight
        plugins.append(entry)
    return {"name": name, "plugins": plugins}


def scheduling_config(
    *,
    model: str,
    namespace: str,
    serving: Mapping[str, str],
    pair: bool,
    kv_events: bool,
    sglang: bool,
    threshold: int | None,
    block_size: int,
    hash_seed: str | None,
) -> dict[str, Any]:
    """The endpoint picker's ``EndpointPickerConfig``.

    ``kv_events``: score by the engines' KV events (a role publishes them and a tokenizer runs
    beside the picker); ``hash_seed`` is the engines' ``PYTHONHASHSEED`` when every publishing
    role sets the same one (the picker must hash blocks as the engines do).
    """
    gates: list[str] = []
    plugins: list[dict[str, Any]] = []
    data: dict[str, Any] | None = None
    if sglang:
        # SGLang's gauge names reach the picker only through its (experimental) data layer,
        # which needs a data section naming the source and the extractor.
        gates.append("dataLayer")
        plugins += [
            _plugin(_METRICS_SOURCE, _METRICS_SOURCE),
            _plugin(_METRICS_EXTRACTOR, _METRICS_EXTRACTOR, defaultEngine="sglang"),
        ]
        data = {
            "sources": [
                {"pluginRef": _METRICS_SOURCE, "extractors": [{"pluginRef": _METRICS_EXTRACTOR}]}
            ]
        }
    if kv_events:
        processor: dict[str, Any] = {"blockSize": block_size}
        if hash_seed is not None:
            processor["hashSeed"] = hash_seed
        plugins.append(
            _plugin(
                _PRECISE,
                tokenProcessorConfig=processor,
                indexerConfig={
                    "tokenizersPoolConfig": {
                        "modelName": model,
                        "uds": {"socketFile": TOKENIZER_SOCKET},
                    }
                },
                kvEventsConfig={
                    "topicFilter": KV_EVENTS_TOPIC,
                    "discoverPods": True,
                    "podDiscoveryConfig": {
                        "podLabelSelector": ",".join(f"{k}={v}" for k, v in serving.items()),
                        "podNamespace": namespace,
                        "socketPort": KV_EVENTS_PORT,
                    },
                },
            )
        )
        scorer = _PRECISE
    else:
        plugins.append(_plugin(_ESTIMATE))
        scorer = _ESTIMATE
    plugins += [_plugin("queue-scorer"), _plugin("max-score-picker")]
    scoring = ((scorer, 2), ("queue-scorer", 1), ("max-score-picker", None))
    if not pair:
        plugins.insert(0, _plugin("single-profile-handler"))
        profiles = [_profile("default", *scoring)]
    else:
        gates.append("prepareDataPlugins")
        tokens = DEFAULT_NON_CACHED_TOKENS if threshold is None else threshold
        plugins = [
            _plugin("by-label", "prefill-pods", label=ROLE_KIND, validValues=["prefill"]),
            _plugin("by-label", "decode-pods", label=ROLE_KIND, validValues=["decode"]),
            *plugins,
            _plugin("disagg-headers-handler"),
            _plugin("prefix-based-pd-decider", nonCachedTokens=tokens),
            _plugin(
                "disagg-profile-handler",
                profiles={"prefill": "prefill", "decode": "decode"},
                deciders={"prefill": "prefix-based-pd-decider"},
            ),
        ]
        profiles = [
            _profile("prefill", ("prefill-pods", None), *scoring),
            _profile("decode", ("decode-pods", None), *scoring),
        ]
    config: dict[str, Any] = {"apiVersion": EPP_CONFIG_API_VERSION, "kind": EPP_CONFIG_KIND}
    if gates:
        config["featureGates"] = gates
    config["plugins"] = plugins
    config["schedulingProfiles"] = profiles
    if data is not None:
        config["data"] = data
    return config


def _typed(type_url: str, **fields: Any) -> dict[str, Any]:
    return {"@type": f"type.googleapis.com/{type_url}", **fields}


def _socket(address: str, port: int) -> dict[str, Any]:
    return {"socket_address": {"address": address, "port_value": port}}


def _router_filter(**fields: Any) -> dict[str, Any]:
    return {
        "name": "envoy.filters.http.router",
        "typed_config": _typed("envoy.extensions.filters.http.router.v3.Router", **fields),
    }


def _connection_manager(prefix: str, routes: Any, filters: Sequence[Any]) -> dict[str, Any]:
    return {
        "name": "envoy.filters.network.http_connection_manager",
        "typed_config": _typed(
            "envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
            stat_prefix=prefix,
            route_config=routes,
            http_filters=list(filters),
        ),
    }


def _cluster(name: str, address: str, port: int, **fields: Any) -> dict[str, Any]:
    return {
        "name": name,
        "type": "STATIC",
        **fields,
        "load_assignment": {
            "cluster_name": name,
            "endpoints": [{"lb_endpoints": [{"endpoint": {"address": _socket(address, port)}}]}],
        },
    }


def proxy_config(*, port: int, timeout_seconds: int | None) -> dict[str, Any]:
    """The proxy's bootstrap configuration: serve ``port``, ask the picker, forward."""
    timeout = f"{timeout_seconds or PROXY_DEFAULT_TIMEOUT_SECONDS}s"
    ready = {
        "name": "ready",
        "address": _socket("0.0.0.0", PROXY_READY_PORT),
        "filter_chains": [
            {
                "filters": [
                    _connection_manager(
                        "ready",
                        {
                            "name": "ready",
                            "virtual_hosts": [
                                {
                                    "name": "stats",
                                    "domains": ["*"],
                                    "routes": [
                                        {
                                            "match": {"prefix": "/stats/prometheus"},
                                            "route": {"cluster": "admin"},
                                        }
                                    ],
                                }
                            ],
                        },
                        [
                            {
                                "name": "envoy.filters.http.health_check",
                                "typed_config": _typed(
                                    "envoy.extensions.filters.http.health_check.v3.HealthCheck",
                                    pass_through_mode=False,
                                    headers=[
                                        {"name": ":path", "string_match": {"exact": "/ready"}}
                                    ],
                                ),
                            },
                            _router_filter(),
                        ],
                    )
                ]
            }
        ],
    }
    serving = {
        "name": "serving",
        "address": _socket("0.0.0.0", port),
        "filter_chains": [
            {
                "filters": [
                    _connection_manager(
                        "serving",
                        {
                            "name": "serving",
                            "virtual_hosts": [
                                {
                                    "name": "serving",
                                    "domains": ["*"],
                                    "routes": [
                                        {
                                            "match": {"prefix": "/"},
                                            "route": {
                                                "cluster": "original_destination",
                                                "timeout": timeout,
                                                "idle_timeout": timeout,
                                            },
                                        }
                                    ],
                                }
                            ],
                        },
                        [
                            {
                                "name": "envoy.filters.http.ext_proc",
                                "typed_config": _typed(
                                    "envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor",
                                    grpc_service={
                                        "envoy_grpc": {
                                            "cluster_name": "endpoint_picker",
                                            "authority": f"localhost:{EPP_GRPC_PORT}",
                                        },
                                        "timeout": "10s",
                                    },
                                    processing_mode={
                                        "request_header_mode": "SEND",
                                        "response_header_mode": "SEND",
                                        "request_body_mode": "FULL_DUPLEX_STREAMED",
                                        "response_body_mode": "FULL_DUPLEX_STREAMED",
                                        "request_trailer_mode": "SEND",
                                        "response_trailer_mode": "SEND",
                                    },
                                    message_timeout="1000s",
                                ),
                            },
                            _router_filter(suppress_envoy_headers=True),
                        ],
                    )
                ]
            }
        ],
    }
    limits = {
        "thresholds": [
            {"max_connections": 40000, "max_pending_requests": 40000, "max_requests": 40000}
        ]
    }
    clusters = [
        _cluster("admin", "127.0.0.1", PROXY_ADMIN_PORT, connect_timeout="0.25s"),
        {
            "name": "original_destination",
            "type": "ORIGINAL_DST",
            "connect_timeout": "1000s",
            "lb_policy": "CLUSTER_PROVIDED",
            "circuit_breakers": limits,
            "original_dst_lb_config": {
                "use_http_header": True,
                "http_header_name": DESTINATION_HEADER,
            },
        },
        _cluster(
            "endpoint_picker",
            "127.0.0.1",
            EPP_GRPC_PORT,
            connect_timeout="86400s",
            lb_policy="LEAST_REQUEST",
            circuit_breakers=limits,
            transport_socket={
                "name": "envoy.transport_sockets.tls",
                "typed_config": _typed(
                    "envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext",
                    common_tls_context={"validation_context": {}},
                ),
            },
            typed_extension_protocol_options={
                "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": _typed(
                    "envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                    explicit_http_config={"http2_protocol_options": {}},
                )
            },
        ),
    ]
    return {
        "admin": {"address": _socket("127.0.0.1", PROXY_ADMIN_PORT)},
        "static_resources": {"listeners": [ready, serving], "clusters": clusters},
    }


def config_text(document: Mapping[str, Any]) -> str:
    """A configuration file's text: indented JSON (valid YAML), a final newline."""
    return json.dumps(document, indent=2) + "\n"
