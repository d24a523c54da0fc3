"""The resources of a replica's ``main`` container, derived from its InstanceType
(docs/contract/render.md §15).

CPU, memory and ephemeral storage are not expressible on a role: they are the type's per-unit
resources scaled by the card count (whole cards), by the slice's memory percentage, or by the
partition profile's share of the card. Requests equal limits for every resource (Guaranteed QoS;
D11 has no overcommit Setting). Slices and partitions use ``<key>.sliced`` /
``<key>.partitioned`` with count 1 and carry the request in Pod annotations (D12).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Final

from gpustack_render.api.inputs import InstanceType
from gpustack_render.api.modeldeployment import RoleSpec
from gpustack_render.core.errors import RenderError
from gpustack_render.core.labels import (
    PARTITIONED_PROFILE,
    SLICED_CORES_PERCENTAGE,
    SLICED_MEMORY_PERCENTAGE,
)
from gpustack_render.core.paths import ROLES
from gpustack_render.core.quantity import (
    QuantityError,
    canonical,
    format_cpu,
    format_memory,
    parse_quantity,
    whole_number,
)

#: Resource names on ``main``.
CPU: Final = "cpu"
MEMORY: Final = "memory"
EPHEMERAL_STORAGE: Final = "ephemeral-storage"

#: Manufacturer → whole-card accelerator resource key (docs/contract/render.md §15).
ACCELERATOR_KEYS: Final[dict[str, str]] = {
    "nvidia": "nvidia.com/gpu",
    "amd": "amd.com/gpu",
    "ascend": "huawei.com/npu",
    "cambricon": "cambricon.com/mlu",
    "hygon": "hygon.com/dcu",
    "iluvatar": "iluvatar.com/gpu",
    "metax": "metax-tech.com/gpu",
    "mthreads": "mthreads.com/gpu",
    "thead": "alibabacloud.com/ppu",
}
#: Suffix of the accelerator key for a logical slice (D12).
SLICED_SUFFIX: Final = ".sliced"
#: Suffix of the accelerator key for a partition profile (D12).
PARTITIONED_SUFFIX: Final = ".partitioned"

#: One RDMA interface: the shared RDMA device.
RDMA_SHARED_KEY: Final = "device.gpustack.ai/rdma.shared"
#: More than one RDMA interface: that many exclusive RDMA devices.
RDMA_KEY: Final = "device.gpustack.ai/rdma"
#: EFA interfaces: the EFA device plugin's own key.
EFA_KEY: Final = "vpc.amazonaws.com/efa"

#: Ephemeral storage per Pod when the type gives no per-unit value (D21).
DEFAULT_EPHEMERAL_STORAGE: Final = Fraction(15 * 1024**3)

_MIB = 1024 * 1024


@dataclass(frozen=True)
class PodResources:
    """The ``main`` container's limits (= requests) and the Pod annotations of the request."""

    limits: dict[str, str]
    annotations: dict[str, str] = field(default_factory=dict)
    #: The accelerator resource key, or None when the Pod requests no accelerator.
    accelerator_key: str | None = None
    #: Cards the sizing scaled by (whole cards; 1 for slices, partitions and CPU-only types).
    cards: int = 1

    def to_json(self) -> dict[str, Any]:
        """``{limits, requests}``: requests equal limits (Guaranteed QoS)."""
        return {"limits": dict(self.limits), "requests": dict(self.limits)}


def _fail(role: RoleSpec, index: int, message: str, *, origin: str, child: str = "") -> RenderError:
    path = ROLES.index(index)
    if child:
        path = path.child(*child.split("."))
    return RenderError(f"role {role.name!r}: {message}", field=str(path), origin=origin)


def fabric_key(protocol: str, count: int) -> str:
    """The fabric-interface resource key for ``count`` > 0 interfaces on ``protocol``
    (``rdma`` or ``efa``): one RDMA interface is the shared device, more are exclusive ones."""
    if protocol == "efa":
        return EFA_KEY
    return RDMA_SHARED_KEY if count == 1 else RDMA_KEY


def interface_count(role: RoleSpec, index: int) -> int:
    """The role's ``resources.interface`` as a whole number (0 when unset)."""
    raw = role.resources.interface if role.resources is not None else None
    if raw is None:
        return 0
    count = whole_number(raw)
    if count is None or count < 0:
        raise _fail(
            role,
            index,
            f"resources.interface {raw!r} is not a non-negative whole number",
            origin="render.interface-invalid",
            child="resources.interface",
        )
    return count


def accelerator_count(role: RoleSpec, index: int) -> int | None:
    """The role's ``resources.accelerator`` as a whole number, or None when unset."""
    raw = role.resources.accelerator if role.resources is not None else None
    if raw is None:
        return None
    count = whole_number(raw)
    if count is None or count < 0:
        raise _fail(
            role,
            index,
            f"resources.accelerator {raw!r} is not a whole number of cards",
            origin="render.accelerator-invalid",
            child="resources.accelerator",
        )
    return count


def _unit(it: InstanceType, role: RoleSpec, index: int, what: str, raw: str | None) -> Fraction:
    if raw is None or raw == "":
        raise _fail(
            role,
            index,
            f"InstanceType {it.name!r} declares no unit {what} (spec.unitResources)",
            origin="render.unit-resources",
            child="instanceType",
        )
    try:
        value = parse_quantity(raw)
    except QuantityError:
        value = Fraction(-1)
    if value <= 0:
        raise _fail(
            role,
            index,
            f"InstanceType {it.name!r} has an unparsable unit {what} {raw!r}",
            origin="render.unit-resources",
            child="instanceType",
        )
    return value


def _optional_quantity(
    it: InstanceType, role: RoleSpec, index: int, what: str, raw: str | None
) -> Fraction | None:
    if raw is None or raw == "":
        return None
    try:
        return parse_quantity(raw)
    except QuantityError:
        raise _fail(
            role,
            index,
            f"InstanceType {it.name!r} has an unparsable {what} {raw!r}",
            origin="render.unit-resources",
            child="instanceType",
        ) from None


def _accelerator_key(it: InstanceType, role: RoleSpec, index: int, manufacturer: str) -> str:
    key = ACCELERATOR_KEYS.get(manufacturer)
    if key is None:
        raise _fail(
            role,
            index,
            f"InstanceType {it.name!r} reports manufacturer {manufacturer!r}, which has no "
            f"accelerator resource key (known: {', '.join(sorted(ACCELERATOR_KEYS))})",
            origin="render.manufacturer-unknown",
            child="instanceType",
        )
    return key


def _not_ready(it: InstanceType, role: RoleSpec, index: int, what: str) -> RenderError:
    return _fail(
        role,
        index,
        f"InstanceType {it.name!r} is not ready yet: {what}; retry once its status converges",
        origin="render.instance-type-not-ready",
        child="instanceType",
    )


def size_pod(
    role: RoleSpec,
    it: InstanceType,
    *,
    index: int,
    fabric: tuple[str, int] | None = None,
) -> PodResources:
    """The ``main`` container's resources for ``role`` on ``it`` (docs/contract/render.md §15, D20,
    D21).

    ``fabric`` is the interface resource (key, count) decided from the transfer paths, or None.
    Raises :class:`RenderError` naming the role and the type for a type whose detail is not
    ready, an unparsable unit, an unknown manufacturer or an unsizable partition profile.
    """
    unit = it.spec.unit_resources
    unit_cpu = _unit(it, role, index, "cpu", unit.cpu if unit else None)
    unit_ram = _unit(it, role, index, "ram", unit.ram if unit else None)
    unit_eph = _optional_quantity(
        it, role, index, "unit ephemeral storage", unit.ephemeral_storage if unit else None
    )
    local = _optional_quantity(it, role, index, "localStorage", it.spec.local_storage)

    cards = 1  # a slice or a partition is one card's share: it counts 1 (docs/decisions.md)
    share = Fraction(1)  # of the unit, for CPU and memory
    key: str | None = None
    count = 0
    annotations: dict[str, str] = {}
    res = role.resources
    requested = accelerator_count(role, index)
    if it.spec.acceleratable:
        detail = it.status.detail
        manufacturer = (detail.manufacturer if detail else None) or ""
        if not manufacturer:
            raise _not_ready(it, role, index, "status.detail.manufacturer is empty")
        if it.status.accelerator is None or it.status.accelerator.capacity is None:
            raise _not_ready(it, role, index, "status.accelerator.capacity is not reported")
        profile = (res.accelerator_partitioned_profile if res else None) or ""
        mem_pct = (res.accelerator_sliced_memory_percentage if res else None) or 0
        cores_pct = (res.accelerator_sliced_cores_percentage if res else None) or 0
        sliced = detail.sliced_detail if detail else None
        if profile:
            profiles = sliced.physical.profiles if sliced and sliced.physical else None
            if profiles is None:
                raise _not_ready(it, role, index, "its partition detail is not computed")
            base = _accelerator_key(it, role, index, manufacturer)
            found = next((p for p in profiles if p.name == profile), None)
            card = _optional_quantity(
                it, role, index, "card memory", detail.memory if detail else None
            )
            if found is None or not found.memory_mi_b or not card or card <= 0:
                offered = ", ".join(p.name for p in profiles) or "none"
                vram = detail.memory if detail else None
                raise _fail(
                    role,
                    index,
                    f"partition profile {profile!r} cannot be sized on InstanceType {it.name!r} "
                    f"(offered profiles: {offered}; card memory {vram!r}); "
                    "retry once the type's detail is complete",
                    origin="render.partition-unsizable",
                    child="resources.acceleratorPartitionedProfile",
                )
            share = Fraction(found.memory_mi_b * _MIB) / card
            key, count = base + PARTITIONED_SUFFIX, 1
            annotations[PARTITIONED_PROFILE] = profile
        elif mem_pct or cores_pct:
            logical = sliced.logical if sliced else None
            if logical is None:
                raise _not_ready(it, role, index, "its slicing detail is not computed")
            if logical.count <= 0:
                raise _fail(
                    role,
                    index,
                    f"InstanceType {it.name!r} offers no logical slicing",
                    origin="render.slice-not-offered",
                    child="resources.acceleratorSlicedMemoryPercentage",
                )
            base = _accelerator_key(it, role, index, manufacturer)
            mem_pct = mem_pct or cores_pct
            cores_pct = cores_pct or mem_pct
            share = Fraction(mem_pct, 100)
            key, count = base + SLICED_SUFFIX, 1
            annotations[SLICED_MEMORY_PERCENTAGE] = str(mem_pct)
            annotations[SLICED_CORES_PERCENTAGE] = str(cores_pct)
        else:
            cards = requested if requested else 1
            share = Fraction(cards)
            if requested:
                key, count = _accelerator_key(it, role, index, manufacturer), requested

    eph = unit_eph * cards if unit_eph is not None else DEFAULT_EPHEMERAL_STORAGE
    if local is not None and local < eph:
        eph = local
    limits = {
        CPU: format_cpu(unit_cpu * share),
        MEMORY: format_memory(unit_ram * share),
        EPHEMERAL_STORAGE: format_memory(eph),
    }
    if key is not None:
        limits[key] = str(count)
    if fabric is not None:
        limits[fabric[0]] = str(fabric[1])
    return PodResources(limits=limits, annotations=annotations, accelerator_key=key, cards=cards)


def _canonical_or_raw(value: str | None) -> str | None:
    if value is None:
        return None
    try:
        return canonical(value)
    except QuantityError:
        return value


def instance_type_hash_input(it: InstanceType) -> dict[str, Any]:
    """The InstanceType's part of the pod-spec-hash input (D10): entrance, manufacturer,
    acceleratable, unit resources and local storage, quantities in canonical form."""
    unit = it.spec.unit_resources
    detail = it.status.detail
    return {
        "entrance": it.status.entrance,
        "manufacturer": detail.manufacturer if detail else None,
        "acceleratable": it.spec.acceleratable,
        "unitResources": (
            {
                "cpu": _canonical_or_raw(unit.cpu),
                "ram": _canonical_or_raw(unit.ram),
                "ephemeralStorage": _canonical_or_raw(unit.ephemeral_storage),
            }
            if unit is not None
            else None
        ),
        "localStorage": _canonical_or_raw(it.spec.local_storage),
    }
