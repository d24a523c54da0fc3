"""Settings: one value object with documented defaults (D11), read from ``gpustack-settings``.

The library receives Settings as an argument; it never reads the environment.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace

from gpustack_render.core import errors
from gpustack_render.core.errors import ErrorList
from gpustack_render.core.paths import FieldPath
from gpustack_render.core.quantity import QuantityError, parse_quantity

CONFIGMAP_NAME = "gpustack-settings"
DEFAULT_SYSTEM_NAMESPACE = "gpustack-system"
DEFAULT_ROUTING_SIDECAR_IMAGE = "gpustack/mirrored-llm-d-router-disagg-sidecar:v0.10.0"
#: The HTTP proxy in front of llm-d-router's endpoint picker: the Envoy image the Gateway API
#: Inference Extension v1.4.0 runs beside its picker in standalone mode (its
#: ``config/charts/standalone/values.yaml``, the module hack/envtest fetches).
DEFAULT_ROUTER_PROXY_IMAGE = "docker.io/envoyproxy/envoy:distroless-v1.33.2"
#: Each router's default image (D26 amended): the release its project publishes for the version
#: this command line was written against and the tests run (docs/decisions.md, "Router images by
#: default", says where each was read). ``spec.router.image`` wins; an administrator may set
#: another image, or empty the Setting (the router is then not rendered, the engines are).
DEFAULT_ROUTER_IMAGE_LLM_D_ROUTER = "ghcr.io/llm-d/llm-d-inference-scheduler:v0.7.1"
DEFAULT_ROUTER_IMAGE_VLLM_ROUTER = "vllm/vllm-router:v0.1.17"
DEFAULT_ROUTER_IMAGE_SGLANG_GATEWAY = "lmsysorg/sgl-model-gateway:v0.3.2"
#: Requests and limits of each container of a router Pod (D26).
DEFAULT_ROUTER_CPU = "500m"
DEFAULT_ROUTER_MEMORY = "512Mi"
#: How long a multi-role deployment may wait on the joint admission check, with quota reserved,
#: before it is parked (docs/contract/controller.md §9).
DEFAULT_PARK_AFTER_SECONDS = 30 * 60
#: The public hubs (``model-artifact-*-endpoint``, D28).
DEFAULT_HUGGINGFACE_ENDPOINT = "https://huggingface.co"
DEFAULT_MODELSCOPE_ENDPOINT = "https://www.modelscope.cn"
#: ``model-artifact-revalidate-interval``: the default, and the floor below which it applies.
DEFAULT_REVALIDATE_INTERVAL_SECONDS = 24 * 3600
MIN_REVALIDATE_INTERVAL_SECONDS = 60
#: ``model-artifact-delivery-mode``: how hub weights reach a Pod.
DELIVERY_MODES = ("Engine", "Node")
#: The node model store (D28: Settings, the same on every node; docs/node-store.md): collection
#: starts above the high watermark and goes down to the low one (whole percent of the store's
#: filesystem); at most this many files of one tree download at once.
DEFAULT_STORE_HIGH_WATERMARK_PERCENT = 80
DEFAULT_STORE_LOW_WATERMARK_PERCENT = 70
DEFAULT_STORE_DOWNLOAD_CONCURRENCY = 8
#: Every node store Setting is a whole number in this range.
STORE_SETTING_RANGE = (1, 100)


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
    #: ``model-deployment-router-image-llm-d-router``: the endpoint picker's image when
    #: ``spec.router.image`` is unset. Empty: no default; a deployment naming no image is still
    #: admitted (with a warning) and its engines run, but its router is not rendered.
    router_image_llm_d_router: str = DEFAULT_ROUTER_IMAGE_LLM_D_ROUTER
    #: ``model-deployment-router-image-vllm-router``: as above, for vllm-router.
    router_image_vllm_router: str = DEFAULT_ROUTER_IMAGE_VLLM_ROUTER
    #: ``model-deployment-router-image-sglang-gateway``: as above, for sglang-gateway.
    router_image_sglang_gateway: str = DEFAULT_ROUTER_IMAGE_SGLANG_GATEWAY
    #: ``model-deployment-router-proxy-image``: the HTTP proxy (Envoy) beside llm-d-router's
    #: endpoint picker.
    router_proxy_image: str = DEFAULT_ROUTER_PROXY_IMAGE
    #: ``model-deployment-router-tokenizer-image``: the tokenizer beside llm-d-router's endpoint
    #: picker; with it (and a KV-event publisher) the picker scores by the engines' KV events,
    #: without it by its own estimate of each endpoint's prefix cache.
    router_tokenizer_image: str = ""
    #: ``model-deployment-router-cpu`` / ``-memory``: requests and limits of each container of a
    #: router Pod (Kubernetes quantities).
    router_cpu: str = DEFAULT_ROUTER_CPU
    router_memory: str = DEFAULT_ROUTER_MEMORY
    #: ``model-deployment-inference-pool``: also render an InferencePool for a deployment behind
    #: llm-d-router, so a Gateway API Inference Extension gateway can front it.
    inference_pool: bool = False
    #: ``model-artifact-delivery-mode``: ``Engine`` (the engine downloads the pinned commit) or
    #: ``Node`` (the node plugin mounts a verified tree) for hub-sourced artifacts.
    artifact_delivery_mode: str = "Engine"
    #: ``model-artifact-huggingface-endpoint``: resolution and the Pods' ``HF_ENDPOINT``.
    huggingface_endpoint: str = DEFAULT_HUGGINGFACE_ENDPOINT
    #: ``model-artifact-modelscope-endpoint``: resolution; its host is ``MODELSCOPE_DOMAIN``.
    modelscope_endpoint: str = DEFAULT_MODELSCOPE_ENDPOINT
    #: ``model-artifact-https-proxy`` / ``-no-proxy``: given to resolution and, when not blank,
    #: to Engine-delivered Pods as ``HTTPS_PROXY`` / ``NO_PROXY`` defaults.
    artifact_https_proxy: str = ""
    artifact_no_proxy: str = ""
    #: ``model-artifact-ca-bundle``: a ConfigMap (key ``ca.crt``) trusted by resolution only.
    artifact_ca_bundle: str = ""
    #: ``model-artifact-revalidate-interval``: seconds between revalidations (``24h``; a value
    #: below ``1m`` is refused and keeps the default).
    artifact_revalidate_interval: int = DEFAULT_REVALIDATE_INTERVAL_SECONDS
    #: ``model-store-high-watermark-percent``: above this share of its filesystem a node's store
    #: collects unreferenced trees at once (``80``; 1..100, above the low watermark).
    store_high_watermark_percent: int = DEFAULT_STORE_HIGH_WATERMARK_PERCENT
    #: ``model-store-low-watermark-percent``: collection stops below this share (``70``).
    store_low_watermark_percent: int = DEFAULT_STORE_LOW_WATERMARK_PERCENT
    #: ``model-store-download-concurrency``: files of one tree fetched at once (``8``; 1..100).
    store_download_concurrency: int = DEFAULT_STORE_DOWNLOAD_CONCURRENCY
    #: The controller's own namespace; set by the process, not the ConfigMap (D24).
    system_namespace: str = DEFAULT_SYSTEM_NAMESPACE

    def router_image(self, router: str) -> str:
        """The Settings default image of ``router`` (``""``: none)."""
        attr = ROUTER_IMAGE_ATTRS.get(router)
        return str(getattr(self, attr)) if attr else ""


#: ConfigMap key → Settings attribute.
KEYS: dict[str, str] = {
    "model-deployment-kv-cache-dtype-owned": "kv_cache_dtype_owned",
    "model-deployment-routing-sidecar-image": "routing_sidecar_image",
    "instance-privileged-allowed": "privileged_allowed",
    "instance-host-path-volume-allowed": "host_path_volume_allowed",
    "native-sidecars": "native_sidecars",
    "model-deployment-park-after-seconds": "park_after_seconds",
    "model-deployment-router-image-llm-d-router": "router_image_llm_d_router",
    "model-deployment-router-image-vllm-router": "router_image_vllm_router",
    "model-deployment-router-image-sglang-gateway": "router_image_sglang_gateway",
    "model-deployment-router-proxy-image": "router_proxy_image",
    "model-deployment-router-tokenizer-image": "router_tokenizer_image",
    "model-deployment-router-cpu": "router_cpu",
    "model-deployment-router-memory": "router_memory",
    "model-deployment-inference-pool": "inference_pool",
    "model-artifact-delivery-mode": "artifact_delivery_mode",
    "model-artifact-huggingface-endpoint": "huggingface_endpoint",
    "model-artifact-modelscope-endpoint": "modelscope_endpoint",
    "model-artifact-https-proxy": "artifact_https_proxy",
    "model-artifact-no-proxy": "artifact_no_proxy",
    "model-artifact-ca-bundle": "artifact_ca_bundle",
    "model-artifact-revalidate-interval": "artifact_revalidate_interval",
    "model-store-high-watermark-percent": "store_high_watermark_percent",
    "model-store-low-watermark-percent": "store_low_watermark_percent",
    "model-store-download-concurrency": "store_download_concurrency",
}
#: Router name → the Settings attribute of its default image.
ROUTER_IMAGE_ATTRS: dict[str, str] = {
    "llm-d-router": "router_image_llm_d_router",
    "vllm-router": "router_image_vllm_router",
    "sglang-gateway": "router_image_sglang_gateway",
}
#: Settings attributes an empty value is meaningful for: no default image.
_MAY_BE_EMPTY = frozenset(
    {
        *ROUTER_IMAGE_ATTRS.values(),
        "router_tokenizer_image",
        "artifact_https_proxy",
        "artifact_no_proxy",
        "artifact_ca_bundle",
    }
)
#: Settings attributes whose value is an http(s) URL (proxies: without credentials).
_URLS = frozenset({"huggingface_endpoint", "modelscope_endpoint", "artifact_https_proxy"})
#: Settings attributes whose value is a duration (``90s``, ``10m``, ``24h``; stored in seconds).
_DURATIONS = {"artifact_revalidate_interval": MIN_REVALIDATE_INTERVAL_SECONDS}
#: Settings attributes that are whole numbers in :data:`STORE_SETTING_RANGE`.
_RANGED = frozenset(
    {"store_high_watermark_percent", "store_low_watermark_percent", "store_download_concurrency"}
)
#: Settings attributes limited to a set of words.
_CHOICES = {"artifact_delivery_mode": DELIVERY_MODES}
#: Settings attributes whose value is a Kubernetes quantity.
_QUANTITIES = frozenset({"router_cpu", "router_memory"})
#: The ConfigMap key of each router's default image, for messages.
ROUTER_IMAGE_KEYS: dict[str, str] = {
    router: next(k for k, a in KEYS.items() if a == attr)
    for router, attr in ROUTER_IMAGE_ATTRS.items()
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
        elif attr in _DURATIONS:
            seconds = parse_duration(raw.strip())
            if seconds is None or seconds < _DURATIONS[attr]:
                errs.append(
                    errors.invalid(
                        path.key(key),
                        raw,
                        f"must be a duration such as 30m or 24h, at least "
                        f"{_DURATIONS[attr]}s; the default applies",
                    )
                )
                continue
            updates[attr] = seconds
        elif types[attr] in ("int", int):
            number, problem = _whole_number(raw, STORE_SETTING_RANGE if attr in _RANGED else None)
            if problem:
                errs.append(errors.invalid(path.key(key), raw, problem))
                continue
            updates[attr] = number
        else:
            if not raw.strip() and attr not in _MAY_BE_EMPTY:
                errs.append(errors.required(path.key(key), "must not be empty"))
                continue
            if attr in _QUANTITIES and not _positive_quantity(raw.strip()):
                errs.append(
                    errors.invalid(path.key(key), raw, "must be a positive Kubernetes quantity")
                )
                continue
            if attr in _CHOICES and raw.strip() not in _CHOICES[attr]:
                errs.append(errors.not_supported(path.key(key), raw, list(_CHOICES[attr])))
                continue
            if attr in _URLS and raw.strip() and (problem := url_problem(raw.strip())):
                errs.append(errors.invalid(path.key(key), raw, problem))
                continue
            updates[attr] = raw.strip()
    result = replace(settings, **updates)  # type: ignore[arg-type]
    return _watermarks(result, settings, errs, path), errs


def _whole_number(raw: str, bounds: tuple[int, int] | None) -> tuple[int, str]:
    """The number ``raw`` spells and ``""``, or why it is not a positive whole number (within
    ``bounds``)."""
    text = raw.strip()
    number = int(text) if text.isascii() and text.isdigit() else 0
    if bounds is None:
        return number, "" if number > 0 else "must be a positive whole number"
    low, high = bounds
    if low <= number <= high:
        return number, ""
    return number, f"must be a whole number from {low} to {high}"


def _watermarks(result: Settings, settings: Settings, errs: ErrorList, path: FieldPath) -> Settings:
    """The store's low watermark must be below its high one; else both keep their previous
    values (the defaults if those clash too), and the low one's key is reported."""
    if result.store_low_watermark_percent >= result.store_high_watermark_percent:
        key = "model-store-low-watermark-percent"
        errs.append(
            errors.invalid(
                path.key(key),
                str(result.store_low_watermark_percent),
                f"must be below model-store-high-watermark-percent "
                f"({result.store_high_watermark_percent}); both watermarks keep their defaults",
            )
        )
        result = replace(
            result,
            store_high_watermark_percent=settings.store_high_watermark_percent,
            store_low_watermark_percent=settings.store_low_watermark_percent,
        )
        if result.store_low_watermark_percent >= result.store_high_watermark_percent:
            result = replace(
                result,
                store_high_watermark_percent=DEFAULT_STORE_HIGH_WATERMARK_PERCENT,
                store_low_watermark_percent=DEFAULT_STORE_LOW_WATERMARK_PERCENT,
            )
    return result


_DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")


def parse_duration(text: str) -> int | None:
    """Seconds of a Go-style duration made of hours, minutes and seconds (``1h30m``, ``90s``);
    ``None`` when it is not one."""
    match = _DURATION.match(text)
    if not text or match is None:
        return None
    hours, minutes, seconds = (int(g) if g else 0 for g in match.groups())
    return hours * 3600 + minutes * 60 + seconds


def format_duration(seconds: int) -> str:
    """The shortest ``XhYmZs`` spelling of ``seconds`` (``86400`` → ``24h``)."""
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    out = "".join(f"{v}{u}" for v, u in ((hours, "h"), (minutes, "m"), (secs, "s")) if v)
    return out or "0s"


def url_problem(text: str) -> str:
    """Why ``text`` is not an ``http``/``https`` URL without credentials (``""``: it is one)."""
    scheme, sep, rest = text.partition("://")
    if not sep or scheme not in ("http", "https"):
        return "must be an http:// or https:// URL"
    host = rest.split("/", 1)[0]
    if not host:
        return "must name a host"
    if "@" in host:
        return "must not carry credentials (user:password@); give them another way"
    return ""


def _positive_quantity(text: str) -> bool:
    try:
        return parse_quantity(text) > 0
    except QuantityError:
        return False


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
        if isinstance(value, bool):
            out[key] = "true" if value else "false"
        elif attr in _DURATIONS:
            out[key] = format_duration(int(value))
        else:
            out[key] = str(value)
    return out
