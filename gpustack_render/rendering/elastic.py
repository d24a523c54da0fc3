"""The Elastic EP profile's objects (docs/contract/elastic-ep.md §3, D29; docs/elastic-ep.md,
"What is rendered").

A role with ``elasticEp`` runs one vLLM serving instance whose data- and expert-parallel
collective lives in one Ray cluster and grows while it serves. For ``width`` W the render holds:

- **W GPU members**: the role rendered as an ordinary role with ``replicas = W`` and ``size = 1``
  (ordinals ``0..W-1``, each its own Kueue pod group of one on the role's entrance), stamped
  from two templates: ordinal 0, the **master**, runs the engine inside a shell that first
  joins Ray; every other ordinal, a **worker**, only joins Ray and blocks;
- the **Ray head Pod** (``generateName <md>-elastic-head-``), CPU-only and outside Kueue, and
  its ClusterIP Service ``<md>-elastic-head`` (GCS 6379, dashboard 8265);
- the serving Services of the role, selecting the master alone (``pod-ordinal: "0"``).

The master's ``--data-parallel-size`` is its **boot width** B, written on it as the annotation
``worker.gpustack.ai/elastic-boot-width``: ``width`` while no master exists, otherwise the live
master's own annotation, so a width change never alters (or restarts) the master; the engine
grows through its resize endpoint instead. Width is not a pod-spec-hash input (D29,
``hashing.role_hash_input``). The live masters reach the render as :class:`LiveMaster` values
(:func:`live_masters` reads them off Pods); without any, B is ``width``.

vLLM 0.33.0 needs one flag the reference does not list: its EPLB runs asynchronously by default,
and asynchronous EPLB with Elastic EP needs the NIXL package (``ParallelConfig`` refuses the
line otherwise), so the master also passes ``--eplb-config.use_async false``: the renderer owns
that key (D29, docs/contract/elastic-ep.md §3.3).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from gpustack_render.api.modeldeployment import EnvVar, ModelDeployment, RoleSpec
from gpustack_render.core import naming
from gpustack_render.core.errors import RenderError
from gpustack_render.core.labels import (
    COMPONENT,
    INSTANCE,
    MEMBER_INDEX,
    NAME,
    NAME_VALUE,
    NOTE_ROLE,
    PART_OF,
    PART_OF_VALUE,
    POD_ORDINAL,
    POD_SPEC_HASH,
    RENDER_VERSION,
    RESOURCE_TYPE,
    RESOURCE_TYPE_VALUE,
)
from gpustack_render.core.paths import ROLES
from gpustack_render.core.quantity import QuantityError, canonical
from gpustack_render.core.vocabulary import Engine
from gpustack_render.engines import connectors
from gpustack_render.rendering.hashing import hash_of
from gpustack_render.rendering.pods import (
    MAIN_CONTAINER,
    POD_API_VERSION,
    POD_KIND,
    head_volumes_and_mounts,
)
from gpustack_render.rendering.probes import (
    HEALTH_PATH,
    LIVENESS_FAILURE_THRESHOLD,
    LIVENESS_TIMEOUT_SECONDS,
    PERIOD_SECONDS,
)
from gpustack_render.rendering.roleplan import RolePlan
from gpustack_render.rendering.services import (
    CLUSTER_IP,
    SERVICE_API_VERSION,
    SERVICE_KIND,
    ServicePort,
)

#: The master's boot width (docs/contract/elastic-ep.md §3.4).
BOOT_WIDTH_ANNOTATION: Final = "worker.gpustack.ai/elastic-boot-width"
#: The bounds of ``width`` (and of a boot width read back from a master).
MIN_WIDTH: Final = 2
MAX_WIDTH: Final = 64
#: The ordinal of the master, the only member serving HTTP.
MASTER_ORDINAL: Final = 0

#: The Ray head's name stem: ``<md>-elastic-head`` (its Service, its component label and,
#: with a dash, its Pod's ``generateName``; D29 drops upstream's doubled deployment name).
HEAD_SUFFIX: Final = "elastic-head"
#: Ray's GCS port and dashboard port on the head, and their port names.
GCS_PORT: Final = 6379
DASHBOARD_PORT: Final = 8265
GCS_PORT_NAME: Final = "gcs"
DASHBOARD_PORT_NAME: Final = "dashboard"
#: The Ray node label naming the Pod a Ray node runs in (the observation reads it).
RAY_NODE_LABEL: Final = "gpustack-pod-uid"

#: Env the members and the head read (docs/contract/elastic-ep.md §3.2, §3.5).
POD_UID_ENV: Final = "GPUSTACK_ELASTIC_POD_UID"
POD_IP_ENV: Final = "GPUSTACK_ELASTIC_POD_IP"
RAY_ADDRESS_ENV: Final = "RAY_ADDRESS"
PACK_STRATEGY_ENV: Final = "VLLM_RAY_DP_PACK_STRATEGY"
PACK_STRATEGY: Final = "strict"
#: Ray's log variables: appended to the role's env when it lacks them, before rendering (not
#: owned: a role's own value wins).
RAY_LOG_DEFAULTS: Final = (
    ("RAY_LOG_TO_STDERR", "1"),
    ("RAY_LOGGER_LEVEL", "info"),
    ("RAY_BACKEND_LOG_LEVEL", "info"),
)
#: The variables the head copies from member 0, in this order (only those present).
HEAD_ENV_FROM_MEMBER: Final = (
    "RAY_LOG_TO_STDERR",
    "RAY_LOGGER_LEVEL",
    "RAY_BACKEND_LOG_LEVEL",
    "RAY_DEDUP_LOGS",
)
#: The variables the profile owns (docs/contract/elastic-ep.md §2.3): a role's own entry of one
#: of these names is dropped from the members, as admission refuses it.
OWNED_ENV: Final = (
    "VLLM_DP_SIZE",
    "VLLM_DATA_PARALLEL_SIZE_LOCAL",
    "VLLM_ENABLE_ELASTIC_EP",
    "VLLM_ENABLE_EPLB",
    "VLLM_TENSOR_PARALLEL_SIZE",
    "VLLM_PIPELINE_PARALLEL_SIZE",
    "VLLM_RAY_ADDRESS",
    RAY_ADDRESS_ENV,
    POD_UID_ENV,
    POD_IP_ENV,
    PACK_STRATEGY_ENV,
    "RAY_OVERRIDE_LABELS",
)

#: ``$0`` of the master's shell: the name the engine's process line shows before its argv.
SERVE_NAME: Final = "elastic-serve"
DATA_PARALLEL_ADDRESS_FLAG: Final = "--data-parallel-address"
#: The key vLLM 0.33.0 needs beside the reference's flags (module docstring); written in the
#: dotted form, which vLLM merges with a role's own dotted ``--eplb-config.*`` keys.
EPLB_USE_ASYNC_FLAG: Final = "--eplb-config.use_async"
#: The python3 liveness script's own request timeout (below the probe's 3 s).
LIVENESS_REQUEST_SECONDS: Final = 1
#: The status codes the master's liveness accepts: serving, and alive but resizing.
LIVENESS_ACCEPTED: Final = (200, 503)

ORIGIN_UNSUPPORTED: Final = "render.elastic-unsupported"
ORIGIN_MASTER_UNREADABLE: Final = "render.elastic-master-unreadable"
ORIGIN_TWO_MASTERS: Final = "render.elastic-two-masters"
ORIGIN_HEAD_NAME: Final = "render.elastic-head-name"

_SIGNED_INT = re.compile(r"^[+-]?[0-9]{1,10}$")


def master_flags(boot_width: int) -> list[str]:
    """What the master appends to the ordinary argv (docs/contract/elastic-ep.md §3.3), then the
    key vLLM 0.33.0 needs (D29)."""
    return [
        "--data-parallel-backend",
        "ray",
        "--data-parallel-size",
        str(boot_width),
        "--data-parallel-size-local",
        "1",
        "--enable-expert-parallel",
        "--enable-eplb",
        "--enable-elastic-ep",
        EPLB_USE_ASYNC_FLAG,
        "false",
    ]


#: Every flag the master's command line writes (for the owned-flag list of admission).
OWNED_FLAGS: Final = (
    "--data-parallel-size",
    "--data-parallel-size-local",
    "--data-parallel-backend",
    DATA_PARALLEL_ADDRESS_FLAG,
    "--enable-expert-parallel",
    "--enable-elastic-ep",
    "--enable-eplb",
    EPLB_USE_ASYNC_FLAG,
)


# --- the live masters ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LiveMaster:
    """A master Pod that exists: its name, its ``metadata.uid`` (empty when it has none yet)
    and its ``worker.gpustack.ai/elastic-boot-width`` annotation as written (None when absent).
    """

    name: str
    uid: str
    boot_width: str | None


class ElasticMasterUnreadableError(RenderError):
    """A live master whose boot width cannot be read: nothing is rendered for the deployment
    this pass (the reference's "render nothing"), so no second master boots at another width.
    Not a refusal of the spec: the pass is retried."""


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def live_masters(
    md: ModelDeployment, pods: Iterable[Mapping[str, Any]], *, namespace: str = ""
) -> tuple[LiveMaster, ...]:
    """The masters among ``pods`` (Pod manifests as the API server returns them): the Pods of
    the deployment's elastic role at ordinal 0 (labels ``app.kubernetes.io/instance``,
    ``app.kubernetes.io/component`` and ``modeldeployment.gpustack.ai/pod-ordinal``), in
    ``namespace`` when given (a Pod naming none is in ``default``). Whether a Pod still counts
    as live (terminating, terminal) is the caller's to decide before it passes the list.
    """
    index = elastic_index(md)
    if index is None:
        return ()
    role = md.spec.roles[index].name
    out: list[LiveMaster] = []
    for pod in pods:
        meta = pod.get("metadata")
        if not isinstance(meta, Mapping):
            continue
        labels = meta.get("labels")
        if not isinstance(labels, Mapping):
            continue
        if (
            labels.get(INSTANCE) != md.metadata.name
            or labels.get(COMPONENT) != role
            or labels.get(POD_ORDINAL) != str(MASTER_ORDINAL)
        ):
            continue
        if namespace and (_str(meta.get("namespace")) or naming.DEFAULT_NAMESPACE) != namespace:
            continue
        annotations = meta.get("annotations")
        raw = annotations.get(BOOT_WIDTH_ANNOTATION) if isinstance(annotations, Mapping) else None
        name = _str(meta.get("name")) or _str(meta.get("generateName")) or "(unnamed)"
        out.append(LiveMaster(name=name, uid=_str(meta.get("uid")), boot_width=_str(raw) or None))
    return tuple(out)


def parse_boot_width(raw: str | None) -> int | None:
    """A boot width annotation read as a decimal integer (a sign allowed, as upstream's
    ``strconv.ParseInt`` reads it) within 2..64; None otherwise."""
    if raw is None or not _SIGNED_INT.match(raw):
        return None
    value = int(raw)
    return value if MIN_WIDTH <= value <= MAX_WIDTH else None


def boot_width(
    width: int, masters: Sequence[LiveMaster], *, deployment: str, index: int, role: str
) -> int:
    """The master's boot width (docs/contract/elastic-ep.md §3.4): ``width`` with no live
    master, else the live master's annotation. Raises :class:`ElasticMasterUnreadableError`
    (render nothing) for a master without a UID or with an unreadable annotation, and
    :class:`RenderError` for two masters."""
    path = str(ROLES.index(index).child("elasticEp"))
    if len(masters) > 1:
        names = ", ".join(repr(m.name) for m in masters)
        raise RenderError(
            f"ModelDeployment {deployment!r}, role {role!r}: {len(masters)} Pods claim ordinal 0, "
            f"the Elastic EP master ({names}); one engine serves the collective, so nothing "
            "is created until one remains: delete the one that is not serving",
            field=path,
            origin=ORIGIN_TWO_MASTERS,
        )
    if not masters:
        return width
    master = masters[0]
    if not master.uid:
        raise ElasticMasterUnreadableError(
            f"ModelDeployment {deployment!r}, role {role!r}: the Elastic EP master "
            f"{master.name!r} has no UID yet, so its boot width cannot be trusted; nothing is "
            "rendered this pass; retry once the API server has stored it",
            field=path,
            origin=ORIGIN_MASTER_UNREADABLE,
        )
    parsed = parse_boot_width(master.boot_width)
    if parsed is None:
        shown = "absent" if master.boot_width is None else repr(master.boot_width)
        raise ElasticMasterUnreadableError(
            f"ModelDeployment {deployment!r}, role {role!r}: the Elastic EP master "
            f"{master.name!r} carries {BOOT_WIDTH_ANNOTATION} {shown}, not a width in "
            f"{MIN_WIDTH}..{MAX_WIDTH}; nothing is rendered, so no member joins an engine of "
            "unknown width: restore the annotation to the width the master booted with, or "
            "delete the master (the engine restarts at the current width)",
            field=path,
            origin=ORIGIN_MASTER_UNREADABLE,
        )
    return parsed


# --- the plan -----------------------------------------------------------------------------


def elastic_index(md: ModelDeployment) -> int | None:
    """The index of the first role carrying ``elasticEp``, or None."""
    for i, role in enumerate(md.spec.roles):
        if role.elastic_ep is not None:
            return i
    return None


def has_elastic(md: ModelDeployment) -> bool:
    """Whether a role of ``md`` carries the Elastic EP profile."""
    return elastic_index(md) is not None


def head_name(deployment: str) -> str:
    """``<md>-elastic-head``: the head's Service and component label."""
    return f"{deployment}-{HEAD_SUFFIX}"


def head_address(deployment: str, namespace: str) -> str:
    """The Ray address every member joins: the head Service's GCS port."""
    return f"{head_name(deployment)}.{namespace}.svc:{GCS_PORT}"


@dataclass(frozen=True, slots=True)
class ElasticPlan:
    """What the render decided for the elastic role before building anything."""

    index: int
    role: str
    width: int
    boot_width: int
    deployment: str
    namespace: str

    @property
    def head(self) -> str:
        return head_name(self.deployment)

    @property
    def address(self) -> str:
        return head_address(self.deployment, self.namespace)

    def join(self) -> str:
        """The shell words that join this Pod to the Ray cluster (no ``--num-gpus``: Ray
        counts the cards the container sees)."""
        return (
            f'ray start --node-ip-address="${POD_IP_ENV}" --address={self.address} '
            f'--labels={RAY_NODE_LABEL}="${POD_UID_ENV}"'
        )


def plan_elastic(
    md: ModelDeployment, *, namespace: str, masters: Sequence[LiveMaster] = ()
) -> ElasticPlan | None:
    """The elastic role's plan, None without one. Raises :class:`RenderError` for a shape the
    profile cannot render (two elastic roles, a take-over command, a head name already taken
    or too long) and for the masters of :func:`boot_width`."""
    index = elastic_index(md)
    if index is None:
        return None
    roles = md.spec.roles
    role = roles[index]
    spec = role.elastic_ep
    assert spec is not None
    deployment = md.metadata.name
    path = ROLES.index(index)
    others = [r.name for r in roles[index + 1 :] if r.elastic_ep is not None]
    if others:
        raise RenderError(
            f"role {role.name!r}: the Elastic EP profile renders one Ray cluster per deployment, "
            f"and roles {', '.join(repr(o) for o in others)} carry elasticEp too; keep "
            f"{path.child('elasticEp')} and remove it from the others",
            field=str(path.child("elasticEp")),
            origin=ORIGIN_UNSUPPORTED,
        )
    if not role.managed:
        raise RenderError(
            f"role {role.name!r}: an Elastic EP role has no command of its own: the renderer "
            "writes the master's and the workers' whole command lines; remove "
            f"{path.child('command')} and pass the engine's flags in extraArgs",
            field=str(path.child("command")),
            origin=ORIGIN_UNSUPPORTED,
        )
    head = head_name(deployment)
    taken = head == naming.role_service_name(deployment, role.name)
    if taken or not naming.is_dns1035_label(head):
        why = (
            f"the role's own Service gets that name too ({path.child('name')} is "
            f"{role.name!r}); rename the role"
            if taken
            else "that is not a valid Service name (a DNS-1035 label of at most 63 "
            "characters); shorten metadata.name"
        )
        raise RenderError(
            f"role {role.name!r}: the Ray head's Service is named {head!r}, and {why}",
            field=str(path.child("name")),
            origin=ORIGIN_HEAD_NAME,
        )
    boot = boot_width(spec.width, masters, deployment=deployment, index=index, role=role.name)
    return ElasticPlan(
        index=index,
        role=role.name,
        width=spec.width,
        boot_width=boot,
        deployment=deployment,
        namespace=namespace,
    )


def check_engine(plan: RolePlan) -> None:
    """The profile is native vLLM's (D29): SGLang's elastic EP is not rendered, and vLLM-Ascend
    is left open."""
    if plan.engine != Engine.VLLM:
        raise RenderError(
            f"role {plan.name!r}: {ROLES.index(plan.index).child('elasticEp')} renders only for "
            f"vLLM on a non-Ascend InstanceType, and this role's engine is {plan.engine}; remove "
            "elasticEp, or set spec.engine.name to vLLM with an InstanceType that is not Ascend",
            field=str(ROLES.index(plan.index).child("elasticEp")),
            origin=ORIGIN_UNSUPPORTED,
        )


def member_deployment(md: ModelDeployment, plan: ElasticPlan) -> ModelDeployment:
    """``md`` with the elastic role as its members are rendered: ``replicas = width``,
    ``size = 1``, and the Ray log variables it lacks appended to its env."""
    role = md.spec.roles[plan.index]
    env = list(role.env or ())
    names = {e.name for e in env}
    env += [EnvVar(name=n, value=v) for n, v in RAY_LOG_DEFAULTS if n not in names]
    members = role.model_copy(update={"replicas": plan.width, "size": 1, "env": env})
    roles: list[RoleSpec] = list(md.spec.roles)
    roles[plan.index] = members
    return md.model_copy(update={"spec": md.spec.model_copy(update={"roles": roles})})


# --- the members --------------------------------------------------------------------------


def _main(pod: dict[str, Any]) -> dict[str, Any]:
    for container in pod["spec"]["containers"]:
        if container["name"] == MAIN_CONTAINER:
            found: dict[str, Any] = container
            return found
    raise ValueError("the member template has no main container")


def member_env(plan: ElasticPlan) -> list[dict[str, Any]]:
    """The four entries every member appends after its rendered env, in this order."""
    return [
        connectors.env_field_ref(POD_UID_ENV, "metadata.uid"),
        connectors.env_value(RAY_ADDRESS_ENV, plan.address),
        connectors.env_field_ref(POD_IP_ENV, "status.podIP"),
        connectors.env_value(PACK_STRATEGY_ENV, PACK_STRATEGY),
    ]


def master_command(ordinary: Sequence[str], plan: ElasticPlan) -> list[str]:
    """The master's whole argv: join Ray, then exec the ordinary argv with the profile's flags
    and the Pod's own IP as the data-parallel address."""
    script = f'set -e; {plan.join()}; exec "$@" {DATA_PARALLEL_ADDRESS_FLAG} "${POD_IP_ENV}"'
    return ["/bin/sh", "-c", script, SERVE_NAME, *ordinary, *master_flags(plan.boot_width)]


def worker_command(plan: ElasticPlan) -> list[str]:
    """A worker's whole argv: join Ray and block."""
    return ["/bin/sh", "-ec", f"{plan.join()} --block"]


def liveness_script(url: str) -> str:
    """The master's liveness program: exit 0 only when ``url`` answers 200 (serving) or 503
    (alive, resizing), whether as a response or as an HTTP error; anything else, a timeout or
    a refused connection included, exits 1. An ``https`` URL is read without verifying the
    engine's certificate (it is the engine's own, on loopback)."""
    https = url.startswith("https:")
    modules = (
        "ssl, sys, urllib.error, urllib.request" if https else "sys, urllib.error, urllib.request"
    )
    context = ", context=ssl._create_unverified_context()" if https else ""
    accepted = ", ".join(str(code) for code in LIVENESS_ACCEPTED)
    return (
        f"import {modules}\n"
        "def answer():\n"
        "    try:\n"
        f"        with urllib.request.urlopen({url!r}, timeout={LIVENESS_REQUEST_SECONDS}"
        f"{context}) as response:\n"
        "            return response.status\n"
        "    except urllib.error.HTTPError as error:\n"
        "        code = error.code\n"
        "        error.close()\n"
        "        return code\n"
        "    except Exception:\n"
        "        return None\n"
        f"sys.exit(0 if answer() in ({accepted}) else 1)\n"
    )


def master_liveness(plan: RolePlan) -> dict[str, Any]:
    """The master's liveness probe: the script on the engine port (``prometheus.io/port``),
    with the ordinary liveness timings (docs/contract/render.md §12)."""
    scheme = "https" if plan.https else "http"
    url = f"{scheme}://127.0.0.1:{plan.ports.engine}{HEALTH_PATH}"
    return {
        "exec": {"command": ["python3", "-c", liveness_script(url)]},
        "periodSeconds": PERIOD_SECONDS,
        "timeoutSeconds": LIVENESS_TIMEOUT_SECONDS,
        "failureThreshold": LIVENESS_FAILURE_THRESHOLD,
    }


def _with_member_env(main: dict[str, Any], plan: ElasticPlan) -> None:
    owned = set(OWNED_ENV)
    env = [e for e in main.get("env") or () if e.get("name") not in owned]
    main["env"] = env + member_env(plan)


def member_templates(
    template: Mapping[str, Any], role_plan: RolePlan, plan: ElasticPlan
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(master, worker): the ordinary template of the role turned into the master's (ordinal
    0) and the workers' (docs/contract/elastic-ep.md §3.2–§3.4). The seat slots stay."""
    master = copy.deepcopy(dict(template))
    main = _main(master)
    main["command"] = master_command(main["command"], plan)
    _with_member_env(main, plan)
    if "livenessProbe" in main:
        main["livenessProbe"] = master_liveness(role_plan)
    master["metadata"]["annotations"][BOOT_WIDTH_ANNOTATION] = str(plan.boot_width)

    worker = copy.deepcopy(dict(template))
    main = _main(worker)
    main["command"] = worker_command(plan)
    _with_member_env(main, plan)
    for key in ("startupProbe", "readinessProbe", "livenessProbe", "lifecycle"):
        main.pop(key, None)
    return master, worker


# --- the head -----------------------------------------------------------------------------


def head_labels(plan: ElasticPlan) -> dict[str, str]:
    """The head Pod's labels: no Kueue label (it asks for no accelerator)."""
    return {
        NAME: NAME_VALUE,
        INSTANCE: plan.deployment,
        COMPONENT: plan.head,
        PART_OF: PART_OF_VALUE,
        RESOURCE_TYPE: RESOURCE_TYPE_VALUE,
        POD_ORDINAL: "0",
        MEMBER_INDEX: "0",
    }


def head_env(master_env: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Member 0's Ray log variables (only those it has, in :data:`HEAD_ENV_FROM_MEMBER`'s
    order), then the head's own Pod UID."""
    by_name = {str(e.get("name")): e for e in master_env}
    env = [dict(by_name[n]) for n in HEAD_ENV_FROM_MEMBER if n in by_name]
    return [*env, connectors.env_field_ref(POD_UID_ENV, "metadata.uid")]


def head_command() -> list[str]:
    """The head's whole argv: a Ray head with its dashboard, no GPUs, blocking."""
    return [
        "/bin/sh",
        "-ec",
        "ray start --head --include-dashboard=true --num-gpus=0 "
        f"--port={GCS_PORT} --dashboard-host=0.0.0.0 "
        f'--labels={RAY_NODE_LABEL}="${POD_UID_ENV}" --block',
    ]


def head_hash_input(role: RoleSpec, image: str, env: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """What the head Pod is made of, as its pod-spec-hash input: the image and pull settings,
    the grace period, the volumes it mounts (the role's additional volumes and shm) and its
    env. Nothing of the width, the model or the engine's flags reaches the head."""
    data = role.model_dump(mode="json", by_alias=True)
    shm = data.get("shmSize")
    if shm is not None:
        try:
            shm = canonical(shm)
        except QuantityError:
            shm = str(shm)
    return {
        "elasticHead": {
            "image": image,
            "imagePullPolicy": data.get("imagePullPolicy"),
            "imagePullSecrets": data.get("imagePullSecrets"),
            "terminationGracePeriodSeconds": data.get("terminationGracePeriodSeconds"),
            "additionalVolumes": data.get("additionalVolumes"),
            "shmSize": shm,
            "env": [dict(e) for e in env],
        }
    }


def head_pod(
    role_plan: RolePlan,
    plan: ElasticPlan,
    *,
    master_env: Sequence[Mapping[str, Any]],
    owner_references: Sequence[Mapping[str, Any]],
    render_version: int,
) -> dict[str, Any]:
    """The Ray head Pod (docs/contract/elastic-ep.md §3.5): the members' image, no resources,
    no probes, the role's additional volumes and shm, neither store client nor weights."""
    role = role_plan.role
    env = head_env(master_env)
    metadata: dict[str, Any] = {
        "generateName": f"{plan.head}-",
        "namespace": plan.namespace,
        "labels": head_labels(plan),
        "annotations": {
            NOTE_ROLE: plan.head,
            POD_SPEC_HASH: hash_of(head_hash_input(role, role_plan.image, env)),
            RENDER_VERSION: str(render_version),
        },
    }
    if owner_references:
        metadata["ownerReferences"] = [dict(ref) for ref in owner_references]
    main: dict[str, Any] = {"name": MAIN_CONTAINER, "image": role_plan.image}
    if role.image_pull_policy is not None:
        main["imagePullPolicy"] = role.image_pull_policy
    main["command"] = head_command()
    main["env"] = env
    main["ports"] = [
        {"name": GCS_PORT_NAME, "protocol": "TCP", "containerPort": GCS_PORT},
        {"name": DASHBOARD_PORT_NAME, "protocol": "TCP", "containerPort": DASHBOARD_PORT},
    ]
    volumes, mounts = head_volumes_and_mounts(role_plan)
    if mounts:
        main["volumeMounts"] = mounts
    spec: dict[str, Any] = {"restartPolicy": "Always"}
    if role.termination_grace_period_seconds is not None:
        spec["terminationGracePeriodSeconds"] = role.termination_grace_period_seconds
    spec["automountServiceAccountToken"] = False
    spec["enableServiceLinks"] = False
    if role.image_pull_secrets:
        spec["imagePullSecrets"] = [{"name": s.name} for s in role.image_pull_secrets]
    spec["containers"] = [main]
    if volumes:
        spec["volumes"] = volumes
    return {"apiVersion": POD_API_VERSION, "kind": POD_KIND, "metadata": metadata, "spec": spec}


def head_service(
    plan: ElasticPlan, *, owner_references: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """``<md>-elastic-head`` (docs/contract/elastic-ep.md §3.6): ClusterIP, selecting the head
    by instance and component, GCS and dashboard ports."""
    metadata: dict[str, Any] = {
        "name": plan.head,
        "namespace": plan.namespace,
        "labels": {NAME: NAME_VALUE, INSTANCE: plan.deployment, RESOURCE_TYPE: RESOURCE_TYPE_VALUE},
        "annotations": {NOTE_ROLE: plan.head},
    }
    if owner_references:
        metadata["ownerReferences"] = [dict(ref) for ref in owner_references]
    ports = [
        ServicePort(GCS_PORT_NAME, "TCP", GCS_PORT, GCS_PORT),
        ServicePort(DASHBOARD_PORT_NAME, "TCP", DASHBOARD_PORT, DASHBOARD_PORT),
    ]
    return {
        "apiVersion": SERVICE_API_VERSION,
        "kind": SERVICE_KIND,
        "metadata": metadata,
        "spec": {
            "type": CLUSTER_IP,
            "selector": {INSTANCE: plan.deployment, COMPONENT: plan.head},
            "ports": [p.to_json() for p in ports],
        },
    }


@dataclass(frozen=True)
class ElasticRendering:
    """The elastic role's own objects and facts, beside its members (the role's seats)."""

    #: ``elasticEp.width``: the members rendered (ordinals ``0..width-1``).
    width: int
    #: The master's ``--data-parallel-size`` and annotation (``width`` without a live master).
    boot_width: int
    #: The Ray head Pod (``generateName``; the controller creates it when absent) and its
    #: Service.
    head_pod: dict[str, Any]
    head_service: dict[str, Any]

    @property
    def master_ordinal(self) -> int:
        return MASTER_ORDINAL
