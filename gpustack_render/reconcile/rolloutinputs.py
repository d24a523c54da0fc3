"""What the rollout planner is given besides the observation: the desired seats of a rendering,
the cache hold, and the replacement remembered in status (D6), read and written.

The controller's pass and ``explain`` build the planner's inputs with these, so both run
:func:`~gpustack_render.reconcile.rollout.plan` on the same inputs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gpustack_render.api.modeldeployment import (
    ModelDeployment,
    ModelDeploymentStatus,
    RoleStatus,
)
from gpustack_render.core.labels import COMPONENT
from gpustack_render.deployment.scaling import ScaleTarget
from gpustack_render.reconcile.rollout import Desired, DesiredRole
from gpustack_render.rendering.renderer import Rendering, RoleRendering
from gpustack_render.rendering.roleplan import CacheResolution


def desired_from_rendering(rendering: Rendering, targets: Sequence[ScaleTarget] = ()) -> Desired:
    """The planner's view of a rendering: per role the seats' hashes, group names and
    LocalQueue; with the deployment's scale ``targets``, the ratio group of each grouped role
    (a scale-down keeps units whole)."""
    units = {name: (t.name, t.per_unit(name)) for t in targets if t.group for name in t.role_names}
    return Desired(
        roles=tuple(
            DesiredRole(
                name=role.name,
                replicas=role.replicas,
                size=role.size,
                hashes=role.hashes(),
                groups=tuple(role.groups()),
                queue=role.queue,
                unit_group=units[role.name][0] if role.name in units else None,
                per_unit=units[role.name][1] if role.name in units else 1,
                elastic=role.elastic is not None,
            )
            for role in rendering.roles
        ),
        companions=frozenset(
            component for role in rendering.roles if (component := _head_component(role))
        ),
        floor=rendering.floor,
        render_version=rendering.render_version,
    )


def _head_component(role: RoleRendering) -> str:
    """The component label of an Elastic EP role's Ray head ("" for an ordinary role)."""
    if role.elastic is None:
        return ""
    head_labels = (role.elastic.head_pod.get("metadata") or {}).get("labels") or {}
    return str(head_labels.get(COMPONENT) or "")


def cache_hold(md: ModelDeployment, cache: CacheResolution | None) -> bool:
    """Outdated roles delete nothing while a deployment that resolved a cache connection before
    (``status.kvCache`` set) resolves none this pass (docs/contract/controller.md §6 step 3)."""
    if md.spec.kv_cache is None or md.status is None or md.status.kv_cache is None:
        return False
    return cache is None or cache.connection is None


def remembered_replacing(md: ModelDeployment) -> dict[str, int | None]:
    """``status.roles[].replacing`` by role (D6): the replacement a restart resumes."""
    return {r.name: r.replacing for r in (md.status.roles or ())} if md.status is not None else {}


def with_replacing(
    md: ModelDeployment, replacing: Mapping[str, int | None]
) -> ModelDeploymentStatus:
    """The stored status with ``roles[].replacing`` set to ``replacing`` (D6): what the
    controller writes before it deletes the replica it chose."""
    base = md.status or ModelDeploymentStatus()
    by_name = {r.name: r for r in base.roles or ()}
    roles = []
    for name in [r.name for r in md.spec.roles]:
        old = by_name.get(name) or RoleStatus(name=name)
        roles.append(old.model_copy(update={"replacing": replacing.get(name, old.replacing)}))
    return base.model_copy(update={"roles": roles})
