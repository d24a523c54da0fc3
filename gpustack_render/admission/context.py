"""What every ModelDeployment admission rule reads: the request, lookups, per-role facts.

The per-role decisions follow docs/contract/render.md §2 (managed, pair, direct leg, direct decoder)
and docs/contract/admission.md §15 (reserved listener ports), so admission judges what the renderer
would build. Lookups are memoised per object within one request (docs/contract/admission.md §1).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Final

from gpustack_render.api.inputs import (
    InstanceType,
)
from gpustack_render.api.modeldeployment import ModelDeployment, RoleSpec
from gpustack_render.core import errors
from gpustack_render.core.errors import ErrorList
from gpustack_render.core.paths import ROLES, FieldPath
from gpustack_render.core.quantity import QuantityError, parse_quantity
from gpustack_render.core.settings import Settings
from gpustack_render.core.vocabulary import Engine, RoleKind
from gpustack_render.deployment import roles
from gpustack_render.deployment.roles import EngineOf, effective_kind
from gpustack_render.engines.flags import engine_of
from gpustack_render.engines.owned import (
    DEFAULT_SERVING_PORT,
)
from gpustack_render.schema.lookups import LookupFailed, Lookups, M

#: The group/kind a refusal names (docs/contract/admission.md §1).
GROUP_KIND: Final = "ModelDeployment.worker.gpustack.ai"


_MISSING: Final = object()


class MemoLookups:
    """Lookups memoised per (kind, namespace, name) for one request; failures are memoised too."""

    def __init__(self, inner: Lookups) -> None:
        self._inner = inner
        self._cache: dict[tuple[str, str, str], Any] = {}

    def get(self, kind: type[M], namespace: str, name: str) -> M | None:
        key = (kind.__name__, namespace, name)
        hit = self._cache.get(key, _MISSING)
        if hit is _MISSING:
            try:
                hit = self._inner.get(kind, namespace, name)
            except LookupFailed as exc:
                hit = exc
            self._cache[key] = hit
        if isinstance(hit, LookupFailed):
            raise hit
        return hit if isinstance(hit, kind) else None


def memoised(lookups: Lookups) -> MemoLookups:
    """``lookups`` memoised for one request (an already memoised one is returned as is)."""
    return lookups if isinstance(lookups, MemoLookups) else MemoLookups(lookups)


def quantity_value(value: int | str | None) -> Fraction | None:
    """A quantity's exact value, or ``None`` when unset or unreadable."""
    if value is None:
        return None
    try:
        return parse_quantity(value)
    except QuantityError:
        return None


def whole_cards(role: RoleSpec) -> int | None:
    """``resources.accelerator`` as a whole number, ``None`` when unset or not whole."""
    value = quantity_value(role.resources.accelerator if role.resources else None)
    if value is None or value.denominator != 1:
        return None
    return int(value)


def serving_port(role: RoleSpec) -> int:
    """The role's serving port: the first declared port, else 8000."""
    return role.ports[0].port if role.ports else DEFAULT_SERVING_PORT


def serving_protocol(role: RoleSpec) -> str:
    """The first declared port's protocol, default ``TCP``."""
    return role.ports[0].protocol if role.ports else "TCP"


def is_slice_request(role: RoleSpec) -> bool:
    """Either slice percentage set to a non-zero value."""
    res = role.resources
    return res is not None and bool(
        res.accelerator_sliced_memory_percentage or res.accelerator_sliced_cores_percentage
    )


def is_partition_request(role: RoleSpec) -> bool:
    res = role.resources
    return res is not None and bool(res.accelerator_partitioned_profile)


@dataclass
class Context:
    """One deployment as the rules see it (the new object, or the stored one for comparisons)."""

    md: ModelDeployment
    lookups: MemoLookups
    settings: Settings
    #: The deployment's name as Service and Pod names use it.
    name: str
    namespace: str
    deleting: bool = False
    _engines: dict[str, Engine | None] = field(default_factory=dict)
    _type_errors: set[str] = field(default_factory=set)

    @property
    def roles(self) -> list[RoleSpec]:
        return list(self.md.spec.roles)

    @property
    def base_engine(self) -> Engine:
        """``vllm`` or ``sglang``: what owned keys and flag spelling follow."""
        return roles.base_engine(self.md)

    @property
    def router(self) -> str | None:
        return roles.router_of(self.md)

    @property
    def has_cache(self) -> bool:
        return self.md.spec.kv_cache is not None

    def kinds(self) -> list[RoleKind]:
        return [effective_kind(r) for r in self.md.spec.roles]

    @property
    def pair(self) -> bool:
        """The deployment declares at least one prefill and one decode role."""
        return roles.is_pair(self.md)

    def role_path(self, i: int) -> FieldPath:
        return ROLES.index(i)

    def inject_engine(self, i: int, errs: ErrorList, *, origin: str) -> Engine | None:
        """The role's internal engine (``vllm-ascend`` on manufacturer ``ascend``).

        SGLang never reads the type. A missing type reads as the plain engine, as the renderer
        would (it then fails on the missing type). A failed read is an ``InternalError`` (once
        per type), except while deleting, where the answer is ``None`` (unknown) and the rule
        declines rather than block the update that clears the finalizer.
        """
        if self.base_engine == Engine.SGLANG:
            return Engine.SGLANG
        type_name = self.md.spec.roles[i].instance_type
        if type_name in self._engines:
            return self._engines[type_name]
        engine: Engine | None
        try:
            itype = self.lookups.get(InstanceType, "", type_name)
        except LookupFailed as exc:
            if not self.deleting and self.first_type_failure(type_name):
                errs.append(
                    errors.internal(
                        self.role_path(i).child("instanceType"),
                        f"cannot read InstanceType {type_name!r} to tell vllm from vllm-ascend: "
                        f"{exc.reason}; retry",
                        origin=origin,
                    )
                )
            engine = None
        else:
            manufacturer = (
                itype.status.detail.manufacturer if itype and itype.status.detail else None
            )
            engine = engine_of(self.md.spec.engine.name, manufacturer)
        self._engines[type_name] = engine
        return engine

    def first_type_failure(self, type_name: str) -> bool:
        """True the first time a failed read of ``type_name`` is reported in this request (one
        InternalError per type, whichever rule read it first)."""
        if type_name in self._type_errors:
            return False
        self._type_errors.add(type_name)
        return True

    # --- docs/contract/render.md §2 decisions -----------------------------------------------------

    def _engine_of(self, i: int, errs: ErrorList, origin: str) -> EngineOf:
        return lambda: self.inject_engine(i, errs, origin=origin)

    def direct_leg(self, i: int, errs: ErrorList, *, origin: str, store_client: bool) -> str | None:
        """The role's direct prefill/decode leg protocol (artifact spelling), or ``None``
        (:func:`~gpustack_render.deployment.roles.direct_leg`; an unknown engine reads as no
        leg)."""
        engine = self._engine_of(i, errs, origin)
        role = self.md.spec.roles[i]
        return roles.direct_leg(self.md, role, engine=engine, store_client=store_client) or None

    def is_direct_decoder(self, i: int, errs: ErrorList, *, origin: str) -> bool | None:
        """Managed native-vLLM decode role behind llm-d-router; ``None`` when unknown."""
        engine = self._engine_of(i, errs, origin)
        return roles.direct_decoder(self.md, self.md.spec.roles[i], engine=engine)

    def reserved_ports(self, i: int, errs: ErrorList, *, origin: str) -> dict[int, str]:
        """The role's reserved listener ports (docs/contract/admission.md §15), port → what listens
        there."""
        engine = self._engine_of(i, errs, origin)
        return roles.reserved_ports(self.md, self.md.spec.roles[i], engine=engine)

    def engine_label(self, i: int, errs: ErrorList, *, origin: str) -> Engine:
        """The engine's internal name for messages (the plain engine when unknown)."""
        return self.inject_engine(i, errs, origin=origin) or self.base_engine

    def router_label(self) -> str:
        return f" and router {self.router}" if self.router else ""


#: Stands in for the suffix the API server appends to ``generateName`` (5 characters).
_GENERATED_SUFFIX: Final = "xxxxx"


def _rule_name(md: ModelDeployment, fallback: str) -> str:
    """The name Service and Pod names are built from.

    Without ``metadata.name`` (a ``generateName`` create reaching the mutating webhook), the
    prefix plus a 5-character placeholder for the suffix the API server appends.
    """
    meta = md.metadata
    if meta.name or fallback:
        return meta.name or fallback
    return meta.generate_name + _GENERATED_SUFFIX if meta.generate_name else ""


def request_context(
    md: ModelDeployment, *, lookups: Lookups, settings: Settings, name: str, namespace: str
) -> Context:
    """``md`` as the rules of one request see it (``name`` and ``namespace`` stand in for what
    its metadata lacks)."""
    return Context(
        md=md,
        lookups=memoised(lookups),
        settings=settings,
        name=_rule_name(md, name),
        namespace=md.metadata.namespace or namespace or "default",
        deleting=md.metadata.deletion_timestamp is not None,
    )
