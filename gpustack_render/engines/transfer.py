"""The direct prefill/decode transfer leg and KV-event publishing
(docs/contract/render.md §17.2–§17.5, §18).

These are the connector compositions only a deployment renders (Pod injection never does): the
native vLLM ``MooncakeConnector`` leg, the vLLM-Ascend ``MooncakeConnectorV1`` leg carrying both
halves' degrees, ``MultiConnector`` joining a leg and a store, the vLLM KV-event publisher, and
SGLang's disaggregation arguments. The store client itself is
:mod:`gpustack_render.engines.connectors`.
Documents are compact JSON with keys in the order the reference shows.
"""

from __future__ import annotations

from typing import Any, Final

from gpustack_render.core.vocabulary import RoleKind
from gpustack_render.engines import owned
from gpustack_render.engines.connectors import KVRole, compact_json

#: The topic of the KV-event publisher.
KV_EVENTS_TOPIC: Final = "kv@"

#: Container port names of the connector listeners (docs/contract/render.md §11).
PORT_MC_BOOTSTRAP: Final = "mc-bootstrap"
PORT_SGLANG_BOOTSTRAP: Final = "bootstrap"
PORT_KV_EVENTS: Final = "kv-events"
PORT_KV_REPLAY: Final = "kv-replay"

#: Connector names of the leg documents.
CONNECTOR_MOONCAKE: Final = "MooncakeConnector"
CONNECTOR_MOONCAKE_V1: Final = "MooncakeConnectorV1"
CONNECTOR_MULTI: Final = "MultiConnector"

#: The defaulted retraction backup of an SGLang decode half.
RETRACTION_BACKUP_CPU_TENSOR: Final = "cpu_tensor"
#: SGLang transfer backends: TCP, or the transfer engine's own choice.
SGLANG_BACKEND_TCP: Final = "mooncake_tcp"
SGLANG_BACKEND_MOONCAKE: Final = "mooncake"


def leg_kv_role(kind: RoleKind) -> KVRole:
    """A leg half's ``kv_role``: ``kv_producer`` on prefill, ``kv_consumer`` on decode."""
    return "kv_producer" if kind == RoleKind.PREFILL else "kv_consumer"


def native_leg(*, kind: RoleKind, protocol: str) -> dict[str, Any]:
    """The native vLLM leg: ``MooncakeConnector`` with the leg's ``mooncake_protocol``."""
    return {
        "kv_connector": CONNECTOR_MOONCAKE,
        "kv_role": leg_kv_role(kind),
        "kv_connector_extra_config": {"mooncake_protocol": protocol},
    }


def ascend_leg(
    *, kind: RoleKind, prefill_tp: int, prefill_dp: int, decode_tp: int, decode_dp: int
) -> dict[str, Any]:
    """The vLLM-Ascend leg (``llm-d-router`` only): both halves' TP and DP degrees."""
    return {
        "kv_connector": CONNECTOR_MOONCAKE_V1,
        "kv_role": leg_kv_role(kind),
        "kv_port": owned.BOOTSTRAP_PORT,
        "kv_connector_extra_config": {
            "prefill": {"tp_size": prefill_tp, "dp_size": prefill_dp},
            "decode": {"tp_size": decode_tp, "dp_size": decode_dp},
        },
    }


def multi_connector(
    *, kind: RoleKind, leg: dict[str, Any], store: dict[str, Any]
) -> dict[str, Any]:
    """A leg and a store: ``MultiConnector`` listing the leg, then the store."""
    return {
        "kv_connector": CONNECTOR_MULTI,
        "kv_role": leg_kv_role(kind),
        "kv_connector_extra_config": {"connectors": [leg, store]},
    }


def store_role_beside_leg(kind: RoleKind) -> KVRole:
    """The inner store's role beside a leg: ``kv_both`` on prefill, ``kv_consumer`` on decode."""
    return "kv_both" if kind == RoleKind.PREFILL else "kv_consumer"


def kv_events_config() -> dict[str, Any]:
    """The vLLM ``--kv-events-config`` document (docs/contract/render.md §17.3)."""
    return {
        "enable_kv_cache_events": True,
        "publisher": "zmq",
        "endpoint": f"tcp://*:{owned.KV_EVENTS_PORT}",
        "replay_endpoint": f"tcp://*:{owned.KV_REPLAY_PORT}",
        "buffer_steps": 10000,
        "hwm": 100000,
        "max_queue_size": 100000,
        "topic": KV_EVENTS_TOPIC,
    }


def kv_events_args() -> list[str]:
    """``--kv-events-config <doc>``."""
    return [owned.KV_EVENTS_CONFIG_FLAG, compact_json(kv_events_config())]


def sglang_leg_args(*, kind: RoleKind, protocol: str) -> list[str]:
    """SGLang's disaggregation arguments: mode, transfer backend, and on prefill the bootstrap
    port (docs/contract/render.md §17.5)."""
    backend = SGLANG_BACKEND_TCP if protocol == "tcp" else SGLANG_BACKEND_MOONCAKE
    args = [
        owned.DISAGGREGATION_MODE_FLAG,
        # SGLang's own mode names (plain strings: they are written into the command line).
        "prefill" if kind == RoleKind.PREFILL else "decode",
        owned.DISAGGREGATION_TRANSFER_BACKEND_FLAG,
        backend,
    ]
    if kind == RoleKind.PREFILL:
        args += [owned.DISAGGREGATION_BOOTSTRAP_PORT_FLAG, str(owned.BOOTSTRAP_PORT)]
    return args


def sglang_decode_defaulted_args() -> list[str]:
    """The defaulted group of an SGLang decode half: ``--disaggregation-decode-retraction-backup
    cpu_tensor`` (dropped when the role names the flag)."""
    return [owned.DISAGGREGATION_DECODE_RETRACTION_BACKUP_FLAG, RETRACTION_BACKUP_CPU_TENSOR]


def connector_ports(
    *, vllm_prefill_leg: bool, publisher: bool, sglang_prefill_leg: bool
) -> list[dict[str, Any]]:
    """The connector listeners a role declares, in docs/contract/render.md §11's order."""
    out: list[dict[str, Any]] = []
    if vllm_prefill_leg:
        out.append(
            {"name": PORT_MC_BOOTSTRAP, "protocol": "TCP", "containerPort": owned.BOOTSTRAP_PORT}
        )
    if publisher:
        out.append(
            {"name": PORT_KV_EVENTS, "protocol": "TCP", "containerPort": owned.KV_EVENTS_PORT}
        )
        out.append(
            {"name": PORT_KV_REPLAY, "protocol": "TCP", "containerPort": owned.KV_REPLAY_PORT}
        )
    if sglang_prefill_leg:
        out.append(
            {
                "name": PORT_SGLANG_BOOTSTRAP,
                "protocol": "TCP",
                "containerPort": owned.BOOTSTRAP_PORT,
            }
        )
    return out
