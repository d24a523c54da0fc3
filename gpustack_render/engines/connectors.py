"""The Mooncake store-client rendering shared by Pod injection and deployment rendering.

Written once, used by both: ``gpustack_render.injection`` (an opted-in Pod,
``docs/contract/injection-notes.md`` §4) and the deployment renderer (``docs/contract/render.md``
§17).
Everything here is a pure function returning plain JSON data (env entries, argv fragments,
volumes, mounts, annotation values), so each caller composes it into its own Pod.

What lives here:

- the transport: API → artifact spelling (docs/contract/api-notes.md §11.4), the backend's offers in
  group order, the mixed-offer check and the match (docs/contract/injection-notes.md §11);
- the tenant: the pool's ``QuotaLedgerAvailable`` condition decides whether the Binding's
  domain is rendered (docs/contract/injection-notes.md §3, D20);
- the documents: the vLLM client configuration file (docs/contract/render.md §17.1), the store-only
  ``--kv-transfer-config`` document (§17.2), the SGLang ``MOONCAKE_*`` environment (§17.5);
- the defaulted variables (``MC_TE_METRIC``, ``MC_STORE_CLIENT_METRIC_BANDWIDTH``,
  ``MC_FORCE_TCP``) and ``--kv-cache-dtype``.

Compositions only the renderer needs (the direct prefill/decode leg, ``MultiConnector``, the
KV-events document, where defaulted variables go in a rendered Pod) are left to the renderer;
the building blocks below are what it composes them from.

Engines are :class:`~gpustack_render.core.vocabulary.Engine` members (D1). Key names
shared with admission are declared once in :mod:`gpustack_render.engines.owned`; the names below are
this module's stable aliases of them (plus the keys only a store client uses).
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, assert_never

from gpustack_render.api.inputs import KVCacheBackend, KVCachePool, KVCachePoolBinding
from gpustack_render.core import labels
from gpustack_render.core.vocabulary import ConditionStatus, Engine, EngineFamily, RoleKind
from gpustack_render.engines import owned

KVRole = Literal["kv_both", "kv_producer", "kv_consumer"]
Vehicle = Literal["file", "environment"]

#: Every engine this module renders for, in the internal spelling (D1).
ENGINES: Final[tuple[Engine, ...]] = tuple(Engine)

# --- Pod annotation, volume, mount ------------------------------------------------------------

#: The downwardAPI volume projecting the annotation into the engine container
#: (docs/contract/render.md §14 row 2). Owned: a Pod volume of this name is refused by injection
#: (``inject.owned-volume``).
CLIENT_CONFIG_VOLUME: Final = "gpustack-kvcache-config"
#: The projected file's name inside the mount.
CLIENT_CONFIG_FILE: Final = "mooncake.json"
#: The file the engine reads: ``MOONCAKE_CONFIG_PATH``'s value.
CLIENT_CONFIG_PATH: Final = f"{owned.CLIENT_CONFIG_MOUNT_PATH}/{CLIENT_CONFIG_FILE}"

# --- Environment variable names ---------------------------------------------------------------

#: Defaulted by Pod injection only (docs/contract/render.md §10 does not render it): bandwidth
#: metrics.
ENV_MC_STORE_CLIENT_METRIC_BANDWIDTH: Final = "MC_STORE_CLIENT_METRIC_BANDWIDTH"
#: The value of every defaulted toggle above.
DEFAULTED_ENV_VALUE: Final = "1"

# --- Engine flags -----------------------------------------------------------------------------

#: The ``--hicache-storage-backend`` value selecting Mooncake.
HICACHE_BACKEND_MOONCAKE: Final = "mooncake"

# --- Document constants -----------------------------------------------------------------------

#: The metadata plane every client uses.
METADATA_SERVER: Final = "P2PHANDSHAKE"
#: The pure-client topology of the vLLM file (``mode``).
MODE_STANDALONE_STORE: Final = "standalone-store"
#: Contributed store segment: a client contributes nothing (an absent key costs 4 GiB on vLLM).
GLOBAL_SEGMENT_SIZE: Final = 0
#: vLLM-family client staging buffer: 128 MiB (an absent key costs GiBs of host memory).
LOCAL_BUFFER_SIZE: Final = 128 * 1024 * 1024
#: The store-only connector on native vLLM.
CONNECTOR_MOONCAKE_STORE: Final = "MooncakeStoreConnector"
#: The store-only connector on vLLM-Ascend (same file, another connector registry).
CONNECTOR_ASCEND_STORE: Final = "AscendStoreConnector"

# --- Transport --------------------------------------------------------------------------------

#: API protocol (backend or member group) → the artifact (Mooncake) spelling
#: (docs/contract/api-notes.md §11.4). ``Auto``, ``TCP`` and an empty value are ``tcp``; anything
#: else unknown is ``""``.
ARTIFACT_TRANSPORT: Final[dict[str, str]] = {
    "": "tcp",
    "Auto": "tcp",
    "TCP": "tcp",
    "RDMA": "rdma",
    "EFA": "efa",
    "CANN": "ascend",
    "ROCM": "hip",
    "MUSA": "musa",
    "MACA": "maca",
}
#: The artifact transport an engine requires, when it requires one
#: (docs/contract/injection-notes.md §11).
REQUIRED_TRANSPORT: Final[dict[Engine, str]] = {Engine.VLLM_ASCEND: "ascend"}
#: The API value to set for a required artifact transport (messages name both spellings).
API_PROTOCOL_FOR: Final[dict[str, str]] = {"ascend": "CANN"}

# --- Tenancy ----------------------------------------------------------------------------------

#: The pool condition deciding whether a tenant is rendered (docs/contract/injection-notes.md §3,
#: D20).
LEDGER_CONDITION: Final = "QuotaLedgerAvailable"
#: The one ``False`` reason that is a declared single-tenant store rather than an outage.
REASON_MULTI_TENANCY_DISABLED: Final = "MultiTenancyDisabled"


def compact_json(value: Any) -> str:
    """Compact JSON (no spaces), keys in build order, as the Go encoder writes it.

    ``<``, ``>`` and ``&`` become ``\\u003c``, ``\\u003e``, ``\\u0026``
    (docs/contract/injection-notes.md §9), and U+2028/U+2029 are escaped; other non-ASCII text is
    kept as is.
    """
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    # These characters only ever occur inside JSON strings, so a textual replace is exact.
    return (
        text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def env_value(name: str, value: str) -> dict[str, Any]:
    """One ``env`` entry with a literal value (an empty string is written, D19)."""
    return {"name": name, "value": value}


def env_field_ref(name: str, field_path: str) -> dict[str, Any]:
    """One ``env`` entry from a ``fieldRef`` (no ``apiVersion``: the API server defaults it)."""
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": field_path}}}


# --- Transport --------------------------------------------------------------------------------


def artifact_transport(protocol: str | None) -> str:
    """The artifact spelling of an API protocol: ``CANN`` → ``ascend``; unknown → ``""``."""
    return ARTIFACT_TRANSPORT.get(protocol or "", "")


def transport_offers(backend: KVCacheBackend) -> tuple[str, ...]:
    """The backend's transport offers in artifact spelling, in group declaration order.

    One offer per managed member group (its own ``transport.protocol``, else the backend-wide
    value), or a single backend-wide offer when there are no managed members
    (docs/contract/api-notes.md §11.4).
    """
    backend_wide = backend.spec.transport.protocol if backend.spec.transport else None
    connection = backend.spec.connection
    members = connection.managed.members if connection and connection.managed else None
    if not members:
        return (artifact_transport(backend_wide),)
    offers = []
    for member in members:
        own = member.transport.protocol if member.transport else None
        offers.append(artifact_transport(own or backend_wide))
    return tuple(offers)


def required_transport(engine: Engine) -> str | None:
    """The one artifact transport ``engine`` accepts, or ``None`` when it accepts any."""
    return REQUIRED_TRANSPORT.get(engine)


def distinct_offers(offers: Sequence[str]) -> tuple[str, ...]:
    """The non-empty offers, de-duplicated, keeping first-seen order."""
    seen: list[str] = []
    for offer in offers:
        if offer and offer not in seen:
            seen.append(offer)
    return tuple(seen)


def match_transport(engine: Engine, offers: Sequence[str]) -> str | None:
    """The first non-empty offer ``engine`` accepts, or ``None``
    (docs/contract/injection-notes.md §11).

    This is the transport written into the client (``protocol`` / ``MOONCAKE_PROTOCOL``). It
    ignores the mixed-offer check, so a renderer keeping an older binding (which still renders its
    first offered transport) can call it alone.
    """
    required = required_transport(engine)
    for offer in offers:
        if offer and (required is None or offer == required):
            return offer
    return None


class TransportFailure(enum.Enum):
    """Why an engine cannot bind to a pool's offers."""

    #: Several distinct offers for an engine without a required transport
    #: (``inject.transport-mixed``).
    MIXED = "mixed"
    #: No offer the engine accepts (``inject.transport-unsupported``, typed reason
    #: ``TransportUnsupported``).
    UNSUPPORTED = "unsupported"


@dataclass(frozen=True)
class TransportCheck:
    """The outcome of both transport checks for one engine against one pool's offers."""

    engine: Engine
    #: Every offer in group order, empty ones included (artifact spelling).
    offers: tuple[str, ...]
    #: The non-empty offers, de-duplicated in first-seen order.
    distinct: tuple[str, ...]
    #: The engine's required transport, or ``None``.
    required: str | None
    #: The matched transport (``""`` when the check failed).
    protocol: str = ""
    failure: TransportFailure | None = None

    @property
    def ok(self) -> bool:
        return self.failure is None


def check_transport(engine: Engine, offers: Sequence[str]) -> TransportCheck:
    """The mixed-offer check, then the match (docs/contract/injection-notes.md §11;
    docs/contract/admission.md §10.2).

    An engine without a required transport facing two or more distinct non-empty offers fails as
    :attr:`TransportFailure.MIXED`; a mixed ``[tcp, ascend]`` pool is fine for vllm-ascend. Then
    no accepted offer fails as :attr:`TransportFailure.UNSUPPORTED` (an unconstrained engine whose
    offers are all empty included).
    """
    all_offers = tuple(offers)
    distinct = distinct_offers(all_offers)
    required = required_transport(engine)
    if required is None and len(distinct) >= 2:
        return TransportCheck(engine, all_offers, distinct, required, "", TransportFailure.MIXED)
    matched = match_transport(engine, all_offers)
    if matched is None:
        return TransportCheck(
            engine, all_offers, distinct, required, "", TransportFailure.UNSUPPORTED
        )
    return TransportCheck(engine, all_offers, distinct, required, matched)


# --- Tenancy ----------------------------------------------------------------------------------


class LedgerState(enum.Enum):
    """What the pool's ``QuotaLedgerAvailable`` condition says
    (docs/contract/injection-notes.md §3)."""

    #: Not reported yet: unresolved (``inject.ledger-absent``).
    ABSENT = "absent"
    #: ``Unknown`` (or any status other than True/False): unresolved
    #: (``inject.ledger-unknown``).
    UNKNOWN = "unknown"
    #: ``False`` for a reason other than ``MultiTenancyDisabled``: unresolved
    #: (``inject.ledger-unavailable``).
    UNAVAILABLE = "unavailable"
    #: ``False``/``MultiTenancyDisabled``: resolved, no tenant rendered.
    SINGLE_TENANT = "single-tenant"
    #: ``True``: resolved, the Binding's domain is the tenant.
    AVAILABLE = "available"


@dataclass(frozen=True)
class TenantResolution:
    """The tenant decision for one Binding on one pool."""

    state: LedgerState
    #: Whether a store client may be rendered at all.
    resolved: bool
    #: The tenant to render (``""`` = none); meaningful only when ``resolved``.
    tenant: str
    #: The Binding's declared domain (``spec.domain.name`` or ``default``), tenant or not.
    domain: str
    #: The condition's reason and message, for refusals and status (empty when absent).
    reason: str = ""
    message: str = ""
    #: True when the backend's ``multiTenancy`` answered for an absent condition.
    from_backend: bool = False


def ledger_state(pool: KVCachePool) -> LedgerState:
    """Classify the pool's ``QuotaLedgerAvailable`` condition."""
    cond = pool.condition(LEDGER_CONDITION)
    if cond is None:
        return LedgerState.ABSENT
    if cond.status == ConditionStatus.TRUE:
        return LedgerState.AVAILABLE
    if cond.status == ConditionStatus.FALSE:
        if cond.reason == REASON_MULTI_TENANCY_DISABLED:
            return LedgerState.SINGLE_TENANT
        return LedgerState.UNAVAILABLE
    return LedgerState.UNKNOWN


def backend_multi_tenancy(backend: KVCacheBackend) -> bool | None:
    """The backend's declared ``spec.connection.managed.leader.multiTenancy``, or ``None``."""
    connection = backend.spec.connection
    if connection is None or connection.managed is None or connection.managed.leader is None:
        return None
    return connection.managed.leader.multi_tenancy


def resolve_tenant(
    binding: KVCachePoolBinding,
    pool: KVCachePool,
    *,
    backend_fallback: KVCacheBackend | None = None,
) -> TenantResolution:
    """The tenant to render for ``binding`` on ``pool`` (docs/contract/injection-notes.md §3, D20).

    ``True`` → the Binding's domain; ``False``/``MultiTenancyDisabled`` → resolved with no tenant;
    absent, ``Unknown`` or another ``False`` reason → unresolved. Both Pod injection (the seed
    refuses an absent condition) and deployment rendering (D20) pass no ``backend_fallback``.
    docs/contract/api-notes.md §11.4 describes the backend's ``multiTenancy`` as the fallback answer
    for an absent condition; a caller that wants it passes the backend: ``true`` → the domain,
    ``false`` → no tenant, unset → still unresolved.
    """
    domain = binding.domain_name
    cond = pool.condition(LEDGER_CONDITION)
    state = ledger_state(pool)
    reason = cond.reason if cond else ""
    message = cond.message if cond else ""
    if state is LedgerState.AVAILABLE:
        return TenantResolution(state, True, domain, domain, reason, message)
    if state is LedgerState.SINGLE_TENANT:
        return TenantResolution(state, True, "", domain, reason, message)
    if state is LedgerState.ABSENT and backend_fallback is not None:
        answer = backend_multi_tenancy(backend_fallback)
        if answer is not None:
            tenant = domain if answer else ""
            return TenantResolution(state, True, tenant, domain, from_backend=True)
    return TenantResolution(state, False, "", domain, reason, message)


# --- Documents --------------------------------------------------------------------------------


def kv_role_for(kind: RoleKind | None) -> KVRole:
    """The store connector's ``kv_role`` for a role kind (docs/contract/render.md §17.2).

    ``None`` (no role)/``server`` → ``kv_both``; ``prefill`` → ``kv_producer``; ``decode`` →
    ``kv_consumer``.
    """
    match kind:
        case RoleKind.PREFILL:
            return "kv_producer"
        case RoleKind.DECODE:
            return "kv_consumer"
        case RoleKind.SERVER | RoleKind.ENCODE | None:
            return "kv_both"
        case _:
            assert_never(kind)


def store_connector(engine: Engine) -> str:
    """The vLLM-family store connector: ``AscendStoreConnector`` on vllm-ascend."""
    return CONNECTOR_ASCEND_STORE if engine == Engine.VLLM_ASCEND else CONNECTOR_MOONCAKE_STORE


def client_config(*, endpoint: str, transport: str, tenant: str) -> dict[str, Any]:
    """The vLLM-family client configuration document (docs/contract/render.md §17.1), keys in order.

    ``tenant_id`` is last and omitted when ``tenant`` is empty.
    """
    doc: dict[str, Any] = {
        "metadata_server": METADATA_SERVER,
        "master_server_address": endpoint,
        "protocol": transport,
        "device_name": "",
        "mode": MODE_STANDALONE_STORE,
        "global_segment_size": GLOBAL_SEGMENT_SIZE,
        "local_buffer_size": LOCAL_BUFFER_SIZE,
    }
    if tenant:
        doc["tenant_id"] = tenant
    return doc


def client_config_json(*, endpoint: str, transport: str, tenant: str) -> str:
    """:func:`client_config` as the compact JSON written into the client-config annotation."""
    return compact_json(client_config(endpoint=endpoint, transport=transport, tenant=tenant))


def store_transfer_config(*, engine: Engine, kv_role: KVRole) -> dict[str, Any]:
    """The store-only ``--kv-transfer-config`` document: connector and role, no other key."""
    return {"kv_connector": store_connector(engine), "kv_role": kv_role}


def client_config_volume() -> dict[str, Any]:
    """The Pod volume projecting the client-config annotation (one item, no ``defaultMode``)."""
    return {
        "name": CLIENT_CONFIG_VOLUME,
        "downwardAPI": {
            "items": [
                {
                    "path": CLIENT_CONFIG_FILE,
                    "fieldRef": {"fieldPath": f"metadata.annotations['{labels.KV_CLIENT_CONFIG}']"},
                }
            ]
        },
    }


def client_config_mount() -> dict[str, Any]:
    """The engine container's read-only mount of :func:`client_config_volume`."""
    return {
        "name": CLIENT_CONFIG_VOLUME,
        "mountPath": owned.CLIENT_CONFIG_MOUNT_PATH,
        "readOnly": True,
    }


def vllm_store_env() -> list[dict[str, Any]]:
    """The vLLM-family owned environment: ``MOONCAKE_CONFIG_PATH``."""
    return [env_value(owned.MOONCAKE_CONFIG_PATH_ENV, CLIENT_CONFIG_PATH)]


def dtype_args(dtype: str) -> list[str]:
    """``--kv-cache-dtype <dtype>`` verbatim, or nothing for an empty dtype."""
    return [owned.KV_CACHE_DTYPE_FLAG, dtype] if dtype else []


def vllm_store_args(*, engine: Engine, kv_role: KVRole, dtype: str) -> list[str]:
    """The vLLM-family store-only arguments: the transfer document, then the dtype (§17.4)."""
    doc = compact_json(store_transfer_config(engine=engine, kv_role=kv_role))
    return [owned.KV_TRANSFER_CONFIG_FLAG, doc, *dtype_args(dtype)]


def sglang_store_args(*, dtype: str, extra_config: Mapping[str, Any] | None = None) -> list[str]:
    """The SGLang store arguments: ``--hicache-storage-backend mooncake``, the backend's extra
    configuration as compact JSON when there is any (the deployment renderer's KV reuse
    identity), then the dtype."""
    args = [owned.HICACHE_STORAGE_BACKEND_FLAG, HICACHE_BACKEND_MOONCAKE]
    if extra_config:
        args += [owned.HICACHE_STORAGE_BACKEND_EXTRA_CONFIG_FLAG, compact_json(dict(extra_config))]
    return [*args, *dtype_args(dtype)]


def sglang_store_env(*, endpoint: str, transport: str, tenant: str) -> list[dict[str, Any]]:
    """The SGLang ``MOONCAKE_*`` environment vehicle, in the order of docs/contract/render.md §17.5.

    ``MOONCAKE_TENANT_ID`` comes first and only for a non-empty tenant; ``MOONCAKE_DEVICE`` is
    written as ``value: ""`` (D19); ``MOONCAKE_LOCAL_HOSTNAME`` is the Pod IP via ``fieldRef``.
    """
    env = [env_value(owned.MOONCAKE_TENANT_ID_ENV, tenant)] if tenant else []
    env += [
        env_value(owned.MOONCAKE_MASTER_ENV, endpoint),
        env_value(owned.MOONCAKE_TE_META_DATA_SERVER_ENV, METADATA_SERVER),
        env_value(owned.MOONCAKE_PROTOCOL_ENV, transport),
        env_value(owned.MOONCAKE_DEVICE_ENV, ""),
        env_value(owned.MOONCAKE_GLOBAL_SEGMENT_SIZE_ENV, str(GLOBAL_SEGMENT_SIZE)),
        env_field_ref(owned.MOONCAKE_LOCAL_HOSTNAME_ENV, "status.podIP"),
    ]
    return env


def sglang_defaulted_args() -> list[str]:
    """SGLang's defaulted host-tier switch; the caller drops it when the user names the flag."""
    return [owned.ENABLE_HIERARCHICAL_CACHE_FLAG]


def observability_env() -> list[dict[str, Any]]:
    """The two observability toggles Pod injection defaults (each only when not declared)."""
    return [
        env_value(owned.MC_TE_METRIC_ENV, DEFAULTED_ENV_VALUE),
        env_value(ENV_MC_STORE_CLIENT_METRIC_BANDWIDTH, DEFAULTED_ENV_VALUE),
    ]


def defaulted_env(name: str) -> dict[str, Any]:
    """One defaulted toggle (``MC_TE_METRIC``, ``MC_FORCE_TCP``, ...) set to ``"1"``."""
    return env_value(name, DEFAULTED_ENV_VALUE)


@dataclass(frozen=True)
class StoreClient:
    """Everything one store client adds to an engine container and its Pod.

    ``args`` and ``env`` are owned (env in order); ``defaulted_args`` are groups the caller
    drops when the user already names the flag; ``volumes``, ``mounts`` and ``annotations``
    are empty on the environment vehicle.
    """

    engine: Engine
    vehicle: Vehicle
    args: list[str]
    env: list[dict[str, Any]]
    defaulted_args: list[list[str]] = field(default_factory=list)
    volumes: list[dict[str, Any]] = field(default_factory=list)
    mounts: list[dict[str, Any]] = field(default_factory=list)
    annotations: dict[str, str] = field(default_factory=dict)


def store_client(
    engine: Engine,
    *,
    endpoint: str,
    transport: str,
    tenant: str,
    dtype: str,
    kv_role: KVRole = "kv_both",
) -> StoreClient:
    """The store-only client for ``engine`` (docs/contract/injection-notes.md §4,
    docs/contract/render.md §17).

    vLLM family: file vehicle (``--kv-transfer-config`` store document, dtype, env
    ``MOONCAKE_CONFIG_PATH``, the downwardAPI volume and mount, the client-config annotation).
    SGLang: environment vehicle (``--hicache-storage-backend mooncake``, dtype, the
    ``MOONCAKE_*`` variables, defaulted ``--enable-hierarchical-cache``); ``kv_role`` is unused.
    """
    match engine.family:
        case EngineFamily.VLLM:
            return StoreClient(
                engine=engine,
                vehicle="file",
                args=vllm_store_args(engine=engine, kv_role=kv_role, dtype=dtype),
                env=vllm_store_env(),
                volumes=[client_config_volume()],
                mounts=[client_config_mount()],
                annotations={
                    labels.KV_CLIENT_CONFIG: client_config_json(
                        endpoint=endpoint, transport=transport, tenant=tenant
                    )
                },
            )
        case EngineFamily.SGLANG:
            return StoreClient(
                engine=engine,
                vehicle="environment",
                args=sglang_store_args(dtype=dtype),
                env=sglang_store_env(endpoint=endpoint, transport=transport, tenant=tenant),
                defaulted_args=[sglang_defaulted_args()],
            )
        case _:
            assert_never(engine.family)
