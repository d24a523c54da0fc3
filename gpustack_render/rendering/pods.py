"""A role's Pod template: the ``main`` container, the routing proxy, volumes, Pod fields.

One template is built per role and then stamped per seat (``renderer.py``, ``stamping.py``); the
template carries a :class:`~gpustack_render.rendering.stamping.Slot` where a seat differs (its name,
hostname and subdomain, the group-name, ordinal and member-index labels, the pod-spec-hash, the
leader address).

The ``main`` container (docs/contract/render.md §8–§16, D7, D17, D19, D21):

- ``command`` = the whole argv (there is no ``args``): base command, owned connector arguments,
  defaulted connector groups, ``--served-model-name``/``--host``/``--port`` each only when the
  role's ``extraArgs`` do not carry it, then ``extraArgs`` verbatim and last; a take-over role's
  ``command`` verbatim;
- ``env`` = owned connector env, defaulted env, the role's ``env``, then the three replica
  variables above size 1;
- ports, resources, mounts, probes, the drain hook and the security context.

With ``spec.model.artifactRef`` the weights' pieces (``weights.py``) join them: the model
argument, the hub variables after the owned connector env and the proxy defaults after the
other defaulted env, the model or cache volume after the others, the raised ephemeral limit,
the claim's node affinity and the store client's KV reuse identity.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, assert_never

from gpustack_render.api.modeldeployment import ModelDeployment
from gpustack_render.core import naming, nesting
from gpustack_render.core.errors import RenderError
from gpustack_render.core.labels import (
    KV_CLIENT_CONFIG,
    MEMBER_INDEX,
    POD_GROUP_NAME,
    POD_ORDINAL,
    POD_SPEC_HASH,
    RENDER_VERSION,
    SGLANG_BOOTSTRAP_PORT,
    VLLM_BOOTSTRAP_PORT,
    group_annotations,
    member_index_field_path,
    pod_labels,
    prometheus_annotations,
)
from gpustack_render.core.paths import ROLES
from gpustack_render.core.quantity import QuantityError, format_memory, parse_quantity
from gpustack_render.core.settings import Settings
from gpustack_render.core.vocabulary import Engine, EngineFamily, RoleKind
from gpustack_render.deployment.roles import router_of
from gpustack_render.engines import connectors, owned
from gpustack_render.engines.flags import flag_name, has_flag
from gpustack_render.engines.owned import (
    BOOTSTRAP_PORT,
    HOST_FLAG,
    MC_FORCE_TCP_ENV,
    MC_TE_METRIC_ENV,
    MEMBER_INDEX_ENV,
    PORT_FLAG,
    REPLICA_LEADER_ADDRESS_ENV,
    REPLICA_SIZE_ENV,
    SERVED_MODEL_NAME_FLAG,
    SGLANG_CACHE_DIR_ENV,
    VLLM_CACHE_ROOT_ENV,
    VLLM_MOONCAKE_BOOTSTRAP_PORT_ENV,
    VLLM_ROUTER,
    owned_env,
)
from gpustack_render.engines.transfer import (
    connector_ports,
    kv_events_args,
    multi_connector,
    sglang_decode_defaulted_args,
    sglang_leg_args,
    store_role_beside_leg,
)
from gpustack_render.rendering import compilecache
from gpustack_render.rendering import weights as delivery
from gpustack_render.rendering.drain import prestop_hook
from gpustack_render.rendering.probes import MODELS_PATH, probes
from gpustack_render.rendering.resources import PodResources
from gpustack_render.rendering.roleplan import (
    DEFAULT_PORT_NAME,
    MODEL_SERVER_PORT_NAME,
    Connection,
    RolePlan,
    declared_port_name,
)
from gpustack_render.rendering.stamping import Slot

POD_API_VERSION: Final = "v1"
POD_KIND: Final = "Pod"
#: The engine container's name.
MAIN_CONTAINER: Final = "main"
#: The routing proxy's container name (docs/contract/render.md §18).
ROUTING_PROXY_CONTAINER: Final = "routing-proxy"

#: Base commands (docs/contract/render.md §9 step 1).
VLLM_BASE: Final = ("vllm", "serve")
SGLANG_BASE: Final = ("python3", "-m", "sglang.launch_server")
SGLANG_MODEL_PATH_FLAG: Final = "--model-path"
SGLANG_ENABLE_METRICS_FLAG: Final = "--enable-metrics"
#: The bind address the operator fills when the role passes none.
BIND_ALL: Final = "0.0.0.0"

#: Shared memory (D7): an emptyDir in memory at /dev/shm on ``main``.
SHM_VOLUME: Final = "gpustack-shm"
DEFAULT_SHM_SIZE: Final = "16Gi"
#: The Ascend driver tree a vllm-ascend direct leg mounts read-only (docs/contract/render.md §14 row
#: 3).
ASCEND_DRIVER_VOLUME: Final = "gpustack-ascend-driver"
#: Additional volume *i* is named ``additional-<i>`` (D12).
ADDITIONAL_VOLUME_PREFIX: Final = "additional-"

#: Grace period a managed role gets when it states none (docs/contract/render.md §8).
DEFAULT_GRACE_SECONDS: Final = 30

#: vLLM's Engram offload switch and its host-memory member (D7, docs/contract/render.md §16).
ENGRAM_CONFIG_FLAG: Final = "--engram-config"
ENGRAM_CPU_OFFLOAD: Final = "cpu_offload"
#: SGLang's Engram host-table switch, read from the role's ``env`` (D7).
SGLANG_ENGRAM_ENV: Final = "SGLANG_ENABLE_DSV41_ENGRAM_HOST_TABLE"
#: Capabilities granted to a non-privileged Engram role so it can pin host memory.
ENGRAM_CAPABILITIES: Final = ("IPC_LOCK", "SYS_RESOURCE")

#: Routing proxy (docs/contract/render.md §18, D21).
PROXY_PULL_POLICY: Final = "IfNotPresent"
PROXY_CPU: Final = "100m"
PROXY_MEMORY: Final = "128Mi"
PROXY_POD_IP_ENV: Final = "POD_IP"
PROXY_KV_CONNECTOR: Final = "mooncake"


def _fail(plan: RolePlan, message: str, *, origin: str, child: str = "") -> RenderError:
    path = ROLES.index(plan.index)
    if child:
        path = path.child(*child.split("."))
    return RenderError(f"role {plan.name!r}: {message}", field=str(path), origin=origin)


# --- argv ---------------------------------------------------------------------------------------


def base_command(family: EngineFamily, model: str) -> list[str]:
    """The engine's base command (docs/contract/render.md §9 step 1)."""
    match family:
        case EngineFamily.VLLM:
            return [*VLLM_BASE, model]
        case EngineFamily.SGLANG:
            return [*SGLANG_BASE, SGLANG_MODEL_PATH_FLAG, model, SGLANG_ENABLE_METRICS_FLAG]
        case _:
            assert_never(family)


def _vllm_connector_args(plan: RolePlan, connection: Connection | None) -> list[str]:
    args: list[str] = []
    store_doc: dict[str, Any] | None = None
    if plan.store_client:
        kv_role = (
            store_role_beside_leg(plan.kind)
            if plan.leg_document is not None
            else connectors.kv_role_for(plan.kind)
        )
        store_doc = connectors.store_transfer_config(engine=plan.engine, kv_role=kv_role)
        reuse = _kv_reuse(plan)
        if reuse is not None:
            # The KV reuse identity of the artifact (docs/weights.md, "Delivery"): blocks are
            # shared only between Pods serving the same weights.
            store_doc["kv_connector_extra_config"] = reuse
    if plan.leg_document is not None and store_doc is not None:
        doc: dict[str, Any] | None = multi_connector(
            kind=plan.kind, leg=dict(plan.leg_document), store=store_doc
        )
    elif plan.leg_document is not None:
        doc = dict(plan.leg_document)
    else:
        doc = store_doc
    if doc is not None:
        args += [owned.KV_TRANSFER_CONFIG_FLAG, connectors.compact_json(doc)]
    if plan.store_client and connection is not None:
        args += connectors.dtype_args(connection.rendered_dtype)
    if plan.publishes_kv_events:
        args += kv_events_args()
    return args


def _sglang_connector_args(plan: RolePlan, connection: Connection | None) -> list[str]:
    args: list[str] = []
    if plan.store_client and connection is not None:
        args += connectors.sglang_store_args(
            dtype=connection.rendered_dtype, extra_config=_kv_reuse(plan)
        )
    if plan.direct_leg:
        args += sglang_leg_args(kind=plan.kind, protocol=plan.leg_protocol)
    return args


def _kv_reuse(plan: RolePlan) -> dict[str, str] | None:
    """The artifact's KV reuse identity for the role's store client, or None."""
    if plan.weights is None or not plan.store_client:
        return None
    return delivery.kv_reuse_config(plan.weights, engine=plan.engine)


def _defaulted_groups(plan: RolePlan) -> list[list[str]]:
    if plan.family is not EngineFamily.SGLANG:
        return []
    leg_decode = plan.direct_leg and plan.kind == RoleKind.DECODE
    groups: list[list[str]] = []
    if plan.store_client and not leg_decode:
        groups += [connectors.sglang_defaulted_args()]
    if leg_decode:
        groups.append(sglang_decode_defaulted_args())
    return groups


def main_command(md: ModelDeployment, plan: RolePlan, connection: Connection | None) -> list[str]:
    """The whole argv of ``main`` (D17); a take-over role's ``command`` verbatim."""
    extra = list(plan.own_args)
    if not plan.managed:
        return extra
    model = md.spec.model.name
    if plan.weights is not None:
        # The artifact's weights: the mount path, or the hub repository at its commit.
        value, pinned = delivery.model_argument(plan.weights)
        argv = [*base_command(plan.family, value), *pinned]
    else:
        argv = base_command(plan.family, model)
    match plan.family:
        case EngineFamily.VLLM:
            argv += _vllm_connector_args(plan, connection)
        case EngineFamily.SGLANG:
            argv += _sglang_connector_args(plan, connection)
        case _:
            assert_never(plan.family)
    for group in _defaulted_groups(plan):
        if not has_flag(extra, group[0], plan.engine):
            argv += group
    if not has_flag(extra, SERVED_MODEL_NAME_FLAG, plan.engine):
        argv += [SERVED_MODEL_NAME_FLAG, model]
    if not has_flag(extra, HOST_FLAG, plan.engine):
        argv += [HOST_FLAG, BIND_ALL]
    if not has_flag(extra, PORT_FLAG, plan.engine):
        argv += [PORT_FLAG, str(plan.ports.engine)]
    return argv + extra


# --- env ----------------------------------------------------------------------------------------


def _owned_connector_env(plan: RolePlan, connection: Connection | None) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = []
    if plan.store_client and connection is not None:
        if plan.family is EngineFamily.VLLM:
            env += connectors.vllm_store_env()
        else:
            env += connectors.sglang_store_env(
                endpoint=connection.endpoint,
                transport=plan.store_transport,
                tenant=connection.tenant,
            )
    if plan.engine == Engine.VLLM and plan.direct_leg and plan.kind == RoleKind.PREFILL:
        env.append(connectors.env_value(VLLM_MOONCAKE_BOOTSTRAP_PORT_ENV, str(BOOTSTRAP_PORT)))
    return env


def _defaulted_env(plan: RolePlan) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = []
    if plan.connector:
        env.append(connectors.defaulted_env(MC_TE_METRIC_ENV))
    if (
        plan.engine == Engine.VLLM
        and plan.direct_leg
        and plan.leg_protocol == "tcp"
        and plan.store_transport in ("", "tcp")
    ):
        env.append(connectors.defaulted_env(MC_FORCE_TCP_ENV))
    if plan.managed:
        name = SGLANG_CACHE_DIR_ENV if plan.family is EngineFamily.SGLANG else VLLM_CACHE_ROOT_ENV
        env.append(connectors.env_value(name, owned.COMPILE_CACHE_MOUNT_PATH))
    return env


def _user_env_entry(name: str, value: str | None) -> dict[str, Any]:
    return {"name": name} if value is None else {"name": name, "value": value}


def main_env(
    md: ModelDeployment, plan: RolePlan, connection: Connection | None
) -> list[dict[str, Any]]:
    """``main``'s env (docs/contract/render.md §10, D19); above size 1 the leader address is a seat
    :class:`Slot`."""
    role = plan.role
    env: list[dict[str, Any]] = []
    user = list(role.env or ())
    user_names = {e.name for e in user}
    weights = plan.weights
    if plan.managed:
        env += _owned_connector_env(plan, connection)
        if weights is not None:
            env += delivery.owned_env(weights, engine=plan.engine, managed=True)
    defaulted = _defaulted_env(plan)
    if weights is not None:
        defaulted += delivery.defaulted_env(weights, managed=plan.managed)
    env += [e for e in defaulted if e["name"] not in user_names]
    owned = set(owned_env(plan.engine))
    if weights is not None and plan.managed:
        owned.update(delivery.owned_env_names(plan.engine))
    position = {e["name"]: i for i, e in enumerate(env)}
    for entry in user:
        if entry.name in owned:
            continue
        item = _user_env_entry(entry.name, entry.value)
        if entry.name in position:
            env[position[entry.name]] = item
        else:
            position[entry.name] = len(env)
            env.append(item)
    if role.size > 1:
        env.append({"name": REPLICA_LEADER_ADDRESS_ENV, "value": Slot("leader")})
        env.append(connectors.env_value(REPLICA_SIZE_ENV, str(role.size)))
        env.append(connectors.env_field_ref(MEMBER_INDEX_ENV, member_index_field_path()))
    return env


# --- ports --------------------------------------------------------------------------------------


def main_ports(plan: RolePlan) -> list[dict[str, Any]]:
    """``main``'s container ports (docs/contract/render.md §11): declared (or ``http``), then
    connectors."""
    declared = plan.declared_ports
    ports: list[dict[str, Any]]
    if declared:
        ports = [
            {
                "name": declared_port_name(p.protocol, p.port),
                "protocol": p.protocol,
                "containerPort": p.port,
            }
            for p in declared
        ]
    else:
        ports = [
            {"name": DEFAULT_PORT_NAME, "protocol": "TCP", "containerPort": plan.ports.listener}
        ]
    if plan.direct_decoder:
        ports[0] = {
            "name": MODEL_SERVER_PORT_NAME,
            "protocol": "TCP",
            "containerPort": plan.ports.engine,
        }
    prefill_leg = plan.direct_leg and plan.kind == RoleKind.PREFILL
    extra = connector_ports(
        vllm_prefill_leg=prefill_leg and plan.family is EngineFamily.VLLM,
        publisher=plan.publishes_kv_events,
        sglang_prefill_leg=prefill_leg and plan.family is EngineFamily.SGLANG,
    )
    for port in extra:
        clash = next((p for p in ports if p["containerPort"] == port["containerPort"]), None)
        if clash is None:
            ports.append(port)
        elif clash["name"] != port["name"]:
            raise _fail(
                plan,
                f"port {port['containerPort']} is claimed twice: by {clash['name']!r} (the role's "
                f"serving port) and by the connector listener {port['name']!r}; pick another "
                "port for the role",
                origin="render.port-collision",
                child="ports",
            )
    return ports


# --- volumes ------------------------------------------------------------------------------------


def _additional(plan: RolePlan) -> tuple[list[dict[str, Any]], list[dict[str, Any]], set[str]]:
    volumes: list[dict[str, Any]] = []
    mounts: list[dict[str, Any]] = []
    paths: set[str] = set()
    for i, av in enumerate(plan.role.additional_volumes or ()):
        name = f"{ADDITIONAL_VOLUME_PREFIX}{i}"
        volume: dict[str, Any] = {"name": name}
        if av.config_map is not None:
            volume["configMap"] = {"name": av.config_map.name}
        elif av.secret is not None:
            volume["secret"] = {"secretName": av.secret.name}
        elif av.host_path is not None:
            host: dict[str, Any] = {"path": av.host_path.path}
            if av.host_path.type is not None:
                host["type"] = av.host_path.type
            volume["hostPath"] = host
        else:
            continue
        mount: dict[str, Any] = {"name": name, "mountPath": av.mount_path}
        if av.read_only is not None:
            mount["readOnly"] = av.read_only
        if av.sub_path:
            mount["subPath"] = av.sub_path
        volumes.append(volume)
        mounts.append(mount)
        paths.add(av.mount_path)
    return volumes, mounts, paths


def _shm_size(plan: RolePlan) -> str:
    """The ``gpustack-shm`` sizeLimit: ``shmSize`` written as D18 writes every memory quantity
    (largest exact binary unit, rounded down to 1Mi), else ``16Gi``."""
    raw = plan.role.shm_size
    if raw is None:
        return DEFAULT_SHM_SIZE
    try:
        return format_memory(parse_quantity(raw))
    except QuantityError:
        return str(raw)


def head_volumes_and_mounts(plan: RolePlan) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The Elastic EP Ray head's volumes and mounts: the role's additional volumes and shm
    (rows 1 and 4 of docs/contract/render.md §14), nothing of the engine's."""
    volumes, mounts, paths = _additional(plan)
    if owned.SHM_MOUNT_PATH not in paths:
        volumes.append(
            {"name": SHM_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": _shm_size(plan)}}
        )
        mounts.append({"name": SHM_VOLUME, "mountPath": owned.SHM_MOUNT_PATH})
    return volumes, mounts


def volumes_and_mounts(
    plan: RolePlan, *, compile_cache_path: str | None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The Pod's volumes and ``main``'s mounts, in docs/contract/render.md §14's order."""
    volumes, mounts, paths = _additional(plan)
    if plan.store_client and plan.family is EngineFamily.VLLM:
        volumes.append(connectors.client_config_volume())
        mounts.append(connectors.client_config_mount())
    if plan.engine == Engine.VLLM_ASCEND and plan.direct_leg:
        volumes.append(
            {
                "name": ASCEND_DRIVER_VOLUME,
                "hostPath": {"path": owned.ASCEND_DRIVER_PATH, "type": "Directory"},
            }
        )
        mounts.append(
            {"name": ASCEND_DRIVER_VOLUME, "mountPath": owned.ASCEND_DRIVER_PATH, "readOnly": True}
        )
    if owned.SHM_MOUNT_PATH not in paths:
        volumes.append(
            {"name": SHM_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": _shm_size(plan)}}
        )
        mounts.append({"name": SHM_VOLUME, "mountPath": owned.SHM_MOUNT_PATH})
    if plan.managed and compile_cache_path and owned.COMPILE_CACHE_MOUNT_PATH not in paths:
        volumes.append(compilecache.cache_volume(compile_cache_path))
        mounts.append(compilecache.cache_mount())
    if plan.weights is not None:
        more, more_mounts = delivery.volumes_and_mounts(plan.weights, managed=plan.managed)
        volumes += more
        mounts += more_mounts
    return volumes, mounts


# --- security context ---------------------------------------------------------------------------


def _false_like(value: Any) -> bool:
    if value is False:
        return True
    return isinstance(value, str) and value.strip().lower() == "false"


def vllm_engram_enabled(argv: Sequence[str], engine: Engine) -> bool:
    """vLLM: ``--engram-config`` or a dotted ``--engram-config.*`` flag, unless ``cpu_offload``
    is set false (in the JSON value or as ``--engram-config.cpu_offload``); the last setting of
    ``cpu_offload`` wins."""
    enabled = False
    offload = True
    for i, token in enumerate(argv):
        if flag_name(token, engine) != ENGRAM_CONFIG_FLAG:
            continue
        enabled = True
        raw_name, eq, inline = token.partition("=")
        _, dot, member = raw_name.partition(".")
        value: str | None = inline if eq else (argv[i + 1] if i + 1 < len(argv) else None)
        if dot:
            if member.replace("-", "_") == ENGRAM_CPU_OFFLOAD:
                offload = not _false_like(value) if value is not None else True
            continue
        if value is None:
            continue
        try:
            doc = nesting.loads(value)
        except ValueError:
            continue
        if isinstance(doc, dict) and ENGRAM_CPU_OFFLOAD in doc:
            offload = not _false_like(doc[ENGRAM_CPU_OFFLOAD])
    return enabled and offload


def engram_enabled(plan: RolePlan) -> bool:
    """Whether the role enables Engram host-memory offload (D7, docs/contract/render.md §16)."""
    match plan.family:
        case EngineFamily.VLLM:
            return vllm_engram_enabled(plan.own_args, plan.engine)
        case EngineFamily.SGLANG:
            return any(e.name == SGLANG_ENGRAM_ENV and e.value == "1" for e in plan.role.env or ())
        case _:
            assert_never(plan.family)


def security_context(plan: RolePlan) -> dict[str, Any] | None:
    """``{privileged: true}``, else Engram's capabilities, else None."""
    if plan.role.privileged:
        return {"privileged": True}
    if engram_enabled(plan):
        return {"capabilities": {"add": list(ENGRAM_CAPABILITIES)}}
    return None


# --- containers ---------------------------------------------------------------------------------


def main_container(
    md: ModelDeployment,
    plan: RolePlan,
    *,
    connection: Connection | None,
    resources: PodResources,
    compile_cache_path: str | None,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``main`` and the Pod's volumes."""
    role = plan.role
    container: dict[str, Any] = {"name": MAIN_CONTAINER, "image": plan.image}
    if role.image_pull_policy is not None:
        container["imagePullPolicy"] = role.image_pull_policy
    container["command"] = main_command(md, plan, connection)
    env = main_env(md, plan, connection)
    if env:
        container["env"] = env
    container["ports"] = main_ports(plan)
    container["resources"] = resources.to_json()
    if plan.weights is not None:
        container["resources"] = delivery.raise_ephemeral_limit(
            container["resources"], plan.weights, managed=plan.managed
        )
    volumes, mounts = volumes_and_mounts(plan, compile_cache_path=compile_cache_path)
    if mounts:
        container["volumeMounts"] = mounts
    if plan.probes:
        if plan.direct_decoder:
            container.update(
                probes(
                    port=plan.ports.external,
                    https=False,
                    startup_timeout_seconds=role.startup_timeout_seconds,
                    path=MODELS_PATH,
                )
            )
        else:
            container.update(
                probes(
                    port=plan.ports.listener,
                    https=plan.https,
                    startup_timeout_seconds=role.startup_timeout_seconds,
                )
            )
    if plan.managed:
        container["lifecycle"] = prestop_hook(
            engine_family=plan.family,
            port=plan.ports.engine,
            https=plan.https,
            grace_seconds=grace_seconds(plan) or DEFAULT_GRACE_SECONDS,
        )
    context = security_context(plan)
    if context is not None:
        container["securityContext"] = context
    return container, volumes


def routing_proxy(plan: RolePlan, *, settings: Settings) -> dict[str, Any]:
    """The routing proxy of a direct decoder (docs/contract/render.md §18, D21)."""
    ports = plan.ports
    proxy: dict[str, Any] = {
        "name": ROUTING_PROXY_CONTAINER,
        "image": settings.routing_sidecar_image,
        "imagePullPolicy": PROXY_PULL_POLICY,
    }
    if settings.native_sidecars:
        proxy["restartPolicy"] = "Always"
    proxy["args"] = [
        f"--port={ports.external}",
        f"--model-server-port={ports.engine}",
        f"--kv-connector={PROXY_KV_CONNECTOR}",
        f"--mooncake-bootstrap-port={BOOTSTRAP_PORT}",
        "--secure-proxy=false",
    ]
    proxy["env"] = [connectors.env_field_ref(PROXY_POD_IP_ENV, "status.podIP")]
    proxy["ports"] = [
        {"name": ports.external_name, "protocol": "TCP", "containerPort": ports.external}
    ]
    limits = {"cpu": PROXY_CPU, "memory": PROXY_MEMORY}
    proxy["resources"] = {"limits": dict(limits), "requests": dict(limits)}
    proxy["securityContext"] = {"allowPrivilegeEscalation": False, "runAsNonRoot": True}
    return proxy


def grace_seconds(plan: RolePlan) -> int | None:
    """``terminationGracePeriodSeconds``: managed → the role's or 30; take-over → the role's."""
    own = plan.role.termination_grace_period_seconds
    if own is not None:
        return own
    return DEFAULT_GRACE_SECONDS if plan.managed else None


# --- the template -------------------------------------------------------------------------------


def pod_template(
    md: ModelDeployment,
    plan: RolePlan,
    *,
    namespace: str,
    connection: Connection | None,
    resources: PodResources,
    compile_cache_path: str | None,
    owner_references: list[dict[str, Any]],
    settings: Settings,
    render_version: int,
) -> dict[str, Any]:
    """The role's Pod template (docs/contract/render.md §3–§16); seat values are :class:`Slot` s."""
    role = plan.role
    deployment = md.metadata.name
    metadata: dict[str, Any] = {}
    if role.size > 1:
        metadata["name"] = Slot("name")
    else:
        metadata["generateName"] = naming.generate_name(deployment, role.name)
    metadata["namespace"] = namespace
    labels: dict[str, Any] = pod_labels(
        deployment, role.name, kind=plan.kind, queue=plan.entrance, group="", ordinal=0, member=0
    )
    labels[POD_GROUP_NAME] = Slot("group")
    labels[POD_ORDINAL] = Slot("ordinal")
    labels[MEMBER_INDEX] = Slot("member")
    metadata["labels"] = labels
    annotations: dict[str, Any] = group_annotations(
        role.name,
        size=role.size,
        required_topology=role.topology.required_level if role.topology else None,
    )
    main, volumes = main_container(
        md,
        plan,
        connection=connection,
        resources=resources,
        compile_cache_path=compile_cache_path,
    )
    if plan.store_client and plan.family is EngineFamily.VLLM and connection is not None:
        annotations[KV_CLIENT_CONFIG] = connectors.client_config_json(
            endpoint=connection.endpoint, transport=plan.store_transport, tenant=connection.tenant
        )
    if plan.family is EngineFamily.SGLANG and plan.direct_leg and plan.kind == RoleKind.PREFILL:
        annotations[SGLANG_BOOTSTRAP_PORT] = str(BOOTSTRAP_PORT)
    if plan.direct_leg and plan.kind == RoleKind.PREFILL and router_of(md) == VLLM_ROUTER:
        # vllm-router reads a discovered prefiller's bootstrap port from this annotation
        # (it has no flag for it); the router's name is a pod-spec-hash input (D10).
        annotations[VLLM_BOOTSTRAP_PORT] = str(BOOTSTRAP_PORT)
    if plan.managed:
        annotations.update(prometheus_annotations(port=plan.ports.engine, https=plan.https))
    annotations.update(resources.annotations)
    annotations[POD_SPEC_HASH] = Slot("digest")
    annotations[RENDER_VERSION] = str(render_version)
    metadata["annotations"] = annotations
    if owner_references:
        metadata["ownerReferences"] = [dict(ref) for ref in owner_references]

    spec: dict[str, Any] = {}
    if role.size > 1:
        spec["hostname"] = Slot("name")
        spec["subdomain"] = Slot("subdomain")
    spec["restartPolicy"] = "Always"
    grace = grace_seconds(plan)
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    spec["automountServiceAccountToken"] = False
    spec["enableServiceLinks"] = False
    if role.image_pull_secrets:
        spec["imagePullSecrets"] = [{"name": s.name} for s in role.image_pull_secrets]
    if plan.weights is not None:
        delivery.apply_node_affinity(spec, plan.weights)
        delivery.apply_node_preference(spec, plan.weights)
    containers = [main]
    if plan.direct_decoder:
        proxy = routing_proxy(plan, settings=settings)
        if settings.native_sidecars:
            spec["initContainers"] = [proxy]
        else:
            containers = [proxy, main]
    spec["containers"] = containers
    if volumes:
        spec["volumes"] = volumes
    pod = {"apiVersion": POD_API_VERSION, "kind": POD_KIND, "metadata": metadata, "spec": spec}
    return pod
