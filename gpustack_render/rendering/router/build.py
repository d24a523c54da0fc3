"""``render_router``: the router's objects from the deployment and its role plans (D26;
docs/routers.md).

The router reaches only the deployment's serving Pods (every Pod at size 1, the leader of a
larger instance) on their container-side listener, which must be one port for every role. Its
image is ``spec.router.image``, else the router's Settings default; with neither, or with
roles listening on different ports, nothing of the router is rendered and the failure says why
(admission refuses both on create, ``router.image-missing`` and
``router.listener-ports-differ``). The engine Pods are rendered either way.

Nothing here reaches an engine Pod: ``spec.router``'s replicas, image, pull policy, pull secrets,
arguments and timeout change the router's objects only (D10 keeps only ``router.name`` in the
pod-spec-hash).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Final

from gpustack_render.api.modeldeployment import ModelDeployment, RouterSpec
from gpustack_render.core import naming
from gpustack_render.core.labels import (
    ROLE_KIND,
    ROUTER_CONFIG_HASH,
    prometheus_annotations,
    router_labels,
    serving_selector,
)
from gpustack_render.core.paths import ROUTER
from gpustack_render.core.quantity import canonical
from gpustack_render.core.settings import ROUTER_IMAGE_KEYS, Settings
from gpustack_render.core.vocabulary import EngineFamily, RoleKind
from gpustack_render.engines.flags import last_value
from gpustack_render.engines.owned import LLM_D_ROUTER
from gpustack_render.engines.parallelism import parse_int
from gpustack_render.rendering.elastic import has_elastic
from gpustack_render.rendering.roleplan import RolePlan
from gpustack_render.rendering.router import llmd, objects
from gpustack_render.rendering.router.commandline import (
    EPP_CONFIG_DIR,
    EPP_CONFIG_KEY,
    EPP_GRPC_PORT,
    EPP_HEALTH_PORT,
    EPP_METRICS_PORT,
    METRICS_PORT,
    discovery_command,
    endpoint_picker_args,
)
from gpustack_render.rendering.router.model import RouterFailure, RouterRendering

#: The user and group every router container runs as (the restricted Pod Security profile asks
#: for a non-root user; the endpoint picker's image runs as this one).
RUN_AS: Final = 65532
#: The engine variable whose value the precise prefix scorer must hash blocks with.
HASH_SEED_ENV: Final = "PYTHONHASHSEED"
#: The vLLM flag setting the KV block size.
BLOCK_SIZE_FLAG: Final = "--block-size"
#: Probe timing of the router's containers (as the engines' readiness and liveness probes).
_PERIOD, _TIMEOUT = 10, 3
_CONFIG_VOLUME, _TOKENIZER_VOLUME, _TOKENIZER_MODELS = "config", "tokenizer", "tokenizer-models"


def render_router(
    md: ModelDeployment,
    plans: Sequence[RolePlan],
    *,
    namespace: str,
    owner_references: Sequence[Mapping[str, Any]],
    settings: Settings,
) -> RouterRendering | None:
    """The router of ``md`` (``None`` without ``spec.router``)."""
    router = md.spec.router
    if router is None:
        return None
    deployment = md.metadata.name
    name = naming.router_name(deployment)
    port = plans[0].ports.external
    llm_d = router.name == LLM_D_ROUTER
    base = RouterRendering(
        router=router.name,
        object_name=name,
        namespace=namespace,
        replicas=router.replicas,
        port=port,
        metrics_port=EPP_METRICS_PORT if llm_d else METRICS_PORT,
    )
    failure = _failure(router, plans, settings)
    if failure is not None:
        return replace(base, failure=failure)
    image = router.image or settings.router_image(router.name)
    target_port = plans[0].ports.listener
    serving = serving_selector(deployment, master_only=has_elastic(md))
    meta = objects.metadata(
        name, namespace=namespace, deployment=deployment, owner_references=owner_references
    )
    out: list[dict[str, Any]] = [
        objects.service_account(meta),
        objects.role(meta),
        objects.role_binding(meta, name=name, namespace=namespace),
    ]
    service_ports = [_service_port("http", port)]
    if llm_d:
        kv_events = bool(settings.router_tokenizer_image) and any(
            p.publishes_kv_events for p in plans
        )
        data = _llm_d_config(md, plans, namespace=namespace, kv_events=kv_events)
        out.append(objects.config_map(meta, data))
        containers = _llm_d_containers(
            router,
            image,
            settings=settings,
            port=port,
            serving=serving,
            target_port=target_port,
            kv_events=kv_events,
        )
        volumes = _llm_d_volumes(name, kv_events=kv_events)
        annotations = {ROUTER_CONFIG_HASH: _digest(data)}
        service_ports.append(_service_port("grpc-ext-proc", EPP_GRPC_PORT))
    else:
        containers = [
            _discovery_container(
                router,
                image,
                md,
                plans,
                namespace=namespace,
                settings=settings,
                port=port,
                serving=serving,
                target_port=target_port,
            )
        ]
        volumes, annotations = [], {}
    out.append(objects.service(meta, deployment=deployment, ports=service_ports))
    template = _template(
        name,
        deployment,
        router,
        containers=containers,
        volumes=volumes,
        annotations={
            **annotations,
            **prometheus_annotations(port=base.metrics_port, https=False),
        },
    )
    out.append(
        objects.deployment_object(
            meta, deployment=deployment, replicas=router.replicas, template=template
        )
    )
    if llm_d and settings.inference_pool:
        pool_meta = objects.metadata(
            naming.inference_pool_name(deployment),
            namespace=namespace,
            deployment=deployment,
            owner_references=owner_references,
        )
        out.append(
            objects.inference_pool(
                pool_meta,
                serving=serving,
                target_port=target_port,
                picker_service=name,
                picker_port=EPP_GRPC_PORT,
            )
        )
    return replace(base, objects=tuple(out))


def router_image_failure(router: RouterSpec, settings: Settings) -> RouterFailure | None:
    """No image for the router: neither ``spec.router.image`` nor a Settings default (the
    message names both ways out). Admission asks the same question."""
    if router.image or settings.router_image(router.name):
        return None
    key = ROUTER_IMAGE_KEYS[router.name]
    return RouterFailure(
        f"router {router.name} has no image: set spec.router.image, or the default image "
        f"{key} in the gpustack-settings ConfigMap",
        str(ROUTER.child("image")),
        "router.image-missing",
    )


def listener_ports_failure(
    router: RouterSpec, listeners: Mapping[str, int]
) -> RouterFailure | None:
    """Roles listening on different container ports (``listeners``: role → port): a router
    dials every serving Pod on one port."""
    if len(set(listeners.values())) <= 1:
        return None
    listed = ", ".join(f"{role} on {port}" for role, port in listeners.items())
    return RouterFailure(
        f"router {router.name} dials every serving Pod on one port, but the roles listen on "
        f"different ports ({listed}); give them the same --port, or none",
        str(ROUTER),
        "router.listener-ports-differ",
    )


def _failure(
    router: RouterSpec, plans: Sequence[RolePlan], settings: Settings
) -> RouterFailure | None:
    return router_image_failure(router, settings) or listener_ports_failure(
        router, {p.name: p.ports.listener for p in plans}
    )


def _service_port(name: str, port: int) -> dict[str, Any]:
    return {"name": name, "protocol": "TCP", "port": port, "targetPort": port}


def _container_port(name: str, port: int) -> dict[str, Any]:
    return {"name": name, "protocol": "TCP", "containerPort": port}


def _http_probe(path: str, port: int, *, failures: int) -> dict[str, Any]:
    return {
        "httpGet": {"path": path, "port": port, "scheme": "HTTP"},
        "periodSeconds": _PERIOD,
        "timeoutSeconds": _TIMEOUT,
        "failureThreshold": failures,
    }


def _grpc_probe(service: str, *, failures: int) -> dict[str, Any]:
    return {
        "grpc": {"port": EPP_HEALTH_PORT, "service": service},
        "periodSeconds": _PERIOD,
        "timeoutSeconds": _TIMEOUT,
        "failureThreshold": failures,
    }


def _resources(settings: Settings) -> dict[str, Any]:
    limits = {"cpu": canonical(settings.router_cpu), "memory": canonical(settings.router_memory)}
    return {"limits": dict(limits), "requests": dict(limits)}


def _restricted() -> dict[str, Any]:
    return {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def _container(
    name: str,
    image: str,
    pull_policy: str | None,
    settings: Settings,
    **fields: Any,
) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "image": image}
    if pull_policy:
        out["imagePullPolicy"] = pull_policy
    out.update(fields)
    out["resources"] = _resources(settings)
    out["securityContext"] = _restricted()
    return out


def _discovery_container(
    router: RouterSpec,
    image: str,
    md: ModelDeployment,
    plans: Sequence[RolePlan],
    *,
    namespace: str,
    settings: Settings,
    port: int,
    serving: Mapping[str, str],
    target_port: int,
) -> dict[str, Any]:
    """vllm-router or sglang-gateway: one container that discovers the serving Pods itself."""
    pair = any(p.kind == RoleKind.PREFILL for p in plans) and any(
        p.kind == RoleKind.DECODE for p in plans
    )
    prefill = {**serving, ROLE_KIND: RoleKind.PREFILL.value} if pair else None
    decode = {**serving, ROLE_KIND: RoleKind.DECODE.value} if pair else None
    command = discovery_command(
        router.name,
        namespace=namespace,
        port=port,
        target_port=target_port,
        serving=None if pair else serving,
        prefill=prefill,
        decode=decode,
        mooncake=any(p.direct_leg for p in plans),
        timeout=router.request_timeout_seconds,
        extra_args=router.extra_args or (),
    )
    return _container(
        "router",
        image,
        router.image_pull_policy,
        settings,
        command=command,
        ports=[_container_port("http", port), _container_port("metrics", METRICS_PORT)],
        readinessProbe=_http_probe("/readiness", port, failures=3),
        livenessProbe=_http_probe("/liveness", port, failures=6),
    )


def _publishing_value(plans: Sequence[RolePlan], read: Any) -> set[str | None]:
    return {read(p) for p in plans if p.publishes_kv_events}


def _hash_seed(plans: Sequence[RolePlan]) -> str | None:
    """The engines' ``PYTHONHASHSEED`` when every publishing role sets the same one."""

    def seed(plan: RolePlan) -> str | None:
        for entry in plan.role.env or ():
            if entry.name == HASH_SEED_ENV:
                return entry.value
        return None

    values = _publishing_value(plans, seed)
    return values.pop() if len(values) == 1 else None


def _block_size(plans: Sequence[RolePlan]) -> int:
    """The publishing roles' ``--block-size`` when they agree on one, else vLLM's default."""

    def size(plan: RolePlan) -> str | None:
        value = last_value(plan.own_args, BLOCK_SIZE_FLAG, plan.engine)
        parsed = parse_int(value) if value is not None else None
        return str(parsed) if parsed else None

    values = _publishing_value(plans, size)
    value = values.pop() if len(values) == 1 else None
    return int(value) if value else llmd.DEFAULT_BLOCK_SIZE


def _llm_d_config(
    md: ModelDeployment, plans: Sequence[RolePlan], *, namespace: str, kv_events: bool
) -> dict[str, str]:
    router = md.spec.router
    assert router is not None
    kinds = {p.kind for p in plans}
    scheduling = llmd.scheduling_config(
        model=md.spec.model.name,
        namespace=namespace,
        serving=serving_selector(md.metadata.name, master_only=has_elastic(md)),
        pair=RoleKind.PREFILL in kinds and RoleKind.DECODE in kinds,
        kv_events=kv_events,
        sglang=any(p.family is EngineFamily.SGLANG for p in plans),
        threshold=router.disaggregation_threshold_tokens,
        block_size=_block_size(plans),
        hash_seed=_hash_seed(plans) if kv_events else None,
    )
    proxy = llmd.proxy_config(
        port=plans[0].ports.external, timeout_seconds=router.request_timeout_seconds
    )
    return {
        EPP_CONFIG_KEY: llmd.config_text(scheduling),
        llmd.PROXY_CONFIG_KEY: llmd.config_text(proxy),
    }


def _llm_d_containers(
    router: RouterSpec,
    image: str,
    *,
    settings: Settings,
    port: int,
    serving: Mapping[str, str],
    target_port: int,
    kv_events: bool,
) -> list[dict[str, Any]]:
    """The endpoint picker, the proxy in front of it and, scoring by KV events, the tokenizer."""
    shared = [{"name": _TOKENIZER_VOLUME, "mountPath": llmd.TOKENIZER_DIR}] if kv_events else []
    picker = _container(
        "endpoint-picker",
        image,
        router.image_pull_policy,
        settings,
        args=endpoint_picker_args(
            serving=serving, target_port=target_port, extra_args=router.extra_args or ()
        ),
        env=[
            {"name": "NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        ],
        ports=[
            _container_port("grpc", EPP_GRPC_PORT),
            _container_port("grpc-health", EPP_HEALTH_PORT),
            _container_port("metrics", EPP_METRICS_PORT),
        ],
        readinessProbe=_grpc_probe("readiness", failures=3),
        livenessProbe=_grpc_probe("liveness", failures=6),
        volumeMounts=[
            {"name": _CONFIG_VOLUME, "mountPath": EPP_CONFIG_DIR, "readOnly": True},
            *shared,
        ],
    )
    proxy = _container(
        "proxy",
        settings.router_proxy_image,
        "IfNotPresent",
        settings,
        command=[
            "envoy",
            "--config-path",
            f"{llmd.PROXY_CONFIG_DIR}/{llmd.PROXY_CONFIG_KEY}",
            "--drain-strategy",
            "immediate",
            "--drain-time-s",
            "60",
        ],
        ports=[
            _container_port("http", port),
            _container_port("proxy-ready", llmd.PROXY_READY_PORT),
        ],
        readinessProbe=_http_probe("/ready", llmd.PROXY_READY_PORT, failures=3),
        volumeMounts=[
            {"name": _CONFIG_VOLUME, "mountPath": llmd.PROXY_CONFIG_DIR, "readOnly": True}
        ],
    )
    containers = [picker, proxy]
    if kv_events:
        probe = _http_probe("/healthz", llmd.TOKENIZER_PROBE_PORT, failures=3)
        containers.append(
            _container(
                "tokenizer",
                settings.router_tokenizer_image,
                "IfNotPresent",
                settings,
                env=[{"name": "PROBE_PORT", "value": str(llmd.TOKENIZER_PROBE_PORT)}],
                ports=[_container_port("tokenizer", llmd.TOKENIZER_PROBE_PORT)],
                readinessProbe=probe,
                livenessProbe={**probe, "failureThreshold": 6},
                volumeMounts=[
                    *shared,
                    {"name": _TOKENIZER_MODELS, "mountPath": "/models"},
                ],
            )
        )
    return containers


def _llm_d_volumes(name: str, *, kv_events: bool) -> list[dict[str, Any]]:
    volumes: list[dict[str, Any]] = [{"name": _CONFIG_VOLUME, "configMap": {"name": name}}]
    if kv_events:
        volumes += [
            {"name": _TOKENIZER_VOLUME, "emptyDir": {}},
            {"name": _TOKENIZER_MODELS, "emptyDir": {}},
        ]
    return volumes


def _template(
    name: str,
    deployment: str,
    router: RouterSpec,
    *,
    containers: list[dict[str, Any]],
    volumes: list[dict[str, Any]],
    annotations: Mapping[str, str],
) -> dict[str, Any]:
    """The router's Pod: its own ServiceAccount token (discovery authenticates with it), the
    restricted security profile, no Kueue label and no accelerator."""
    spec: dict[str, Any] = {
        "serviceAccountName": name,
        "automountServiceAccountToken": True,
        "enableServiceLinks": False,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": RUN_AS,
            "runAsGroup": RUN_AS,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
    }
    if router.image_pull_secrets:
        spec["imagePullSecrets"] = [{"name": s.name} for s in router.image_pull_secrets]
    spec["containers"] = containers
    if volumes:
        spec["volumes"] = volumes
    return {
        "metadata": {"labels": router_labels(deployment), "annotations": dict(annotations)},
        "spec": spec,
    }


def _digest(data: Mapping[str, str]) -> str:
    """A short digest of the router's configuration files: a change rolls the router's Pods,
    which read their files once."""
    text = "".join(f"{k}\0{v}\0" for k, v in sorted(data.items()))
    return hashlib.sha256(text.encode()).hexdigest()[:16]
