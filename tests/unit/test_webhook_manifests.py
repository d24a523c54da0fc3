"""deploy/webhook: the registrations say what the specification gives and match the server.

(The API server's own verdict on these manifests is tests/integration/test_webhook_deploy.py.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest
from ruamel.yaml import YAML

from gpustack_kube.client import Kube
from gpustack_webhook.__main__ import DEFAULT_MUTATING, DEFAULT_VALIDATING, parser
from gpustack_webhook.cache import WatchedSources
from gpustack_webhook.lookups import LiveSources
from gpustack_webhook.server import (
    PATH_MODELARTIFACT_MUTATE,
    PATH_MODELARTIFACT_VALIDATE,
    PATH_MODELDEPLOYMENT_MUTATE,
    PATH_MODELDEPLOYMENT_VALIDATE,
    PATH_POD_FREEZE,
    PATH_POD_INJECT,
    default_webhooks,
)

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "webhook"
INJECT_SELECTOR = {
    "matchExpressions": [
        {"key": "kvcache.gpustack.ai/inject", "operator": "In", "values": ["true"]}
    ]
}


def load(name: str) -> list[dict[str, Any]]:
    yaml = YAML(typ="safe", pure=True)
    return [doc for doc in yaml.load_all((DEPLOY / name).read_text()) if doc]


def objects() -> list[dict[str, Any]]:
    kustomization = load("kustomization.yaml")[0]
    return [doc for name in kustomization["resources"] for doc in load(name)]


def one(kind: str, name: str | None = None) -> dict[str, Any]:
    found = [
        o
        for o in objects()
        if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)
    ]
    assert len(found) == 1, (kind, name, len(found))
    return found[0]


def hooks() -> dict[str, dict[str, Any]]:
    out = {}
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        for hook in one(kind)["webhooks"]:
            out[hook["name"]] = {**hook, "_configuration": kind}
    return out


def test_every_file_is_listed_in_the_kustomization() -> None:
    listed = set(load("kustomization.yaml")[0]["resources"])
    on_disk = {p.name for p in DEPLOY.glob("*.yaml")} - {"kustomization.yaml"}
    assert listed == on_disk
    assert load("kustomization.yaml")[0]["namespace"] == "gpustack-system"


def test_every_namespaced_object_is_in_gpustack_system() -> None:
    cluster = {
        "ClusterRole",
        "ClusterRoleBinding",
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    }
    for obj in objects():
        if obj["kind"] not in cluster:
            assert obj["metadata"]["namespace"] == "gpustack-system", obj["kind"]


def test_configuration_names_follow_kv_injection_section_12() -> None:
    assert one("MutatingWebhookConfiguration")["metadata"]["name"] == "gpustack-worker-mutation"
    assert one("ValidatingWebhookConfiguration")["metadata"]["name"] == "gpustack-worker-validation"


@pytest.mark.parametrize(
    ("name", "configuration", "path", "group", "resource", "operations", "policy", "selector"),
    [
        pytest.param(
            "mutate.gpustack-worker-modeldeployment.worker.v1.modeldeployment",
            "MutatingWebhookConfiguration",
            PATH_MODELDEPLOYMENT_MUTATE,
            "worker.gpustack.ai",
            "modeldeployments",
            ["CREATE", "UPDATE"],
            "Fail",
            None,
            id="modeldeployment-mutate",
        ),
        pytest.param(
            "validate.gpustack-worker-modeldeployment.worker.v1.modeldeployment",
            "ValidatingWebhookConfiguration",
            PATH_MODELDEPLOYMENT_VALIDATE,
            "worker.gpustack.ai",
            "modeldeployments",
            ["CREATE", "UPDATE"],
            "Fail",
            None,
            id="modeldeployment-validate",
        ),
        pytest.param(
            "mutate.gpustack-worker-modelartifact.worker.v1.modelartifact",
            "MutatingWebhookConfiguration",
            PATH_MODELARTIFACT_MUTATE,
            "worker.gpustack.ai",
            "modelartifacts",
            ["CREATE", "UPDATE"],
            "Fail",
            None,
            id="modelartifact-mutate",
        ),
        pytest.param(
            "validate.gpustack-worker-modelartifact.worker.v1.modelartifact",
            "ValidatingWebhookConfiguration",
            PATH_MODELARTIFACT_VALIDATE,
            "worker.gpustack.ai",
            "modelartifacts",
            ["CREATE", "UPDATE"],
            "Fail",
            None,
            id="modelartifact-validate",
        ),
        pytest.param(
            "mutate.gpustack-worker-kvcache.core.v1.pod",
            "MutatingWebhookConfiguration",
            PATH_POD_INJECT,
            "",
            "pods",
            ["CREATE"],
            "Fail",
            INJECT_SELECTOR,
            id="pod-inject",
        ),
        pytest.param(
            "validate.gpustack-worker-kvcache.core.v1.pod",
            "ValidatingWebhookConfiguration",
            PATH_POD_FREEZE,
            "",
            "pods,pods/status",
            ["UPDATE"],
            "Ignore",
            INJECT_SELECTOR,
            id="pod-freeze",
        ),
    ],
)
def test_registration(
    name: str,
    configuration: str,
    path: str,
    group: str,
    resource: str,
    operations: list[str],
    policy: str,
    selector: dict[str, Any] | None,
) -> None:
    hook = hooks()[name]
    assert hook["_configuration"] == configuration
    assert hook["clientConfig"]["service"] == {
        "namespace": "gpustack-system",
        "name": "gpustack-webhook",
        "path": path,
        "port": 443,
    }
    assert hook["rules"] == [
        {
            "apiGroups": [group],
            "apiVersions": ["v1"],
            "operations": operations,
            "resources": resource.split(","),
            "scope": "Namespaced",
        }
    ]
    assert hook["failurePolicy"] == policy
    assert hook["sideEffects"] == "None"
    assert hook["matchPolicy"] == "Equivalent"
    assert hook["timeoutSeconds"] == 10
    assert hook["admissionReviewVersions"] == ["v1"]
    assert hook.get("objectSelector") == selector
    assert "namespaceSelector" not in hook
    if configuration == "MutatingWebhookConfiguration":
        assert hook["reinvocationPolicy"] == "Never"


def test_every_served_path_is_registered_and_every_registration_served() -> None:
    registered = {h["clientConfig"]["service"]["path"] for h in hooks().values()}
    assert registered == {hook.path for hook in default_webhooks()}


def test_rbac_reads_and_watches_the_four_input_kinds_and_the_settings_config_map() -> None:
    cluster_role = one("ClusterRole", "gpustack-webhook")
    assert cluster_role["rules"] == [
        {
            "apiGroups": ["worker.gpustack.ai"],
            "resources": [
                "instancetypes",
                "kvcachepoolbindings",
                "kvcachepools",
                "kvcachebackends",
            ],
            # get for the live reads; list and watch for the Pod hooks' watch-fed cache.
            "verbs": ["get", "list", "watch"],
        }
    ]
    role = one("Role", "gpustack-webhook")
    assert role["rules"] == [
        {
            "apiGroups": [""],
            "resources": ["configmaps"],
            "resourceNames": ["gpustack-settings"],
            "verbs": ["get", "list", "watch"],
        }
    ]
    for kind in ("ClusterRoleBinding", "RoleBinding"):
        for name in ("gpustack-webhook", "gpustack-webhook-certificates"):
            assert one(kind, name)["subjects"] == [
                {
                    "kind": "ServiceAccount",
                    "name": "gpustack-webhook",
                    "namespace": "gpustack-system",
                }
            ]
            assert one(kind, name)["roleRef"]["name"] == name


def test_the_cache_watches_only_what_the_rbac_lets_it_list_and_watch() -> None:
    """Every kind the Pod hooks' cache lists and watches is granted list and watch (a kind
    missing here fails the informer with 403 for ever, a warning every few seconds)."""
    granted = {
        resource
        for rule in one("ClusterRole", "gpustack-webhook")["rules"]
        if {"list", "watch"} <= set(rule["verbs"])
        for resource in rule["resources"]
    }
    cache = WatchedSources(cast(Kube, object()), cast(LiveSources, _NoLive()))
    watched = {informer.resource.plural for informer in cache.informers.values()}
    assert watched, "the cache watches no kind"
    assert watched <= granted, f"watched but not granted: {sorted(watched - granted)}"


class _NoLive:
    namespace = "gpustack-system"


def test_self_managed_certificates_name_the_shipped_objects() -> None:
    """The server's defaults are the Service and configurations deploy/webhook ships, and its
    certificate RBAC reaches exactly those and its Secret."""
    (container,) = one("Deployment")["spec"]["template"]["spec"]["containers"]
    args = parser().parse_args(container["args"])
    assert args.tls_secret == "gpustack-webhook-tls"
    assert args.service_name == one("Service")["metadata"]["name"]
    assert {h["clientConfig"]["service"]["name"] for h in hooks().values()} == {args.service_name}
    cluster_role = one("ClusterRole", "gpustack-webhook-certificates")
    # Each configuration by name, read and patched (the caBundle is a strategic merge patch
    # by webhook name): no `update`, which the server never sends.
    assert {
        (r["resources"][0], r["resourceNames"][0], tuple(r["verbs"])) for r in cluster_role["rules"]
    } == {
        ("mutatingwebhookconfigurations", DEFAULT_MUTATING, ("get", "patch")),
        ("validatingwebhookconfigurations", DEFAULT_VALIDATING, ("get", "patch")),
    }
    assert one("MutatingWebhookConfiguration")["metadata"]["name"] == DEFAULT_MUTATING
    assert one("ValidatingWebhookConfiguration")["metadata"]["name"] == DEFAULT_VALIDATING
    # The Secret by name, read (GET) and rewritten (PUT): no `create`, which RBAC cannot limit
    # to a name (the Secret is shipped instead), and no `patch`, which the server never sends.
    role = one("Role", "gpustack-webhook-certificates")
    assert role["rules"] == [
        {
            "apiGroups": [""],
            "resources": ["secrets"],
            "resourceNames": [args.tls_secret],
            "verbs": ["get", "update"],
        },
    ]


def test_the_self_managed_secret_is_shipped_empty() -> None:
    """The Secret the server fills: no data (the server's field, which an apply leaves alone)
    and no type (a kubernetes.io/tls Secret needs its keys at creation), labelled as the other
    webhook objects."""
    (container,) = one("Deployment")["spec"]["template"]["spec"]["containers"]
    secret = one("Secret")
    assert secret["metadata"]["name"] == parser().parse_args(container["args"]).tls_secret
    assert set(secret) == {"apiVersion", "kind", "metadata"}
    assert secret["metadata"]["labels"] == one("Deployment")["metadata"]["labels"]


def test_deployment_runs_two_guarded_replicas_with_the_servers_flags() -> None:
    deployment = one("Deployment")
    spec = deployment["spec"]
    assert spec["replicas"] == 2
    pod = spec["template"]["spec"]
    assert pod["serviceAccountName"] == "gpustack-webhook"
    (container,) = pod["containers"]
    assert container["command"] == ["python", "-m", "gpustack_webhook"]
    # The container's arguments are ones the server accepts.
    args = parser().parse_args(container["args"])
    assert args.port == 9443 and args.probe_port == 8080
    # Self-managed certificates: nothing mounted (deploy/components/existing-secret mounts the
    # Secret; tests/integration/test_kustomize_components.py checks that).
    assert args.tls_secret and "volumes" not in pod and "volumeMounts" not in container
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "probes"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "probes"}
    assert set(container["resources"]["requests"]) == {"cpu", "memory"}
    assert pod["securityContext"]["fsGroup"] == pod["securityContext"]["runAsGroup"]
    pdb = one("PodDisruptionBudget")
    assert pdb["spec"]["selector"] == spec["selector"]
    assert pdb["spec"]["minAvailable"] == 1
    service = one("Service")
    assert service["spec"]["selector"] == spec["selector"]["matchLabels"]
    https = next(p for p in service["spec"]["ports"] if p["name"] == "https")
    assert https == {"name": "https", "port": 443, "targetPort": "https", "protocol": "TCP"}


#: bench/webhook_slowloris.py on the reference machine: the warm server and the cost of one
#: held TLS connection (with the shrunken TLS read buffer).
MEASURED_BASELINE_MIB = 87
MEASURED_PER_CONNECTION_KIB = 43


def _mebibytes(quantity: str) -> float:
    units = {"Ki": 1 / 1024, "Mi": 1, "Gi": 1024}
    return float(quantity[:-2]) * units[quantity[-2:]]


def test_the_memory_limit_covers_the_connection_cap_with_margin() -> None:
    (container,) = one("Deployment")["spec"]["template"]["spec"]["containers"]
    args = parser().parse_args(container["args"])
    assert 0 < args.header_timeout <= 10 and 0 < args.body_timeout <= 10
    assert 0 < args.idle_timeout <= 60
    at_cap = MEASURED_BASELINE_MIB + args.max_connections * MEASURED_PER_CONNECTION_KIB / 1024
    limit = _mebibytes(container["resources"]["limits"]["memory"])
    assert limit >= 1.5 * at_cap


def test_a_network_policy_admits_only_the_webhook_port() -> None:
    policy = one("NetworkPolicy")
    deployment = one("Deployment")
    assert policy["spec"]["podSelector"] == deployment["spec"]["selector"]
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    (rule,) = policy["spec"]["ingress"]
    assert "from" not in rule  # the API server's addresses cannot be selected
    (port,) = rule["ports"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    named = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert port["protocol"] == "TCP"
    assert named.get(port["port"], port["port"]) == parser().parse_args(container["args"]).port
