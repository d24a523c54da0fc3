"""Refusals of the KV-cache Pod injection and their stable rule ids (kv-injection.md §6, §10).

A CREATE refusal is a denied admission with a message and no field causes (HTTP 403, D23); the
rule id is the verdict's ``origin``. The UPDATE freeze reports field errors (HTTP 422) whose
``origin`` is one of the ``freeze.*`` ids below. ``docs/rules.md`` lists every id with the
short code it replaces, which the constant names still carry (``B4_BINDING_READ``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

# --- CREATE: contract (§1) ----------------------------------------------------------------------
#: A written key (``client-config`` or ``injected``) submitted on the Pod.
K1_WRITTEN_KEY: Final = "inject.written-key-submitted"
#: An unknown ``kvcache.gpustack.ai/`` annotation key.
K2_UNKNOWN_KEY: Final = "inject.unknown-key"
#: The ``kvcache.gpustack.ai/domain`` annotation, whatever its value.
K3_DOMAIN: Final = "inject.domain-annotation"
#: The engine annotation missing or not ``vLLM``/``SGLang``.
E1_ENGINE: Final = "inject.engine-invalid"
#: The engine annotation spelled ``vllm-ascend``.
E2_ENGINE_ASCEND: Final = "inject.engine-ascend-spelled"
#: A manufacturer annotation beside an engine other than vLLM.
E3_MANUFACTURER_ENGINE: Final = "inject.manufacturer-without-vllm"
#: A manufacturer annotation other than ``ascend``.
E4_MANUFACTURER_VALUE: Final = "inject.manufacturer-invalid"
#: A role annotation other than ``""``, ``Prefill``, ``Decode``.
E5_ROLE: Final = "inject.role-invalid"
# --- CREATE: resolution (§3) ----------------------------------------------------------------------
#: The binding annotation missing or empty.
B1_BINDING_REQUIRED: Final = "inject.binding-required"
#: A ``/`` in the binding annotation (no cross-namespace form).
B2_BINDING_CROSS_NAMESPACE: Final = "inject.binding-cross-namespace"
#: The Binding does not exist in the Pod's namespace.
B3_BINDING_NOT_FOUND: Final = "inject.binding-not-found"
#: Reading the Binding failed.
B4_BINDING_READ: Final = "inject.binding-unreadable"
#: The Binding is being deleted.
B5_BINDING_TERMINATING: Final = "inject.binding-terminating"
#: The Binding's pool does not exist.
P1_POOL_NOT_FOUND: Final = "inject.pool-not-found"
#: Reading the pool failed.
P2_POOL_READ: Final = "inject.pool-unreadable"
#: The pool reports no ``QuotaLedgerAvailable`` condition.
P3_LEDGER_ABSENT: Final = "inject.ledger-absent"
#: ``QuotaLedgerAvailable`` is ``Unknown``.
P4_LEDGER_UNKNOWN: Final = "inject.ledger-unknown"
#: ``QuotaLedgerAvailable`` is ``False`` for a reason other than ``MultiTenancyDisabled``.
P5_LEDGER_FALSE: Final = "inject.ledger-unavailable"
#: The pool names no backend.
P6_NO_BACKEND: Final = "inject.pool-without-backend"
#: The pool's backend does not exist.
P7_BACKEND_NOT_FOUND: Final = "inject.backend-not-found"
#: Reading the backend failed.
P8_BACKEND_READ: Final = "inject.backend-unreadable"
#: The pool has published no client endpoint.
P9_NO_ENDPOINT: Final = "inject.pool-without-endpoint"
#: Mixed transport offers for an engine without a required transport.
T1_MIXED_TRANSPORT: Final = "inject.transport-mixed"
#: No offer matches the engine's required transport (reason ``TransportUnsupported``).
T2_TRANSPORT_UNSUPPORTED: Final = "inject.transport-unsupported"
# --- CREATE: the target container and its keys (§6) -----------------------------------------------
#: The Pod has no containers.
C1_NO_CONTAINERS: Final = "inject.no-containers"
#: Several containers and none named.
C2_CONTAINER_UNNAMED: Final = "inject.container-unnamed"
#: The named container is an init container.
C3_INIT_CONTAINER: Final = "inject.init-container"
#: The named container does not exist.
C4_CONTAINER_NOT_FOUND: Final = "inject.container-not-found"
#: vLLM family: ``MOONCAKE_CONFIG_PATH`` in ``env``.
O1_OWNED_ENV: Final = "inject.owned-env"
#: The engine's owned connector flag on the command line.
O2_OWNED_FLAG: Final = "inject.owned-flag"
#: ``--kv-cache-dtype`` while a dtype is rendered.
O3_DTYPE_FLAG: Final = "inject.dtype-flag"
#: A Pod volume with the webhook's volume name.
O4_OWNED_VOLUME: Final = "inject.owned-volume"
#: The target mounts a volume with the webhook's volume name.
O5_OWNED_MOUNT_NAME: Final = "inject.owned-mount-name"
#: The target mounts something at the webhook's mount path.
O6_OWNED_MOUNT_PATH: Final = "inject.owned-mount-path"
#: SGLang: ``SGLANG_HICACHE_MOONCAKE_CONFIG_PATH`` in ``env``.
F1_CONFIG_SOURCE_ENV: Final = "inject.config-source-env"
#: SGLang: ``--hicache-storage-backend-extra-config`` on the command line.
F2_CONFIG_SOURCE_FLAG: Final = "inject.config-source-flag"
# --- CREATE: launch recognition (§7) --------------------------------------------------------------
#: Neither ``command`` nor ``args``.
A1_NO_LAUNCH: Final = "launch.no-command"
#: The forwarding annotation present with a value other than ``"true"``.
A2_FORWARDING_VALUE: Final = "launch.forwarding-value"
#: ``args`` without ``command`` and no forwarding declaration.
A3_ARGS_WITHOUT_COMMAND: Final = "launch.args-without-command"
#: A command line hidden in one token (``env -S``) and no declaration.
A4_HIDDEN_COMMAND_LINE: Final = "launch.hidden-command-line"
#: A shell with a ``c`` option.
A5_SHELL_C: Final = "launch.shell-c"
#: A ``.sh`` program or shell command file and no declaration.
A6_SCRIPT: Final = "launch.script"
#: A launcher with nothing after it.
A7_NOTHING_TO_RUN: Final = "launch.nothing-to-run"
#: A recognised engine other than the selected runtime.
A8_OTHER_ENGINE: Final = "launch.other-engine"
#: An unrecognised program and no declaration.
A9_UNRECOGNISED: Final = "launch.unrecognised"
# --- UPDATE freeze (§10) --------------------------------------------------------------------------
#: The inject label added to a live Pod.
U1_LABEL_ADDED: Final = "freeze.inject-label-added"
#: The inject label removed from (or changed on) an injected Pod.
U2_LABEL_REMOVED: Final = "freeze.inject-label-removed"
#: A written annotation (``injected`` or ``client-config``) added, removed or changed.
U3_WRITTEN_ANNOTATION: Final = "freeze.written-annotation-changed"

#: The typed reason T2 carries in its message.
REASON_TRANSPORT_UNSUPPORTED: Final = "TransportUnsupported"


@dataclass(frozen=True, slots=True)
class Refusal:
    """One CREATE refusal: the rule id (``origin``) and the message naming its facts."""

    rule: str
    message: str
