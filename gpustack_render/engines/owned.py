"""Operator-owned and operator-defaulted command-line flags and environment names, per engine.

The table in the seed's "Operator-owned keys" (and ``docs/contract/admission.md`` §13) is the
authority: ownership is per (engine, key), never by a name prefix. Every name is declared here
once; admission refuses an owned key in a role's ``extraArgs``/``env`` (``args.owned-flag``,
``env.owned-name``, §10.3),
the renderer writes them (docs/contract/render.md §9, §10, §17) and the Pod injection webhook guards
the ones it writes (docs/contract/injection-notes.md §6).

Engines are the lowercase internal names of D1: ``vllm``, ``vllm-ascend``, ``sglang``. The two
vLLM backends own exactly the same keys (per seed: "One vLLM row covers both backends").
"""

from __future__ import annotations

from typing import Final, assert_never

from gpustack_render.core.vocabulary import Engine, EngineFamily

# --- engines ----------------------------------------------------------------------------------

#: Every internal engine name (:class:`~gpustack_render.core.vocabulary.Engine`), in the order
#: messages list them.
ENGINES: Final = tuple(Engine)

# --- owned on every engine ----------------------------------------------------------------------

#: Written by the renderer above ``size: 1`` (docs/contract/render.md §10 step 4); reserved at every
#: size so widening an instance never turns an accepted deployment into a refused one (per seed).
REPLICA_LEADER_ADDRESS_ENV: Final = "GPUSTACK_REPLICA_LEADER_ADDRESS"
REPLICA_SIZE_ENV: Final = "GPUSTACK_REPLICA_SIZE"
MEMBER_INDEX_ENV: Final = "GPUSTACK_MEMBER_INDEX"
REPLICA_ENV: Final = (REPLICA_LEADER_ADDRESS_ENV, REPLICA_SIZE_ENV, MEMBER_INDEX_ENV)

# --- vLLM (both accelerator backends) -----------------------------------------------------------

#: The connector document (docs/contract/render.md §17.2); written by the renderer and by Pod
#: injection.
KV_TRANSFER_CONFIG_FLAG: Final = "--kv-transfer-config"
#: The KV-event publisher document (docs/contract/render.md §17.3); written by the renderer under
#: llm-d-router.
KV_EVENTS_CONFIG_FLAG: Final = "--kv-events-config"
VLLM_OWNED_ARGS: Final = (KV_TRANSFER_CONFIG_FLAG, KV_EVENTS_CONFIG_FLAG)

#: Points vLLM at the projected client JSON (docs/contract/render.md §17.1); renderer and Pod
#: injection.
MOONCAKE_CONFIG_PATH_ENV: Final = "MOONCAKE_CONFIG_PATH"
#: The native-leg prefill bootstrap port (docs/contract/render.md §17.2); renderer.
VLLM_MOONCAKE_BOOTSTRAP_PORT_ENV: Final = "VLLM_MOONCAKE_BOOTSTRAP_PORT"
VLLM_OWNED_ENV: Final = (MOONCAKE_CONFIG_PATH_ENV, VLLM_MOONCAKE_BOOTSTRAP_PORT_ENV)

# --- SGLang -------------------------------------------------------------------------------------

HICACHE_STORAGE_BACKEND_FLAG: Final = "--hicache-storage-backend"
#: Owned for what a user entry would destroy: it outranks the environment loader (per seed).
HICACHE_STORAGE_BACKEND_EXTRA_CONFIG_FLAG: Final = "--hicache-storage-backend-extra-config"
DISAGGREGATION_MODE_FLAG: Final = "--disaggregation-mode"
DISAGGREGATION_TRANSFER_BACKEND_FLAG: Final = "--disaggregation-transfer-backend"
DISAGGREGATION_BOOTSTRAP_PORT_FLAG: Final = "--disaggregation-bootstrap-port"
SGLANG_OWNED_ARGS: Final = (
    HICACHE_STORAGE_BACKEND_FLAG,
    HICACHE_STORAGE_BACKEND_EXTRA_CONFIG_FLAG,
    DISAGGREGATION_MODE_FLAG,
    DISAGGREGATION_TRANSFER_BACKEND_FLAG,
    DISAGGREGATION_BOOTSTRAP_PORT_FLAG,
)

#: Owned for what a user entry would destroy: it selects a file loader over the environment.
SGLANG_HICACHE_MOONCAKE_CONFIG_PATH_ENV: Final = "SGLANG_HICACHE_MOONCAKE_CONFIG_PATH"
MOONCAKE_MASTER_ENV: Final = "MOONCAKE_MASTER"
MOONCAKE_TE_META_DATA_SERVER_ENV: Final = "MOONCAKE_TE_META_DATA_SERVER"
MOONCAKE_PROTOCOL_ENV: Final = "MOONCAKE_PROTOCOL"
MOONCAKE_DEVICE_ENV: Final = "MOONCAKE_DEVICE"
MOONCAKE_GLOBAL_SEGMENT_SIZE_ENV: Final = "MOONCAKE_GLOBAL_SEGMENT_SIZE"
MOONCAKE_LOCAL_HOSTNAME_ENV: Final = "MOONCAKE_LOCAL_HOSTNAME"
#: The tenant (reuse domain): its ownership is a security property (per seed).
MOONCAKE_TENANT_ID_ENV: Final = "MOONCAKE_TENANT_ID"
SGLANG_OWNED_ENV: Final = (
    SGLANG_HICACHE_MOONCAKE_CONFIG_PATH_ENV,
    MOONCAKE_MASTER_ENV,
    MOONCAKE_TE_META_DATA_SERVER_ENV,
    MOONCAKE_PROTOCOL_ENV,
    MOONCAKE_DEVICE_ENV,
    MOONCAKE_GLOBAL_SEGMENT_SIZE_ENV,
    MOONCAKE_LOCAL_HOSTNAME_ENV,
    MOONCAKE_TENANT_ID_ENV,
)

# --- conditional ------------------------------------------------------------------------------

#: Owned on both engines while ``spec.kvCache`` is set and the Setting
#: ``model-deployment-kv-cache-dtype-owned`` is on (docs/contract/admission.md §10.3); the renderer
#: writes the Binding's dtype there (docs/contract/render.md §17.6). Its longer sibling below is
#: never owned.
KV_CACHE_DTYPE_FLAG: Final = "--kv-cache-dtype"
KV_CACHE_DTYPE_SKIP_LAYERS_FLAG: Final = "--kv-cache-dtype-skip-layers"

# --- owned while spec.model.artifactRef is set (docs/weights.md "Admission", D28) ---------------

#: Where the engine finds its weights, and at which revision: the artifact sets them (the model
#: argument and ``--revision`` on the command line, the hub cache in the environment), so a
#: role's own value would load other weights than the ones the artifact pins.
MODEL_FLAG: Final = "--model"
MODEL_PATH_FLAG: Final = "--model-path"
REVISION_FLAG: Final = "--revision"
TOKENIZER_REVISION_FLAG: Final = "--tokenizer-revision"
DOWNLOAD_DIR_FLAG: Final = "--download-dir"
VLLM_ARTIFACT_ARGS: Final = (MODEL_FLAG, REVISION_FLAG, TOKENIZER_REVISION_FLAG, DOWNLOAD_DIR_FLAG)
SGLANG_ARTIFACT_ARGS: Final = (MODEL_PATH_FLAG, REVISION_FLAG, DOWNLOAD_DIR_FLAG)
#: vLLM flags whose names are prefixes of an artifact-owned flag but are flags of their own
#: (``--tokenizer`` is not an abbreviation of ``--tokenizer-revision``): step 5 of
#: docs/contract/admission.md §13 needs them known.
VLLM_ARTIFACT_NEIGHBOURS: Final = ("--tokenizer",)

#: The hub clients' variables, each with what it carries (the admission message names it).
HF_TOKEN_ENV: Final = "HF_TOKEN"
HF_ENDPOINT_ENV: Final = "HF_ENDPOINT"
HF_HOME_ENV: Final = "HF_HOME"
MODELSCOPE_API_TOKEN_ENV: Final = "MODELSCOPE_API_TOKEN"
MODELSCOPE_DOMAIN_ENV: Final = "MODELSCOPE_DOMAIN"
MODELSCOPE_CACHE_ENV: Final = "MODELSCOPE_CACHE"
VLLM_USE_MODELSCOPE_ENV: Final = "VLLM_USE_MODELSCOPE"
SGLANG_USE_MODELSCOPE_ENV: Final = "SGLANG_USE_MODELSCOPE"
ARTIFACT_ENV_ROLES: Final[dict[str, str]] = {
    HF_TOKEN_ENV: "the Hugging Face token, read from the artifact's secretRef",
    HF_ENDPOINT_ENV: "the Hugging Face endpoint, from the Setting "
    "model-artifact-huggingface-endpoint",
    HF_HOME_ENV: "the Hugging Face download cache the artifact delivery mounts",
    MODELSCOPE_API_TOKEN_ENV: "the ModelScope token, read from the artifact's secretRef",
    MODELSCOPE_DOMAIN_ENV: "the ModelScope host, from the Setting "
    "model-artifact-modelscope-endpoint",
    MODELSCOPE_CACHE_ENV: "the ModelScope download cache the artifact delivery mounts",
    VLLM_USE_MODELSCOPE_ENV: "the switch that sends vLLM's downloads to ModelScope",
    SGLANG_USE_MODELSCOPE_ENV: "the switch that sends SGLang's downloads to ModelScope",
}
_HUB_ENV: Final = (
    HF_TOKEN_ENV,
    HF_ENDPOINT_ENV,
    HF_HOME_ENV,
    MODELSCOPE_API_TOKEN_ENV,
    MODELSCOPE_DOMAIN_ENV,
    MODELSCOPE_CACHE_ENV,
)


def artifact_args(engine: Engine) -> tuple[str, ...]:
    """The flags a ``spec.model.artifactRef`` owns on ``engine``, in table order."""
    match engine.family:
        case EngineFamily.VLLM:
            return VLLM_ARTIFACT_ARGS
        case EngineFamily.SGLANG:
            return SGLANG_ARTIFACT_ARGS
        case _:
            assert_never(engine.family)


def artifact_env(engine: Engine) -> tuple[str, ...]:
    """The environment names a ``spec.model.artifactRef`` owns on ``engine``, in table order."""
    match engine.family:
        case EngineFamily.VLLM:
            return (*_HUB_ENV, VLLM_USE_MODELSCOPE_ENV)
        case EngineFamily.SGLANG:
            return (*_HUB_ENV, SGLANG_USE_MODELSCOPE_ENV)
        case _:
            assert_never(engine.family)


# --- filled when absent (docs/contract/render.md §9 step 4, D17) ----------------------------------

#: Rendered as ``--served-model-name <model.name>`` unless ``extraArgs`` carry it (D7); admission
#: then requires exactly that one value (docs/contract/admission.md §8.1).
SERVED_MODEL_NAME_FLAG: Final = "--served-model-name"
#: Rendered as ``--host 0.0.0.0`` unless ``extraArgs`` carry it.
HOST_FLAG: Final = "--host"
#: Rendered as ``--port <engine port>`` unless ``extraArgs`` carry it; read by §6 and the probes.
PORT_FLAG: Final = "--port"
FILLED_FLAGS: Final = (SERVED_MODEL_NAME_FLAG, HOST_FLAG, PORT_FLAG)

#: TLS flags: either one makes the engine serve HTTPS (docs/contract/render.md §12;
#: ``router.tls-endpoint``).
SSL_CERTFILE_FLAG: Final = "--ssl-certfile"
SSL_KEYFILE_FLAG: Final = "--ssl-keyfile"
SSL_CERT_REQS_FLAG: Final = "--ssl-cert-reqs"

# --- listener ports and mount paths the operator synthesizes (docs/contract/admission.md §15, D22)

#: The serving port of a role that declares no ``ports`` (``http``, docs/contract/render.md §11).
DEFAULT_SERVING_PORT: Final = 8000
#: vLLM's KV-event publisher and replay ports, on a native-vLLM producer under llm-d-router.
KV_EVENTS_PORT: Final = 5557
KV_REPLAY_PORT: Final = 5558
#: The bootstrap port of a prefiller in a declared pair with a router or a cache (D22).
BOOTSTRAP_PORT: Final = 8998
#: Where a direct decoder's engine moves (raised past declared ports, docs/contract/render.md §18).
DECODER_ENGINE_PORT_BASE: Final = 8200
#: The vLLM-family client configuration directory (docs/contract/render.md §14 row 2,
#: docs/contract/injection-notes.md §4).
CLIENT_CONFIG_MOUNT_PATH: Final = "/etc/gpustack/kvcache"
#: The Ascend driver mounted on a vllm-ascend direct leg (docs/contract/render.md §14 row 3).
ASCEND_DRIVER_PATH: Final = "/usr/local/Ascend/driver"
#: Shared memory and the compile cache: an additional volume here takes precedence (D7, D22).
SHM_MOUNT_PATH: Final = "/dev/shm"
COMPILE_CACHE_MOUNT_PATH: Final = "/var/lib/gpustack/cache"

# --- defaulted: set by the operator, a user's value wins, never refused --------------------------

MC_TE_METRIC_ENV: Final = "MC_TE_METRIC"
MC_FORCE_TCP_ENV: Final = "MC_FORCE_TCP"
VLLM_CACHE_ROOT_ENV: Final = "VLLM_CACHE_ROOT"
SGLANG_CACHE_DIR_ENV: Final = "SGLANG_CACHE_DIR"
DEFAULTED_ENV: Final = (
    MC_TE_METRIC_ENV,
    MC_FORCE_TCP_ENV,
    VLLM_CACHE_ROOT_ENV,
    SGLANG_CACHE_DIR_ENV,
)
ENABLE_HIERARCHICAL_CACHE_FLAG: Final = "--enable-hierarchical-cache"
DISAGGREGATION_DECODE_RETRACTION_BACKUP_FLAG: Final = "--disaggregation-decode-retraction-backup"
SGLANG_DEFAULTED_ARGS: Final = (
    ENABLE_HIERARCHICAL_CACHE_FLAG,
    DISAGGREGATION_DECODE_RETRACTION_BACKUP_FLAG,
)

# --- router-owned flags (docs/contract/admission.md §7 rule 1; exact name before ``=``) -----------

LLM_D_ROUTER: Final = "llm-d-router"
VLLM_ROUTER: Final = "vllm-router"
SGLANG_GATEWAY: Final = "sglang-gateway"
_VLLM_ROUTER_ARGS: Final = (
    "--host",
    "--port",
    "--prometheus-host",
    "--prometheus-port",
    "--kv-connector",
    "--service-discovery",
    "--service-discovery-namespace",
    "--service-discovery-port",
    "--selector",
    "--prefill-selector",
    "--decode-selector",
    "--vllm-pd-disaggregation",
)
ROUTER_OWNED_ARGS: Final[dict[str, tuple[str, ...]]] = {
    LLM_D_ROUTER: (
        "--endpoint-selector",
        "--endpoint-target-ports",
        "--config-file",
        "--secure-serving",
        "--grpc-health-port",
        "--metrics-endpoint-auth",
    ),
    VLLM_ROUTER: _VLLM_ROUTER_ARGS,
    SGLANG_GATEWAY: tuple(
        "--pd-disaggregation" if a == "--vllm-pd-disaggregation" else a
        for a in _VLLM_ROUTER_ARGS
        if a != "--kv-connector"
    ),
}


def owned_args(engine: Engine) -> tuple[str, ...]:
    """The flags ``engine`` owns unconditionally (without ``--kv-cache-dtype``), in table order."""
    match engine.family:
        case EngineFamily.VLLM:
            return VLLM_OWNED_ARGS
        case EngineFamily.SGLANG:
            return SGLANG_OWNED_ARGS
        case _:
            assert_never(engine.family)


def owned_env(engine: Engine) -> tuple[str, ...]:
    """The environment names ``engine`` owns, the three replica variables included."""
    match engine.family:
        case EngineFamily.VLLM:
            return (*REPLICA_ENV, *VLLM_OWNED_ENV)
        case EngineFamily.SGLANG:
            return (*REPLICA_ENV, *SGLANG_OWNED_ENV)
        case _:
            assert_never(engine.family)


def known_flags(engine: Engine) -> frozenset[str]:
    """Every flag this module names for ``engine``: owned, conditional, filled, owned by an
    artifact, and the artifact flags' neighbours.

    Flag resolution (``flags.resolves_to``) uses it for step 5 of docs/contract/admission.md §13: a
    name that is exactly one of these flags is that flag, never an abbreviation of another.
    """
    known = _KNOWN.get(engine)
    if known is None:
        neighbours = VLLM_ARTIFACT_NEIGHBOURS if engine.family is EngineFamily.VLLM else ()
        known = _KNOWN[engine] = frozenset(
            (
                *owned_args(engine),
                KV_CACHE_DTYPE_FLAG,
                *FILLED_FLAGS,
                *artifact_args(engine),
                *neighbours,
            )
        )
    return known


_KNOWN: dict[Engine, frozenset[str]] = {}
