"""Refusals of the KV-cache Pod injection and their stable rule ids (kv-injection.md §6, §10).

A CREATE refusal is a denied admission with a message and no field causes (HTTP 403, D23); the
rule id is the verdict's ``origin``. The UPDATE freeze reports field errors (HTTP 422) whose
``origin`` is one of the ``U`` ids below (the reference gives the freeze no ids of its own).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

# --- CREATE: contract (§1) ----------------------------------------------------------------------
#: A written key (``client-config`` or ``injected``) submitted on the Pod.
K1_WRITTEN_KEY: Final = "K1"
#: An unknown ``kvcache.gpustack.ai/`` annotation key.
K2_UNKNOWN_KEY: Final = "K2"
#: The ``kvcache.gpustack.ai/domain`` annotation, whatever its value.
K3_DOMAIN: Final = "K3"
#: The engine annotation missing or not ``vLLM``/``SGLang``.
E1_ENGINE: Final = "E1"
#: The engine annotation spelled ``vllm-ascend``.
E2_ENGINE_ASCEND: Final = "E2"
#: A manufacturer annotation beside an engine other than vLLM.
E3_MANUFACTURER_ENGINE: Final = "E3"
#: A manufacturer annotation other than ``ascend``.
E4_MANUFACTURER_VALUE: Final = "E4"
#: A role annotation other than ``""``, ``Prefill``, ``Decode``.
E5_ROLE: Final = "E5"
# --- CREATE: resolution (§3) ----------------------------------------------------------------------
#: The binding annotation missing or empty.
B1_BINDING_REQUIRED: Final = "B1"
#: A ``/`` in the binding annotation (no cross-namespace form).
B2_BINDING_CROSS_NAMESPACE: Final = "B2"
#: The Binding does not exist in the Pod's namespace.
B3_BINDING_NOT_FOUND: Final = "B3"
#: Reading the Binding failed.
B4_BINDING_READ: Final = "B4"
#: The Binding is being deleted.
B5_BINDING_TERMINATING: Final = "B5"
#: The Binding's pool does not exist.
P1_POOL_NOT_FOUND: Final = "P1"
#: Reading the pool failed.
P2_POOL_READ: Final = "P2"
#: The pool reports no ``QuotaLedgerAvailable`` condition.
P3_LEDGER_ABSENT: Final = "P3"
#: ``QuotaLedgerAvailable`` is ``Unknown``.
P4_LEDGER_UNKNOWN: Final = "P4"
#: ``QuotaLedgerAvailable`` is ``False`` for a reason other than ``MultiTenancyDisabled``.
P5_LEDGER_FALSE: Final = "P5"
#: The pool names no backend.
P6_NO_BACKEND: Final = "P6"
#: The pool's backend does not exist.
P7_BACKEND_NOT_FOUND: Final = "P7"
#: Reading the backend failed.
P8_BACKEND_READ: Final = "P8"
#: The pool has published no client endpoint.
P9_NO_ENDPOINT: Final = "P9"
#: Mixed transport offers for an engine without a required transport.
T1_MIXED_TRANSPORT: Final = "T1"
#: No offer matches the engine's required transport (reason ``TransportUnsupported``).
T2_TRANSPORT_UNSUPPORTED: Final = "T2"
# --- CREATE: the target container and its keys (§6) -----------------------------------------------
#: The Pod has no containers.
C1_NO_CONTAINERS: Final = "C1"
#: Several containers and none named.
C2_CONTAINER_UNNAMED: Final = "C2"
#: The named container is an init container.
C3_INIT_CONTAINER: Final = "C3"
#: The named container does not exist.
C4_CONTAINER_NOT_FOUND: Final = "C4"
#: vLLM family: ``MOONCAKE_CONFIG_PATH`` in ``env``.
O1_OWNED_ENV: Final = "O1"
#: The engine's owned connector flag on the command line.
O2_OWNED_FLAG: Final = "O2"
#: ``--kv-cache-dtype`` while a dtype is rendered.
O3_DTYPE_FLAG: Final = "O3"
#: A Pod volume with the webhook's volume name.
O4_OWNED_VOLUME: Final = "O4"
#: The target mounts a volume with the webhook's volume name.
O5_OWNED_MOUNT_NAME: Final = "O5"
#: The target mounts something at the webhook's mount path.
O6_OWNED_MOUNT_PATH: Final = "O6"
#: SGLang: ``SGLANG_HICACHE_MOONCAKE_CONFIG_PATH`` in ``env``.
F1_CONFIG_SOURCE_ENV: Final = "F1"
#: SGLang: ``--hicache-storage-backend-extra-config`` on the command line.
F2_CONFIG_SOURCE_FLAG: Final = "F2"
#: SGLang: an ``envFrom`` source that could supply ``SGLANG_HICACHE_MOONCAKE_CONFIG_PATH``.
F3_CONFIG_SOURCE_ENV_FROM: Final = "F3"
# --- CREATE: launch recognition (§7) --------------------------------------------------------------
#: Neither ``command`` nor ``args``.
A1_NO_LAUNCH: Final = "A1"
#: The forwarding annotation present with a value other than ``"true"``.
A2_FORWARDING_VALUE: Final = "A2"
#: ``args`` without ``command`` and no forwarding declaration.
A3_ARGS_WITHOUT_COMMAND: Final = "A3"
#: A command line hidden in one token (``env -S``) and no declaration.
A4_HIDDEN_COMMAND_LINE: Final = "A4"
#: A shell with a ``c`` option.
A5_SHELL_C: Final = "A5"
#: A ``.sh`` program or shell command file and no declaration.
A6_SCRIPT: Final = "A6"
#: A launcher with nothing after it.
A7_NOTHING_TO_RUN: Final = "A7"
#: A recognised engine other than the selected runtime.
A8_OTHER_ENGINE: Final = "A8"
#: An unrecognised program and no declaration.
A9_UNRECOGNISED: Final = "A9"
#: ``env`` setting, unsetting (``-u``) or clearing (``-i``) a KV-cache variable at exec time.
A10_LAUNCHER_ENV: Final = "A10"
# --- bounds -------------------------------------------------------------------------------------
#: The Pod nests deeper than the bound of :mod:`gpustack_render.nesting` (no API server sends one).
N1_NESTING: Final = "N1"
# --- UPDATE freeze (§10) --------------------------------------------------------------------------
#: The inject label added to a live Pod.
U1_LABEL_ADDED: Final = "U1"
#: The inject label removed from (or changed on) an injected Pod.
U2_LABEL_REMOVED: Final = "U2"
#: A written annotation (``injected`` or ``client-config``) added, removed or changed.
U3_WRITTEN_ANNOTATION: Final = "U3"

#: The typed reason T2 carries in its message.
REASON_TRANSPORT_UNSUPPORTED: Final = "TransportUnsupported"


@dataclass(frozen=True, slots=True)
class Refusal:
    """One CREATE refusal: the rule id (``origin``) and the message naming its facts."""

    rule: str
    message: str
