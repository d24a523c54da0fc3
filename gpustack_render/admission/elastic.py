"""Admission of the Elastic EP profile (``roles[].elasticEp``; docs/contract/elastic-ep.md §2,
D29; docs/elastic-ep.md "Admission").

- :func:`validate_elastic`: the shape rules S1–S18 on a deployment with an elastic role (CREATE
  and UPDATE);
- :func:`validate_elastic_update`: what an UPDATE may not change (§2.4);
- :func:`elastic_owned_flag` and :data:`ELASTIC_OWNED_ENV`: the keys the renderer writes on an
  elastic role (§2.3), matched by the profile's own rule, not by ``admission.md §13``'s.

The accelerator default (elastic-ep.md §2.1: TP, not 1) lives with the other default in
``deployment/defaulting.py``. The profile is delivered (D29): these rules are its admission.

Rule ids (``origin``) are listed in ``docs/rules.md``.
"""

from __future__ import annotations

import json
from fractions import Fraction
from typing import Any, Final

from gpustack_render.admission.context import quantity_value
from gpustack_render.api.modeldeployment import ModelDeployment, RoleResources, RoleSpec
from gpustack_render.core import errors, naming
from gpustack_render.core.errors import ErrorList
from gpustack_render.core.paths import ENGINE, ROLES, SCALING_GROUPS, FieldPath
from gpustack_render.core.vocabulary import RoleKind
from gpustack_render.deployment.defaulting import elastic_parallelism
from gpustack_render.deployment.roles import base_engine, effective_kind
from gpustack_render.engines.parallelism import Parallelism
from gpustack_render.rendering.elastic import OWNED_ENV, OWNED_FLAGS, head_name

#: The width bounds; ``width`` counts the master (ordinal 0) among the data-parallel engines.
MIN_WIDTH: Final = 2
MAX_WIDTH: Final = 64

#: The flag that caps the width (vLLM 0.30.0 and later).
CEILING_FLAG: Final = "--elastic-ep-max-dp-size"

#: Flags the renderer writes on an elastic role's master (elastic-ep.md §2.3, §3.3).
#: The two ``--eplb-config`` keys are D29's addition: vLLM 0.33.0's ``ParallelConfig`` refuses
#: Elastic EP with asynchronous EPLB (its default) unless NIXL is installed, so the master's line
#: carries ``--eplb-config.use_async false``. That key is owned (a role's own value would be
#: overridden), and so is the whole ``--eplb-config <json>`` form, which vLLM drops beside a
#: dotted key; the other dotted keys (``--eplb-config.window_size=500``) merge and stay free.
ELASTIC_OWNED_FLAGS: Final = frozenset(
    {
        # What the master's line carries (rendering/elastic.py writes exactly these) ...
        *OWNED_FLAGS,
        # ... and what would change how it runs though the renderer does not write it: the
        # executor backend and the Ray address (the members' RAY_ADDRESS names the head), and
        # the whole --eplb-config document, which vLLM drops beside the dotted key above.
        "--distributed-executor-backend",
        "--ray-address",
        "--eplb-config",
    }
)

#: The short names the matching of elastic-ep.md §2.3 expands (``tp`` and ``pp`` expand to
#: flags this version does not own; ``ep`` is not expanded).
_EXPANSIONS: Final = {
    "dp": "data-parallel-size",
    "dpl": "data-parallel-size-local",
    "dpb": "data-parallel-backend",
    "dpa": "data-parallel-address",
    "tp": "tensor-parallel-size",
    "pp": "pipeline-parallel-size",
}

#: Environment names the renderer writes on an elastic role's members (exact names). The Ray
#: log variables it adds when missing (``RAY_LOG_TO_STDERR``, ``RAY_LOGGER_LEVEL``,
#: ``RAY_BACKEND_LOG_LEVEL``) are the user's to set.
#: The env names the renderer writes or owns on an elastic role (rendering/elastic.py).
ELASTIC_OWNED_ENV: Final = frozenset(OWNED_ENV)

_SLICES: Final = (
    ("acceleratorSlicedMemoryPercentage", "accelerator_sliced_memory_percentage"),
    ("acceleratorSlicedCoresPercentage", "accelerator_sliced_cores_percentage"),
)


def elastic_owned_flag(token: str) -> str | None:
    """The owned flag ``token`` names under the rule of elastic-ep.md §2.3, or ``None``: every
    leading ``-`` stripped, cut at the first ``=``, a short name expanded, ``--`` put in front,
    then exact membership. No prefix and no ``_`` folding; value tokens are read like any
    other."""
    name = token.lstrip("-").partition("=")[0]
    key = "--" + _EXPANSIONS.get(name, name)
    return key if key in ELASTIC_OWNED_FLAGS else None


def elastic_roles(md: ModelDeployment) -> list[tuple[int, RoleSpec]]:
    """The roles carrying ``elasticEp``, with their index."""
    return [(i, r) for i, r in enumerate(md.spec.roles) if r.elastic_ep is not None]


def role_degrees(md: ModelDeployment, role: RoleSpec) -> Parallelism:
    """An elastic role's degrees, read from ``extraArgs`` and ``env`` (S5's parse)."""
    env = [(e.name, e.value) for e in role.env or ()]
    return elastic_parallelism(role.extra_args, env, engine=base_engine(md))


def ceiling_of(parsed: Parallelism) -> int | None:
    """The ``--elastic-ep-max-dp-size`` the role declares (``None``: no ceiling)."""
    if CEILING_FLAG not in parsed.declared:
        return None
    return parsed.degrees.elastic_ep_max_dp_size


# --- S1–S3: the deployment ----------------------------------------------------------------------


def _deployment_shape(md: ModelDeployment, elastic: list[tuple[int, RoleSpec]]) -> ErrorList:
    out = ErrorList()
    engine = md.spec.engine.name
    if engine != "vLLM":
        out.append(
            errors.invalid(
                ENGINE.child("name"),
                engine,
                f"role {elastic[0][1].name!r} carries elasticEp, which only vLLM serves (its "
                f"resize endpoint grows the data-parallel collective inside one Ray cluster); "
                f"use engine vLLM, or remove elasticEp",
                origin="elastic.engine-not-vllm",
            )
        )
    if len(elastic) > 1:
        names = ", ".join(repr(r.name) for _, r in elastic)
        out.append(
            errors.forbidden(
                ROLES,
                f"roles {names} each carry elasticEp; at most one role may: one deployment is "
                f"one elastic instance. Keep elasticEp on one role",
                origin="elastic.several-roles",
            )
        )
    others = [r.name for r in md.spec.roles if r.elastic_ep is None]
    if others:
        out.append(
            errors.forbidden(
                ROLES,
                f"role {elastic[0][1].name!r} carries elasticEp, so it must be the only role: "
                f"its width, not a second role, sizes the collective. Remove "
                f"{', '.join(repr(n) for n in others)}, or put them in a deployment of their own",
                origin="elastic.not-only-role",
            )
        )
    return out


# --- S4–S7: width and degrees --------------------------------------------------------------------


def _width_and_degrees(md: ModelDeployment, path: FieldPath, role: RoleSpec) -> ErrorList:
    out = ErrorList()
    assert role.elastic_ep is not None
    width = role.elastic_ep.width
    wpath = path.child("elasticEp", "width")
    if not MIN_WIDTH <= width <= MAX_WIDTH:
        out.append(
            errors.invalid(
                wpath,
                width,
                f"the width must lie within {MIN_WIDTH}..{MAX_WIDTH}: it counts every "
                f"data-parallel engine, the master (ordinal 0) included, so 2 is the smallest "
                f"width that has a worker",
                origin="elastic.width-out-of-range",
            )
        )
    parsed = role_degrees(md, role)
    apath = path.child("extraArgs")
    if parsed.error is not None:
        err = parsed.error
        out.append(
            errors.invalid(
                apath,
                err.token,
                f"the parallel degrees of elastic role {role.name!r} cannot be read from its "
                f"extraArgs and env: {err.flag}: {err.problem}. The tensor-parallel degree "
                f"sizes every member and the ceiling bounds the width: fix the value",
                origin="elastic.degrees-unreadable",
            )
        )
        return out  # S5 suppresses S6, S7 (and S12)
    ceiling = ceiling_of(parsed)
    if ceiling is not None and width > ceiling:
        out.append(
            errors.invalid(
                wpath,
                width,
                f"width {width} is above the ceiling {CEILING_FLAG}={ceiling} in "
                f"{apath}: the engine cannot grow past it. Lower the width to at most "
                f"{ceiling}",
                origin="elastic.width-above-ceiling",
            )
        )
    d = parsed.degrees
    extra = [
        f"{flag}={value}"
        for flag, value in (
            ("--pipeline-parallel-size", d.pipeline_parallel),
            ("--prefill-context-parallel-size", d.prefill_context_parallel),
        )
        if value != 1
    ]
    if extra:
        out.append(
            errors.invalid(
                apath,
                ", ".join(extra),
                f"elastic role {role.name!r} declares {', '.join(extra)}: each member is one "
                f"tensor-parallel group, so the pipeline and prefill-context degrees must be 1. "
                f"Remove the flags",
                origin="elastic.pipeline-or-context-degree",
            )
        )
    return out


# --- S8–S11: the role ----------------------------------------------------------------------------


def _role_shape(path: FieldPath, role: RoleSpec) -> ErrorList:
    out = ErrorList()
    kind = effective_kind(role)
    if kind != RoleKind.SERVER:
        out.append(
            errors.invalid(
                path.child("kind"),
                role.kind,
                f"elastic role {role.name!r} is of kind {kind}: prefill/decode disaggregation "
                f"does not combine with Elastic EP. Use kind Server",
                origin="elastic.kind-not-server",
            )
        )
    if role.replicas != 1:
        out.append(
            errors.invalid(
                path.child("replicas"),
                role.replicas,
                f"elastic role {role.name!r} runs one instance; elasticEp.width, not replicas, "
                f"sizes it. Set replicas to 1",
                origin="elastic.replicas-not-one",
            )
        )
    if role.size != 1:
        out.append(
            errors.invalid(
                path.child("size"),
                role.size,
                f"each member of elastic role {role.name!r} is one Pod and elasticEp.width is "
                f"the member count. Set size to 1",
                origin="elastic.size-not-one",
            )
        )
    if role.command:
        out.append(
            errors.forbidden(
                path.child("command"),
                f"elastic role {role.name!r} may not set command: the renderer writes every "
                f"member's argv (the Ray join, and on the master the engine with the elastic "
                f"flags). Remove command and pass engine flags in extraArgs",
                origin="elastic.command-set",
            )
        )
    return out


# --- S12–S15: the cards --------------------------------------------------------------------------


def _cards(md: ModelDeployment, path: FieldPath, role: RoleSpec, res: RoleResources) -> ErrorList:
    out = ErrorList()
    rpath = path.child("resources")
    parsed = role_degrees(md, role)
    if res.accelerator is not None and parsed.error is None:
        tp = parsed.degrees.tensor_parallel
        if quantity_value(res.accelerator) != Fraction(tp):
            out.append(
                errors.invalid(
                    rpath.child("accelerator"),
                    res.accelerator,
                    f"each member of elastic role {role.name!r} is one tensor-parallel group "
                    f"on whole cards: accelerator must equal the tensor-parallel degree {tp}. "
                    f"Set it to {tp}, or leave it out for that default",
                    origin="elastic.cards-not-tp",
                )
            )
    for name, attr in _SLICES:
        value = getattr(res, attr)
        if value:
            out.append(
                errors.forbidden(
                    rpath.child(name),
                    f"elastic role {role.name!r} asks for {name} {value}: its members take "
                    f"whole, unsliced cards. Remove the field or set it to 0",
                    origin="elastic.sliced-cards",
                )
            )
    if res.accelerator_partitioned_profile:
        out.append(
            errors.forbidden(
                rpath.child("acceleratorPartitionedProfile"),
                f"elastic role {role.name!r} asks for partition profile "
                f"{res.accelerator_partitioned_profile!r}: its members take whole, "
                f"unpartitioned cards. Remove the field",
                origin="elastic.partitioned-cards",
            )
        )
    if res.interface is not None and quantity_value(res.interface) != 0:
        out.append(
            errors.forbidden(
                rpath.child("interface"),
                f"elastic role {role.name!r} asks for {res.interface} fabric interface(s): the "
                f"profile renders none (no RDMA). Remove the field or set it to 0",
                origin="elastic.fabric-interface",
            )
        )
    return out


# --- S16–S17: owned keys -------------------------------------------------------------------------


def _owned_keys(path: FieldPath, role: RoleSpec) -> ErrorList:
    out = ErrorList()
    apath = path.child("extraArgs")
    for token in role.extra_args or ():
        key = elastic_owned_flag(token)
        if key is None:
            continue
        as_written = "" if token == key else f" (as written: {token!r})"
        out.append(
            errors.forbidden(
                apath,
                f"{key}{as_written} is written by the renderer on elastic role {role.name!r}: "
                f"it lays out the data-parallel collective itself. Remove the token from "
                f"{apath}",
                origin="elastic.owned-flag",
            )
        )
    for j, entry in enumerate(role.env or ()):
        if entry.name not in ELASTIC_OWNED_ENV:
            continue
        out.append(
            errors.forbidden(
                path.child("env").index(j).child("name"),
                f"{entry.name} is written by the renderer on elastic role {role.name!r}. Remove "
                f"the variable",
                origin="elastic.owned-env",
            )
        )
    return out


# --- S18: scaling --------------------------------------------------------------------------------


def _scaling(md: ModelDeployment, path: FieldPath, role: RoleSpec) -> ErrorList:
    out = ErrorList()
    reason = (
        "an autoscaler may lower the count, and an elastic role's width may grow but not "
        "shrink: shrinking is not delivered in this release"
    )
    if role.scaling is not None and role.scaling.mode == "External":
        out.append(
            errors.forbidden(
                path.child("scaling", "mode"),
                f"elastic role {role.name!r} cannot be scaled External: {reason}. Remove "
                f"scaling, and raise elasticEp.width to grow",
                origin="elastic.external-scaling",
            )
        )
    for gi, group in enumerate(md.spec.scaling_groups or ()):
        for ri, member in enumerate(group.roles):
            if member.name != role.name:
                continue
            out.append(
                errors.forbidden(
                    SCALING_GROUPS.index(gi).child("roles").index(ri).child("name"),
                    f"scaling group {group.name!r} names elastic role {role.name!r}: {reason}. "
                    f"Remove the role from the group, and raise elasticEp.width to grow",
                    origin="elastic.external-scaling",
                )
            )
    return out


def validate_elastic(md: ModelDeployment) -> ErrorList:
    """S1–S18 (elastic-ep.md §2.2, D29) when ``md`` has an elastic role: the deployment first
    (S1–S3), then each elastic role in order (S4–S7, S8–S11, S12–S15 when ``resources`` is set,
    S16–S17, S18). An unreadable parse (S5) leaves S6, S7 and S12 unjudged. Nothing when no role
    is elastic."""
    elastic = elastic_roles(md)
    if not elastic:
        return ErrorList()
    out = _deployment_shape(md, elastic)
    for i, role in elastic:
        path = ROLES.index(i)
        out.extend(_width_and_degrees(md, path, role))
        out.extend(_role_shape(path, role))
        if role.resources is not None:
            out.extend(_cards(md, path, role, role.resources))
        out.extend(_owned_keys(path, role))
        out.extend(_scaling(md, path, role))
        out.extend(_head_service(md, path, role))
    return out


def _head_service(md: ModelDeployment, path: FieldPath, role: RoleSpec) -> ErrorList:
    """The Ray head's Service ``<md>-elastic-head`` must be a valid Service name and must not be
    the role's own Service name (a role named ``elastic-head``): the renderer refuses both, so
    admission says it first, at the field to change."""
    out = ErrorList()
    deployment = md.metadata.name
    head = head_name(deployment)
    if not deployment:
        return out
    if head == naming.role_service_name(deployment, role.name):
        out.append(
            errors.invalid(
                path.child("name"),
                role.name,
                f"the Ray head's Service is named {head!r}, and a role named {role.name!r} "
                "would give its own Service the same name; rename the role",
                origin="elastic.head-name",
            )
        )
    elif not naming.is_dns1035_label(head):
        out.append(
            errors.invalid(
                "metadata.name",
                deployment,
                f"the Ray head's Service would be named {head!r} ({len(head)} characters), "
                "which is not a valid Service name (a DNS-1035 label of at most 63 characters); "
                f"shorten metadata.name to at most {63 - len(head) + len(deployment)} characters",
                origin="elastic.head-name",
            )
        )
    return out


# --- elastic-ep.md §2.4: UPDATE ----------------------------------------------------------------


_IDENTITY = "a different value describes a different deployment, which is created, not edited"


def _resources_key(res: RoleResources | None) -> str:
    """``resources`` compared deeply, quantities by value (``2`` and ``"2"`` are one count)."""
    if res is None:
        return "null"
    data: dict[str, Any] = res.model_dump(mode="json", by_alias=True, exclude_none=True)
    for name in ("accelerator", "interface"):
        if name in data:
            number = quantity_value(data[name])
            data[name] = str(number) if number is not None else f"raw:{data[name]}"
    return json.dumps(data, sort_keys=True)


def _profile_presence(new: RoleSpec | None, old: RoleSpec | None) -> ErrorList:
    out = ErrorList()
    where = ROLES.child("elasticEp")
    if old is not None and new is None:
        out.append(
            errors.forbidden(
                where,
                f"role {old.name!r} was created with elasticEp and no role carries it now: the "
                f"profile is part of the deployment's identity ({_IDENTITY}). Keep elasticEp, or "
                f"create a new deployment without it",
                origin="elastic.profile-changed",
            )
        )
    elif new is not None and old is None:
        out.append(
            errors.forbidden(
                where,
                f"role {new.name!r} adds elasticEp to a deployment created without it: the "
                f"profile is part of the deployment's identity ({_IDENTITY}). Create a new "
                f"deployment with elasticEp",
                origin="elastic.profile-changed",
            )
        )
    return out


def _degrees_changed(
    new_md: ModelDeployment, old_md: ModelDeployment, path: FieldPath, new: RoleSpec, old: RoleSpec
) -> ErrorList:
    out = ErrorList()
    apath = path.child("extraArgs")
    now, before = role_degrees(new_md, new), role_degrees(old_md, old)
    if now.error is not None or before.error is not None:
        which = "new" if now.error is not None else "stored"
        err = now.error if now.error is not None else before.error
        out.append(
            errors.invalid(
                apath,
                str(err),
                f"the tensor-parallel degree of elastic role {new.name!r} is fixed at creation "
                f"and the {which} object's cannot be read ({err}), so it cannot be shown "
                f"unchanged ({_IDENTITY}). Restore the stored extraArgs and env",
                origin="elastic.tp-changed",
            )
        )
        return out
    tp, old_tp = now.degrees.tensor_parallel, before.degrees.tensor_parallel
    if tp != old_tp:
        out.append(
            errors.invalid(
                apath,
                tp,
                f"the tensor-parallel degree of elastic role {new.name!r} was {old_tp} at "
                f"creation and is {tp} now: it sizes every member ({_IDENTITY}). Keep "
                f"--tensor-parallel-size {old_tp}",
                origin="elastic.tp-changed",
            )
        )
    ceiling, old_ceiling = ceiling_of(now), ceiling_of(before)
    if ceiling != old_ceiling:

        def shown(value: int | None) -> str:
            return "none" if value is None else f"{CEILING_FLAG}={value}"

        out.append(
            errors.forbidden(
                apath,
                f"the width ceiling of elastic role {new.name!r} is fixed at creation: it was "
                f"{shown(old_ceiling)} and is {shown(ceiling)} now ({_IDENTITY}). Restore "
                f"{shown(old_ceiling)}",
                origin="elastic.ceiling-changed",
            )
        )
    return out


def _role_changed(path: FieldPath, new: RoleSpec, old: RoleSpec) -> ErrorList:
    out = ErrorList()
    if new.name != old.name:
        out.append(
            errors.forbidden(
                path.child("name"),
                f"elasticEp was created on role {old.name!r} and stays on it; role {new.name!r} "
                f"is another role ({_IDENTITY}). Keep the name {old.name!r}",
                origin="elastic.role-renamed",
            )
        )
    if new.instance_type != old.instance_type:
        out.append(
            errors.invalid(
                path.child("instanceType"),
                new.instance_type,
                f"the members of elastic role {new.name!r} were admitted against InstanceType "
                f"{old.instance_type!r}, and members never roll: a new type would split the "
                f"collective across pools. Keep {old.instance_type!r}",
                origin="elastic.instance-type-changed",
            )
        )
    if _resources_key(new.resources) != _resources_key(old.resources):
        out.append(
            errors.invalid(
                path.child("resources"),
                _resources_key(new.resources),
                f"resources set the card shape of every member of elastic role {new.name!r}, "
                f"and members never roll: the stored {_resources_key(old.resources)} stays. "
                f"Restore it",
                origin="elastic.resources-changed",
            )
        )
    assert new.elastic_ep is not None and old.elastic_ep is not None
    width, old_width = new.elastic_ep.width, old.elastic_ep.width
    if width < old_width:
        out.append(
            errors.forbidden(
                path.child("elasticEp", "width"),
                f"width of elastic role {new.name!r} lowered from {old_width} to {width}: "
                f"scale-down is not supported in this release. Keep {old_width} or raise it",
                origin="elastic.width-lowered",
            )
        )
    return out


def validate_elastic_update(new_md: ModelDeployment, old_md: ModelDeployment) -> ErrorList:
    """elastic-ep.md §2.4 on UPDATE: the profile is neither removed nor added; on the elastic
    role (the first, old and new; S2 allows one) TP and the ceiling stay, the name,
    ``instanceType`` and ``resources`` stay, and ``width`` is not lowered."""
    new_elastic, old_elastic = elastic_roles(new_md), elastic_roles(old_md)
    new = new_elastic[0] if new_elastic else None
    old = old_elastic[0] if old_elastic else None
    out = _profile_presence(new[1] if new else None, old[1] if old else None)
    if new is None or old is None:
        return out
    i, role = new
    path = ROLES.index(i)
    out.extend(_degrees_changed(new_md, old_md, path, role, old[1]))
    out.extend(_role_changed(path, role, old[1]))
    return out
