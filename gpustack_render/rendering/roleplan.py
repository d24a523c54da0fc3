"""What one render pass resolves and decides before it builds any object
(docs/contract/render.md §1, §2).

:func:`resolve_cache` follows ``spec.kvCache`` to a store connection (the Binding, its
registration, the pool's endpoint and tenancy, the backend's transport offers).
:func:`plan_roles` then decides, per role, everything the Pod, its ports and its Services depend
on: managed or take-over, the inject engine, the store client, the direct transfer leg, KV-event
publishing, the direct decoder, the listener ports, TLS and the probes, the fabric-interface key,
the parsed parallelism, and the resolved bindings that enter the pod-spec-hash.

Nothing here builds a manifest; ``pods.py``, ``services.py`` and ``renderer.py`` read the plan.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, Final

from gpustack_render.api.inputs import InstanceType, KVCacheBackend, KVCachePool, KVCachePoolBinding
from gpustack_render.api.modeldeployment import ModelDeployment, RolePort, RoleSpec
from gpustack_render.core.errors import RenderError
from gpustack_render.core.paths import ROLES
from gpustack_render.core.settings import Settings
from gpustack_render.core.vocabulary import ConditionStatus, Engine, EngineFamily, RoleKind
from gpustack_render.deployment import roles as facts
from gpustack_render.deployment.bindings import BindingChain
from gpustack_render.deployment.roles import (
    EngineOf,
    effective_kind,
    is_pair,
    role_argv,
    role_parallelism,
)
from gpustack_render.engines import connectors
from gpustack_render.engines.connectors import TenantResolution
from gpustack_render.engines.flags import engine_of, last_value
from gpustack_render.engines.owned import (
    DECODER_ENGINE_PORT_BASE,
    DEFAULT_SERVING_PORT,
    PORT_FLAG,
)
from gpustack_render.engines.parallelism import Parallelism, parse_int
from gpustack_render.engines.transfer import ascend_leg, native_leg
from gpustack_render.rendering.hashing import HashBindings
from gpustack_render.rendering.probes import (
    demands_client_certificates,
    is_loopback,
    own_host,
    serves_tls,
)
from gpustack_render.rendering.resources import (
    fabric_key,
    instance_type_hash_input,
    interface_count,
)
from gpustack_render.rendering.weights import artifact_hash_input
from gpustack_render.schema.lookups import Lookups
from gpustack_render.weights.delivery import WeightsPlan

#: The container port name of the default listener.
DEFAULT_PORT_NAME: Final = "http"
#: The renamed first container port of a direct decoder (the engine behind the proxy).
MODEL_SERVER_PORT_NAME: Final = "model-server"


def declared_port_name(protocol: str, port: int) -> str:
    """The container-port name of a declared port: ``<protocol>-<port>``, lowercased."""
    return f"{protocol}-{port}".lower()


#: Binding registration outcomes (docs/contract/controller.md §4 step 1; ``DomainRegistered``
#: reasons).
REGISTERED: Final = "Registered"
BINDING_NOT_FOUND: Final = "BindingNotFound"
BINDING_NOT_READY: Final = "BindingNotReady"
BINDING_DELETING: Final = "BindingDeleting"
#: The Binding condition that completes registration.
QUOTA_GRANTED: Final = "QuotaGranted"
#: The Binding phase that completes registration.
BINDING_READY_PHASE: Final = "Ready"


# --- the cache connection -----------------------------------------------------------------------


@dataclass(frozen=True)
class Connection:
    """A resolved store connection: what every store client of this pass is rendered from."""

    binding: str
    pool: str
    backend: str
    #: The pool's ``status.clientEndpoint``.
    endpoint: str
    #: The backend's transport offers, artifact spelling, group order.
    offers: tuple[str, ...]
    #: The tenant to render (``""`` on a single-tenant store).
    tenant: str
    #: The Binding's declared domain (``default`` when omitted), block size and dtype.
    domain: str
    block_size: int
    dtype: str
    #: The dtype rendered as ``--kv-cache-dtype`` (``""`` when the Setting is off).
    rendered_dtype: str


@dataclass(frozen=True)
class CacheResolution:
    """What ``spec.kvCache`` resolved to in this pass.

    ``connection`` is None when no store client can be rendered; ``reason`` says why (the
    registration outcome, a missing pool/backend, an empty endpoint, an unresolved tenant).
    The objects read are kept for status (``status.kvCache``) and for the interface key.
    """

    binding_name: str
    registration: str
    binding: KVCachePoolBinding | None = None
    pool: KVCachePool | None = None
    backend: KVCacheBackend | None = None
    tenant: TenantResolution | None = None
    connection: Connection | None = None
    reason: str = ""

    @property
    def offers(self) -> tuple[str, ...]:
        """The backend's offers when the backend was read (for the interface key)."""
        return connectors.transport_offers(self.backend) if self.backend is not None else ()


def registration(binding: KVCachePoolBinding | None) -> str:
    """The Binding's registration outcome (docs/contract/controller.md §4 step 1)."""
    if binding is None:
        return BINDING_NOT_FOUND
    if binding.deleting:
        return BINDING_DELETING
    status = binding.status
    if status.phase != BINDING_READY_PHASE:
        return BINDING_NOT_READY
    granted = next((c for c in status.conditions or () if c.type == QUOTA_GRANTED), None)
    if granted is None or granted.status != ConditionStatus.TRUE:
        return BINDING_NOT_READY
    return REGISTERED


def resolve_cache(
    md: ModelDeployment, *, namespace: str, lookups: Lookups, settings: Settings
) -> CacheResolution | None:
    """Follow ``spec.kvCache`` to a connection (docs/contract/render.md §1, D20); None without a
    pool.

    Never a render error: an unresolved connection renders replicas without a store client.
    """
    kv = md.spec.kv_cache
    if kv is None:
        return None
    name = kv.pool_ref.name
    chain = BindingChain(lookups, namespace=namespace, name=name)
    binding = chain.binding()
    reg = registration(binding)
    pool = chain.pool()
    backend = chain.backend()
    base = CacheResolution(name, reg, binding, pool, backend)
    if binding is None or reg != REGISTERED:
        return replace(base, reason=f"KVCachePoolBinding {namespace}/{name}: {reg}")
    if pool is None:
        return replace(
            base,
            reason=f"KVCachePool {binding.spec.pool_ref.name!r} named by the Binding is missing",
        )
    endpoint = pool.status.client_endpoint or ""
    if not endpoint:
        return replace(base, reason=f"KVCachePool {pool.name!r} publishes no client endpoint yet")
    if backend is None:
        backend_name = pool.spec.backends[0] if pool.spec.backends else ""
        return replace(base, reason=f"KVCacheBackend {backend_name!r} named by the pool is missing")
    tenant = connectors.resolve_tenant(binding, pool)
    base = replace(base, tenant=tenant)
    if not tenant.resolved:
        return replace(
            base,
            reason=(
                f"KVCachePool {pool.name!r} reports {connectors.LEDGER_CONDITION} "
                f"{tenant.state.value}" + (f" ({tenant.reason})" if tenant.reason else "")
            ),
        )
    dtype = binding.spec.domain.dtype
    connection = Connection(
        binding=binding.name,
        pool=pool.name,
        backend=backend.name,
        endpoint=endpoint,
        offers=connectors.transport_offers(backend),
        tenant=tenant.tenant,
        domain=binding.domain_name,
        block_size=binding.spec.domain.block_size,
        dtype=dtype,
        rendered_dtype=dtype if settings.kv_cache_dtype_owned else "",
    )
    return replace(base, connection=connection)


# --- per-role decisions -----------------------------------------------------------------------


@dataclass(frozen=True)
class Ports:
    """A role's listeners: the external (Service) port and the engine's own port."""

    #: The Service port and status endpoint port: first declared, else 8000.
    external: int
    #: The external port's container-port name: ``http``, or ``<protocol>-<port>`` lowercased.
    external_name: str
    #: The serving protocol: the first declared port's, else TCP.
    protocol: str
    #: The port the engine listens on (the direct decoder's internal port, the role's own
    #: ``--port``, else the external port).
    engine: int
    #: The container-side listener probes and ``targetPort`` follow (the proxy's external port
    #: on a direct decoder, else the engine port).
    listener: int
    #: The role's own ``--port`` (from ``extraArgs`` or a take-over ``command``), if any.
    own: int | None


@dataclass(frozen=True)
class RolePlan:
    """Everything decided about one role before its template is built
    (docs/contract/render.md §2)."""

    index: int
    role: RoleSpec
    #: Effective kind, lowercase (``server``, ``prefill``, ``decode``).
    kind: RoleKind
    #: ``vllm`` | ``vllm-ascend`` | ``sglang``.
    engine: Engine
    managed: bool
    instance_type: InstanceType
    entrance: str
    image: str
    #: The role's own arguments (``deployment.roles.role_argv``): ``extraArgs`` when managed,
    #: the take-over ``command`` otherwise.
    own_args: tuple[str, ...]
    parallelism: Parallelism
    pair: bool
    #: The store client's matched transport, or ``""`` when the role has no store client.
    store_transport: str
    direct_leg: bool
    #: The leg's protocol (artifact spelling; ``ascend`` on vllm-ascend), ``""`` without a leg.
    leg_protocol: str
    #: The rendered leg document (vLLM family), None without one.
    leg_document: Mapping[str, Any] | None
    publishes_kv_events: bool
    direct_decoder: bool
    ports: Ports
    https: bool
    probes: bool
    #: The fabric-interface (key, count), or None.
    fabric: tuple[str, int] | None
    bindings: HashBindings
    #: How the weights of ``spec.model.artifactRef`` reach the Pod (``rendering/weights.py``);
    #: None without an artifact.
    weights: WeightsPlan | None = None

    @property
    def family(self) -> EngineFamily:
        """``vllm`` | ``sglang``: the base command, the cache variable and the compile-cache
        path."""
        return self.engine.family

    @property
    def store_client(self) -> bool:
        return bool(self.store_transport)

    @property
    def connector(self) -> bool:
        """A connector is synthesized: store client, leg, publisher or direct decoder."""
        return (
            self.store_client or self.direct_leg or self.publishes_kv_events or self.direct_decoder
        )

    @property
    def name(self) -> str:
        return self.role.name

    @property
    def declared_ports(self) -> list[RolePort]:
        return list(self.role.ports or [])


def _fail(index: int, role: str, message: str, *, origin: str, child: str = "") -> RenderError:
    path = ROLES.index(index)
    if child:
        path = path.child(*child.split("."))
    return RenderError(f"role {role!r}: {message}", field=str(path), origin=origin)


def instance_type_of(role: RoleSpec, index: int, *, lookups: Lookups) -> InstanceType:
    """The role's InstanceType with a published entrance, or a render error naming both."""
    it = lookups.get(InstanceType, "", role.instance_type)
    if it is None:
        raise _fail(
            index,
            role.name,
            f"InstanceType {role.instance_type!r} does not exist",
            origin="render.instance-type-missing",
            child="instanceType",
        )
    if not it.status.entrance:
        raise _fail(
            index,
            role.name,
            f"InstanceType {role.instance_type!r} publishes no queue entrance yet "
            "(status.entrance is empty); retry once it converges",
            origin="render.entrance-missing",
            child="instanceType",
        )
    return it


def _parse_port(value: str | None) -> int | None:
    """The port the engine reads from a ``--port`` value: parsed as its argparse ``type=int``
    does (Python ``int()``: trimmed, a sign, ``_`` between digits), as admission reads it."""
    if value is None:
        return None
    number = parse_int(value)
    return number if number is not None and 0 < number < 65536 else None


def _ports(
    role: RoleSpec, index: int, *, own_args: Sequence[str], engine: Engine, direct_decoder: bool
) -> Ports:
    declared = list(role.ports or [])
    if declared:
        external = declared[0].port
        name = declared_port_name(declared[0].protocol, declared[0].port)
        protocol = declared[0].protocol
    else:
        external, name, protocol = DEFAULT_SERVING_PORT, DEFAULT_PORT_NAME, "TCP"
    own = _parse_port(last_value(own_args, PORT_FLAG, engine))
    if direct_decoder:
        taken = {external, *(p.port for p in declared)}
        if own is not None:
            if own in taken:
                raise _fail(
                    index,
                    role.name,
                    f"port {own} is claimed twice: by the engine's own --port and by the "
                    "routing proxy's external port or a declared port",
                    origin="render.port-collision",
                    child="extraArgs",
                )
            engine_port = own
        else:
            engine_port = DECODER_ENGINE_PORT_BASE
            while engine_port in taken:
                engine_port += 1
        return Ports(external, name, protocol, engine_port, external, own)
    engine_port = own if own is not None else external
    return Ports(external, name, protocol, engine_port, engine_port, own)


def _store_transport(
    plan_engine: Engine, index: int, role: RoleSpec, connection: Connection
) -> str:
    matched = connectors.match_transport(plan_engine, connection.offers)
    if matched is not None:
        return matched
    offers = ", ".join(repr(o) for o in connection.offers) or "none"
    required = connectors.required_transport(plan_engine)
    if required is not None:
        api = connectors.API_PROTOCOL_FOR.get(required, required)
        message = (
            f"engine {plan_engine} accepts only the {required!r} transport, and KVCacheBackend "
            f"{connection.backend!r} offers {offers}; set {api} on the backend's "
            "spec.transport.protocol or on one member group, or use another pool"
        )
    else:
        message = (
            f"KVCacheBackend {connection.backend!r} offers no transport engine {plan_engine} "
            f"can use (offers: {offers})"
        )
    raise _fail(index, role.name, message, origin="render.transport-unresolvable")


def _unread_backend(cache: CacheResolution | None) -> str:
    """Why ``spec.kvCache`` yielded no backend to read transport offers from (``""``: it did,
    or the deployment names no pool)."""
    if cache is None or cache.backend is not None:
        return ""
    if cache.binding is None:
        return f"KVCachePoolBinding {cache.binding_name!r} does not exist"
    if cache.pool is None:
        pool = cache.binding.spec.pool_ref.name
        return f"KVCachePool {pool!r} named by the Binding does not exist"
    backend = cache.pool.spec.backends[0] if cache.pool.spec.backends else ""
    return f"KVCacheBackend {backend!r} named by KVCachePool {cache.pool.name!r} does not exist"


def _fabric(
    role: RoleSpec,
    index: int,
    *,
    managed: bool,
    cache: CacheResolution | None,
    leg_protocol: str,
) -> tuple[str, int] | None:
    count = interface_count(role, index)
    if count <= 0:
        return None
    protocols: list[str] = []
    if managed and cache is not None:
        protocols += connectors.distinct_offers(cache.offers)
    if leg_protocol:
        protocols.append(leg_protocol)
    rdma, efa = "rdma" in protocols, "efa" in protocols
    if rdma != efa:
        return fabric_key("rdma" if rdma else "efa", count), count
    seen = ", ".join(dict.fromkeys(p for p in protocols if p)) or "none"
    why = "RDMA and EFA are mixed" if rdma else "no managed RDMA or EFA transfer path"
    unread = _unread_backend(cache) if managed and not rdma else ""
    cause = (
        f"; the pool's transport is unknown because {unread}, and the interface key follows "
        "it: the count renders once the Binding, its pool and their backend exist"
        if unread
        else ""
    )
    raise _fail(
        index,
        role.name,
        f"resources.interface {count} cannot be allocated: {why} (effective protocols: "
        f"{seen}){cause}",
        origin="render.interface-no-path",
        child="resources.interface",
    )


def plan_roles(
    md: ModelDeployment,
    *,
    instance_types: Sequence[InstanceType],
    cache: CacheResolution | None,
    weights: WeightsPlan | None = None,
) -> list[RolePlan]:
    """Every role's decisions, in spec order (docs/contract/render.md §2). Raises
    :class:`RenderError`.

    ``weights`` is the delivery of the deployment's artifact (``weights.delivery.weights_of``);
    every role carries it, and its ``bindings.artifact`` hash input.
    """
    spec = md.spec
    roles = spec.roles
    kinds = [effective_kind(r) for r in roles]
    pair = is_pair(md)
    connection = cache.connection if cache is not None else None

    engines: list[Engine] = []
    parsed: list[Parallelism] = []
    for role, it in zip(roles, instance_types, strict=True):
        manufacturer = it.status.detail.manufacturer if it.status.detail else None
        engine = engine_of(spec.engine.name, manufacturer)
        engines.append(engine)
        parsed.append(role_parallelism(role, engine=engine))

    plans: list[RolePlan] = []
    for index, (role, it) in enumerate(zip(roles, instance_types, strict=True)):
        kind = kinds[index]
        engine = engines[index]
        managed = role.managed
        own_args = role_argv(role).argv
        store_transport = ""
        if managed and connection is not None:
            store_transport = _store_transport(engine, index, role, connection)
        known: EngineOf = partial(Engine, engine)
        leg_protocol = facts.direct_leg(md, role, engine=known, store_client=bool(store_transport))
        direct_leg = bool(leg_protocol)
        publishes = facts.publishes_kv_events(md, role, engine=known)
        decoder = facts.direct_decoder(md, role, engine=known) is True
        ports = _ports(role, index, own_args=own_args, engine=engine, direct_decoder=decoder)
        https = serves_tls(own_args, engine)
        host = own_host(own_args, engine)
        probes = decoder or (
            ports.protocol == "TCP"
            and not (host is not None and is_loopback(host))
            and not demands_client_certificates(own_args, engine)
        )
        leg_document: dict[str, Any] | None = None
        peer_leg: str | None = None
        if direct_leg and engine.family is EngineFamily.VLLM:
            if engine == Engine.VLLM_ASCEND:
                leg_document = _ascend_leg_document(
                    md, kind=kind, kinds=kinds, parsed=parsed, index=index
                )
                peer_leg = connectors.compact_json(leg_document)
            else:
                leg_document = native_leg(kind=kind, protocol=leg_protocol)
        fabric = _fabric(role, index, managed=managed, cache=cache, leg_protocol=leg_protocol)
        bindings = HashBindings(
            instance_type=instance_type_hash_input(it),
            pool=(
                {"clientEndpoint": connection.endpoint, "transport": store_transport}
                if connection is not None and store_transport
                else None
            ),
            binding=(
                {
                    "domain": connection.domain,
                    "blockSize": connection.block_size,
                    "dtype": connection.dtype,
                    "tenant": connection.tenant or None,
                }
                if connection is not None and store_transport
                else None
            ),
            interface_key=fabric[0] if fabric is not None else None,
            runtime_class_name=None,
            peer_leg=peer_leg,
            artifact=artifact_hash_input(weights, role) if weights is not None else None,
        )
        plans.append(
            RolePlan(
                index=index,
                role=role,
                kind=kind,
                engine=engine,
                managed=managed,
                instance_type=it,
                entrance=it.status.entrance or "",
                image=role.image or spec.engine.image,
                own_args=own_args,
                parallelism=parsed[index],
                pair=pair,
                store_transport=store_transport,
                direct_leg=direct_leg,
                leg_protocol=leg_protocol,
                leg_document=leg_document,
                publishes_kv_events=publishes,
                direct_decoder=decoder,
                ports=ports,
                https=https,
                probes=probes,
                fabric=fabric,
                bindings=bindings,
                weights=weights,
            )
        )
    return plans


def _ascend_leg_document(
    md: ModelDeployment,
    *,
    kind: RoleKind,
    kinds: Sequence[RoleKind],
    parsed: Sequence[Parallelism],
    index: int,
) -> dict[str, Any]:
    roles = md.spec.roles
    p_index = kinds.index(RoleKind.PREFILL)
    d_index = kinds.index(RoleKind.DECODE)
    for i in (p_index, d_index):
        error = parsed[i].error
        if error is not None:
            raise _fail(
                i,
                roles[i].name,
                f"its parallel degrees cannot be read for the Ascend transfer leg: {error}; "
                "own the whole line with roles[].command",
                origin="render.degrees-unreadable",
            )
    p, d = parsed[p_index].degrees, parsed[d_index].degrees
    if p.tensor_parallel < d.tensor_parallel:
        raise _fail(
            index,
            roles[index].name,
            f"the Ascend transfer leg needs the prefill TP to be at least the decode TP: role "
            f"{roles[p_index].name!r} declares TP {p.tensor_parallel}, role "
            f"{roles[d_index].name!r} declares TP {d.tensor_parallel}",
            origin="render.ascend-leg-tp",
        )
    return ascend_leg(
        kind=kind,
        prefill_tp=p.tensor_parallel,
        prefill_dp=p.data_parallel,
        decode_tp=d.tensor_parallel,
        decode_dp=d.data_parallel,
    )
