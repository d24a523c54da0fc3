"""Settings: one value object with documented defaults (D11), read from ``gpustack-settings``.

The library receives Settings as an argument; it never reads the environment.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace

from gpustack_render.core import errors
from gpustack_render.core.errors import ErrorList
from gpustack_render.core.paths import FieldPath

CONFIGMAP_NAME = "gpustack-settings"
DEFAULT_SYSTEM_NAMESPACE = "gpustack-system"
DEFAULT_ROUTING_SIDECAR_IMAGE = "gpustack/mirrored-llm-d-router-disagg-sidecar:v0.10.0"
#: How long a multi-role deployment may wait on the joint admission check, with quota reserved,
#: before it is parked (docs/contract/controller.md §9).
DEFAULT_PARK_AFTER_SECONDS = 30 * 60


@dataclass(frozen=True)
class Settings:
    """Operator-wide switches; every field has the default the specification gives."""

    #: ``model-deployment-kv-cache-dtype-owned``: render and own ``--kv-cache-dtype``.
    kv_cache_dtype_owned: bool = True
    #: ``model-deployment-routing-sidecar-image``: image of the routing proxy.
    routing_sidecar_image: str = DEFAULT_ROUTING_SIDECAR_IMAGE
    #: ``instance-privileged-allowed``: when false, new ``privileged: true`` grants are refused.
    privileged_allowed: bool = True
    #: ``instance-host-path-volume-allowed``: when false, new ``hostPath`` volumes are refused.
    host_path_volume_allowed: bool = True
    #: ``native-sidecars``: routing proxy as a restartable init container.
    native_sidecars: bool = True
    #: ``model-deployment-park-after-seconds``: the joint check's parking window (a positive
    #: whole number of seconds).
    park_after_seconds: int = DEFAULT_PARK_AFTER_SECONDS
    #: The controller's own namespace; set by the process, not the ConfigMap (D24).
    system_namespace: str = DEFAULT_SYSTEM_NAMESPACE


#: ConfigMap key → Settings attribute.
KEYS: dict[str, str] = {
    "model-deployment-kv-cache-dtype-owned": "kv_cache_dtype_owned",
    "model-deployment-routing-sidecar-image": "routing_sidecar_image",
    "instance-privileged-allowed": "privileged_allowed",
    "instance-host-path-volume-allowed": "host_path_volume_allowed",
    "native-sidecars": "native_sidecars",
    "model-deployment-park-after-seconds": "park_after_seconds",
}

_BOOL_WORDS = {"true": True, "false": False}


def settings_from_data(
    data: Mapping[str, object] | None, *, base: Settings | None = None
) -> tuple[Settings, ErrorList]:
    """Settings from a ConfigMap's ``data``; a bad value keeps its default and is reported.

    Unknown keys are reported too (a misspelt key silently doing nothing is worse).
    """
    settings = base or Settings()
    errs = ErrorList()
    types = {f.name: f.type for f in fields(Settings)}
    updates: dict[str, object] = {}
    path = FieldPath.root("data")
    for key, raw in sorted((data or {}).items()):
        attr = KEYS.get(key)
        if attr is None:
            errs.append(errors.not_supported(path.key(key), key, sorted(KEYS)))
            continue
        if not isinstance(raw, str):
            errs.append(errors.invalid(path.key(key), raw, "ConfigMap values are strings"))
            continue
        if types[attr] in ("bool", bool):
            value = _BOOL_WORDS.get(raw.strip().lower())
            if value is None:
                errs.append(errors.invalid(path.key(key), raw, 'must be "true" or "false"'))
                continue
            updates[attr] = value
        elif types[attr] in ("int", int):
            text = raw.strip()
            if not (text.isascii() and text.isdigit() and int(text) > 0):
                errs.append(errors.invalid(path.key(key), raw, "must be a positive whole number"))
                continue
            updates[attr] = int(text)
        else:
            if not raw.strip():
                errs.append(errors.required(path.key(key), "must not be empty"))
                continue
            updates[attr] = raw.strip()
    return replace(settings, **updates), errs  # type: ignore[arg-type]


def settings_of_config_map(
    config_map: Mapping[str, object] | None, *, system_namespace: str
) -> tuple[Settings, ErrorList]:
    """The Settings the controller works with in ``system_namespace``: the ``gpustack-settings``
    ConfigMap's ``data`` over the defaults (``None``, an absent or deleted ConfigMap, gives the
    defaults); a bad value keeps its default and is reported (:func:`settings_from_data`)."""
    data = config_map.get("data") if config_map is not None else None
    return settings_from_data(
        data if isinstance(data, Mapping) else None,
        base=Settings(system_namespace=system_namespace),
    )


def settings_to_data(settings: Settings) -> dict[str, str]:
    """The ConfigMap ``data`` that gives ``settings`` (the system namespace is not in it)."""
    out: dict[str, str] = {}
    for key, attr in KEYS.items():
        value = getattr(settings, attr)
        out[key] = ("true" if value else "false") if isinstance(value, bool) else str(value)
    return out
