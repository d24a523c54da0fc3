"""The injection record: the ``kvcache.gpustack.ai/injected`` annotation
(docs/contract/injection-notes.md §9).

Compact JSON with keys in a fixed order; ``<``, ``>``, ``&`` escaped. It records what the
webhook decided (an action, not an outcome): ``tenantInjected`` says a tenant was written, not
that the image read it. New records carry no ``engineVersion``; :func:`parse_record` ignores one
written by an older operator.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpustack_render.core import nesting
from gpustack_render.core.vocabulary import Engine
from gpustack_render.engines.connectors import compact_json


@dataclass(frozen=True, slots=True)
class InjectionRecord:
    """What one injection decided."""

    #: The raw binding annotation.
    binding: str
    #: ``vllm`` | ``vllm-ascend`` | ``sglang``.
    engine: Engine
    #: ``file`` when a volume was rendered, else ``environment``.
    vehicle: str
    #: The Binding's declared domain, shown even without a tenant; omitted when empty.
    domain: str
    #: Whether a tenant was written into the container.
    tenant_injected: bool
    #: The program left after launcher prefixes, or ``""``.
    launch_program: str
    #: Whether the forwarding declaration admitted an unidentified launch.
    launch_args_forwarded: bool

    def to_dict(self) -> dict[str, Any]:
        """The record's keys in §9 order."""
        out: dict[str, Any] = {
            "binding": self.binding,
            "engine": self.engine,
            "vehicle": self.vehicle,
        }
        if self.domain:
            out["domain"] = self.domain
        out["tenantInjected"] = self.tenant_injected
        out["launchProgram"] = self.launch_program
        out["launchArgsForwarded"] = self.launch_args_forwarded
        return out

    def to_json(self) -> str:
        """The annotation value."""
        return compact_json(self.to_dict())


def parse_record(text: str) -> InjectionRecord | None:
    """Read an annotation value back; ``None`` when it is not a record (not a JSON object, or
    no engine this project writes); legacy keys are ignored."""
    try:
        data = nesting.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None

    def string(key: str) -> str:
        value = data.get(key, "")
        return value if isinstance(value, str) else ""

    engine = next((e for e in Engine if e == string("engine")), None)
    if engine is None:
        return None
    return InjectionRecord(
        binding=string("binding"),
        engine=engine,
        vehicle=string("vehicle"),
        domain=string("domain"),
        tenant_injected=data.get("tenantInjected") is True,
        launch_program=string("launchProgram"),
        launch_args_forwarded=data.get("launchArgsForwarded") is True,
    )
