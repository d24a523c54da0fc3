"""deploy/components/: each component, rendered with the real ``kubectl kustomize`` on top of the
base, adds exactly its objects and wires them to the base's.

* base: the CRDs the project owns only (ModelDeployment, ModelDeploymentScaler), no cert-manager
  or Prometheus Operator object, no CA injection annotation; self-managed certificates (the
  server names its Secret, mounts none, the Secret is shipped empty for it to fill, and its RBAC
  reaches that Secret, get and update only, and the two webhook configurations by name);
* existing-secret: the Secret mounted and loaded from files, the shipped empty Secret and the
  self-managed RBAC gone;
* input-crds: the CRDs of every other generated kind, byte for byte the committed ones;
* cert-manager: existing-secret's changes (no shipped Secret: cert-manager creates it), plus
  Issuers and a Certificate whose Secret is the one the webhook Deployment mounts,
  for the webhook Service's DNS name, and the CA injection annotation on both webhook
  configurations naming that Certificate;
* servicemonitors: one ServiceMonitor each for the controller and the webhook, each selecting a
  Service whose named port reaches the container port that serves ``/metrics``, a port the
  webhook's NetworkPolicy admits;
* all three together render without a conflict.

Only ``kubectl`` is needed (no cluster is started).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpustack_render.schema.crd import all_crds

from .cluster import ClusterBinaries
from .manifests import Objects, kustomize_overlay

REPO_ROOT = Path(__file__).resolve().parents[2]
DEPLOY = REPO_ROOT / "deploy"
COMPONENTS = DEPLOY / "components"
NAMESPACE = "gpustack-system"


def render(kubectl: Path, tmp_path: Path, *components: str) -> Objects:
    """``kubectl kustomize`` of an overlay: the base plus ``components`` (by name)."""
    workdir = tmp_path / ("overlay-" + "-".join(components or ("base",)))
    return kustomize_overlay(kubectl, workdir, [DEPLOY], [COMPONENTS / c for c in components])


def of_kind(objects: Objects, kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == kind}


def added(objects: Objects, base: Objects) -> set[tuple[str, str]]:
    ids = {(o["kind"], o["metadata"]["name"]) for o in base}
    return {(o["kind"], o["metadata"]["name"]) for o in objects} - ids


@pytest.fixture(scope="module")
def kubectl(envtest_binaries: ClusterBinaries) -> Path:
    return envtest_binaries.kubectl


@pytest.fixture(scope="module")
def base(kubectl: Path, tmp_path_factory: pytest.TempPathFactory) -> Objects:
    return render(kubectl, tmp_path_factory.mktemp("base"))


OWNED_CRDS = {
    "modeldeployments.worker.gpustack.ai",
    "modeldeploymentscalers.worker.gpustack.ai",
    "modelartifacts.worker.gpustack.ai",  # owned since D28: the controller resolves them
    "nodemodelstores.worker.gpustack.ai",  # owned: the node plugin writes them (issue 34)
}


def test_the_base_installs_only_the_owned_crds(base: Objects) -> None:
    assert set(of_kind(base, "CustomResourceDefinition")) == OWNED_CRDS
    kinds = {o["kind"] for o in base}
    assert not kinds & {"Issuer", "Certificate", "ServiceMonitor"}
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        for hook_config in of_kind(base, kind).values():
            assert "cert-manager.io/inject-ca-from" not in (
                hook_config["metadata"].get("annotations") or {}
            )


CERTIFICATE_RBAC = {
    (kind, "gpustack-webhook-certificates")
    for kind in ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
}
#: The empty Secret the base ships for the server to fill.
SHIPPED_SECRET = ("Secret", "gpustack-webhook-tls")


def _webhook_container(objects: Objects) -> dict[str, Any]:
    (container,) = of_kind(objects, "Deployment")["gpustack-webhook"]["spec"]["template"]["spec"][
        "containers"
    ]
    return dict(container)


def test_the_base_manages_its_own_certificates(base: Objects) -> None:
    webhook = of_kind(base, "Deployment")["gpustack-webhook"]["spec"]["template"]["spec"]
    assert "volumes" not in webhook
    args = _webhook_container(base)["args"]
    assert args[0] == "--tls-secret=gpustack-webhook-tls"
    assert not [a for a in args if a.startswith(("--cert-file", "--key-file"))]
    assert {(o["kind"], o["metadata"]["name"]) for o in base} >= CERTIFICATE_RBAC
    (role,) = [o for o in of_kind(base, "Role").values() if "certificates" in o["metadata"]["name"]]
    # The Secret by name, get and update only: no `create` (not limitable to a name; the Secret
    # is shipped instead) and no `patch` (never sent).
    assert [(r["resources"], r.get("resourceNames"), r["verbs"]) for r in role["rules"]] == [
        (["secrets"], ["gpustack-webhook-tls"], ["get", "update"])
    ]
    secret = of_kind(base, "Secret")["gpustack-webhook-tls"]
    assert set(secret) == {"apiVersion", "kind", "metadata"}  # no data, no type: the server's
    assert secret["metadata"]["namespace"] == NAMESPACE
    cluster_role = of_kind(base, "ClusterRole")["gpustack-webhook-certificates"]
    configurations = {
        name for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
        for name in of_kind(base, kind)
    }  # fmt: skip
    assert {n for r in cluster_role["rules"] for n in r["resourceNames"]} == configurations


def test_existing_secret_mounts_the_secret_and_drops_the_certificate_rbac(
    kubectl: Path, tmp_path: Path, base: Objects
) -> None:
    objects = render(kubectl, tmp_path, "existing-secret")
    assert not added(objects, base)
    ids = {(o["kind"], o["metadata"]["name"]) for o in objects}
    assert not CERTIFICATE_RBAC & ids
    assert SHIPPED_SECRET not in ids  # yours: applying or deleting the manifests never touches it
    container = _webhook_container(objects)
    assert container["args"][:2] == [
        "--cert-file=/etc/gpustack-webhook/tls/tls.crt",
        "--key-file=/etc/gpustack-webhook/tls/tls.key",
    ]
    assert container["args"][2:] == _webhook_container(base)["args"][1:]
    (mount,) = container["volumeMounts"]
    webhook = of_kind(objects, "Deployment")["gpustack-webhook"]["spec"]["template"]["spec"]
    (volume,) = webhook["volumes"]
    assert volume["name"] == mount["name"] and mount["mountPath"] == "/etc/gpustack-webhook/tls"
    assert volume["secret"]["secretName"] == "gpustack-webhook-tls"
    assert volume["secret"]["defaultMode"] == 0o440
    assert "subPath" not in mount  # a subPath mount never sees a rotation


def test_input_crds_adds_every_other_generated_crd(
    kubectl: Path, tmp_path: Path, base: Objects
) -> None:
    objects = render(kubectl, tmp_path, "input-crds")
    generated = {c["metadata"]["name"]: c for c in all_crds()}
    inputs = set(generated) - OWNED_CRDS
    assert inputs == {
        f"{plural}.worker.gpustack.ai"
        for plural in (
            "instancetypes",
            "kvcachepoolbindings",
            "kvcachepools",
            "kvcachebackends",
        )
    }
    assert added(objects, base) == {("CustomResourceDefinition", name) for name in inputs}
    for name, crd in of_kind(objects, "CustomResourceDefinition").items():
        assert crd["spec"] == generated[name]["spec"], name


def test_cert_manager_issues_the_mounted_secret_and_injects_its_ca(
    kubectl: Path, tmp_path: Path, base: Objects
) -> None:
    objects = render(kubectl, tmp_path, "cert-manager")
    assert {kind for kind, _ in added(objects, base)} == {"Issuer", "Certificate"}
    assert SHIPPED_SECRET not in {(o["kind"], o["metadata"]["name"]) for o in objects}
    issuers = of_kind(objects, "Issuer")
    certificates = of_kind(objects, "Certificate")
    for cert in certificates.values():
        assert cert["metadata"]["namespace"] == NAMESPACE
        assert cert["spec"]["issuerRef"]["name"] in issuers
    for issuer in issuers.values():
        if "ca" in issuer["spec"]:
            assert issuer["spec"]["ca"]["secretName"] in {
                c["spec"]["secretName"] for c in certificates.values() if c["spec"].get("isCA")
            }
    # The serving certificate is the Secret the webhook Deployment mounts.
    webhook = of_kind(objects, "Deployment")["gpustack-webhook"]
    (mounted,) = [v["secret"]["secretName"] for v in webhook["spec"]["template"]["spec"]["volumes"]]
    (serving,) = [c for c in certificates.values() if c["spec"]["secretName"] == mounted]
    assert not serving["spec"].get("isCA")
    service = of_kind(objects, "Service")["gpustack-webhook"]
    assert f"{service['metadata']['name']}.{NAMESPACE}.svc" in serving["spec"]["dnsNames"]
    # Both webhook configurations get their caBundle from that Certificate.
    reference = f"{NAMESPACE}/{serving['metadata']['name']}"
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        (hook_config,) = of_kind(objects, kind).values()
        annotations = hook_config["metadata"]["annotations"]
        assert annotations["cert-manager.io/inject-ca-from"] == reference
        for hook in hook_config["webhooks"]:
            assert hook["clientConfig"]["service"]["name"] == service["metadata"]["name"]


def _serves_metrics(deployment: dict[str, Any], port_name: str) -> bool:
    """The container port ``port_name`` is the one whose probes/--flags serve ``/metrics``."""
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    if port_name not in ports:
        return False
    number = ports[port_name]
    # The controller serves /metrics on --health-port, the webhook on --probe-port.
    return any(
        arg in (f"--health-port={number}", f"--probe-port={number}") for arg in container["args"]
    )


def test_servicemonitors_scrape_both_metrics_ports(
    kubectl: Path, tmp_path: Path, base: Objects
) -> None:
    objects = render(kubectl, tmp_path, "servicemonitors")
    assert added(objects, base) == {
        ("ServiceMonitor", "gpustack-controller"),
        ("ServiceMonitor", "gpustack-webhook"),
        ("Service", "gpustack-controller-metrics"),
    }
    services = of_kind(objects, "Service")
    deployments = of_kind(objects, "Deployment")
    for name, monitor in of_kind(objects, "ServiceMonitor").items():
        wanted = monitor["spec"]["selector"]["matchLabels"]
        assert monitor["spec"]["namespaceSelector"]["matchNames"] == [NAMESPACE]
        (service,) = [
            s for s in services.values() if wanted.items() <= s["metadata"]["labels"].items()
        ]
        (deployment,) = [
            d
            for d in deployments.values()
            if service["spec"]["selector"].items()
            <= d["spec"]["template"]["metadata"]["labels"].items()
        ]
        assert deployment["metadata"]["name"] == name
        (endpoint,) = monitor["spec"]["endpoints"]
        assert endpoint["path"] == "/metrics"
        (port,) = [p for p in service["spec"]["ports"] if p["name"] == endpoint["port"]]
        assert _serves_metrics(deployment, port["targetPort"]), (name, port)
        assert _admitted(objects, deployment, port["targetPort"]), (name, port)


def _admitted(objects: Objects, deployment: dict[str, Any], port_name: str) -> bool:
    """Whether Prometheus, from another namespace, may reach ``port_name`` of the Deployment's
    Pods: no NetworkPolicy selects them, or one admits that port from anywhere."""
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    policies = [
        p
        for p in of_kind(objects, "NetworkPolicy").values()
        if p["spec"]["podSelector"]["matchLabels"].items() <= labels.items()
    ]
    return not policies or any(
        "from" not in rule and any(p["port"] == port_name for p in rule.get("ports", []))
        for policy in policies
        for rule in policy["spec"].get("ingress", [])
    )


def test_all_components_together(kubectl: Path, tmp_path: Path, base: Objects) -> None:
    objects = render(kubectl, tmp_path, "input-crds", "cert-manager", "servicemonitors")
    kinds = {kind for kind, _ in added(objects, base)}
    assert kinds == {
        "CustomResourceDefinition",
        "Issuer",
        "Certificate",
        "ServiceMonitor",
        "Service",
    }
