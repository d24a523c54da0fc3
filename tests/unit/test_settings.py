"""Settings from the gpustack-settings ConfigMap."""

from __future__ import annotations

from gpustack_render.core.errors import ErrorType
from gpustack_render.core.settings import (
    Settings,
    settings_from_data,
    settings_of_config_map,
    settings_to_data,
)


def test_defaults_match_the_specification() -> None:
    s = Settings()
    assert s.kv_cache_dtype_owned is True
    assert s.routing_sidecar_image == "gpustack/mirrored-llm-d-router-disagg-sidecar:v0.10.0"
    assert s.privileged_allowed and s.host_path_volume_allowed and s.native_sidecars
    assert s.system_namespace == "gpustack-system"


def test_values_are_read_and_round_trip() -> None:
    data = {
        "model-deployment-kv-cache-dtype-owned": "false",
        "native-sidecars": "False",
        "model-deployment-routing-sidecar-image": "r/proxy:1",
    }
    s, errs = settings_from_data(data)
    assert not errs
    assert not s.kv_cache_dtype_owned and not s.native_sidecars
    assert s.routing_sidecar_image == "r/proxy:1"
    assert settings_from_data(settings_to_data(s))[0] == s


def test_bad_values_keep_defaults_and_are_reported() -> None:
    s, errs = settings_from_data({"native-sidecars": "maybe", "no-such-key": "1"})
    assert s.native_sidecars is True
    got = {(e.field, e.type) for e in errs}
    assert ("data[native-sidecars]", ErrorType.INVALID) in got
    assert ("data[no-such-key]", ErrorType.NOT_SUPPORTED) in got


def test_the_parking_window_is_a_positive_whole_number_of_seconds() -> None:
    assert Settings().park_after_seconds == 1800
    s, errs = settings_from_data({"model-deployment-park-after-seconds": " 20 "})
    assert not errs and s.park_after_seconds == 20
    assert settings_from_data(settings_to_data(s))[0] == s
    for bad in ("0", "-5", "1.5", "30m", ""):
        s, errs = settings_from_data({"model-deployment-park-after-seconds": bad})
        assert s.park_after_seconds == 1800
        assert [(e.field, e.type) for e in errs] == [
            ("data[model-deployment-park-after-seconds]", ErrorType.INVALID)
        ], bad


def test_a_config_map_is_read_over_the_defaults_of_its_system_namespace() -> None:
    cm = {"data": {"native-sidecars": "false", "instance-privileged-allowed": "maybe"}}
    s, errs = settings_of_config_map(cm, system_namespace="ops")
    assert s == Settings(native_sidecars=False, system_namespace="ops")
    assert [e.field for e in errs] == ["data[instance-privileged-allowed]"]
    assert settings_of_config_map(None, system_namespace="ops") == (
        Settings(system_namespace="ops"),
        [],
    )
    assert settings_of_config_map({"data": ["not", "a", "map"]}, system_namespace="ops")[0] == (
        Settings(system_namespace="ops")
    )


def test_the_router_settings() -> None:
    """D26 amended (docs/routers.md): each router's default image is its own pinned release,
    quantities are checked, an empty image is "no default"."""
    s = Settings()
    assert s.router_image("llm-d-router") == "ghcr.io/llm-d/llm-d-inference-scheduler:v0.7.1"
    assert s.router_image("vllm-router") == "vllm/vllm-router:v0.1.17"
    assert s.router_image("sglang-gateway") == "lmsysorg/sgl-model-gateway:v0.3.2"
    assert s.router_image("no-such-router") == ""
    assert s.router_proxy_image == "docker.io/envoyproxy/envoy:distroless-v1.33.2"
    assert (s.router_cpu, s.router_memory, s.inference_pool) == ("500m", "512Mi", False)
    s, errs = settings_from_data(
        {
            "model-deployment-router-image-sglang-gateway": "r/gateway:1",
            "model-deployment-router-image-vllm-router": "",
            "model-deployment-router-cpu": "2",
            "model-deployment-inference-pool": "true",
        }
    )
    assert not errs
    assert s.router_image("sglang-gateway") == "r/gateway:1" and s.router_image("vllm-router") == ""
    assert s.router_cpu == "2" and s.inference_pool
    bad, errs = settings_from_data(
        {"model-deployment-router-memory": "lots", "model-deployment-router-cpu": "0"}
    )
    assert (bad.router_memory, bad.router_cpu) == ("512Mi", "500m")
    assert {(e.field, e.type) for e in errs} == {
        ("data[model-deployment-router-memory]", ErrorType.INVALID),
        ("data[model-deployment-router-cpu]", ErrorType.INVALID),
    }
    # The proxy image has a default: empty is a mistake, not "none".
    _, errs = settings_from_data({"model-deployment-router-proxy-image": " "})
    assert [e.type for e in errs] == [ErrorType.REQUIRED]
