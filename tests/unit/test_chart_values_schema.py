"""charts/gpustack-render/values.schema.json: the defaults pass, and a misspelt or mistyped value
is refused with its path, before anything renders (Helm checks it on install, upgrade, template
and lint; tests/integration/test_chart.py runs the real helm on it).

The Settings keys it allows are exactly the ones the library reads.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft7Validator

from gpustack_render.core.settings import KEYS

CHART = Path(__file__).resolve().parents[2] / "charts" / "gpustack-render"
SCHEMA = json.loads((CHART / "values.schema.json").read_text())
DEFAULTS: dict[str, Any] = yaml.safe_load((CHART / "values.yaml").read_text())


def _errors(values: dict[str, Any]) -> list[tuple[str, str]]:
    validator = Draft7Validator(SCHEMA)
    errors = validator.iter_errors(values)
    return [("/" + "/".join(map(str, e.absolute_path)), e.message) for e in errors]


def _with(path: str, value: Any) -> dict[str, Any]:
    values = copy.deepcopy(DEFAULTS)
    *parents, last = path.split(".")
    node = values
    for key in parents:
        node = node[key]
    node[last] = value
    return values


def test_the_schema_is_a_valid_draft_7_schema() -> None:
    Draft7Validator.check_schema(SCHEMA)


def test_the_defaults_pass() -> None:
    assert _errors(DEFAULTS) == []


def test_the_settings_keys_are_the_ones_the_library_reads() -> None:
    assert set(SCHEMA["properties"]["settings"]["properties"]) == set(KEYS)
    assert set(DEFAULTS["settings"]) == set(KEYS)


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("controller.workers", 1),
        ("controller.replicas", 0),
        ("webhook.minAvailable", "50%"),
        ("image.tag", "v1.2.3"),
        ("settings.native-sidecars", False),  # `--set` gives a boolean
        ("settings.native-sidecars", "False"),
        ("settings.model-deployment-park-after-seconds", 600),  # `--set` gives a number
        ("certificates.selfManaged.certLifetime", "30d"),
        ("certificates.selfManaged.renewBefore", "0.5h"),
        ("certificates.selfManaged.caLifetime", 86400),
        ("certificates.existingSecret.caBundle", "Q0EK"),
        ("certificates.certManager.duration", "1h30m"),
        ("metrics.serviceMonitor.interval", "1m30s"),
        ("controller.resources", {"requests": {"cpu": 1, "memory": "1Gi"}}),
        ("webhook.tolerations", [{"key": "a", "operator": "Exists", "effect": "NoSchedule"}]),
        ("imagePullSecrets", [{"name": "regcred"}]),
    ],
)
def test_documented_values_pass(path: str, value: Any) -> None:
    assert _errors(_with(path, value)) == []


@pytest.mark.parametrize(
    ("path", "value", "where"),
    [
        ("controller.replica", 3, "/controller"),  # misspelt: never silently ignored
        ("webhook.nodeselector", {"a": "b"}, "/webhook"),
        ("settings.native-sidecar", "false", "/settings"),
        ("metrics.serviceMonitor.enable", True, "/metrics/serviceMonitor"),
        ("controller.replicas", "two", ""),
        ("controller.workers", 0, ""),
        ("webhook.replicas", -1, ""),
        ("webhook.minAvailable", "half", ""),
        ("webhook.connectionLimits.maxConnections", 0, ""),
        ("webhook.connectionLimits.headerTimeout", 0, ""),
        ("image.tag", 1.10, ""),  # YAML reads 1.10 as 1.1
        ("image.pullPolicy", "always", ""),
        ("imagePullSecrets", ["regcred"], "/imagePullSecrets/0"),
        ("settings.native-sidecars", "no", ""),
        ("settings.model-deployment-park-after-seconds", 0, ""),
        ("settings.model-deployment-routing-sidecar-image", " ", ""),
        ("certificates.secretName", "My_TLS", ""),
        ("certificates.selfManaged.certLifetime", "0d", ""),
        ("certificates.selfManaged.renewBefore", "a week", ""),
        ("certificates.existingSecret.caBundle", "-----BEGIN CERTIFICATE-----", ""),
        ("certificates.certManager.duration", "90d", ""),
        ("metrics.serviceMonitor.interval", "30", ""),
        ("controller.tolerations", [{"operater": "Exists"}], "/controller/tolerations/0"),
        ("controller.affinity", {"nodeaffinity": {}}, ""),
        ("controller.resources", {"request": {"cpu": "1"}}, ""),
        ("rbac.aggregateToDefaultRoles", "yes", ""),
    ],
)  # fmt: skip
def test_a_wrong_value_is_refused_at_its_path(path: str, value: Any, where: str) -> None:
    errors = _errors(_with(path, value))
    # "" stands for the value's own path.
    assert [w for w, _ in errors] == [where or "/" + path.replace(".", "/")], errors
