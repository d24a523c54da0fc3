"""charts/gpustack-render: lint, template, in step with deploy/, and accepted by the API server.

With helm built from its Go module by hack/envtest/build.sh (like kubectl):

* ``helm lint`` passes for the defaults and for every certificate mode that works;
* ``helm template`` with default values renders the same objects as ``kubectl kustomize
  deploy`` (kind, name, namespace and everything else but Helm's own labels and the CRDs'
  keep-on-uninstall annotation; the Namespace is left to ``--create-namespace``), and each chart
  switch renders the same objects as the matching kustomize component (input CRDs,
  cert-manager, ServiceMonitors);
* the values reach the objects (image, replicas, resources, scheduling, Settings, caBundle), a
  certificate mode that is not available is refused with its field named, and so is a misspelt
  or mistyped value (values.schema.json);
* ``helm install`` prints NOTES that say what the certificate mode needs (a warning when your
  own Secret's CA is not given);
* the rendered objects pass ``kubectl apply --dry-run=server`` on the simulated cluster: the
  defaults with the input CRDs, and every switch on (cert-manager's and the Prometheus
  Operator's kinds then stand in as schema-less CRDs, so only their kinds are checked).
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from .cluster import Cluster, ClusterBinaries
from .controlplane import APIError
from .manifests import Objects, kustomize_overlay, run, yaml_stream

REPO_ROOT = Path(__file__).resolve().parents[2]
CHART = REPO_ROOT / "charts" / "gpustack-render"
DEPLOY = REPO_ROOT / "deploy"
NAMESPACE = "gpustack-system"
#: The version of the simulated cluster (helm built from source defaults to an old one).
KUBE_VERSION = "v1.35.4"
HELM_LABELS = (
    "helm.sh/chart",
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/version",
)
HELM_ANNOTATIONS = ("helm.sh/resource-policy",)

#: Chart values and the kustomize component that renders the same objects.
SWITCHES = {
    "input-crds": ["--set", "crds.inputs=true"],
    "cert-manager": ["--set", "certificates.mode=certManager"],
    "existing-secret": ["--set", "certificates.mode=existingSecret"],
    "servicemonitors": ["--set", "metrics.serviceMonitor.enabled=true"],
}


@pytest.fixture(scope="module")
def helm(envtest_binaries: ClusterBinaries) -> Path:
    path = envtest_binaries.path("helm")
    assert path.exists(), f"no helm in {envtest_binaries.bin_dir} (hack/envtest/build.sh)"
    return path


def template(helm: Path, *args: str, chart: Path = CHART) -> Objects:
    return yaml_stream(
        run(
            helm,
            "template",
            "gpustack-render",
            chart,
            "--namespace",
            NAMESPACE,
            "--kube-version",
            KUBE_VERSION,
            *args,
        )
    )


def without_helm(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` less what Helm adds on its own (its labels, the CRDs' keep annotation)."""
    out = copy.deepcopy(obj)
    meta = out["metadata"]
    for field, keys in (("labels", HELM_LABELS), ("annotations", HELM_ANNOTATIONS)):
        for key in keys:
            (meta.get(field) or {}).pop(key, None)
        if not meta.get(field):
            meta.pop(field, None)
    return out


def by_id(objects: Objects) -> dict[tuple[str, str, str], dict[str, Any]]:
    ids = {}
    for obj in objects:
        key = (obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
        assert key not in ids, f"rendered twice: {key}"
        ids[key] = without_helm(obj)
    return ids


def assert_same_objects(chart: Objects, kustomized: Objects) -> None:
    left = by_id(chart)
    right = by_id([o for o in kustomized if o["kind"] != "Namespace"])
    assert sorted(left) == sorted(right), "chart and deploy/ render different objects"
    for key, obj in right.items():
        assert left[key] == obj, f"{key} differs between the chart and deploy/"


def test_helm_lint(helm: Path) -> None:
    for args in ([], *SWITCHES.values()):
        out = run(helm, "lint", "--strict", CHART, "--kube-version", KUBE_VERSION, *args)
        assert "1 chart(s) linted, 0 chart(s) failed" in out, out


def test_defaults_render_what_kustomize_renders(
    helm: Path, envtest_binaries: ClusterBinaries, tmp_path: Path
) -> None:
    kustomized = kustomize_overlay(envtest_binaries.kubectl, tmp_path / "base", [DEPLOY])
    assert_same_objects(template(helm), kustomized)


@pytest.mark.parametrize("component", sorted(SWITCHES))
def test_each_switch_renders_what_its_component_renders(
    helm: Path, envtest_binaries: ClusterBinaries, tmp_path: Path, component: str
) -> None:
    kustomized = kustomize_overlay(
        envtest_binaries.kubectl,
        tmp_path / component,
        [DEPLOY],
        [DEPLOY / "components" / component],
    )
    assert_same_objects(template(helm, *SWITCHES[component]), kustomized)


def _one(objects: Objects, kind: str, name: str) -> dict[str, Any]:
    (found,) = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


def test_values_reach_the_objects(helm: Path, tmp_path: Path) -> None:
    values = {
        "image": {"repository": "registry.invalid/gpustack-render", "tag": "v9.9.9"},
        "controller": {
            "replicas": 3,
            "workers": 4,
            "resources": {"requests": {"cpu": "250m"}},
            "nodeSelector": {"pool": "system"},
            "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
        },
        "webhook": {"replicas": 4, "nodeSelector": {"pool": "edge"}},
        "settings": {"native-sidecars": "false"},
        "certificates": {
            "mode": "existingSecret",
            "existingSecret": {"caBundle": "Q0EK"},
            "secretName": "my-tls",
        },
        "rbac": {"aggregateToDefaultRoles": False},
        "crds": {"install": False},
    }
    values_file = tmp_path / "values.json"  # JSON is YAML: one -f file
    values_file.write_text(json.dumps(values))
    objects = template(helm, "-f", str(values_file))
    controller = _one(objects, "Deployment", "gpustack-controller")
    pod = controller["spec"]["template"]["spec"]
    assert controller["spec"]["replicas"] == 3
    assert pod["nodeSelector"] == {"pool": "system"}
    assert pod["tolerations"] == [
        {"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}
    ]
    (container,) = pod["containers"]
    assert container["image"] == "registry.invalid/gpustack-render:v9.9.9"
    # Helm merges values: the request given, the other defaults kept.
    assert container["resources"]["requests"] == {"cpu": "250m", "memory": "256Mi"}
    assert "--workers=4" in container["args"]
    webhook = _one(objects, "Deployment", "gpustack-webhook")
    assert webhook["spec"]["replicas"] == 4
    assert webhook["spec"]["template"]["spec"]["nodeSelector"] == {"pool": "edge"}
    (volume,) = webhook["spec"]["template"]["spec"]["volumes"]
    assert volume["secret"]["secretName"] == "my-tls"
    settings = _one(objects, "ConfigMap", "gpustack-settings")["data"]
    assert settings["native-sidecars"] == "false"
    assert settings["instance-privileged-allowed"] == "true"  # the other keys keep defaults
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        for hook in _one(objects, kind, _hook_config_name(kind))["webhooks"]:
            assert hook["clientConfig"]["caBundle"] == "Q0EK"
    kinds = {o["kind"] for o in objects}
    assert "CustomResourceDefinition" not in kinds
    assert "Secret" not in kinds  # existingSecret: the user's, never the chart's
    assert not [o for o in objects if o["metadata"]["name"].startswith("gpustack-render-")]


def test_a_pod_annotation_given_is_kept_over_the_scrape_annotations(helm: Path) -> None:
    objects = template(
        helm,
        "--set-string", "controller.podAnnotations.prometheus\\.io/port=9999",
        "--set-string", "controller.podAnnotations.team=ml",
    )  # fmt: skip
    controller = _one(objects, "Deployment", "gpustack-controller")
    assert controller["spec"]["template"]["metadata"]["annotations"] == {
        "prometheus.io/port": "9999",  # the user's, never silently replaced
        "prometheus.io/path": "/metrics",
        "prometheus.io/scrape": "true",
        "team": "ml",
    }
    plain = _one(template(helm), "Deployment", "gpustack-controller")
    assert plain["spec"]["template"]["metadata"]["annotations"]["prometheus.io/port"] == "8081"


def test_large_whole_numbers_from_a_values_file_render_whole(helm: Path, tmp_path: Path) -> None:
    """A values file's numbers reach the templates as floats, which print 1e+06 from a million:
    an argument the servers refuse, a replica count the API server refuses, a Setting the
    controller ignores."""
    values = {
        "controller": {"replicas": 1000000, "workers": 1000000},
        "webhook": {
            "replicas": 3000000,
            "minAvailable": 2000000,
            "connectionLimits": {"maxConnections": 1000000},
        },
        "settings": {"model-deployment-park-after-seconds": 1000000},
    }
    values_file = tmp_path / "values.yaml"
    values_file.write_text(json.dumps(values))
    objects = template(helm, "-f", str(values_file))
    controller = _one(objects, "Deployment", "gpustack-controller")
    assert controller["spec"]["replicas"] == 1000000
    assert "--workers=1000000" in controller["spec"]["template"]["spec"]["containers"][0]["args"]
    webhook = _one(objects, "Deployment", "gpustack-webhook")
    assert webhook["spec"]["replicas"] == 3000000
    assert (
        "--max-connections=1000000" in webhook["spec"]["template"]["spec"]["containers"][0]["args"]
    )
    assert (
        _one(objects, "PodDisruptionBudget", "gpustack-webhook")["spec"]["minAvailable"] == 2000000
    )
    settings = _one(objects, "ConfigMap", "gpustack-settings")["data"]
    assert settings["model-deployment-park-after-seconds"] == "1000000"


def _hook_config_name(kind: str) -> str:
    return {
        "MutatingWebhookConfiguration": "gpustack-worker-mutation",
        "ValidatingWebhookConfiguration": "gpustack-worker-validation",
    }[kind]


def test_self_managed_values_reach_the_server_and_its_rbac(helm: Path) -> None:
    objects = template(
        helm,
        "--set", "certificates.secretName=my-tls",
        "--set", "certificates.selfManaged.certLifetime=30d",
        "--set", "certificates.selfManaged.renewBefore=7d",
    )  # fmt: skip
    webhook = _one(objects, "Deployment", "gpustack-webhook")["spec"]["template"]["spec"]
    assert "volumes" not in webhook
    (container,) = webhook["containers"]
    certificate_args = [a for a in container["args"] if a.split("=")[0] in CERT_FLAGS]
    assert certificate_args == ["--tls-secret=my-tls", "--cert-lifetime=30d", "--renew-before=7d"]
    role = _one(objects, "Role", "gpustack-webhook-certificates")
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["my-tls"],
         "verbs": ["get", "update"]},
    ]  # fmt: skip
    secret = _one(objects, "Secret", "my-tls")  # shipped empty for the server to fill
    assert set(secret) == {"apiVersion", "kind", "metadata"}
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        for hook in _one(objects, kind, _hook_config_name(kind))["webhooks"]:
            assert "caBundle" not in hook["clientConfig"]  # the server writes it


CERT_FLAGS = {"--tls-secret", "--cert-file", "--key-file", "--ca-lifetime", "--cert-lifetime",
              "--renew-before"}  # fmt: skip


@pytest.mark.parametrize("mode", ["letsEncrypt", "selfmanaged"])
def test_an_unavailable_certificate_mode_is_refused(helm: Path, mode: str) -> None:
    result = subprocess.run(
        [str(helm), "template", "x", str(CHART), "--kube-version", KUBE_VERSION,
         "--set", f"certificates.mode={mode}"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode != 0
    assert "certificates.mode" in result.stderr and mode in result.stderr, result.stderr


@pytest.mark.parametrize(
    ("setting", "where"),
    [
        ("controller.replica=3", "at '/controller': additional properties 'replica'"),
        ("settings.native-sidecar=false", "at '/settings': additional properties 'native-sidecar'"),
        ("webhook.replicas=two", "at '/webhook/replicas'"),
        ("certificates.selfManaged.certLifetime=0d", "at '/certificates/selfManaged/certLifetime'"),
    ],
)
def test_a_misspelt_or_mistyped_value_is_refused_with_its_path(
    helm: Path, setting: str, where: str
) -> None:
    """values.schema.json (tests/unit/test_chart_values_schema.py), as helm reports it."""
    result = subprocess.run(
        [str(helm), "template", "x", str(CHART), "--kube-version", KUBE_VERSION,
         "--set", setting],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode != 0
    assert "don't meet the specifications of the schema" in result.stderr, result.stderr
    assert where in result.stderr, result.stderr


@pytest.mark.parametrize(
    ("replicas", "min_available", "kept"),
    [("1", "1", 1), ("3", "3", 3), ("2", "100%", 2), ("1", "50%", 1)],
)
def test_a_budget_that_keeps_every_webhook_pod_is_refused(
    helm: Path, replicas: str, min_available: str, kept: int
) -> None:
    result = subprocess.run(
        [str(helm), "template", "x", str(CHART), "--kube-version", KUBE_VERSION,
         "--set", f"webhook.replicas={replicas}", "--set", f"webhook.minAvailable={min_available}"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode != 0
    assert (
        f"webhook.minAvailable ({min_available}) keeps {kept} of webhook.replicas ({replicas})"
        in result.stderr
    ), result.stderr


@pytest.mark.parametrize(
    ("replicas", "min_available"), [("1", "0"), ("3", "2"), ("3", "60%"), ("0", "1")]
)
def test_a_budget_that_lets_one_webhook_pod_go_renders(
    helm: Path, replicas: str, min_available: str
) -> None:
    objects = template(
        helm, "--set", f"webhook.replicas={replicas}",
        "--set", f"webhook.minAvailable={min_available}",
    )  # fmt: skip
    budget = _one(objects, "PodDisruptionBudget", "gpustack-webhook")
    assert str(budget["spec"]["minAvailable"]) == min_available


def test_the_rendered_chart_passes_a_server_side_dry_run(cluster: Cluster, helm: Path) -> None:
    try:
        cluster.control_plane.request(
            "POST", "/api/v1/namespaces", {"metadata": {"name": NAMESPACE}}
        )
    except APIError as exc:
        if exc.status != 409:
            raise
    rendered = run(
        helm, "template", "gpustack-render", CHART, "--namespace", NAMESPACE,
        "--kube-version", KUBE_VERSION, "--set", "crds.inputs=true",
        "--set", "certificates.existingSecret.caBundle=Q0EK",
    )  # fmt: skip
    kinds = {o["kind"] for o in yaml_stream(rendered)}
    assert {"CustomResourceDefinition", "Deployment", "ValidatingWebhookConfiguration"} <= kinds
    result = cluster.kubectl(
        "apply", "--dry-run=server", "--validate=strict", "-f", "-", input=rendered, check=False
    )
    assert result.returncode == 0, result.stderr
    assert "(server dry run)" in result.stdout
    # Nothing was persisted.
    with pytest.raises(APIError) as info:
        cluster.control_plane.request(
            "GET", f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/gpustack-controller"
        )
    assert info.value.status == 404


def _notes(helm: Path, chart: Path, *args: str) -> str:
    """The NOTES ``helm install`` prints: NOTES.txt includes ``gpustack-render.notes``, which
    ``helm template`` of a copy of the chart with one more template renders."""
    (found,) = template(helm, "--show-only", "templates/notes.yaml", *args, chart=chart)
    notes: str = found["data"]["notes"]
    return notes


@pytest.fixture(scope="module")
def notes_chart(tmp_path_factory: pytest.TempPathFactory) -> Path:
    copy_ = tmp_path_factory.mktemp("chart") / "gpustack-render"
    shutil.copytree(CHART, copy_, symlinks=False)
    (copy_ / "templates" / "notes.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: notes\n"
        'data:\n  notes: {{ include "gpustack-render.notes" . | quote }}\n'
    )
    return copy_


def test_the_install_notes_say_what_each_certificate_mode_needs(
    helm: Path, notes_chart: Path
) -> None:
    assert (CHART / "templates" / "NOTES.txt").read_text() == (
        '{{- include "gpustack-render.notes" . }}\n'
    )
    notes = _notes(helm, notes_chart)
    assert "deployment/gpustack-webhook deployment/gpustack-controller" in notes
    assert "issues its own into the Secret gpustack-webhook-tls" in notes
    assert "gpustack-model-deployment-joint" in notes
    assert "WARNING" not in notes and "crds.install" not in notes
    # Your own Secret and no CA given: every review would fail TLS until caBundle is patched.
    bare = _notes(helm, notes_chart, "--set", "certificates.mode=existingSecret")
    assert "kubectl -n gpustack-system create secret tls gpustack-webhook-tls" in bare
    assert "WARNING: certificates.existingSecret.caBundle is empty" in bare
    given = _notes(
        helm, notes_chart, "--set", "certificates.mode=existingSecret",
        "--set", "certificates.existingSecret.caBundle=Q0EK",
    )  # fmt: skip
    assert "WARNING" not in given
    manager = _notes(helm, notes_chart, "--set", "certificates.mode=certManager")
    assert "cert-manager issues the Secret gpustack-webhook-tls" in manager
    assert "crds.install is false" in _notes(helm, notes_chart, "--set", "crds.install=false")


def test_the_dashboard_ships_in_a_configmap(helm: Path) -> None:
    objects = template(helm, "--set", "metrics.dashboard.enabled=true")
    configmap = _one(objects, "ConfigMap", "gpustack-render-dashboard")
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    shipped = CHART / "files" / "dashboards" / "gpustack-render.json"
    assert json.loads(configmap["data"]["gpustack-render.json"]) == json.loads(shipped.read_text())


def _stub_crd(group: str, kind: str, plural: str) -> dict[str, Any]:
    """A schema-less CRD standing in for an add-on's (cert-manager, Prometheus Operator)."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"kind": kind, "plural": plural, "singular": kind.lower()},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                        }
                    },
                }
            ],
        },
    }


def test_every_switch_on_passes_a_server_side_dry_run(cluster: Cluster, helm: Path) -> None:
    """cert-manager, ServiceMonitors and the dashboard on: the add-ons' kinds exist as stubs
    (no schema), so their objects are only known to be well-kinded; every other object (the
    annotated webhook configurations, the metrics Service, the dashboard ConfigMap) is checked
    in full."""
    stubs = [
        _stub_crd("cert-manager.io", "Issuer", "issuers"),
        _stub_crd("cert-manager.io", "Certificate", "certificates"),
        _stub_crd("monitoring.coreos.com", "ServiceMonitor", "servicemonitors"),
    ]
    cluster.control_plane.install_crds(stubs)
    try:
        rendered = run(
            helm, "template", "gpustack-render", CHART, "--namespace", NAMESPACE,
            "--kube-version", KUBE_VERSION, "--set", "certificates.mode=certManager",
            "--set", "metrics.serviceMonitor.enabled=true",
            "--set", "metrics.dashboard.enabled=true",
        )  # fmt: skip
        kinds = {o["kind"] for o in yaml_stream(rendered)}
        assert {"Issuer", "Certificate", "ServiceMonitor"} <= kinds
        result = cluster.kubectl(
            "apply", "--dry-run=server", "--validate=strict", "-f", "-", input=rendered, check=False
        )
        assert result.returncode == 0, result.stderr
    finally:
        for stub in stubs:
            cluster.control_plane.request(
                "DELETE",
                f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{stub['metadata']['name']}",
            )
