"""The project's closed vocabularies as ``StrEnum``s: each member *is* its wire string, so a
member compares equal to, hashes like and serialises (as JSON, in messages) as the plain string
it replaces. The YAML writer knows only ``str`` itself: a member written into a manifest is
written as its ``.value``.

An engine's family is decided here and nowhere else (:attr:`Engine.family`). A ``match`` over a
vocabulary ends in ``assert_never``, so a new member fails type-checking wherever it is not yet
handled.
"""

from __future__ import annotations

from enum import StrEnum
from typing import assert_never


class EngineFamily(StrEnum):
    """How an engine reads its command line and which store client it is given: the vLLM family
    (``vllm`` and ``vllm-ascend``: one command-line syntax, one flag table, the file vehicle) or
    ``sglang``. Its value is the name the base command, the compile-cache path and the drain
    hook's gauges follow."""

    VLLM = "vllm"
    SGLANG = "sglang"


class Engine(StrEnum):
    """An engine in the internal spelling (D1): the API's ``vLLM`` on an InstanceType whose
    manufacturer is ``ascend`` is ``vllm-ascend``."""

    VLLM = "vllm"
    VLLM_ASCEND = "vllm-ascend"
    SGLANG = "sglang"

    @property
    def family(self) -> EngineFamily:
        """The engine's family: the one place it is decided (both vLLM backends are one)."""
        match self:
            case Engine.VLLM | Engine.VLLM_ASCEND:
                return EngineFamily.VLLM
            case Engine.SGLANG:
                return EngineFamily.SGLANG
            case _:
                assert_never(self)


class RoleKind(StrEnum):
    """A role's effective kind in the internal (and ``role-kind`` label) spelling; an unset
    ``kind`` reads ``server``. The API spells it capitalised
    (:data:`~gpustack_render.api.modeldeployment.RoleKindName`)."""

    SERVER = "server"
    PREFILL = "prefill"
    DECODE = "decode"
    ENCODE = "encode"


class ConditionStatus(StrEnum):
    """``status`` of a Kubernetes condition."""

    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"
