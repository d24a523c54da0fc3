"""The controller reads the ``gpustack-settings`` ConfigMap with the library's policy
(``settings_of_config_map``): its data over the defaults of the process's system namespace, a bad
value keeping its default, and the defaults back when the ConfigMap is deleted."""

from __future__ import annotations

from typing import Any

from controller_support import MemoryKube

from gpustack_controller.controller import Controller, Options
from gpustack_render.core.settings import CONFIGMAP_NAME, Settings


def _config_map(**data: str) -> dict[str, Any]:
    return {"metadata": {"name": CONFIGMAP_NAME, "namespace": "ops"}, "data": data}


def test_the_settings_follow_the_config_map_and_fall_back_to_the_defaults() -> None:
    controller = Controller(MemoryKube(), Options(system_namespace="ops"))  # type: ignore[arg-type]
    changed = _config_map(**{"native-sidecars": "false", "instance-privileged-allowed": "maybe"})
    controller._on_settings("ADDED", changed, None)
    assert controller.settings == Settings(native_sidecars=False, system_namespace="ops")
    controller._on_settings("DELETED", changed, None)
    assert controller.settings == Settings(system_namespace="ops")


def test_another_config_map_is_not_read() -> None:
    controller = Controller(MemoryKube(), Options(system_namespace="ops"))  # type: ignore[arg-type]
    other = {"metadata": {"name": "other"}, "data": {"native-sidecars": "false"}}
    controller._on_settings("ADDED", other, None)
    assert controller.settings == Settings(system_namespace="ops")
