"""Object-only rules (``docs/contract/admission.md`` §5, §12, §7): answered from the submitted
object alone, in the order of §4 step 1 — the release-scope refusals, then the rules of each role in
turn, then the rules of the whole deployment and the router rules.

Rule ids (``origin``) are listed in ``docs/rules.md`` with the old ids they replace.
"""

from __future__ import annotations

import posixpath
import re
from typing import Final

from gpustack_render.admission.arguments import (
    role_parallelism,
    validate_degrees,
    validate_owned_args,
    validate_owned_env,
)
from gpustack_render.admission.context import Context, quantity_value
from gpustack_render.admission.ports import validate_declared_ports
from gpustack_render.admission.router import validate_router
from gpustack_render.admission.scaling import validate_scaling
from gpustack_render.api.modeldeployment import MAX_ROLES, AdditionalVolume, RoleSpec
from gpustack_render.core import errors
from gpustack_render.core.errors import ErrorList
from gpustack_render.core.naming import (
    MAX_LABEL_LENGTH,
    deployment_service_name,
    instance_name,
    is_dns1035_label,
    is_dns1123_label,
    member_name,
    role_service_name,
    router_service_name,
)
from gpustack_render.core.paths import ENGINE, KV_CACHE, MODEL, ROLES, FieldPath
from gpustack_render.core.vocabulary import Engine, EngineFamily, RoleKind
from gpustack_render.deployment.scaling import most_replicas
from gpustack_render.engines import mountpaths
from gpustack_render.engines.owned import (
    ASCEND_DRIVER_PATH,
    CLIENT_CONFIG_MOUNT_PATH,
)

#: The implicit lowest topology level; naming it explicitly is refused
#: (``topology.hostname-level``).
HOSTNAME_LEVEL: Final = "kubernetes.io/hostname"

# Matched whole (``fullmatch``): ``$`` alone also matches before a trailing newline.
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS1123_SUBDOMAIN = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
_DNS1035_MESSAGE: Final = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character"
)
_DNS1123_MESSAGE: Final = (
    "a DNS-1123 label must consist of lower case alphanumeric characters or '-', and must start "
    "and end with an alphanumeric character"
)


def validate_release_scope(ctx: Context) -> ErrorList:
    """§12 (D8, D14): ``spec.model.artifactRef`` and ``roles[].elasticEp`` are not delivered."""
    out = ErrorList()
    if ctx.md.spec.model.artifact_ref is not None:
        out.append(
            errors.forbidden(
                MODEL.child("artifactRef"),
                "this release does not deliver ModelArtifact weights; remove the field and let "
                "the engine fetch the model, or mount the weights with additionalVolumes",
                origin="release.field-not-delivered",
            )
        )
    for i, role in enumerate(ctx.md.spec.roles):
        if role.elastic_ep is not None:
            out.append(
                errors.forbidden(
                    ROLES.index(i).child("elasticEp"),
                    "this release does not deliver the Elastic EP profile; remove the field",
                    origin="release.field-not-delivered",
                )
            )
    return out


def validate_images(ctx: Context) -> ErrorList:
    """``image.whitespace`` (project addition): an image reference with leading or trailing
    whitespace, which the API server refuses on every Pod that runs it (``roles[].image`` empty
    falls back)."""
    out = ErrorList()
    found: list[tuple[FieldPath, str | None]] = [(ENGINE.child("image"), ctx.md.spec.engine.image)]
    found.extend((ROLES.index(i).child("image"), r.image) for i, r in enumerate(ctx.md.spec.roles))
    for where, image in found:
        if image and image != image.strip():
            out.append(
                errors.invalid(
                    where,
                    image,
                    "an image reference must not have leading or trailing whitespace",
                    origin="image.whitespace",
                )
            )
    return out


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


def operator_mount_paths(ctx: Context, i: int, role: RoleSpec, errs: ErrorList) -> dict[str, str]:
    """Paths the renderer mounts on this role's ``main`` container (docs/contract/render.md §14),
    with why."""
    out: dict[str, str] = {}
    if not role.managed:
        return out
    vllm = ctx.base_engine.family is EngineFamily.VLLM
    if vllm and ctx.has_cache:
        out[CLIENT_CONFIG_MOUNT_PATH] = "the KV-cache client configuration"
    if (
        vllm
        and ctx.direct_leg(i, errs, origin="volumes.operator-mount-path", store_client=False)
        is not None
        and ctx.inject_engine(i, errs, origin="volumes.operator-mount-path") == Engine.VLLM_ASCEND
    ):
        out[ASCEND_DRIVER_PATH] = "the Ascend driver of the direct transfer leg"
    return out


#: The hostPath types a Pod volume accepts ("" = no check), as the API server lists them.
HOST_PATH_TYPES: Final = (
    "",
    "BlockDevice",
    "CharDevice",
    "Directory",
    "DirectoryOrCreate",
    "File",
    "FileOrCreate",
    "Socket",
)


def _source_problems(vol: AdditionalVolume, vpath: FieldPath) -> ErrorList:
    """``volumes.source-unusable``: a source the rendered Pod volume could not carry (the API server
    would refuse every Pod of the role): a ConfigMap or Secret without a name, a hostPath without a
    path, with a ``..`` element or of a type Pods do not know."""
    out = ErrorList()
    origin = "volumes.source-unusable"
    for key, ref in (("configMap", vol.config_map), ("secret", vol.secret)):
        if ref is not None and not ref.name:
            out.append(
                errors.required(
                    vpath.child(key, "name"),
                    f"the volume mounted at {vol.mount_path} names no {key}: name the {key} "
                    f"in this namespace",
                    origin=origin,
                )
            )
    host = vol.host_path
    if host is None:
        return out
    hpath = vpath.child("hostPath")
    if not host.path:
        out.append(
            errors.required(
                hpath.child("path"),
                f"the volume mounted at {vol.mount_path} names no node path",
                origin=origin,
            )
        )
    elif ".." in host.path.split("/"):
        out.append(
            errors.invalid(
                hpath.child("path"),
                host.path,
                "must not contain '..' as a path element; name the node path itself",
                origin=origin,
            )
        )
    if host.type is not None and host.type not in HOST_PATH_TYPES:
        out.append(
            errors.not_supported(hpath.child("type"), host.type, HOST_PATH_TYPES, origin=origin)
        )
    return out


def validate_volumes(ctx: Context, i: int, role: RoleSpec, path: FieldPath) -> ErrorList:
    """``volumes.*``: one source per entry, unique mount paths, no ``..`` in ``subPath``, no mount
    at a path the operator mounts (D22: at it, not above it, where kubelet mounts the operator's
    path on top, nor inside it, which :func:`volume_warnings` reports; ``/dev/shm`` and the
    compile cache take precedence), a source a Pod volume can carry."""
    out = ErrorList()
    volumes = role.additional_volumes or []
    if not volumes:
        return out
    operator_paths = operator_mount_paths(ctx, i, role, out)
    seen: dict[str, int] = {}
    for j, vol in enumerate(volumes):
        vpath = path.child("additionalVolumes").index(j)
        sources = [
            name
            for name, present in (
                ("configMap", vol.config_map is not None),
                ("secret", vol.secret is not None),
                ("hostPath", vol.host_path is not None),
            )
            if present
        ]
        if not sources:
            out.append(
                errors.required(
                    vpath,
                    f"the volume mounted at {vol.mount_path} names no source: set exactly one "
                    f"of configMap, secret or hostPath",
                    origin="volumes.no-source",
                )
            )
        elif len(sources) > 1:
            out.append(
                errors.forbidden(
                    vpath,
                    f"the volume mounted at {vol.mount_path} names {len(sources)} sources "
                    f"({', '.join(sources)}); set exactly one of configMap, secret or hostPath",
                    origin="volumes.several-sources",
                )
            )
        out.extend(_source_problems(vol, vpath))
        if vol.mount_path in seen:
            k = seen[vol.mount_path]
            out.append(
                errors.duplicate(
                    vpath.child("mountPath"),
                    vol.mount_path,
                    f"already mounted by {path.child('additionalVolumes').index(k)}",
                    origin="volumes.duplicate-mount-path",
                )
            )
        else:
            seen[vol.mount_path] = j
        if vol.sub_path is not None and ".." in vol.sub_path.split("/"):
            out.append(
                errors.invalid(
                    vpath.child("subPath"),
                    vol.sub_path,
                    "must not contain '..' as a path element",
                    origin="volumes.path-traversal",
                )
            )
        owned = mountpaths.normalize(vol.mount_path)
        if owned in operator_paths:
            out.append(
                errors.invalid(
                    vpath.child("mountPath"),
                    vol.mount_path,
                    f"the operator mounts {operator_paths[owned]} at {owned} on this role; "
                    f"a container cannot carry two mounts at one path. Mount the volume "
                    f"elsewhere (a parent such as {posixpath.dirname(owned)} is allowed)",
                    origin="volumes.operator-mount-path",
                )
            )
    return out


def volume_warnings(ctx: Context) -> list[str]:
    """What a managed role's volume beside a path the operator mounts does, as warnings (D22
    amended: only a mount *at* that path is refused).

    - *Inside* it (a ``subPath`` file over the KV-cache client file, say): admitted, as the seed
      documents the hazard, but it replaces what the operator put there without a word.
    - *Above* it, on a read-only ``hostPath``: the container runtime must create the operator's
      mount point inside the user's volume, which fails on a read-only one unless the node
      directory already holds it (a ConfigMap or Secret is fine: kubelet creates nested mount
      points in those itself, ``pkg/volume/util/nested_volumes.go``; a writable ``hostPath``
      gets the directory created on the node).
    """
    out: list[str] = []
    for i, role in enumerate(ctx.md.spec.roles):
        if not role.additional_volumes:
            continue
        owned = operator_mount_paths(ctx, i, role, ErrorList())
        for j, vol in enumerate(role.additional_volumes):
            where = ROLES.index(i).child("additionalVolumes").index(j).child("mountPath")
            path = mountpaths.normalize(vol.mount_path)
            inside = next((p for p in owned if mountpaths.inside(path, p)), None)
            if inside is not None:
                out.append(
                    f"{where}: {vol.mount_path} lies inside {inside}, where the operator mounts "
                    f"{owned[inside]}; your volume replaces what is there. Mount it elsewhere "
                    f"unless that is what you want"
                )
            above = next((p for p in owned if mountpaths.inside(p, path)), None)
            if above is not None and vol.host_path is not None and vol.read_only:
                out.append(
                    f"{where}: the operator mounts {owned[above]} at {above}, inside this "
                    f"read-only hostPath volume; the container runtime cannot create that mount "
                    f"point in a read-only volume, so the container will not start unless "
                    f"{vol.host_path.path}{above[len(path) :]} exists on every node. Mount it "
                    f"writable, or elsewhere"
                )
    return out


def validate_role(ctx: Context, i: int, role: RoleSpec) -> ErrorList:
    """The rules of one role, in order (the shared-memory size beside the resource counts)."""
    path = ROLES.index(i)
    out = ErrorList()
    out.extend(validate_owned_args(ctx, role, path))
    out.extend(validate_degrees(ctx, role, path, role_parallelism(ctx, role)))
    out.extend(validate_owned_env(ctx, role, path))
    out.extend(validate_resources(role, path))
    out.extend(validate_shm_size(role, path))
    out.extend(validate_volumes(ctx, i, role, path))
    out.extend(validate_declared_ports(ctx, i, role, path))
    return out


def validate_pool_ref(ctx: Context) -> ErrorList:
    """``kv-cache.empty-pool-ref``: ``spec.kvCache`` with an empty ``poolRef.name``."""
    out = ErrorList()
    cache = ctx.md.spec.kv_cache
    if cache is not None and not cache.pool_ref.name:
        out.append(
            errors.required(
                KV_CACHE.child("poolRef", "name"),
                "name the KVCachePoolBinding in this namespace that grants the pool: the "
                "Binding is the authorization point, and an empty reference names none",
                origin="kv-cache.empty-pool-ref",
            )
        )
    return out


def validate_role_count(ctx: Context) -> ErrorList:
    """``roles.too-many``: at most 10 roles."""
    out = ErrorList()
    count = len(ctx.md.spec.roles)
    if count > MAX_ROLES:
        out.append(
            errors.invalid(
                ROLES,
                count,
                f"at most {MAX_ROLES} roles: this operator's own role-count limit, not an "
                f"upstream number, because every role renders its own replicas, Services and "
                f"queue references",
                origin="roles.too-many",
            )
        )
    return out


def validate_unique_names(ctx: Context) -> ErrorList:
    """``roles.duplicate-name``: a later duplicate role name (the schema refuses it first; this
    is the backstop)."""
    out = ErrorList()
    first: dict[str, int] = {}
    for i, role in enumerate(ctx.md.spec.roles):
        if role.name in first:
            out.append(
                errors.duplicate(
                    ROLES.index(i).child("name"),
                    role.name,
                    f"already the name of {ROLES.index(first[role.name])}; replicas of two "
                    f"roles of one name would join the same Kueue pod groups",
                    origin="roles.duplicate-name",
                )
            )
        else:
            first[role.name] = i
    return out


def validate_service_names(ctx: Context, *, existing: frozenset[str]) -> ErrorList:
    """``names.invalid-service-name``: ``<md>-<role>`` must be a DNS-1035 label (roles of the stored
    object exempt)."""
    out = ErrorList()
    for i, role in enumerate(ctx.md.spec.roles):
        if role.name in existing:
            continue
        service = role_service_name(ctx.name, role.name)
        if is_dns1035_label(service):
            continue
        problems = []
        if len(service) > MAX_LABEL_LENGTH:
            problems.append(f"must be no more than {MAX_LABEL_LENGTH} characters")
        if not re.match(r"^[a-z]([-a-z0-9]*[a-z0-9])?$", service):
            problems.append(_DNS1035_MESSAGE)
        out.append(
            errors.invalid(
                ROLES.index(i).child("name"),
                role.name,
                f"the role's Service would be named {service!r} ({len(service)} characters), "
                f"which is not a valid Service name: {'; '.join(problems)}. Shorten or rename "
                f"the role or the deployment",
                origin="names.invalid-service-name",
            )
        )
    return out


#: A role name of the shape ``<role>-r<ordinal>`` (canonical decimal ordinal), the only shape
#: whose role Service can equal an instance Service ``<md>-<role>-r<ordinal>`` of another role.
_INSTANCE_SHAPED = re.compile(r"(?P<role>.+)-r(?P<ordinal>0|[1-9][0-9]*)")


def _contested_ordinals(ctx: Context) -> dict[str, set[int]]:
    """Per role name, the ordinals whose instance Service another claim can also produce.

    An instance Service ``<md>-<role>-r<o>`` is longer than ``<md>``, cannot be ``<md>-router``,
    and equals another role's instance Service only for a repeated role name (whose role Service
    is claimed twice first); so only a role named ``<role>-r<o>`` can contest it. Claiming just
    these keeps ``names.service-name-claimed-twice`` linear in the number of roles instead of in
    Σ replicas: a request with thousands of roles must be answered within the webhook's timeout
    too.
    """
    out: dict[str, set[int]] = {}
    for role in ctx.md.spec.roles:
        m = _INSTANCE_SHAPED.fullmatch(role.name)
        if m is not None:
            out.setdefault(m["role"], set()).add(int(m["ordinal"]))
    return out


def validate_service_collisions(ctx: Context) -> ErrorList:
    """``names.service-name-claimed-twice``: a Service name claimed twice; the later claimant (a
    role) is refused."""
    out = ErrorList()
    claims: dict[str, str] = {deployment_service_name(ctx.name): "the deployment's Service"}
    if ctx.router is not None:
        claims.setdefault(router_service_name(ctx.name), "the router's Service")
    contested = _contested_ordinals(ctx)
    for i, role in enumerate(ctx.md.spec.roles):
        mine = [(role_service_name(ctx.name, role.name), f"the Service of role {role.name!r}")]
        if role.size > 1:
            mine.extend(
                (
                    instance_name(ctx.name, role.name, o),
                    f"the instance {o} Service of role {role.name!r}",
                )
                for o in sorted(contested.get(role.name, ()))
                if o < role.replicas
            )
        reported = False
        for service, claimant in mine:
            other = claims.get(service)
            if other is None:
                claims[service] = claimant
                continue
            if not reported:
                reported = True
                out.append(
                    errors.invalid(
                        ROLES.index(i).child("name"),
                        role.name,
                        f"the Service name {service!r} is claimed by {other} and by "
                        f"{claimant}; rename this role",
                        origin="names.service-name-claimed-twice",
                    )
                )
    return out


def validate_member_names(ctx: Context) -> ErrorList:
    """``names.member-name-too-long``: above size 1 the longest member name must be a DNS-1123 label
    (a hostname)."""
    out = ErrorList()
    for i, role in enumerate(ctx.md.spec.roles):
        if role.size <= 1:
            continue
        # An autoscaled role may reach its upper bound: its names must fit there too.
        highest = max(most_replicas(ctx.md, role) - 1, 0)
        longest = member_name(ctx.name, role.name, highest, role.size - 1)
        if is_dns1123_label(longest):
            continue
        bound = " (or a lower scaling bound)" if highest >= role.replicas else ""
        why = (
            f"longer than {MAX_LABEL_LENGTH} characters"
            if len(longest) > MAX_LABEL_LENGTH
            else _DNS1123_MESSAGE
        )
        out.append(
            errors.invalid(
                ROLES.index(i),
                longest,
                f"the longest member name {longest!r} ({len(longest)} characters) is not a "
                f"hostname: {why}. Shorten the role, shorten the deployment, or declare fewer "
                f"replicas{bound}",
                origin="names.member-name-too-long",
            )
        )
    return out


def validate_kinds(ctx: Context) -> ErrorList:
    """``kinds.*``: kind combinations and kinds no engine renders."""
    out = ErrorList()
    kinds = ctx.kinds()
    if RoleKind.SERVER in kinds and any(k != RoleKind.SERVER for k in kinds):
        for i in range(len(kinds)):
            out.append(
                errors.invalid(
                    ROLES.index(i).child("kind"),
                    ctx.md.spec.roles[i].kind,
                    f"kinds {', '.join(sorted(set(kinds)))} in one deployment: a server serves "
                    f"whole requests by itself, so a server beside another kind describes no "
                    f"arrangement",
                    origin="kinds.server-mixed",
                )
            )
    first: dict[str, int] = {}
    for i, kind in enumerate(kinds):
        if kind == RoleKind.SERVER:
            continue
        if kind in first:
            out.append(
                errors.invalid(
                    ROLES.index(i).child("kind"),
                    ctx.md.spec.roles[i].kind,
                    f"kind {kind} is already declared by role "
                    f"{ctx.md.spec.roles[first[kind]].name!r}; only server may repeat",
                    origin="kinds.repeated",
                )
            )
        else:
            first[kind] = i
    for i, kind in enumerate(kinds):
        if kind == RoleKind.ENCODE:
            out.append(
                errors.invalid(
                    ROLES.index(i).child("kind"),
                    ctx.md.spec.roles[i].kind,
                    f"engine {ctx.base_engine} has no rendering for kind {kind} (on neither "
                    f"accelerator backend)",
                    origin="kinds.not-rendered-by-engine",
                )
            )
    return out


def qualified_name_problems(value: str) -> list[str]:
    """Why ``value`` is not a qualified label key (Kubernetes ``IsQualifiedName``)."""
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            return ["prefix part must be non-empty"]
        problems = []
        if len(prefix) > 253:
            problems.append("prefix part must be no more than 253 characters")
        if not _DNS1123_SUBDOMAIN.fullmatch(prefix):
            problems.append(
                "prefix part a lowercase RFC 1123 subdomain must consist of lower case "
                "alphanumeric characters, '-' or '.', and must start and end with an "
                "alphanumeric character"
            )
        if problems:
            return problems + _name_problems(name)
    else:
        return [
            "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and "
            "must start and end with an alphanumeric character, with an optional DNS subdomain "
            "prefix and '/'"
        ]
    return _name_problems(name)


def _name_problems(name: str) -> list[str]:
    if not name:
        return ["name part must be non-empty"]
    problems = []
    if len(name) > MAX_LABEL_LENGTH:
        problems.append(f"name part must be no more than {MAX_LABEL_LENGTH} characters")
    if not _QUALIFIED_NAME.fullmatch(name):
        problems.append(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start "
            "and end with an alphanumeric character"
        )
    return problems


def validate_topology(ctx: Context) -> ErrorList:
    """``topology.invalid-level-key`` (not a qualified label key) and
    ``topology.hostname-level`` (the implicit hostname level)."""
    out = ErrorList()
    for i, role in enumerate(ctx.md.spec.roles):
        level = role.topology.required_level if role.topology else None
        if not level:
            continue
        path = ROLES.index(i).child("topology", "requiredLevel")
        if level == HOSTNAME_LEVEL:
            out.append(
                errors.forbidden(
                    path,
                    f"{HOSTNAME_LEVEL} is the implicit lowest level; omit the field to leave "
                    f"placement unconstrained",
                    origin="topology.hostname-level",
                )
            )
            continue
        problems = qualified_name_problems(level)
        if problems:
            out.append(
                errors.invalid(
                    path,
                    level,
                    f"{path} must be a label key naming a topology level: {'; '.join(problems)}",
                    origin="topology.invalid-level-key",
                )
            )
    return out


def validate_object(
    ctx: Context, *, existing: frozenset[str], old_ctx: Context | None = None
) -> ErrorList:
    """§4 step 1: every object-only rule, in the reference's order.

    ``existing`` is the set of role names of the stored object (empty on CREATE), exempt from
    ``names.invalid-service-name``; ``old_ctx`` the stored object (the router-object rules leave
    alone what it already had).
    """
    out = ErrorList()
    out.extend(validate_release_scope(ctx))
    for i, role in enumerate(ctx.md.spec.roles):
        out.extend(validate_role(ctx, i, role))
    out.extend(validate_pool_ref(ctx))
    out.extend(validate_role_count(ctx))
    out.extend(validate_unique_names(ctx))
    if ctx.name:  # names derive from the deployment's; a nameless object has none to judge
        out.extend(validate_service_names(ctx, existing=existing))
        out.extend(validate_service_collisions(ctx))
        out.extend(validate_member_names(ctx))
    out.extend(validate_kinds(ctx))
    out.extend(validate_topology(ctx))
    out.extend(validate_router(ctx, old_ctx=old_ctx))
    out.extend(validate_images(ctx))
    out.extend(validate_scaling(ctx.md))
    return out
