"""``render``: one ModelDeployment plus the objects it names → its Pods, Services, LocalQueues and
the router's objects.

A pure function (no I/O, clock or randomness): the same inputs give byte-identical output. The pass
resolves its inputs (docs/contract/render.md §1), decides per role (§2, ``roleplan.py``), builds
**one Pod template per role** and stamps it per seat (ordinal ``0..replicas-1``, member
``0..size-1``): only the seat's name, hostname, subdomain, group name, ordinal, member index, leader
address and pod-spec-hash differ between the Pods of a role.

A render error aborts the pass before any object is produced: it is raised as
:class:`~gpustack_render.core.errors.RenderError` naming the role and the cause; no other exception
escapes. A deployment whose ``ModelArtifact`` cannot be delivered (missing, unresolved, an unbound
claim...) is one: :class:`~gpustack_render.rendering.weights.WeightsBlockedError`, origin
``render.weights``, carrying the ``WeightsReady`` reason.

A role with ``elasticEp`` (``elastic.py``) is rendered as ``width`` members stamped from two
templates (the master at ordinal 0, the workers), plus the Ray head Pod and its Service, which
the role's :class:`RoleRendering` carries in ``elastic``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpustack_render.api.common import API_VERSION
from gpustack_render.api.inputs import InstanceType
from gpustack_render.api.modeldeployment import KIND, ModelDeployment, RoleKindName
from gpustack_render.core import naming
from gpustack_render.core.errors import ErrorType, RenderError
from gpustack_render.core.paths import ROLES
from gpustack_render.core.settings import Settings
from gpustack_render.core.vocabulary import Engine, RoleKind
from gpustack_render.deployment.defaulting import default_deployment
from gpustack_render.deployment.scaling import scale_targets
from gpustack_render.engines.parallelism import Parallelism
from gpustack_render.rendering import elastic as elastic_ep
from gpustack_render.rendering.compilecache import cache_path
from gpustack_render.rendering.elastic import ElasticPlan, ElasticRendering, LiveMaster
from gpustack_render.rendering.hashing import (
    CURRENT_RENDER_VERSION,
    SeatHasher,
    effective_floor,
    spec_hash_input,
)
from gpustack_render.rendering.localqueues import local_queues
from gpustack_render.rendering.pods import MAIN_CONTAINER, pod_template
from gpustack_render.rendering.resources import size_pod
from gpustack_render.rendering.roleplan import (
    CacheResolution,
    RolePlan,
    instance_type_of,
    plan_roles,
    resolve_cache,
)
from gpustack_render.rendering.router import RouterRendering, render_router
from gpustack_render.rendering.scalers import scaler_manifest
from gpustack_render.rendering.services import (
    ServicePort,
    deployment_service,
    instance_service,
    role_service,
)
from gpustack_render.rendering.stamping import compile_builder
from gpustack_render.rendering.weights import WeightsBlockedError
from gpustack_render.schema.lookups import LookupFailed, Lookups
from gpustack_render.weights.delivery import WeightsBlock, WeightsPlan, weights_of


@dataclass(frozen=True, slots=True)
class SeatRendering:
    """One Pod of one replica: its identity, its currency and its manifest.

    ``name`` is set above size 1 (``metadata.name``); at size 1 the Pod carries
    ``generate_name`` instead and the API server names it.
    """

    role: str
    ordinal: int
    member: int
    name: str | None
    generate_name: str | None
    group_name: str
    pod_spec_hash: str
    render_version: int
    pod: dict[str, Any]


@dataclass(frozen=True)
class RoleRendering:
    """Everything rendered for one role, with the facts the controller reads about it."""

    name: str
    #: Effective kind in API spelling (``Server`` when unset).
    kind: RoleKindName
    #: The same kind in the internal spelling, as the ``role-kind`` label writes it.
    kind_label: RoleKind
    #: ``vllm`` | ``vllm-ascend`` | ``sglang``.
    engine: Engine
    #: False for a take-over role (``status.roles[].unmanaged``).
    managed: bool
    replicas: int
    size: int
    instance_type: str
    #: The InstanceType's ``status.entrance``: the queue name and LocalQueue.
    queue: str
    #: The parsed parallel degrees (``status.roles[].parallelism``).
    parallelism: Parallelism
    store_client: bool
    direct_leg: bool
    publishes_kv_events: bool
    direct_decoder: bool
    #: The Service port (first declared, else 8000) and whether the engine serves HTTPS.
    serving_port: int
    https: bool
    #: Every seat, ordinal-major then member.
    seats: tuple[SeatRendering, ...]
    #: ``<md>-<role>`` and, above size 1, ``<md>-<role>-r<o>`` by ordinal.
    service: dict[str, Any]
    instance_services: tuple[dict[str, Any], ...]
    #: The role's pod-spec-hash input without its seat (hashing.spec_hash_input): what an
    #: explanation diffs to name the fields that moved a role's hash.
    hash_input: Mapping[str, Any] = field(default_factory=dict)
    #: The Elastic EP profile's head and boot width (None for an ordinary role): ``replicas``
    #: is then the width, ordinal 0 the master.
    elastic: ElasticRendering | None = None

    def seat(self, ordinal: int, member: int) -> SeatRendering:
        """The seat (``ordinal``, ``member``); IndexError outside the role."""
        if not (0 <= ordinal < self.replicas and 0 <= member < self.size):
            raise IndexError(f"role {self.name!r} has no seat ({ordinal}, {member})")
        return self.seats[ordinal * self.size + member]

    def instance(self, ordinal: int) -> tuple[SeatRendering, ...]:
        """Every member of one replica, leader first."""
        start = ordinal * self.size
        return self.seats[start : start + self.size]

    def hashes(self) -> dict[tuple[int, int], str]:
        """(ordinal, member) → pod-spec-hash, for the rollout planner."""
        return {(s.ordinal, s.member): s.pod_spec_hash for s in self.seats}

    def groups(self) -> list[str]:
        """The Kueue group name of each ordinal (index = ordinal)."""
        return [self.seats[o * self.size].group_name for o in range(self.replicas)]

    def pods(self) -> list[dict[str, Any]]:
        """The role's Pods: every seat, then an Elastic EP role's Ray head."""
        head = [self.elastic.head_pod] if self.elastic is not None else []
        return [*(s.pod for s in self.seats), *head]


@dataclass(frozen=True)
class Rendering:
    """The result of one render pass.

    The manifests are fresh dicts built for this result; :meth:`objects` returns them without
    copying, in D18's order.
    """

    name: str
    namespace: str
    #: The renderer's baseline stamped on every Pod, and the deployment's effective floor.
    render_version: int
    floor: int
    roles: tuple[RoleRendering, ...]
    #: ``<md>``: the deployment-wide Service.
    deployment_service: dict[str, Any]
    local_queues: tuple[dict[str, Any], ...]
    #: What ``spec.kvCache`` resolved to (None without a pool).
    cache: CacheResolution | None
    #: The router's objects, or why there are none (None without ``spec.router``; D26).
    router: RouterRendering | None = None
    #: One ModelDeploymentScaler per scale target (External role, ratio group), in target
    #: order (``deployment/scaling.py``); none without autoscaling.
    scalers: tuple[dict[str, Any], ...] = ()
    #: The artifact's weights and their delivery (None without ``spec.model.artifactRef``).
    weights: WeightsPlan | None = None

    def role(self, name: str) -> RoleRendering | None:
        for role in self.roles:
            if role.name == name:
                return role
        return None

    def services(self) -> list[dict[str, Any]]:
        """``<md>``, then per role in spec order ``<md>-<role>``, its instance Services and an
        Elastic EP role's head Service ``<md>-elastic-head``."""
        out = [self.deployment_service]
        for role in self.roles:
            out.append(role.service)
            out.extend(role.instance_services)
            if role.elastic is not None:
                out.append(role.elastic.head_service)
        return out

    def iter_seats(self) -> Iterator[SeatRendering]:
        for role in self.roles:
            yield from role.seats

    def pods(self) -> list[dict[str, Any]]:
        """Every Pod: roles in spec order, then ordinal, then member; an Elastic EP role's Ray
        head after its members."""
        return [pod for role in self.roles for pod in role.pods()]

    def router_objects(self) -> list[dict[str, Any]]:
        """The router's objects in their apply order (``router/model.py``); none without a
        router or when it cannot be rendered."""
        return list(self.router.objects) if self.router is not None else []

    def objects(self) -> list[dict[str, Any]]:
        """LocalQueues by name, then Services, then Pods (D18), then the scalers, then the
        router's objects."""
        return [
            *self.local_queues,
            *self.services(),
            *self.pods(),
            *self.scalers,
            *self.router_objects(),
        ]


def owner_references(md: ModelDeployment) -> list[dict[str, Any]]:
    """One controller reference to the deployment; none without ``metadata.uid`` (D18)."""
    if not md.metadata.uid:
        return []
    return [
        {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "name": md.metadata.name,
            "uid": md.metadata.uid,
            "controller": True,
        }
    ]


def render(
    md: ModelDeployment,
    *,
    lookups: Lookups,
    settings: Settings,
    counts: Mapping[str, int] | None = None,
    elastic_masters: Sequence[LiveMaster] = (),
) -> Rendering:
    """Render every desired child object of ``md`` (docs/contract/render.md).

    ``md`` is the schema-defaulted deployment (``decoding.decode_deployment``); the mutating
    accelerator default is applied here too (D18). ``counts`` replaces the replicas of the
    roles it names: the count a scaler sets, or a count held after External was turned off
    (``reconcile/scaling.py``); 0 renders no seat. ``elastic_masters`` are the live masters of
    an Elastic EP role (``elastic.live_masters``): the master keeps the boot width the one
    there is carries; without any the boot width is ``width``. The input is never modified.
    Raises :class:`RenderError` (and nothing else) when the deployment cannot be rendered.
    """
    try:
        return _render(
            md,
            lookups=lookups,
            settings=settings,
            counts=counts or {},
            masters=elastic_masters,
        )
    except RenderError:
        raise
    except LookupFailed as exc:
        raise RenderError(
            f"cannot render ModelDeployment {md.metadata.name!r}: {exc}; retry",
            origin="render.lookup-failed",
        ) from exc
    except Exception as exc:  # the library's contract: render errors only
        raise RenderError(
            f"cannot render ModelDeployment {md.metadata.name!r}: internal error: "
            f"{type(exc).__name__}: {exc}",
            origin="render.internal",
        ) from exc


def with_counts(md: ModelDeployment, counts: Mapping[str, int]) -> ModelDeployment:
    """``md`` with the replicas of the roles ``counts`` names replaced (no validation: a
    scaler's count may be 0, below the schema's minimum for ``roles[].replicas``)."""
    if not any(counts.get(r.name, r.replicas) != r.replicas for r in md.spec.roles):
        return md
    roles = [
        r.model_copy(update={"replicas": counts[r.name]}) if r.name in counts else r
        for r in md.spec.roles
    ]
    return md.model_copy(update={"spec": md.spec.model_copy(update={"roles": roles})})


def _render(
    md: ModelDeployment,
    *,
    lookups: Lookups,
    settings: Settings,
    counts: Mapping[str, int],
    masters: Sequence[LiveMaster],
) -> Rendering:
    namespace = md.metadata.namespace or naming.DEFAULT_NAMESPACE
    deployment = md.metadata.name
    types: list[InstanceType] = [
        instance_type_of(role, i, lookups=lookups) for i, role in enumerate(md.spec.roles)
    ]
    md, errs = default_deployment(md, lookups=lookups)
    for err in errs:
        if err.type is ErrorType.INTERNAL:
            raise RenderError(err.detail, field=err.field, origin="render.lookup-failed")
    # After defaulting, which validates the object: a scaler's count may be 0.
    md = with_counts(md, counts)
    # The weights (docs/weights.md, "Delivery"): a deployment whose artifact cannot be
    # delivered gets no Pod; the controller asks weights_of itself and holds its Pods.
    weights = weights_of(md, lookups=lookups, settings=settings)
    if isinstance(weights, WeightsBlock):
        raise WeightsBlockedError(deployment, weights)
    cache = resolve_cache(md, namespace=namespace, lookups=lookups, settings=settings)
    # Elastic EP: the role's members are rendered as width replicas of one Pod; the hash input
    # stays the declared role (hashing.role_hash_input leaves the width out, D29).
    elastic = elastic_ep.plan_elastic(md, namespace=namespace, masters=masters)
    members = elastic_ep.member_deployment(md, elastic) if elastic is not None else md
    plans = plan_roles(members, instance_types=types, cache=cache, weights=weights)
    connection = cache.connection if cache is not None else None
    owners = owner_references(md)
    version = CURRENT_RENDER_VERSION

    roles: list[RoleRendering] = []
    for plan in plans:
        role = plan.role
        resources = size_pod(role, plan.instance_type, index=plan.index, fabric=plan.fabric)
        template = pod_template(
            members,
            plan,
            namespace=namespace,
            connection=connection,
            resources=resources,
            compile_cache_path=_compile_cache_path(md, plan),
            owner_references=owners,
            settings=settings,
            render_version=version,
        )
        hash_input = spec_hash_input(md, md.spec.roles[plan.index], bindings=plan.bindings)
        hasher = SeatHasher(hash_input)
        role_elastic: ElasticRendering | None = None
        master: dict[str, Any] | None = None
        if elastic is not None and plan.index == elastic.index:
            master, template, role_elastic = _elastic(
                template, plan, elastic, owner_references=owners, render_version=version
            )
        seats = _stamp(
            template,
            namespace=namespace,
            deployment=deployment,
            plan=plan,
            hasher=hasher,
            render_version=version,
            first=master,
        )
        port = _service_port(plan)
        master_only = role_elastic is not None
        roles.append(
            RoleRendering(
                name=role.name,
                kind=role.kind,
                kind_label=plan.kind,
                engine=plan.engine,
                managed=plan.managed,
                replicas=role.replicas,
                size=role.size,
                instance_type=role.instance_type,
                queue=plan.entrance,
                parallelism=plan.parallelism,
                store_client=plan.store_client,
                direct_leg=plan.direct_leg,
                publishes_kv_events=plan.publishes_kv_events,
                direct_decoder=plan.direct_decoder,
                serving_port=plan.ports.external,
                https=plan.https,
                seats=seats,
                service=role_service(
                    deployment,
                    role.name,
                    namespace=namespace,
                    port=port,
                    kv_events=plan.publishes_kv_events,
                    owner_references=owners,
                    master_only=master_only,
                ),
                instance_services=tuple(
                    instance_service(
                        deployment,
                        role.name,
                        ordinal,
                        namespace=namespace,
                        port=port,
                        owner_references=owners,
                    )
                    for ordinal in range(role.replicas)
                )
                if role.size > 1
                else (),
                hash_input=hash_input,
                elastic=role_elastic,
            )
        )
    first = plans[0]
    return Rendering(
        weights=weights,
        name=deployment,
        namespace=namespace,
        render_version=version,
        floor=effective_floor(md.metadata.annotations),
        roles=tuple(roles),
        deployment_service=deployment_service(
            deployment,
            namespace=namespace,
            first_role=first.name,
            port=_service_port(first),
            owner_references=owners,
            master_only=elastic is not None and first.index == elastic.index,
        ),
        local_queues=tuple(
            local_queues(
                (p.entrance for p in plans),
                namespace=namespace,
                system_namespace=settings.system_namespace,
            )
        ),
        cache=cache,
        router=render_router(
            md, plans, namespace=namespace, owner_references=owners, settings=settings
        ),
        scalers=tuple(
            scaler_manifest(
                target,
                deployment=deployment,
                namespace=namespace,
                counts={r.name: r.replicas for r in md.spec.roles},
                owner_references=owners,
            )
            for target in scale_targets(md)
        ),
    )


def _elastic(
    template: dict[str, Any],
    plan: RolePlan,
    elastic: ElasticPlan,
    *,
    owner_references: list[dict[str, Any]],
    render_version: int,
) -> tuple[dict[str, Any], dict[str, Any], ElasticRendering]:
    """The elastic role's master and worker templates and its head (``elastic.py``)."""
    elastic_ep.check_engine(plan)
    master, worker = elastic_ep.member_templates(template, plan, elastic)
    master_main = next(c for c in master["spec"]["containers"] if c["name"] == MAIN_CONTAINER)
    rendering = ElasticRendering(
        width=elastic.width,
        boot_width=elastic.boot_width,
        head_pod=elastic_ep.head_pod(
            plan,
            elastic,
            master_env=master_main.get("env") or (),
            owner_references=owner_references,
            render_version=render_version,
        ),
        head_service=elastic_ep.head_service(elastic, owner_references=owner_references),
    )
    return master, worker, rendering


def _service_port(plan: RolePlan) -> ServicePort:
    """The serving port of a role's Services: named after the external container port, the
    Service port on the external port, ``targetPort`` on the container-side listener."""
    ports = plan.ports
    return ServicePort(ports.external_name, ports.protocol, ports.external, ports.listener)


def _compile_cache_path(md: ModelDeployment, plan: RolePlan) -> str | None:
    if not plan.managed:
        return None
    parsed = plan.parallelism
    if parsed.error is not None:
        raise RenderError(
            f"role {plan.name!r}: its parallel degrees cannot be read ({parsed.error}); own the "
            "whole line with roles[].command",
            field=str(ROLES.index(plan.index)),
            origin="render.degrees-unreadable",
        )
    detail = plan.instance_type.status.detail
    return cache_path(
        manufacturer=detail.manufacturer if detail else None,
        engine=plan.family,
        model=md.spec.model.name,
        image=plan.image,
        degrees=parsed.cache_degrees(),
    )


def _stamp(
    template: dict[str, Any],
    *,
    namespace: str,
    deployment: str,
    plan: RolePlan,
    hasher: SeatHasher,
    render_version: int,
    first: dict[str, Any] | None = None,
) -> tuple[SeatRendering, ...]:
    """Every seat of the role: a fresh manifest from the compiled template, seat values in.
    ``first``, when given, is ordinal 0's own template (an Elastic EP master)."""
    role = plan.role
    size = role.size
    build = compile_builder(template)
    build_first = compile_builder(first) if first is not None else build
    generate = naming.generate_name(deployment, role.name) if size == 1 else None
    seats: list[SeatRendering] = []
    append = seats.append
    for ordinal in range(role.replicas):
        group = naming.group_name(namespace, deployment, role.name, ordinal)
        ordinal_text = str(ordinal)
        subdomain = naming.instance_name(deployment, role.name, ordinal)
        leader = naming.leader_address(deployment, role.name, ordinal)
        for member in range(size):
            digest = hasher.hash(ordinal, member)
            name = naming.member_name(deployment, role.name, ordinal, member) if size > 1 else None
            builder = build_first if ordinal == 0 else build
            pod = builder(name or "", group, ordinal_text, str(member), digest, subdomain, leader)
            append(
                SeatRendering(
                    role.name,
                    ordinal,
                    member,
                    name,
                    generate,
                    group,
                    digest,
                    render_version,
                    pod,
                )
            )
    return tuple(seats)
