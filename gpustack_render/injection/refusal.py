"""Refusals of the KV-cache Pod injection and their stable rule ids
(docs/contract/injection-notes.md §6, §10).

A CREATE refusal is a denied admission with a message and no field causes (HTTP 403, D23); the
rule id is the verdict's ``origin``. The UPDATE freeze reports field errors (HTTP 422) whose
``origin`` is one of the ``freeze.*`` ids below. ``docs/rules.md`` lists every id with the
short code it replaces.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

# --- CREATE: contract (§1) ----------------------------------------------------------------------
#: A written key (``client-config`` or ``injected``) submitted on the Pod.
WRITTEN_KEY: Final = "inject.written-key-submitted"
#: An unknown ``kvcache.gpustack.ai/`` annotation key.
UNKNOWN_KEY: Final = "inject.unknown-key"
#: The ``kvcache.gpustack.ai/domain`` annotation, whatever its value.
DOMAIN: Final = "inject.domain-annotation"
#: The engine annotation missing or not ``vLLM``/``SGLang``.
ENGINE: Final = "inject.engine-invalid"
#: The engine annotation spelled ``vllm-ascend``.
ENGINE_ASCEND: Final = "inject.engine-ascend-spelled"
#: A manufacturer annotation beside an engine other than vLLM.
MANUFACTURER_ENGINE: Final = "inject.manufacturer-without-vllm"
#: A manufacturer annotation other than ``ascend``.
MANUFACTURER_VALUE: Final = "inject.manufacturer-invalid"
#: A role annotation other than ``""``, ``Prefill``, ``Decode``.
ROLE: Final = "inject.role-invalid"
# --- CREATE: resolution (§3) ----------------------------------------------------------------------
#: The binding annotation missing or empty.
BINDING_REQUIRED: Final = "inject.binding-required"
#: A ``/`` in the binding annotation (no cross-namespace form).
BINDING_CROSS_NAMESPACE: Final = "inject.binding-cross-namespace"
#: The Binding does not exist in the Pod's namespace.
BINDING_NOT_FOUND: Final = "inject.binding-not-found"
#: Reading the Binding failed.
BINDING_READ: Final = "inject.binding-unreadable"
#: The Binding is being deleted.
BINDING_TERMINATING: Final = "inject.binding-terminating"
#: The Binding's pool does not exist.
POOL_NOT_FOUND: Final = "inject.pool-not-found"
#: Reading the pool failed.
POOL_READ: Final = "inject.pool-unreadable"
#: The pool reports no ``QuotaLedgerAvailable`` condition.
LEDGER_ABSENT: Final = "inject.ledger-absent"
#: ``QuotaLedgerAvailable`` is ``Unknown``.
LEDGER_UNKNOWN: Final = "inject.ledger-unknown"
#: ``QuotaLedgerAvailable`` is ``False`` for a reason other than ``MultiTenancyDisabled``.
LEDGER_FALSE: Final = "inject.ledger-unavailable"
#: The pool names no backend.
NO_BACKEND: Final = "inject.pool-without-backend"
#: The pool's backend does not exist.
BACKEND_NOT_FOUND: Final = "inject.backend-not-found"
#: Reading the backend failed.
BACKEND_READ: Final = "inject.backend-unreadable"
#: The pool has published no client endpoint.
NO_ENDPOINT: Final = "inject.pool-without-endpoint"
#: Mixed transport offers for an engine without a required transport.
MIXED_TRANSPORT: Final = "inject.transport-mixed"
#: No offer matches the engine's required transport (reason ``TransportUnsupported``).
TRANSPORT_UNSUPPORTED: Final = "inject.transport-unsupported"
# --- CREATE: the target container and its keys (§6) -----------------------------------------------
#: The Pod has no containers.
NO_CONTAINERS: Final = "inject.no-containers"
#: Several containers and none named.
CONTAINER_UNNAMED: Final = "inject.container-unnamed"
#: The named container is an init container.
INIT_CONTAINER: Final = "inject.init-container"
#: The named container does not exist.
CONTAINER_NOT_FOUND: Final = "inject.container-not-found"
#: vLLM family: ``MOONCAKE_CONFIG_PATH`` in ``env``.
OWNED_ENV: Final = "inject.owned-env"
#: The engine's owned connector flag on the command line.
OWNED_FLAG: Final = "inject.owned-flag"
#: ``--kv-cache-dtype`` while a dtype is rendered.
DTYPE_FLAG: Final = "inject.dtype-flag"
#: A Pod volume with the webhook's volume name.
OWNED_VOLUME: Final = "inject.owned-volume"
#: The target mounts a volume with the webhook's volume name.
OWNED_MOUNT_NAME: Final = "inject.owned-mount-name"
#: The target mounts something at the webhook's mount path.
OWNED_MOUNT_PATH: Final = "inject.owned-mount-path"
#: SGLang: ``SGLANG_HICACHE_MOONCAKE_CONFIG_PATH`` in ``env``.
CONFIG_SOURCE_ENV: Final = "inject.config-source-env"
#: SGLang: ``--hicache-storage-backend-extra-config`` on the command line.
CONFIG_SOURCE_FLAG: Final = "inject.config-source-flag"
#: SGLang: an ``envFrom`` source that could supply ``SGLANG_HICACHE_MOONCAKE_CONFIG_PATH``.
CONFIG_SOURCE_ENV_FROM: Final = "inject.env-from-owned-prefix"
# --- CREATE: launch recognition (§7) --------------------------------------------------------------
#: Neither ``command`` nor ``args``.
NO_LAUNCH: Final = "launch.no-command"
#: The forwarding annotation present with a value other than ``"true"``.
FORWARDING_VALUE: Final = "launch.forwarding-value"
#: ``args`` without ``command`` and no forwarding declaration.
ARGS_WITHOUT_COMMAND: Final = "launch.args-without-command"
#: A command line hidden in one token (``env -S``) and no declaration.
HIDDEN_COMMAND_LINE: Final = "launch.hidden-command-line"
#: A shell with a ``c`` option.
SHELL_C: Final = "launch.shell-c"
#: A ``.sh`` program or shell command file and no declaration.
SCRIPT: Final = "launch.script"
#: A launcher with nothing after it.
NOTHING_TO_RUN: Final = "launch.nothing-to-run"
#: A recognised engine other than the selected runtime.
OTHER_ENGINE: Final = "launch.other-engine"
#: An unrecognised program and no declaration.
UNRECOGNISED: Final = "launch.unrecognised"
#: ``env`` setting, unsetting (``-u``) or clearing (``-i``) a KV-cache variable at exec time.
LAUNCHER_ENV: Final = "launch.env-owned-variable"
# --- bounds -------------------------------------------------------------------------------------
#: The Pod nests deeper than the bound of :mod:`gpustack_render.core.nesting` (no API server
#: sends one).
NESTING: Final = "inject.nesting-too-deep"
# --- UPDATE freeze (§10) --------------------------------------------------------------------------
#: The inject label added to a live Pod.
LABEL_ADDED: Final = "freeze.inject-label-added"
#: The inject label removed from (or changed on) an injected Pod.
LABEL_REMOVED: Final = "freeze.inject-label-removed"
#: A written annotation (``injected`` or ``client-config``) added, removed or changed.
WRITTEN_ANNOTATION: Final = "freeze.written-annotation-changed"

#: The typed reason TRANSPORT_UNSUPPORTED carries in its message.
REASON_TRANSPORT_UNSUPPORTED: Final = "TransportUnsupported"


@dataclass(frozen=True, slots=True)
class Refusal:
    """One CREATE refusal: the rule id (``origin``) and the message naming its facts."""

    rule: str
    message: str
