"""Weight delivery (docs/weights.md, "Delivery"; D28): ``weights_of``'s blocks and plans, and
what the renderer writes for each delivery (``rendering/weights.py``).

The expected values come from the rules, not from the output: the cache ``sizeLimit`` is
``S + max(floor(S/10), 1Gi)`` (the two worked values of the rule: 999604126 → 2073345950,
20Gi → 22Gi), the identity is ``m-`` and 32 hex of the digest or of the SHA-256 of the UID.
"""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from property.strategies import (
    backend,
    binding,
    deployment,
    input_objects,
    instance_type,
    pool,
    role,
)

from gpustack_render.api.inputs import InputObject
from gpustack_render.api.storage import (
    CSIDriver,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
)
from gpustack_render.cli.documents import read_bundle
from gpustack_render.cli.yamlio import dump_yaml
from gpustack_render.core.errors import RenderError
from gpustack_render.core.settings import Settings
from gpustack_render.rendering.renderer import Rendering, render
from gpustack_render.rendering.weights import (
    cache_size_limit,
    merge_required,
    quantity,
    raise_ephemeral_limit,
)
from gpustack_render.schema.decoding import decode_deployment
from gpustack_render.schema.lookups import StaticLookups
from gpustack_render.weights.delivery import (
    ACCESS_MODE_CONFLICT,
    ANCHOR_NEEDS_NODE_DELIVERY,
    ARTIFACT_NOT_FOUND,
    ARTIFACT_NOT_RESOLVED,
    CLAIM_NOT_BOUND,
    FILTER_NEEDS_NODE_DELIVERY,
    NODE_DELIVERY_UNAVAILABLE,
    WeightsBlock,
    WeightsPlan,
    weights_of,
)

NS = "team-a"
UID = "5b0c2f7e-8a41-4d6b-9f3e-2c1d0a9b8e7f"
DIGEST = "sha256:669ed7b128b6ad1658d735326bd172a3a5d0c9f1e2b3c4d5e6f708192a3b4c5d"
COMMIT = "c1899de289a04d12100db370d81485cdf75e47ca"
GI = 1024**3
FIFTEEN_GI = 15 * GI  # the renderer's default ephemeral storage per Pod (D21)

# --- builders --------------------------------------------------------------------------------


def hub_artifact(
    kind: str = "huggingFace",
    *,
    secret: str | None = None,
    size: int = 999604126,
    resolved: dict[str, Any] | None = None,
    digest: str = DIGEST,
    **spec: Any,
) -> dict[str, Any]:
    source: dict[str, Any] = {"repository": "Qwen/Qwen3-8B", "revision": "main"}
    if secret:
        source["secretRef"] = {"name": secret}
    cond = resolved or {"type": "Resolved", "status": "True", "reason": "Resolved"}
    return {
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "ModelArtifact",
        "metadata": {"name": "weights", "namespace": NS, "uid": UID},
        "spec": {"source": {kind: source}, **spec},
        "status": {
            "resolved": {
                "revision": COMMIT,
                "manifestDigest": digest,
                "digestSource": "Hub",
                "fileCount": 3,
                "sizeBytes": size,
            },
            "conditions": [cond],
        },
    }


def mount_artifact(source: dict[str, Any], *, uid: str = UID) -> dict[str, Any]:
    return {
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "ModelArtifact",
        "metadata": {"name": "weights", "namespace": NS, "uid": uid},
        "spec": {"source": source},
        "status": {
            "resolved": {"resolvedTime": "2026-11-30T10:00:00Z"},
            "conditions": [{"type": "Resolved", "status": "True", "reason": "Resolved"}],
        },
    }


def claim_artifact(path: str = "", *, uid: str = UID) -> dict[str, Any]:
    claim: dict[str, Any] = {"claimName": "weights-pvc"}
    if path:
        claim["path"] = path
    return mount_artifact({"persistentVolumeClaim": claim}, uid=uid)


IMAGE_REF = "registry.example.com/models/qwen@sha256:" + "ab" * 32


def image_artifact(uid: str = UID) -> dict[str, Any]:
    return mount_artifact({"image": {"reference": IMAGE_REF}}, uid=uid)


def claim(
    *,
    phase: str = "Bound",
    volume: str = "pv-a",
    modes: tuple[str, ...] = ("ReadOnlyMany",),
    storage_class: str | None = None,
) -> PersistentVolumeClaim:
    spec: dict[str, Any] = {"accessModes": list(modes)}
    if volume:
        spec["volumeName"] = volume
    if storage_class:
        spec["storageClassName"] = storage_class
    status: dict[str, Any] = {"phase": phase}
    if phase == "Bound":
        status["accessModes"] = list(modes)
    return PersistentVolumeClaim.model_validate(
        {"metadata": {"name": "weights-pvc", "namespace": NS}, "spec": spec, "status": status}
    )


def host_affinity(*hosts: str) -> dict[str, Any]:
    return {
        "nodeSelectorTerms": [
            {
                "matchExpressions": [
                    {"key": "kubernetes.io/hostname", "operator": "In", "values": list(hosts)}
                ]
            }
        ]
    }


def volume(affinity: dict[str, Any] | None = None) -> PersistentVolume:
    spec: dict[str, Any] = {"accessModes": ["ReadOnlyMany"]}
    if affinity is not None:
        spec["nodeAffinity"] = {"required": affinity}
    return PersistentVolume.model_validate({"metadata": {"name": "pv-a"}, "spec": spec})


def storage_class(mode: str, provisioner: str = "nfs.csi.k8s.io") -> StorageClass:
    return StorageClass.model_validate(
        {"metadata": {"name": "cls"}, "provisioner": provisioner, "volumeBindingMode": mode}
    )


CSI = CSIDriver.model_validate({"metadata": {"name": "model.csi.gpustack.ai"}})
NODE = Settings(artifact_delivery_mode="Node")


def md_data(
    roles: list[dict[str, Any]] | None = None, *, ref: str | None = "weights", **kw: Any
) -> dict[str, Any]:
    data = deployment(roles or [role(resources={"accelerator": 1})], model="qwen3", **kw)
    if ref is not None:
        data["spec"]["model"]["artifactRef"] = {"name": ref}
    return data


def lookups(*objects: dict[str, Any] | InputObject) -> StaticLookups:
    plain = [o for o in objects if isinstance(o, dict)]
    typed = [o for o in objects if isinstance(o, InputObject)]
    return StaticLookups.of([*input_objects(plain), *typed], default_namespace=NS)


def decoded(data: dict[str, Any]) -> Any:
    md, errs = decode_deployment(data)
    assert md is not None, errs
    return md


def plan_of(
    data: dict[str, Any], *objects: Any, settings: Settings | None = None
) -> WeightsPlan | WeightsBlock | None:
    return weights_of(decoded(data), lookups=lookups(*objects), settings=settings or Settings())


def render_of(data: dict[str, Any], *objects: Any, settings: Settings | None = None) -> Rendering:
    return render(
        decoded(data),
        lookups=lookups(instance_type(), *objects),
        settings=settings or Settings(),
    )


def main(rendering: Rendering, role_index: int = 0) -> dict[str, Any]:
    pod = rendering.roles[role_index].seats[0].pod
    return next(c for c in pod["spec"]["containers"] if c["name"] == "main")


def hashes(rendering: Rendering) -> list[str]:
    return [seat.pod_spec_hash for seat in rendering.iter_seats()]


def env_names(container: dict[str, Any]) -> list[str]:
    return [e["name"] for e in container.get("env", ())]


def env_value(container: dict[str, Any], name: str) -> Any:
    return next(e for e in container["env"] if e["name"] == name)


# --- weights_of: no artifact, blocks ------------------------------------------------------------


def test_no_artifact_ref_has_no_weights() -> None:
    assert plan_of(md_data(ref=None), hub_artifact()) is None


def test_a_missing_artifact_blocks_with_artifact_not_found() -> None:
    block = plan_of(md_data())
    assert isinstance(block, WeightsBlock)
    assert block.reason == ARTIFACT_NOT_FOUND
    assert "ModelArtifact team-a/weights" in block.message


def test_an_artifact_in_another_namespace_is_not_found() -> None:
    other = hub_artifact()
    other["metadata"]["namespace"] = "team-b"
    block = plan_of(md_data(), other)
    assert isinstance(block, WeightsBlock) and block.reason == ARTIFACT_NOT_FOUND


@pytest.mark.parametrize(
    ("condition", "carried"),
    [
        pytest.param(
            {
                "type": "Resolved",
                "status": "False",
                "reason": "AccessDenied",
                "message": "the repository does not exist or is not accessible",
            },
            "AccessDenied: the repository does not exist or is not accessible",
            id="refused",
        ),
        pytest.param(
            {"type": "Resolved", "status": "Unknown", "reason": "Resolving"},
            "Resolving",
            id="resolving",
        ),
        pytest.param({"type": "Degraded", "status": "False"}, "not resolved yet", id="no-verdict"),
    ],
)
def test_an_unresolved_artifact_blocks_with_its_reason(
    condition: dict[str, Any], carried: str
) -> None:
    block = plan_of(md_data(), hub_artifact(resolved=condition))
    assert isinstance(block, WeightsBlock)
    assert block.reason == ARTIFACT_NOT_RESOLVED
    assert carried in block.message


def test_a_missing_claim_is_not_resolved() -> None:
    block = plan_of(md_data(), claim_artifact())
    assert isinstance(block, WeightsBlock)
    assert block.reason == ARTIFACT_NOT_RESOLVED
    assert "PersistentVolumeClaim team-a/weights-pvc" in block.message


@pytest.mark.parametrize(
    "cls",
    [
        pytest.param(
            storage_class("WaitForFirstConsumer", "kubernetes.io/no-provisioner"), id="np"
        ),
        pytest.param(storage_class("Immediate"), id="immediate"),
        pytest.param(None, id="class-not-given"),
    ],
)
def test_a_pending_claim_nothing_binds_is_claim_not_bound(cls: StorageClass | None) -> None:
    pending = claim(phase="Pending", volume="", storage_class="cls")
    block = plan_of(md_data(), claim_artifact(), pending, *([cls] if cls else []))
    assert isinstance(block, WeightsBlock)
    assert block.reason == CLAIM_NOT_BOUND
    assert "spec.volumeName" in block.message


def test_a_pending_claim_bound_on_first_use_gets_pods_without_affinity() -> None:
    pending = claim(phase="Pending", volume="", storage_class="cls")
    plan = plan_of(md_data(), claim_artifact(), pending, storage_class("WaitForFirstConsumer"))
    assert isinstance(plan, WeightsPlan)
    assert plan.delivery == "PVC"
    assert plan.node_affinity is None


@pytest.mark.parametrize(
    ("modes", "replicas", "size", "blocked"),
    [
        pytest.param(("ReadWriteOnce",), 2, 1, True, id="rwo-two-replicas"),
        pytest.param(("ReadWriteOnce",), 1, 2, True, id="rwo-two-members"),
        pytest.param(("ReadWriteOncePod",), 2, 1, True, id="rwop-two"),
        pytest.param(("ReadWriteOnce",), 1, 1, False, id="rwo-one-pod"),
        pytest.param(("ReadOnlyMany",), 3, 1, False, id="rox"),
        pytest.param(("ReadWriteOnce", "ReadWriteMany"), 2, 2, False, id="rwx"),
    ],
)
def test_access_modes_against_the_pods_mounting_the_claim(
    modes: tuple[str, ...], replicas: int, size: int, blocked: bool
) -> None:
    data = md_data([role(replicas=replicas, size=size, resources={"accelerator": 1})])
    result = plan_of(data, claim_artifact(), claim(modes=modes), volume())
    if blocked:
        assert isinstance(result, WeightsBlock)
        assert result.reason == ACCESS_MODE_CONFLICT
        assert f"{replicas * size} Pods" in result.message
    else:
        assert isinstance(result, WeightsPlan)


def test_node_delivery_without_the_csi_driver_is_unavailable() -> None:
    block = plan_of(md_data(), hub_artifact(), settings=NODE)
    assert isinstance(block, WeightsBlock)
    assert block.reason == NODE_DELIVERY_UNAVAILABLE
    assert "model.csi.gpustack.ai" in block.message
    plan = plan_of(md_data(), hub_artifact(), CSI, settings=NODE)
    assert isinstance(plan, WeightsPlan) and plan.delivery == "Node"


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        pytest.param({"allowPatterns": ["*.safetensors"]}, FILTER_NEEDS_NODE_DELIVERY, id="allow"),
        pytest.param({"ignorePatterns": ["*.bin"]}, FILTER_NEEDS_NODE_DELIVERY, id="ignore"),
        pytest.param({"expectedDigest": DIGEST}, ANCHOR_NEEDS_NODE_DELIVERY, id="anchor"),
    ],
)
def test_patterns_and_anchor_need_node_delivery(spec: dict[str, Any], reason: str) -> None:
    block = plan_of(md_data(), hub_artifact(**spec))
    assert isinstance(block, WeightsBlock) and block.reason == reason
    assert "model-artifact-delivery-mode" in block.message
    assert isinstance(plan_of(md_data(), hub_artifact(**spec), CSI, settings=NODE), WeightsPlan)


def test_deliveries_follow_the_source_and_the_setting() -> None:
    def delivery(*objects: Any, settings: Settings | None = None) -> str:
        plan = plan_of(md_data(), *objects, settings=settings)
        assert isinstance(plan, WeightsPlan), plan
        return plan.delivery

    assert delivery(hub_artifact()) == "Engine"
    assert delivery(hub_artifact("modelScope")) == "Engine"
    assert delivery(hub_artifact(), CSI, settings=NODE) == "Node"
    # The Setting decides for hub sources only.
    assert delivery(claim_artifact(), claim(), volume(), settings=NODE) == "PVC"
    assert delivery(image_artifact(), settings=NODE) == "Image"


# --- the render refusal ---------------------------------------------------------------------


def test_a_block_is_a_render_error_naming_the_field_origin_and_reason() -> None:
    with pytest.raises(RenderError) as caught:
        render_of(md_data())
    exc = caught.value
    assert exc.field == "spec.model.artifactRef"
    assert exc.origin == "render.weights"
    assert getattr(exc, "reason", None) == ARTIFACT_NOT_FOUND
    assert "ArtifactNotFound" in str(exc) and "team-a/weights" in str(exc)


def test_an_unresolved_artifact_refusal_carries_the_artifacts_reason() -> None:
    cond = {"type": "Resolved", "status": "False", "reason": "SecretNotFound", "message": "x"}
    with pytest.raises(RenderError, match="SecretNotFound") as caught:
        render_of(md_data(), hub_artifact(resolved=cond))
    assert getattr(caught.value, "reason", None) == ARTIFACT_NOT_RESOLVED


# --- the cache and the ephemeral limit ------------------------------------------------------


@pytest.mark.parametrize(
    ("size", "limit", "written"),
    [
        pytest.param(999604126, 2073345950, "2073345950", id="below-10Gi-adds-1Gi"),
        pytest.param(20 * GI, 22 * GI, "22Gi", id="20Gi"),
        pytest.param(100 * GI, 110 * GI, "110Gi", id="a-tenth-above-1Gi"),
        pytest.param(0, GI, "1Gi", id="empty"),
    ],
)
def test_cache_size_limit(size: int, limit: int, written: str) -> None:
    assert cache_size_limit(size) == limit
    assert quantity(limit) == written


def test_engine_cache_volume_and_raised_ephemeral_limit() -> None:
    rendering = render_of(md_data(), hub_artifact(size=20 * GI))
    pod = rendering.roles[0].seats[0].pod
    container = main(rendering)
    cache = next(v for v in pod["spec"]["volumes"] if v["name"] == "gpustack-model-cache")
    assert cache == {"name": "gpustack-model-cache", "emptyDir": {"sizeLimit": "22Gi"}}
    assert {"name": "gpustack-model-cache", "mountPath": "/var/lib/gpustack/model-cache"} in (
        container["volumeMounts"]
    )
    resources = container["resources"]
    assert resources["limits"]["ephemeral-storage"] == quantity(FIFTEEN_GI + 22 * GI)
    assert resources["requests"]["ephemeral-storage"] == "15Gi"
    # Only ephemeral storage differs between request and limit.
    for key, value in resources["requests"].items():
        if key != "ephemeral-storage":
            assert resources["limits"][key] == value


def test_the_limit_is_raised_by_the_same_exact_amount() -> None:
    rendering = render_of(md_data(), hub_artifact(size=999604126))
    limit = main(rendering)["resources"]["limits"]["ephemeral-storage"]
    assert limit == str(FIFTEEN_GI + 2073345950)


def test_a_container_without_an_ephemeral_limit_gets_none() -> None:
    plan = plan_of(md_data(), hub_artifact())
    assert isinstance(plan, WeightsPlan)
    given = {"limits": {"cpu": "8"}, "requests": {"cpu": "8"}}
    assert raise_ephemeral_limit(given, plan, managed=True) == given
    assert raise_ephemeral_limit({}, plan, managed=True) == {}
    # A take-over role gets no cache, so no raise either.
    with_limit = {"limits": {"ephemeral-storage": "15Gi"}, "requests": {}}
    assert raise_ephemeral_limit(with_limit, plan, managed=False) == with_limit


def test_mount_deliveries_raise_nothing() -> None:
    for objects, settings in (
        ((image_artifact(),), None),
        ((claim_artifact(), claim(), volume()), None),
        ((hub_artifact(), CSI), NODE),
    ):
        container = main(render_of(md_data(), *objects, settings=settings))
        assert container["resources"]["limits"]["ephemeral-storage"] == "15Gi"
        assert not {"HF_HOME", "HF_ENDPOINT", "HTTPS_PROXY"} & set(env_names(container))


# --- the command line -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("engine", "image", "base"),
    [
        pytest.param("vLLM", "vllm/vllm-openai:v0.25.1", ["vllm", "serve"], id="vllm"),
        pytest.param(
            "SGLang",
            "lmsysorg/sglang:v0.5.18",
            ["python3", "-m", "sglang.launch_server", "--model-path"],
            id="sglang",
        ),
    ],
)
def test_model_argument_per_delivery(engine: str, image: str, base: list[str]) -> None:
    data = md_data(engine=engine, image=image)
    tail = ["--enable-metrics"] if engine == "SGLang" else []
    served = ["--served-model-name", "qwen3"]

    argv = main(render_of(data, hub_artifact()))["command"]
    assert argv[: len(base) + len(tail) + 3] == [
        *base,
        "Qwen/Qwen3-8B",
        *tail,
        "--revision",
        COMMIT,
    ]
    assert argv[len(base) + len(tail) + 3 : len(base) + len(tail) + 5] == served

    for objects, settings in (
        ((image_artifact(),), None),
        ((claim_artifact(), claim(), volume()), None),
        ((hub_artifact(), CSI), NODE),
    ):
        argv = main(render_of(data, *objects, settings=settings))["command"]
        assert argv[: len(base) + len(tail) + 1] == [*base, "/var/lib/gpustack/model", *tail]
        assert "--revision" not in argv
        assert argv[len(base) + len(tail) + 1 : len(base) + len(tail) + 3] == served


def test_a_role_naming_the_served_name_itself_keeps_it() -> None:
    data = md_data([role(resources={"accelerator": 1}, extraArgs=["--served-model-name", "qwen3"])])
    argv = main(render_of(data, image_artifact()))["command"]
    assert argv.count("--served-model-name") == 1
    assert argv[-2:] == ["--served-model-name", "qwen3"]


# --- the environment -------------------------------------------------------------------------


def test_engine_env_order_with_a_store_client() -> None:
    """Owned connector env, then the hub's owned entries, then the defaulted entries and the
    proxy defaults, then the role's own."""
    data = md_data(
        [role(resources={"accelerator": 1}, env=[{"name": "NCCL_DEBUG", "value": "WARN"}])],
        pool_ref="team-a-cache",
    )
    settings = Settings(artifact_https_proxy="http://proxy:3128", artifact_no_proxy="10.0.0.0/8")
    rendering = render_of(
        data, hub_artifact(secret="hf"), binding(), pool(), backend(), settings=settings
    )
    container = main(rendering)
    assert env_names(container) == [
        "MOONCAKE_CONFIG_PATH",
        "HF_HOME",
        "HF_ENDPOINT",
        "HF_TOKEN",
        "MC_TE_METRIC",
        "VLLM_CACHE_ROOT",
        "HTTPS_PROXY",
        "NO_PROXY",
        "NCCL_DEBUG",
    ]
    assert env_value(container, "HF_TOKEN") == {
        "name": "HF_TOKEN",
        "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}},
    }
    assert env_value(container, "HF_HOME")["value"] == "/var/lib/gpustack/model-cache"
    assert env_value(container, "HF_ENDPOINT")["value"] == "https://huggingface.co"


@pytest.mark.parametrize(
    ("engine", "image", "switch"),
    [
        pytest.param("vLLM", "vllm/vllm-openai:v0.25.1", "VLLM_USE_MODELSCOPE", id="vllm"),
        pytest.param("SGLang", "lmsysorg/sglang:v0.5.18", "SGLANG_USE_MODELSCOPE", id="sglang"),
    ],
)
def test_modelscope_env(engine: str, image: str, switch: str) -> None:
    settings = Settings(modelscope_endpoint="https://ms.example.com:8443/")
    data = md_data(engine=engine, image=image)
    container = main(render_of(data, hub_artifact("modelScope", secret="ms"), settings=settings))
    hub = [e for e in container["env"] if e["name"].startswith(("MODELSCOPE", switch))]
    assert hub == [
        {"name": "MODELSCOPE_CACHE", "value": "/var/lib/gpustack/model-cache"},
        {"name": "MODELSCOPE_DOMAIN", "value": "ms.example.com:8443"},
        {
            "name": "MODELSCOPE_API_TOKEN",
            "valueFrom": {"secretKeyRef": {"name": "ms", "key": "token"}},
        },
        {"name": switch, "value": "true"},
    ]
    assert not [n for n in env_names(container) if n.startswith("HF_")]


def test_no_token_without_a_secret_and_no_proxy_when_blank() -> None:
    container = main(render_of(md_data(), hub_artifact()))
    names = env_names(container)
    assert "HF_TOKEN" not in names
    assert not {"HTTPS_PROXY", "NO_PROXY"} & set(names)


def test_a_roles_own_proxy_value_replaces_the_setting() -> None:
    settings = Settings(artifact_https_proxy="http://proxy:3128", artifact_no_proxy="10.0.0.0/8")
    own = [{"name": "HTTPS_PROXY", "value": "http://mine:8080"}]
    data = md_data([role(resources={"accelerator": 1}, env=own)])
    container = main(render_of(data, hub_artifact(), settings=settings))
    proxies = [e for e in container["env"] if e["name"] in ("HTTPS_PROXY", "NO_PROXY")]
    # The Setting's NO_PROXY in the defaulted place, the role's HTTPS_PROXY where its own
    # entries go (after the defaulted ones), once.
    assert proxies == [
        {"name": "NO_PROXY", "value": "10.0.0.0/8"},
        {"name": "HTTPS_PROXY", "value": "http://mine:8080"},
    ]


def test_an_owned_hub_variable_in_a_managed_roles_env_is_dropped() -> None:
    own = [{"name": "HF_TOKEN", "value": "leaked"}, {"name": "NCCL_DEBUG", "value": "WARN"}]
    data = md_data([role(resources={"accelerator": 1}, env=own)])
    container = main(render_of(data, image_artifact()))
    assert "HF_TOKEN" not in env_names(container)
    assert "NCCL_DEBUG" in env_names(container)


# --- volumes ---------------------------------------------------------------------------------


def _model_volume(rendering: Rendering, role_index: int = 0) -> dict[str, Any]:
    pod = rendering.roles[role_index].seats[0].pod
    return next(v for v in pod["spec"]["volumes"] if v["name"] == "gpustack-model")


def _model_mount(rendering: Rendering, role_index: int = 0) -> dict[str, Any]:
    return next(
        m for m in main(rendering, role_index)["volumeMounts"] if m["name"] == "gpustack-model"
    )


def test_claim_volume_and_sub_path_only_when_the_path_is_set() -> None:
    rendering = render_of(md_data(), claim_artifact(), claim(), volume())
    assert _model_volume(rendering) == {
        "name": "gpustack-model",
        "persistentVolumeClaim": {"claimName": "weights-pvc", "readOnly": True},
    }
    assert _model_mount(rendering) == {
        "name": "gpustack-model",
        "mountPath": "/var/lib/gpustack/model",
        "readOnly": True,
    }
    rendering = render_of(md_data(), claim_artifact("models/qwen"), claim(), volume())
    assert _model_mount(rendering)["subPath"] == "models/qwen"


def test_image_volume_has_the_reference_and_no_pull_policy() -> None:
    rendering = render_of(md_data(), image_artifact())
    assert _model_volume(rendering) == {"name": "gpustack-model", "image": {"reference": IMAGE_REF}}
    assert _model_mount(rendering)["readOnly"] is True


@pytest.mark.parametrize("secret", [None, "hf"])
def test_node_volume_is_an_inline_csi_volume(secret: str | None) -> None:
    rendering = render_of(md_data(), hub_artifact(secret=secret), CSI, settings=NODE)
    expected: dict[str, Any] = {
        "driver": "model.csi.gpustack.ai",
        "readOnly": True,
        "volumeAttributes": {"artifact": "weights", "artifactUID": UID, "manifestDigest": DIGEST},
    }
    if secret:
        expected["nodePublishSecretRef"] = {"name": secret}
    assert _model_volume(rendering) == {"name": "gpustack-model", "csi": expected}
    names = {v["name"] for v in rendering.roles[0].seats[0].pod["spec"]["volumes"]}
    assert "gpustack-model-cache" not in names


# --- take-over roles ---------------------------------------------------------------------------

TAKE_OVER = role(
    "custom", resources={"accelerator": 1}, command=["python3", "-m", "srv", "--port", "8000"]
)


def test_a_take_over_role_gets_the_mount_only() -> None:
    data = md_data([TAKE_OVER])
    rendering = render_of(data, image_artifact())
    container = main(rendering)
    assert container["command"] == ["python3", "-m", "srv", "--port", "8000"]
    assert _model_mount(rendering)["mountPath"] == "/var/lib/gpustack/model"


def test_a_take_over_role_gets_nothing_from_engine_delivery() -> None:
    data = md_data([role(resources={"accelerator": 1}), TAKE_OVER])
    rendering = render_of(data, hub_artifact(secret="hf"))
    custom = main(rendering, 1)
    assert custom["command"] == ["python3", "-m", "srv", "--port", "8000"]
    assert not [n for n in env_names(custom) if n.startswith("HF_")]
    assert custom["resources"]["limits"]["ephemeral-storage"] == "15Gi"
    volumes = {v["name"] for v in rendering.roles[1].seats[0].pod["spec"]["volumes"]}
    assert not {"gpustack-model", "gpustack-model-cache"} & volumes
    # ... while the managed role beside it gets everything.
    assert "HF_TOKEN" in env_names(main(rendering, 0))


# --- node affinity -------------------------------------------------------------------------------


def test_the_bound_volumes_affinity_becomes_the_pods_and_is_no_hash_input() -> None:
    a = render_of(md_data(), claim_artifact(), claim(), volume(host_affinity("node-a")))
    b = render_of(md_data(), claim_artifact(), claim(), volume(host_affinity("node-b")))
    none = render_of(md_data(), claim_artifact(), claim(), volume())
    key = "requiredDuringSchedulingIgnoredDuringExecution"
    pod = a.roles[0].seats[0].pod
    assert pod["spec"]["affinity"]["nodeAffinity"][key] == host_affinity("node-a")
    assert "affinity" not in none.roles[0].seats[0].pod["spec"]
    assert hashes(a) == hashes(b) == hashes(none)


def test_merge_required_ands_two_selectors() -> None:
    zone = {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]},
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n9"]}]},
        ]
    }
    host = host_affinity("node-a")
    merged = merge_required(zone, host)
    host_expr = host["nodeSelectorTerms"][0]["matchExpressions"][0]
    assert merged == {
        "nodeSelectorTerms": [
            {
                "matchExpressions": [
                    {"key": "zone", "operator": "In", "values": ["z1"]},
                    host_expr,
                ]
            },
            {
                "matchExpressions": [host_expr],
                "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n9"]}],
            },
        ]
    }
    assert merge_required(None, host) == host
    assert merge_required({"nodeSelectorTerms": []}, host) == host


# --- the pod-spec-hash -------------------------------------------------------------------------


def test_without_an_artifact_the_hash_input_has_no_artifact_key() -> None:
    rendering = render_of(md_data(ref=None))
    assert "artifact" not in rendering.roles[0].hash_input["bindings"]
    with_artifact = render_of(md_data(), image_artifact())
    assert with_artifact.roles[0].hash_input["bindings"]["artifact"] == {
        "source": {"image": {"reference": IMAGE_REF}},
        "revision": None,
        "manifestDigest": None,
        "delivery": "Image",
    }


def test_settings_do_not_move_a_deployment_without_an_artifact() -> None:
    data = md_data(ref=None)
    base = hashes(render_of(data))
    for settings in (
        NODE,
        Settings(huggingface_endpoint="https://hf.example.com"),
        Settings(artifact_https_proxy="http://proxy:3128"),
    ):
        assert hashes(render_of(data, settings=settings)) == base


def test_a_delivery_mode_change_rolls_hub_artifacts_only() -> None:
    hub = (hub_artifact(), CSI)
    engine, node = render_of(md_data(), *hub), render_of(md_data(), *hub, settings=NODE)
    assert set(hashes(engine)).isdisjoint(hashes(node))
    for objects in ((image_artifact(),), (claim_artifact(), claim(), volume())):
        assert hashes(render_of(md_data(), *objects)) == hashes(
            render_of(md_data(), *objects, settings=NODE)
        )


def test_an_endpoint_change_rolls_engine_deliveries_of_that_hub_only() -> None:
    moved = Settings(huggingface_endpoint="https://hf.example.com")
    hf = render_of(md_data(), hub_artifact())
    assert set(hashes(hf)).isdisjoint(hashes(render_of(md_data(), hub_artifact(), settings=moved)))
    ms = render_of(md_data(), hub_artifact("modelScope"))
    assert hashes(ms) == hashes(render_of(md_data(), hub_artifact("modelScope"), settings=moved))
    node = Settings(artifact_delivery_mode="Node", huggingface_endpoint="https://hf.example.com")
    assert hashes(render_of(md_data(), hub_artifact(), CSI, settings=NODE)) == hashes(
        render_of(md_data(), hub_artifact(), CSI, settings=node)
    )


def test_a_proxy_change_skips_roles_that_replace_it_and_take_over_roles() -> None:
    before = Settings(artifact_https_proxy="http://a:3128")
    after = Settings(artifact_https_proxy="http://b:3128")
    own = role(
        "mine", resources={"accelerator": 1}, env=[{"name": "HTTPS_PROXY", "value": "http://x"}]
    )
    data = md_data([role(resources={"accelerator": 1}), own, TAKE_OVER])
    one, two = (
        render_of(data, hub_artifact(), settings=before),
        render_of(data, hub_artifact(), settings=after),
    )
    assert one.roles[0].seats[0].pod_spec_hash != two.roles[0].seats[0].pod_spec_hash
    assert one.roles[1].seats[0].pod_spec_hash == two.roles[1].seats[0].pod_spec_hash
    assert one.roles[2].seats[0].pod_spec_hash == two.roles[2].seats[0].pod_spec_hash


def test_another_commit_or_source_rolls() -> None:
    base = hashes(render_of(md_data(), hub_artifact()))
    other = hub_artifact()
    other["status"]["resolved"]["revision"] = "f" * 40
    assert set(base).isdisjoint(hashes(render_of(md_data(), other)))
    assert set(base).isdisjoint(hashes(render_of(md_data(), hub_artifact("modelScope"))))


# --- KV reuse identity ------------------------------------------------------------------------


def test_identity_of_a_hub_source_is_its_digest() -> None:
    plan = plan_of(md_data(), hub_artifact())
    assert isinstance(plan, WeightsPlan)
    assert plan.identity == "m-669ed7b128b6ad1658d735326bd172a3"


def test_identity_of_a_claim_or_image_is_its_uid() -> None:
    expected = "m-" + hashlib.sha256(UID.encode()).hexdigest()[:32]
    image = plan_of(md_data(), image_artifact())
    claimed = plan_of(md_data(), claim_artifact(), claim(), volume())
    assert isinstance(image, WeightsPlan) and isinstance(claimed, WeightsPlan)
    assert image.identity == claimed.identity == expected
    # Another artifact on the same claim is another identity.
    other = plan_of(md_data(), claim_artifact(uid="another-uid"), claim(), volume())
    assert isinstance(other, WeightsPlan) and other.identity != expected


def _pooled(engine: str = "vLLM", image: str = "vllm/vllm-openai:v0.25.1") -> dict[str, Any]:
    return md_data(pool_ref="team-a-cache", engine=engine, image=image)


POOL = (binding(), pool(), backend())


def test_vllm_store_document_carries_the_cache_prefix() -> None:
    argv = main(render_of(_pooled(), hub_artifact(), *POOL))["command"]
    doc = argv[argv.index("--kv-transfer-config") + 1]
    assert doc == (
        '{"kv_connector":"MooncakeStoreConnector","kv_role":"kv_both",'
        '"kv_connector_extra_config":{"cache_prefix":"m-669ed7b128b6ad1658d735326bd172a3"}}'
    )
    # Without an artifact the document is unchanged.
    argv = main(render_of(md_data(ref=None, pool_ref="team-a-cache"), *POOL))["command"]
    assert argv[argv.index("--kv-transfer-config") + 1] == (
        '{"kv_connector":"MooncakeStoreConnector","kv_role":"kv_both"}'
    )


def test_sglang_store_carries_the_backend_tag() -> None:
    data = _pooled("SGLang", "lmsysorg/sglang:v0.5.18")
    argv = main(render_of(data, image_artifact(), *POOL))["command"]
    at = argv.index("--hicache-storage-backend")
    expected = "m-" + hashlib.sha256(UID.encode()).hexdigest()[:32]
    assert argv[at : at + 4] == [
        "--hicache-storage-backend",
        "mooncake",
        "--hicache-storage-backend-extra-config",
        '{"extra_backend_tag":"' + expected + '"}',
    ]


def test_no_identity_without_a_store_client() -> None:
    argv = main(
        render_of(md_data(engine="SGLang", image="lmsysorg/sglang:v0.5.18"), image_artifact())
    )["command"]
    assert "--hicache-storage-backend-extra-config" not in argv
    assert "--kv-transfer-config" not in main(render_of(md_data(), image_artifact()))["command"]


# --- the command line reads the storage kinds -------------------------------------------------


def test_input_files_carry_the_storage_kinds() -> None:
    docs = [
        md_data(namespace=None),
        claim_artifact() | {"metadata": {"name": "weights", "uid": UID}},
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "weights-pvc"},
            "spec": {"accessModes": ["ReadOnlyMany"], "volumeName": "pv-a"},
            "status": {"phase": "Bound", "accessModes": ["ReadOnlyMany"]},
        },
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": "pv-a"},
            "spec": {"nodeAffinity": {"required": host_affinity("node-a")}},
        },
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": "cls"},
            "provisioner": "x",
        },
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "CSIDriver",
            "metadata": {"name": "model.csi.gpustack.ai"},
        },
    ]
    bundle = read_bundle([("in.yaml", dump_yaml(docs))], namespace=NS)
    assert bundle.skipped == []
    kinds = sorted(type(o).__name__ for o in bundle.inputs)
    assert kinds == [
        "CSIDriver",
        "ModelArtifact",
        "PersistentVolume",
        "PersistentVolumeClaim",
        "StorageClass",
    ]
    found = bundle.lookups(default_namespace=NS)
    assert found.get(PersistentVolumeClaim, NS, "weights-pvc") is not None
    assert found.get(PersistentVolume, "", "pv-a") is not None
    assert found.get(CSIDriver, "", "model.csi.gpustack.ai") is not None
    md = decoded(bundle.deployments[0])
    plan = weights_of(md, lookups=found, settings=Settings())
    assert isinstance(plan, WeightsPlan)
    assert plan.node_affinity == host_affinity("node-a")
