"""InstanceType rules (``docs/contract/admission.md`` §9, D12, D20), skipped while deleting.

Per role with ``resources``: the type must exist; on an acceleratable type the requested mode
must be offered and a whole-card count must fit the type's capacity (the pool total, not what
is free). A type whose observed detail is not ready yet has its mode and capacity rules skipped
(D20): admission must not refuse a legal deployment for losing a race against the InstanceType
reconciler; the render reports it instead.
"""

from __future__ import annotations

from collections import Counter

from gpustack_render.admission.context import (
    Context,
    is_partition_request,
    is_slice_request,
    quantity_value,
)
from gpustack_render.api.inputs import InstanceType
from gpustack_render.api.modeldeployment import RoleSpec
from gpustack_render.core import errors
from gpustack_render.core.errors import ErrorList
from gpustack_render.core.paths import ROLES, FieldPath
from gpustack_render.core.vocabulary import RoleKind
from gpustack_render.deployment.roles import effective_kind
from gpustack_render.schema.lookups import LookupFailed


def _profiles(itype: InstanceType) -> list[str]:
    detail = itype.status.detail
    sliced = detail.sliced_detail if detail else None
    physical = sliced.physical if sliced else None
    return [p.name for p in (physical.profiles or [])] if physical else []


def _logical_count(itype: InstanceType) -> int:
    detail = itype.status.detail
    sliced = detail.sliced_detail if detail else None
    return sliced.logical.count if sliced and sliced.logical else 0


def _manufacturer(itype: InstanceType) -> str:
    detail = itype.status.detail
    return (detail.manufacturer or "") if detail else ""


def _slicing_ready(itype: InstanceType) -> bool:
    detail = itype.status.detail
    return bool(_manufacturer(itype)) and detail is not None and detail.sliced_detail is not None


def _capacity(itype: InstanceType) -> int | None:
    acc = itype.status.accelerator
    if not _manufacturer(itype) or acc is None:
        return None
    return acc.capacity


def accelerator_group(itype: InstanceType) -> str:
    detail = itype.status.detail
    return (detail.accelerator_group or "") if detail else ""


def _mode_rules(role: RoleSpec, path: FieldPath, itype: InstanceType) -> ErrorList:
    """Rule 4: the requested mode against what the type offers."""
    out = ErrorList()
    res = role.resources
    assert res is not None
    rpath = path.child("resources")
    tname = itype.name
    cards_value = quantity_value(res.accelerator)
    cards = cards_value if cards_value is not None else 0
    partition = is_partition_request(role)
    sliced = is_slice_request(role)
    if partition and _slicing_ready(itype):
        offered = _profiles(itype)
        profile = res.accelerator_partitioned_profile
        if not offered:
            out.append(
                errors.forbidden(
                    rpath.child("acceleratorPartitionedProfile"),
                    f"InstanceType {tname!r} is not physically partitionable; request whole "
                    f"accelerators or use a partitionable type",
                    origin="instance-type.not-partitionable",
                )
            )
        elif profile not in offered:
            out.append(
                errors.invalid(
                    rpath.child("acceleratorPartitionedProfile"),
                    profile,
                    f"InstanceType {tname!r} offers the partition profiles {', '.join(offered)}",
                    origin="instance-type.profile-not-offered",
                )
            )
    if sliced and not partition and _slicing_ready(itype) and _logical_count(itype) <= 0:
        out.append(
            errors.forbidden(
                rpath.child("acceleratorSlicedMemoryPercentage"),
                f"InstanceType {tname!r} is not logically sliceable; request whole accelerators "
                f"or use a sliceable type",
                origin="instance-type.not-sliceable",
            )
        )
    if (sliced or partition) and cards != 1:
        mode = "a partition profile" if partition else "a slice"
        out.append(
            errors.invalid(
                rpath.child("accelerator"),
                res.accelerator if res.accelerator is not None else 0,
                f"{mode} of InstanceType {tname!r} takes exactly 1 accelerator",
                origin="instance-type.fraction-takes-one-card",
            )
        )
    if not sliced and not partition:
        capacity = _capacity(itype)
        if capacity is not None and cards > capacity:
            out.append(
                errors.invalid(
                    rpath.child("accelerator"),
                    res.accelerator,
                    f"InstanceType {tname!r} has a whole-accelerator capacity of {capacity} "
                    f"(the pool's total, not what is free); request at most {capacity}",
                    origin="instance-type.cards-over-capacity",
                )
            )
    return out


def validate_instance_types(ctx: Context) -> ErrorList:
    """§9 rules 1–6 over every role; skipped entirely while the object is being deleted."""
    out = ErrorList()
    if ctx.deleting:
        return out
    types: dict[int, InstanceType] = {}
    roles = ctx.md.spec.roles
    for i, role in enumerate(roles):
        if role.resources is None or not role.instance_type:
            continue
        path = ROLES.index(i)
        tname = role.instance_type
        try:
            itype = ctx.lookups.get(InstanceType, "", tname)
        except LookupFailed as exc:
            if not ctx.first_type_failure(tname):
                continue
            out.append(
                errors.internal(
                    path.child("instanceType"),
                    f"cannot read InstanceType {tname!r}: {exc.reason}; retry",
                    origin="instance-type.must-exist",
                )
            )
            continue
        if itype is None:
            out.append(
                errors.not_found(
                    path.child("instanceType"),
                    tname,
                    f"InstanceType {tname!r} does not exist; name an existing InstanceType",
                    origin="instance-type.must-exist",
                )
            )
            continue
        types[i] = itype
        if not itype.spec.acceleratable:
            cards = quantity_value(role.resources.accelerator)
            if cards is not None and cards > 0:
                out.append(
                    errors.invalid(
                        path.child("resources", "accelerator"),
                        role.resources.accelerator,
                        f"InstanceType {tname!r} is not acceleratable; request no accelerator "
                        f"or use an acceleratable type",
                        origin="instance-type.not-acceleratable",
                    )
                )
            continue
        out.extend(_mode_rules(role, path, itype))
    out.extend(_shared_zero(ctx, types))
    out.extend(_shared_slices(ctx, types))
    return out


def _shared_zero(ctx: Context, types: dict[int, InstanceType]) -> ErrorList:
    """Rule 5: explicit ``accelerator: 0`` on an acceleratable type named by two roles or more."""
    out = ErrorList()
    roles = ctx.md.spec.roles
    named = Counter(r.instance_type for r in roles)
    for i, itype in types.items():
        res = roles[i].resources
        if res is None or res.accelerator is None or not itype.spec.acceleratable:
            continue
        if quantity_value(res.accelerator) != 0 or named[itype.name] < 2:
            continue
        out.append(
            errors.invalid(
                ROLES.index(i).child("resources", "accelerator"),
                res.accelerator,
                f"accelerator 0 on acceleratable InstanceType {itype.name!r}, which another "
                f"role of this deployment also names: request at least one accelerator, or "
                f"move the CPU-only role to a non-acceleratable type",
                origin="instance-type.zero-cards-on-shared-type",
            )
        )
    return out


def _shared_slices(ctx: Context, types: dict[int, InstanceType]) -> ErrorList:
    """Rule 6: a Prefill and a Decode role both slicing cards of one accelerator group."""
    out = ErrorList()
    roles = ctx.md.spec.roles
    sliced = {
        i: itype
        for i, itype in types.items()
        if itype.spec.acceleratable and is_slice_request(roles[i]) and accelerator_group(itype)
    }
    for p, ptype in sliced.items():
        if effective_kind(roles[p]) != RoleKind.PREFILL:
            continue
        for d, dtype in sliced.items():
            if effective_kind(roles[d]) != RoleKind.DECODE or accelerator_group(
                ptype
            ) != accelerator_group(dtype):
                continue
            group = accelerator_group(ptype)
            out.append(
                errors.invalid(
                    ROLES,
                    f"{roles[p].name}, {roles[d].name}",
                    f"prefill role {roles[p].name!r} (InstanceType {ptype.name!r}) and decode "
                    f"role {roles[d].name!r} (InstanceType {dtype.name!r}) both request a "
                    f"logical slice (acceleratorSlicedMemoryPercentage) from accelerator group "
                    f"{group!r}; use another group, whole accelerators, or partition profiles "
                    f"(isolated by the device)",
                    origin="instance-type.prefill-decode-share-slice",
                )
            )
    return out
