"""Weight delivery in a role's Pod (docs/weights.md, "Delivery"; D28).

:func:`gpustack_render.weights.delivery.weights_of` decides whether a deployment naming a
``ModelArtifact`` may get Pods at all and, when it may, which delivery brings the weights
(``PVC``, ``Engine``, ``Node`` or ``Image``). This module turns that plan into the pieces of one
role's Pod; ``pods.py`` places them:

- the model argument of the base command: the mount path for the mount deliveries, the hub
  repository followed by ``--revision <commit>`` for ``Engine`` (managed roles only);
- the environment of ``Engine`` delivery: the hub client's owned variables (placed after the
  other operator-owned entries) and the proxy Settings as defaults a role's own value replaces;
- the volumes and ``main``'s mounts: the read-only ``gpustack-model`` volume (claim, inline CSI
  or image) on every role, or the ``gpustack-model-cache`` emptyDir of ``Engine`` delivery;
- the ``ephemeral-storage`` limit raised by the cache's size (the request is not);
- the bound volume's required node affinity (claim delivery), outside the pod-spec-hash;
- the KV reuse identity written into a store client's configuration;
- the ``bindings.artifact`` input of the pod-spec-hash.

A take-over role (``roles[].command``) gets the mount and nothing else: its command line is its
own, so it gets no model argument, no hub environment and no download cache.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any, Final

from gpustack_render.api.modeldeployment import RoleSpec
from gpustack_render.core.errors import RenderError
from gpustack_render.core.quantity import QuantityError, format_binary, parse_quantity
from gpustack_render.core.vocabulary import Engine, EngineFamily
from gpustack_render.weights import nodes as node_stores
from gpustack_render.weights.delivery import (
    CACHE_PATH,
    CACHE_VOLUME,
    CSI_DRIVER,
    MODEL_PATH,
    MODEL_VOLUME,
    WeightsBlock,
    WeightsPlan,
)

#: The origin of a render refused because the weights cannot be delivered (docs/rules.md).
ORIGIN: Final = "render.weights"
#: The field a weights refusal names.
ARTIFACT_REF_FIELD: Final = "spec.model.artifactRef"

#: ``--revision <commit>``: pins the weights and the tokenizer of ``Engine`` delivery.
REVISION_FLAG: Final = "--revision"
#: The key of a hub Secret that holds the token.
TOKEN_KEY: Final = "token"

# The hub clients' variables (Engine delivery), in the order they are written.
HF_HOME_ENV: Final = "HF_HOME"
HF_ENDPOINT_ENV: Final = "HF_ENDPOINT"
HF_TOKEN_ENV: Final = "HF_TOKEN"
MODELSCOPE_CACHE_ENV: Final = "MODELSCOPE_CACHE"
MODELSCOPE_DOMAIN_ENV: Final = "MODELSCOPE_DOMAIN"
MODELSCOPE_API_TOKEN_ENV: Final = "MODELSCOPE_API_TOKEN"
VLLM_USE_MODELSCOPE_ENV: Final = "VLLM_USE_MODELSCOPE"
SGLANG_USE_MODELSCOPE_ENV: Final = "SGLANG_USE_MODELSCOPE"
#: The proxy Settings, written as defaults: a role's own entry of the same name wins.
HTTPS_PROXY_ENV: Final = "HTTPS_PROXY"
NO_PROXY_ENV: Final = "NO_PROXY"

#: ``sizeLimit`` headroom of the download cache: a tenth of the weights, at least this much.
CACHE_MIN_HEADROOM: Final = 1024**3
EPHEMERAL_STORAGE: Final = "ephemeral-storage"

#: The KV reuse identity's key in a store client's configuration, per engine family
#: (vLLM-Ascend's store connector takes none).
VLLM_CACHE_PREFIX_KEY: Final = "cache_prefix"
SGLANG_BACKEND_TAG_KEY: Final = "extra_backend_tag"


class WeightsBlockedError(RenderError):
    """The deployment's weights cannot be delivered: nothing is rendered.

    ``reason`` is the ``WeightsReady`` reason of the block (``ArtifactNotFound``,
    ``ClaimNotBound``...), ``block`` the block itself.
    """

    def __init__(self, deployment: str, block: WeightsBlock) -> None:
        super().__init__(
            f"ModelDeployment {deployment!r}: the weights of spec.model.artifactRef cannot be "
            f"delivered ({block.reason}): {block.message}",
            field=ARTIFACT_REF_FIELD,
            origin=ORIGIN,
        )
        self.reason = block.reason
        self.block = block


# --- names ---------------------------------------------------------------------------------


def owned_env_names(engine: Engine) -> tuple[str, ...]:
    """The variables a managed role of a deployment naming an artifact may not set, whatever
    the source (its own entry is dropped, as admission refuses it)."""
    return (
        HF_TOKEN_ENV,
        HF_ENDPOINT_ENV,
        HF_HOME_ENV,
        MODELSCOPE_API_TOKEN_ENV,
        MODELSCOPE_DOMAIN_ENV,
        MODELSCOPE_CACHE_ENV,
        _use_modelscope(engine),
    )


def _use_modelscope(engine: Engine) -> str:
    """The switch that sends the engine's loader to ModelScope."""
    if engine.family is EngineFamily.SGLANG:
        return SGLANG_USE_MODELSCOPE_ENV
    return VLLM_USE_MODELSCOPE_ENV


# --- the command line ------------------------------------------------------------------------


def model_argument(weights: WeightsPlan) -> tuple[str, list[str]]:
    """The value that replaces ``spec.model.name`` in a managed role's base command, and the
    arguments that follow the base command directly.

    ``Engine``: the hub repository, then ``--revision <commit>``; every other delivery: the
    mount path, nothing after it.
    """
    if weights.delivery != "Engine":
        return MODEL_PATH, []
    hub = weights.source.hub
    assert hub is not None  # Engine delivery is chosen for hub sources only
    revision = weights.revision
    return hub.repository, [REVISION_FLAG, revision] if revision else []


# --- the environment ------------------------------------------------------------------------


def _secret_env(name: str, secret: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": TOKEN_KEY}}}


def owned_env(weights: WeightsPlan, *, engine: Engine, managed: bool) -> list[dict[str, Any]]:
    """``Engine`` delivery's hub variables on a managed role, in the table's order; nothing
    for another delivery or a take-over role."""
    if weights.delivery != "Engine" or not managed:
        return []
    endpoint = weights.pod_settings()["endpoint"]
    secret = weights.secret_name
    env: list[dict[str, Any]] = []
    if weights.hub_kind == "huggingFace":
        env.append({"name": HF_HOME_ENV, "value": CACHE_PATH})
        env.append({"name": HF_ENDPOINT_ENV, "value": endpoint})
        if secret:
            env.append(_secret_env(HF_TOKEN_ENV, secret))
        return env
    env.append({"name": MODELSCOPE_CACHE_ENV, "value": CACHE_PATH})
    env.append({"name": MODELSCOPE_DOMAIN_ENV, "value": endpoint})
    if secret:
        env.append(_secret_env(MODELSCOPE_API_TOKEN_ENV, secret))
    env.append({"name": _use_modelscope(engine), "value": "true"})
    return env


def defaulted_env(weights: WeightsPlan, *, managed: bool) -> list[dict[str, Any]]:
    """``Engine`` delivery's proxy Settings, each only when not blank; the caller leaves out
    the ones the role's ``env`` declares (the role's own entry stands where it wrote it)."""
    if weights.delivery != "Engine" or not managed:
        return []
    pod = weights.pod_settings()
    env: list[dict[str, Any]] = []
    if pod.get("httpsProxy"):
        env.append({"name": HTTPS_PROXY_ENV, "value": pod["httpsProxy"]})
    if pod.get("noProxy"):
        env.append({"name": NO_PROXY_ENV, "value": pod["noProxy"]})
    return env


# --- volumes ---------------------------------------------------------------------------------


def cache_size_limit(size_bytes: int) -> int:
    """The download cache's ``sizeLimit``: the weights' size plus a tenth of it, at least
    1Gi more (``S + max(floor(S/10), 1Gi)``)."""
    return size_bytes + max(size_bytes // 10, CACHE_MIN_HEADROOM)


def quantity(amount: int) -> str:
    """Whole bytes as a canonical quantity, exact: the largest binary unit that divides it,
    else the bare number (``22Gi``, ``2073345950``)."""
    return format_binary(Fraction(amount))


def _cache_extra(weights: WeightsPlan, *, managed: bool) -> int | None:
    """The cache's ``sizeLimit`` in bytes (``Engine`` on a managed role with a known size)."""
    if weights.delivery != "Engine" or not managed or weights.size_bytes is None:
        return None
    return cache_size_limit(weights.size_bytes)


def model_volume(weights: WeightsPlan) -> dict[str, Any] | None:
    """The ``gpustack-model`` volume of a mount delivery; None for ``Engine``."""
    source = weights.source
    match weights.delivery:
        case "PVC":
            claim = source.persistent_volume_claim
            assert claim is not None
            return {
                "name": MODEL_VOLUME,
                "persistentVolumeClaim": {"claimName": claim.claim_name, "readOnly": True},
            }
        case "Image":
            image = source.image
            assert image is not None
            return {"name": MODEL_VOLUME, "image": {"reference": image.reference}}
        case "Node":
            artifact = weights.artifact
            csi: dict[str, Any] = {
                "driver": CSI_DRIVER,
                "readOnly": True,
                "volumeAttributes": {
                    "artifact": artifact.name,
                    "artifactUID": artifact.metadata.uid or "",
                    "manifestDigest": weights.manifest_digest or "",
                },
            }
            if weights.secret_name:
                csi["nodePublishSecretRef"] = {"name": weights.secret_name}
            return {"name": MODEL_VOLUME, "csi": csi}
        case _:
            return None


def volumes_and_mounts(
    weights: WeightsPlan, *, managed: bool
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The delivery's Pod volumes and ``main``'s mounts: the read-only model volume at the
    mount path (a claim's ``path`` as ``subPath`` when not empty), or on a managed role under
    ``Engine`` the download cache, read-write."""
    volume = model_volume(weights)
    if volume is not None:
        mount: dict[str, Any] = {"name": MODEL_VOLUME, "mountPath": MODEL_PATH, "readOnly": True}
        claim = weights.source.persistent_volume_claim
        if weights.delivery == "PVC" and claim is not None and claim.path:
            mount["subPath"] = claim.path
        return [volume], [mount]
    if weights.delivery != "Engine" or not managed:
        return [], []
    extra = _cache_extra(weights, managed=managed)
    empty: dict[str, Any] = {"sizeLimit": quantity(extra)} if extra is not None else {}
    return (
        [{"name": CACHE_VOLUME, "emptyDir": empty}],
        [{"name": CACHE_VOLUME, "mountPath": CACHE_PATH}],
    )


def raise_ephemeral_limit(
    resources: Mapping[str, Any], weights: WeightsPlan, *, managed: bool
) -> dict[str, Any]:
    """``main``'s resources with the ``ephemeral-storage`` limit raised by the download cache's
    ``sizeLimit`` (``Engine``, managed role); the request is left as it is, and a container
    without that limit gets none."""
    out = {
        key: dict(value) if isinstance(value, Mapping) else value
        for key, value in resources.items()
    }
    extra = _cache_extra(weights, managed=managed)
    limits = out.get("limits")
    if extra is None or not isinstance(limits, dict) or EPHEMERAL_STORAGE not in limits:
        return out
    try:
        current = parse_quantity(limits[EPHEMERAL_STORAGE])
    except QuantityError:
        return out
    if current.denominator != 1:
        return out
    limits[EPHEMERAL_STORAGE] = quantity(int(current) + extra)
    return out


# --- placement -------------------------------------------------------------------------------


def _term(*parts: Mapping[str, Any]) -> dict[str, Any]:
    term: dict[str, Any] = {}
    for key in ("matchExpressions", "matchFields"):
        items = [item for part in parts for item in part.get(key) or ()]
        if items:
            term[key] = items
    return term


def merge_required(existing: Mapping[str, Any] | None, added: Mapping[str, Any]) -> dict[str, Any]:
    """Two required node selectors that must both hold, as one: terms are alternatives, so
    each pair of terms (one of each) becomes one term holding both's expressions."""
    added_terms = list(added.get("nodeSelectorTerms") or ())
    if existing is None:
        return {"nodeSelectorTerms": [_term(t) for t in added_terms]}
    old_terms = list(existing.get("nodeSelectorTerms") or ())
    if not added_terms:
        return {"nodeSelectorTerms": [_term(t) for t in old_terms]}
    if not old_terms:
        return {"nodeSelectorTerms": [_term(t) for t in added_terms]}
    return {"nodeSelectorTerms": [_term(a, b) for a in old_terms for b in added_terms]}


def apply_node_affinity(spec: dict[str, Any], weights: WeightsPlan) -> None:
    """Add the bound volume's required node affinity to the Pod ``spec``'s (claim delivery),
    merged with any the Pod already carries."""
    required = weights.node_affinity
    if not required or not required.get("nodeSelectorTerms"):
        return
    affinity = spec.setdefault("affinity", {})
    node = affinity.setdefault("nodeAffinity", {})
    key = "requiredDuringSchedulingIgnoredDuringExecution"
    node[key] = merge_required(node.get(key), required)


def apply_node_preference(spec: dict[str, Any], weights: WeightsPlan) -> None:
    """Node delivery: prefer the nodes whose store holds the digest and has room (a preferred
    node-affinity term by node name, after any the Pod already carries). Never a hash input:
    which nodes hold the weights changes as they download, and the Pod is never replaced for
    it; a replacement created later reads the stores again."""
    if weights.delivery != "Node":
        return
    term = node_stores.node_preference(weights.holding_nodes)
    if term is None:
        return
    affinity = spec.setdefault("affinity", {})
    node = affinity.setdefault("nodeAffinity", {})
    preferred = node.setdefault("preferredDuringSchedulingIgnoredDuringExecution", [])
    preferred.append(term)


# --- KV reuse ------------------------------------------------------------------------------


def kv_reuse_config(weights: WeightsPlan, *, engine: Engine) -> dict[str, str] | None:
    """The identity entry a store client's configuration carries: vLLM's ``cache_prefix``,
    SGLang's ``extra_backend_tag``; None on vLLM-Ascend, whose store connector takes none."""
    if engine == Engine.VLLM_ASCEND:
        return None
    key = SGLANG_BACKEND_TAG_KEY if engine.family is EngineFamily.SGLANG else VLLM_CACHE_PREFIX_KEY
    return {key: weights.identity}


# --- the pod-spec-hash ------------------------------------------------------------------------


def artifact_hash_input(weights: WeightsPlan, role: RoleSpec) -> dict[str, Any]:
    """``bindings.artifact`` for one role (D28): the source as stored, the commit, the digest,
    the delivery, and the Setting values the renderer writes into this role's Pod (none on a
    take-over role; a proxy value the role's own ``env`` replaces is not written, so not an
    input)."""
    out = weights.hash_input()
    pod = out.pop("settings", None)
    if pod is None or not role.managed:
        return out
    own = {entry.name for entry in role.env or ()}
    kept = {
        key: value
        for key, value in pod.items()
        if not (key == "httpsProxy" and HTTPS_PROXY_ENV in own)
        and not (key == "noProxy" and NO_PROXY_ENV in own)
    }
    if kept:
        out["settings"] = kept
    return out
