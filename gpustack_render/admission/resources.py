"""A role's resources and shared memory (``resources.*``, ``shm.*``; ``docs/contract/admission.md``
§5 R5, R6): whole cards, whole interfaces, one of slicing or partitioning, a positive shm size."""

from __future__ import annotations

from gpustack_render.admission.context import quantity_value
from gpustack_render.api.modeldeployment import RoleSpec
from gpustack_render.core import errors
from gpustack_render.core.errors import ErrorList
from gpustack_render.core.paths import FieldPath


def validate_resources(role: RoleSpec, path: FieldPath) -> ErrorList:
    """``resources.interface-not-whole``, ``resources.cards-not-whole`` and
    ``resources.partition-with-slice`` (partition together with a slice)."""
    out = ErrorList()
    res = role.resources
    if res is None:
        return out
    rpath = path.child("resources")
    for field_name, value, origin in (
        ("accelerator", res.accelerator, "resources.cards-not-whole"),
        ("interface", res.interface, "resources.interface-not-whole"),
    ):
        if value is None:
            continue
        number = quantity_value(value)
        if number is None or number.denominator != 1 or number < 0:
            out.append(
                errors.invalid(
                    rpath.child(field_name),
                    value,
                    f"{rpath.child(field_name)} must be a non-negative whole number",
                    origin=origin,
                )
            )
    slices = (res.accelerator_sliced_memory_percentage, res.accelerator_sliced_cores_percentage)
    if res.accelerator_partitioned_profile and any(slices):
        out.append(
            errors.invalid(
                rpath.child("acceleratorPartitionedProfile"),
                res.accelerator_partitioned_profile,
                "a partition profile cannot be combined with acceleratorSlicedMemoryPercentage "
                "or acceleratorSlicedCoresPercentage: one accelerator cannot be partitioned and "
                "sliced at once. Set the profile or the slice percentages, not both",
                origin="resources.partition-with-slice",
            )
        )
    return out


def validate_shm_size(role: RoleSpec, path: FieldPath) -> ErrorList:
    """``shm.size-not-positive``: ``shmSize`` is a positive quantity (a negative ``sizeLimit`` makes
    every Pod of the role invalid, and a zero one leaves ``/dev/shm`` no room)."""
    out = ErrorList()
    if role.shm_size is None:
        return out
    size = quantity_value(role.shm_size)
    if size is None or size <= 0:
        out.append(
            errors.invalid(
                path.child("shmSize"),
                role.shm_size,
                f"{path.child('shmSize')} must be a positive quantity, such as 32Gi; leave it "
                f"out for the 16Gi default",
                origin="shm.size-not-positive",
            )
        )
    return out
