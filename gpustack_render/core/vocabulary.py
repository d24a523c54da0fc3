"""The project's closed vocabularies as ``StrEnum``s: each member *is* its wire string, so a
member compares equal to, hashes like and serialises as the plain string it replaces."""

from __future__ import annotations

from enum import StrEnum


class Engine(StrEnum):
    """An engine in the internal spelling (D1): the API's ``vLLM`` on an InstanceType whose
    manufacturer is ``ascend`` is ``vllm-ascend``."""

    VLLM = "vllm"
    VLLM_ASCEND = "vllm-ascend"
    SGLANG = "sglang"


class RoleKind(StrEnum):
    """A role's effective kind in the internal (and ``role-kind`` label) spelling; an unset
    ``kind`` reads ``server``."""

    SERVER = "server"
    PREFILL = "prefill"
    DECODE = "decode"
    ENCODE = "encode"


class ConditionStatus(StrEnum):
    """``status`` of a Kubernetes condition."""

    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"
