"""Keys of the target container that injection refuses instead of overwriting (steps 17–18).

``inject.owned-*``, ``inject.dtype-flag``: keys this Pod's own engine would be given and a merge
could not settle (the mechanism, ``--kv-cache-dtype`` while a dtype is rendered, the volume and
mount, a mount path compared as a path: at, inside or above the owned one).
``inject.config-source-*``, ``inject.env-from-owned-prefix``: on SGLang, keys selecting another
configuration source, which would leave every injected variable unread (the last: an ``envFrom``
that could supply one).
Flags are read with the shared token rule of :mod:`gpustack_render.engines.flags`. Only keys this
render writes are checked, so the same key on an engine that does not read it is not refused;
the volume and mount checks therefore apply to the vLLM family, the only engines given a volume.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, assert_never

from gpustack_render.core import jsonview
from gpustack_render.core.vocabulary import Engine, EngineFamily
from gpustack_render.engines import flags, mountpaths, owned
from gpustack_render.engines.connectors import StoreClient
from gpustack_render.injection import refusal as r
from gpustack_render.injection.refusal import Refusal
from gpustack_render.injection.target import Target


def owned_connector_flag(family: EngineFamily) -> str:
    """The connector flag an engine of ``family`` is given and refuses (``inject.owned-flag``)."""
    match family:
        case EngineFamily.VLLM:
            return owned.KV_TRANSFER_CONFIG_FLAG
        case EngineFamily.SGLANG:
            return owned.HICACHE_STORAGE_BACKEND_FLAG
        case _:
            assert_never(family)


def find_spelled(container: Mapping[str, Any], flag: str, *, engine: Engine) -> str | None:
    """How the container's own tokens name ``flag`` (``args`` first, then ``command``, value
    tokens included, docs/contract/injection-notes.md §8), in any spelling ``engine`` reads;
    ``None`` if not."""
    for argv in (jsonview.tokens(container.get("args")), jsonview.tokens(container.get("command"))):
        hits = flags.find_flag(argv, flag, engine)
        if hits:
            return flags.spelled(argv[hits[0].position], flag)
    return None


def names_flag(container: Mapping[str, Any], flag: str, *, engine: Engine) -> bool:
    """Whether the container's own tokens name ``flag`` in any spelling ``engine`` reads."""
    return find_spelled(container, flag, engine=engine) is not None


def check_collisions(
    pod_spec: Mapping[str, Any],
    target: Target,
    *,
    engine: Engine,
    client: StoreClient,
    dtype: str,
    tenant: str = "",
) -> Refusal | None:
    """Steps 17–18 of §2 in order: env, flags, dtype flag, Pod volume, mounts, then the
    configuration-source keys; ``inject.env-from-owned-prefix`` also covers ``MOONCAKE_TENANT_ID``
    on SGLang when no ``tenant`` is written (a single-tenant store), since nothing then outranks
    it."""
    fam = engine.family
    vllm = fam is EngineFamily.VLLM
    container = target.container
    name = target.name
    env_names = {jsonview.name_of(e) for e in jsonview.items(container.get("env"))}

    if vllm and owned.MOONCAKE_CONFIG_PATH_ENV in env_names:
        return Refusal(
            r.OWNED_ENV,
            f"container {name} declares env {owned.MOONCAKE_CONFIG_PATH_ENV}: a KV cache "
            "is already configured, and two sources for one setting is undiagnosable (no "
            "merge); remove yours, or drop the inject label",
        )
    spelled = find_spelled(container, owned_connector_flag(fam), engine=engine)
    if spelled is not None:
        return Refusal(
            r.OWNED_FLAG,
            f"container {name} passes {spelled}: the webhook writes that flag for engine "
            f"{engine}, and two on one command line are undiagnosable; remove yours, or drop "
            "the inject label",
        )
    if dtype:
        spelled = find_spelled(container, owned.KV_CACHE_DTYPE_FLAG, engine=engine)
        if spelled is not None:
            return Refusal(
                r.DTYPE_FLAG,
                f"container {name} passes {spelled}: the dtype comes from the Binding "
                f"({dtype!r}), and engines writing two dtypes into one domain read each other's "
                "blocks wrong; remove yours and name a Binding declaring the dtype you want (the "
                "Setting model-deployment-kv-cache-dtype-owned off admits it)",
            )
    owned_volumes = {jsonview.name_of(v) for v in client.volumes}
    for volume in jsonview.items(pod_spec.get("volumes")):
        if jsonview.name_of(volume) in owned_volumes:
            return Refusal(
                r.OWNED_VOLUME,
                f"the Pod declares volume {jsonview.name_of(volume)}, a name owned by the "
                "KV-cache injection webhook; rename yours",
            )
    mount_names = {jsonview.name_of(m) for m in client.mounts}
    mount_paths = [
        mountpaths.normalize(jsonview.mapping(m).get("mountPath")) for m in client.mounts
    ]
    mounts = jsonview.items(container.get("volumeMounts"))
    for mount in mounts:
        if jsonview.name_of(mount) in mount_names:
            return Refusal(
                r.OWNED_MOUNT_NAME,
                f"container {name} mounts a volume named {jsonview.name_of(mount)}, a name owned "
                "by the KV-cache injection webhook; rename yours",
            )
    refusal = _owned_path(name, "volumeMounts", "mountPath", mounts, mount_paths) or _owned_path(
        # A raw block device is a node the runtime creates at devicePath: at, inside or above
        # the owned path it meets the projected configuration as a mount there would.
        name,
        "volumeDevices",
        "devicePath",
        jsonview.items(container.get("volumeDevices")),
        mount_paths,
    )
    if refusal is not None:
        return refusal
    if fam is EngineFamily.SGLANG:
        if owned.SGLANG_HICACHE_MOONCAKE_CONFIG_PATH_ENV in env_names:
            return Refusal(
                r.CONFIG_SOURCE_ENV,
                f"container {name} declares env "
                f"{owned.SGLANG_HICACHE_MOONCAKE_CONFIG_PATH_ENV}: it points sglang at its "
                "own file, so the injected MOONCAKE_* variables would go unread; remove it",
            )
        spelled = find_spelled(
            container, owned.HICACHE_STORAGE_BACKEND_EXTRA_CONFIG_FLAG, engine=engine
        )
        if spelled is not None:
            return Refusal(
                r.CONFIG_SOURCE_FLAG,
                f"container {name} passes {spelled}: that configuration outranks the "
                "environment, so the injected MOONCAKE_* variables would go unread; remove it",
            )
        return _config_source_env_from(container, name) or (
            None if tenant else _tenant_env_from(container, name)
        )
    return None


def _owned_path(
    name: str, field: str, key: str, entries: Sequence[Any], held_paths: Sequence[str]
) -> Refusal | None:
    """``inject.owned-mount-path`` for one list of the container (``volumeMounts`` by ``mountPath``,
    ``volumeDevices`` by ``devicePath``): the first entry at, inside or above a path the webhook
    mounts."""
    for k, entry in enumerate(entries):
        path = mountpaths.rooted(jsonview.mapping(entry).get(key))
        held = next((p for p in held_paths if mountpaths.overlap(path, p)), None)
        if held is None:
            continue
        where = "at" if path == held else ("inside" if len(path) > len(held) else "above")
        return Refusal(
            r.OWNED_MOUNT_PATH,
            f"container {name} {field}[{k}] puts something at {path}, {where} {held}, where "
            "the KV-cache injection webhook mounts its client configuration (a mount or device "
            "at, inside or above that path, subPath included, shadows or hides it); put yours "
            "elsewhere",
        )
    return None


def _env_from(container: Mapping[str, Any], name: str, variable: str, why: str) -> Refusal | None:
    """``inject.env-from-owned-prefix``: the first ``envFrom`` entry whose ``prefix`` (empty by
    default) could begin ``variable``, refused with ``why``: admission cannot read a ConfigMap's or
    Secret's keys, so such an entry could supply it, and nothing the webhook writes outranks it."""
    for k, source in enumerate(jsonview.items(container.get("envFrom"))):
        prefix = jsonview.mapping(source).get("prefix")
        prefix = prefix if isinstance(prefix, str) else ""
        if variable.startswith(prefix):
            return Refusal(
                r.CONFIG_SOURCE_ENV_FROM,
                f"container {name} envFrom[{k}] could supply {variable} (admission cannot read "
                f"a ConfigMap's or Secret's keys): {why}; give the entry a prefix that cannot "
                f"begin {variable} (such as APP_), move the variables you need into env, or "
                "drop the inject label",
            )
    return None


def _tenant_env_from(container: Mapping[str, Any], name: str) -> Refusal | None:
    """``inject.env-from-owned-prefix`` on a single-tenant store: no ``MOONCAKE_TENANT_ID`` is
    written (a declared one is removed from ``env``), so one an ``envFrom`` supplies is the tenant
    the engine reads."""
    return _env_from(
        container,
        name,
        owned.MOONCAKE_TENANT_ID_ENV,
        "the pool's store is single-tenant, so the webhook writes no tenant that would outrank "
        "it, and the engine would run with the tenant of that source instead of the Binding's",
    )


def _config_source_env_from(container: Mapping[str, Any], name: str) -> Refusal | None:
    """``inject.env-from-owned-prefix``: an ``envFrom`` entry whose keys could include the
    configuration-source variable.

    ``env`` outranks ``envFrom``, so every variable injection writes wins over a ConfigMap or
    Secret; this one is never written (no value of it means "read the environment"), and
    admission cannot read the source's keys. An entry whose ``prefix`` cannot begin the name
    cannot supply it.
    """
    return _env_from(
        container,
        name,
        owned.SGLANG_HICACHE_MOONCAKE_CONFIG_PATH_ENV,
        "the webhook never overwrites that variable, and it would point sglang at its own file, "
        "so the injected MOONCAKE_* variables would go unread",
    )
