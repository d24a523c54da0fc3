"""The chart installed on the simulated cluster, its shells running under its identities.

What a user gets from ``helm install`` with default values (self-managed certificates), as far as
a cluster without containers allows:

* the chart's objects (``helm template``) are applied for real: ServiceAccounts, RBAC, Settings,
  Services, webhook configurations, the Deployments (scaled to zero: KWOK runs no containers,
  so nothing would run in their Pods);
* the controller and the webhook server run as local processes with the Deployments' own
  arguments, each authenticated as the chart's ServiceAccount for it (a TokenRequest token in a
  kubeconfig per identity), so every request they make is judged by the chart's RBAC;
* the webhook configurations call the local server: each ``clientConfig.service`` is replaced by
  ``url: https://127.0.0.1:<port>/<path>`` (the Service has no endpoints here, and the API server
  runs on this host), with no caBundle. The server is started with ``--cert-host=127.0.0.1`` so
  its certificate names that address and it recognises those webhooks as its own;
* then: the server fills the empty Secret the chart ships (its Role grants no ``create`` and no
  ``patch`` on Secrets) and writes the caBundle, the API server admits a ModelDeployment and
  refuses a bad one through the webhook, and ``kubectl wait --for=condition=Ready`` returns for
  the bundled example (examples/qwen-chat.yaml: 2 replicas of 2 GPUs on the 8-GPU KWOK Nodes,
  admitted by the real Kueue).

A permission the chart lacks shows up here as a failed step (fix the RBAC, not the test); so does
one it must not grant (``create`` or ``patch`` on Secrets: ship the Secret instead).
"""

from __future__ import annotations

import base64
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .cluster import Cluster, ClusterBinaries
from .controlplane import (
    APIError,
    ManagedProcess,
    free_port,
    load_yaml_documents,
    start_process,
    webhook_configuration_path,
)
from .manifests import Objects
from .test_chart import NAMESPACE, template
from .webhook_fixtures import (
    GROUP,
    SETTLE_SECONDS,
    VERSION,
    WebhookProcess,
    admits_and_refuses,
    calling_without_ca_bundle,
    delete_if_present,
    forbidden_answers,
    token_kubeconfig,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = REPO_ROOT / "examples" / "qwen-chat.yaml"
SECRET = "gpustack-webhook-tls"
FIELD_MANAGER = "gpustack-install-test"
#: What the Deployments' arguments read from the downward API.
POD_ENV = {"$(POD_NAMESPACE)": NAMESPACE, "$(POD_NAME)": "local"}


def chart_objects(helm: Path) -> Objects:
    """``helm template`` with default values, the Deployments scaled to zero."""
    return template(helm, "--set", "controller.replicas=0", "--set", "webhook.replicas=0")


def container_args(objects: Objects, deployment: str) -> list[str]:
    """The container arguments of a rendered Deployment, downward-API values filled in."""
    (found,) = [
        o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == deployment
    ]
    (container,) = found["spec"]["template"]["spec"]["containers"]
    out = []
    for arg in container["args"]:
        for variable, value in POD_ENV.items():
            arg = arg.replace(variable, value)
        out.append(arg)
    return out


def replace_flag(args: list[str], flag: str, value: str) -> list[str]:
    """``args`` with ``flag=…`` set to ``value`` (the container's ports are this host's)."""
    assert any(a.startswith(f"{flag}=") for a in args), (flag, args)
    return [f"{flag}={value}" if a.startswith(f"{flag}=") else a for a in args]


def to_local(objects: Objects, port: int) -> Objects:
    """The webhook configurations calling ``https://127.0.0.1:port`` without a caBundle."""
    return [
        calling_without_ca_bundle(o, port) if o["kind"].endswith("WebhookConfiguration") else o
        for o in objects
    ]


def kubectl_apply(cluster: Cluster, objects: Objects) -> None:
    result = cluster.kubectl(
        "apply", "--server-side", "--force-conflicts", f"--field-manager={FIELD_MANAGER}",
        "-f", "-", input="\n".join(json.dumps(o) for o in objects), check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr


def example_objects() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The example's input objects (statuses kept aside) and its ModelDeployment."""
    documents = load_yaml_documents(EXAMPLE)
    (md,) = [d for d in documents if d["kind"] == "ModelDeployment"]
    return [d for d in documents if d["kind"] != "ModelDeployment"], md


def create_inputs(cluster: Cluster, inputs: list[dict[str, Any]]) -> None:
    """The objects the example names, with their statuses, as hack/cluster.py demo does."""
    for doc in inputs:
        body = json.loads(json.dumps(doc))
        status = body.pop("status", None)
        cluster.apply(body, manager=FIELD_MANAGER)
        if status is not None:
            path = _path(body) + "/status"
            cluster.control_plane.request(
                "PATCH", path, {"status": status}, content_type="application/merge-patch+json"
            )
        if body["kind"] == "InstanceType":
            cluster.ensure_cluster_queue(status["entrance"])


_PLURALS = {
    "InstanceType": "instancetypes",
    "KVCachePoolBinding": "kvcachepoolbindings",
    "KVCachePool": "kvcachepools",
    "KVCacheBackend": "kvcachebackends",
    "ModelDeployment": "modeldeployments",
}


def _path(obj: dict[str, Any]) -> str:
    ns = obj["metadata"].get("namespace")
    where = f"/namespaces/{ns}" if ns else ""
    return f"/apis/{GROUP}/{VERSION}{where}/{_PLURALS[obj['kind']]}/{obj['metadata']['name']}"


@pytest.fixture
def installed(
    cluster: Cluster, envtest_binaries: ClusterBinaries, tmp_path: Path
) -> Iterator[tuple[Objects, int]]:
    """The chart's objects applied (webhooks pointed at a local port); removed afterwards, the
    CRDs excepted (the cluster's other tests use them)."""
    helm = envtest_binaries.path("helm")
    objects = chart_objects(helm)
    port = free_port()
    cluster.kubectl("create", "namespace", NAMESPACE, check=False)
    applied = [o for o in to_local(objects, port) if o["kind"] != "CustomResourceDefinition"]
    # What others depend on first: the webhook configurations last, so nothing is refused for
    # want of a server while the rest goes in.
    applied.sort(key=lambda o: o["kind"].endswith("WebhookConfiguration"))
    try:
        kubectl_apply(cluster, applied)
        yield objects, port
    finally:
        cluster.kubectl(
            "delete", "--ignore-not-found", "--wait=false", "-f", "-",
            input="\n".join(json.dumps(o) for o in reversed(applied)), check=False,
        )  # fmt: skip
        delete_if_present(cluster.control_plane, f"/api/v1/namespaces/{NAMESPACE}/secrets/{SECRET}")
        delete_if_present(
            cluster.control_plane,
            f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/gpustack-controller",
        )


def secret_verbs(objects: Objects, account: str) -> set[str]:
    """Every verb on Secrets the rendered roles bound to the ServiceAccount ``account`` grant."""
    bound = {
        (o["roleRef"]["kind"], o["roleRef"]["name"])
        for o in objects
        if o["kind"] in ("RoleBinding", "ClusterRoleBinding")
        and any(s["kind"] == "ServiceAccount" and s["name"] == account for s in o["subjects"])
    }
    return {
        verb
        for o in objects
        if (o["kind"], o["metadata"]["name"]) in bound
        for rule in o.get("rules") or []
        if "" in rule.get("apiGroups", []) and {"secrets", "*"} & set(rule.get("resources", []))
        for verb in rule["verbs"]
    }


def stored_configurations(cluster: Cluster, objects: Objects) -> list[dict[str, Any]]:
    """The chart's webhook configurations as the API server holds them."""
    return [
        dict(cluster.control_plane.request("GET", webhook_configuration_path(obj))[1])
        for obj in objects
        if obj["kind"].endswith("WebhookConfiguration")
    ]


def bundles(cluster: Cluster, objects: Objects) -> set[bytes]:
    """Every caBundle of the chart's webhooks (decoded; empty when one has none)."""
    return {
        base64.b64decode(hook["clientConfig"].get("caBundle", ""))
        for configuration in stored_configurations(cluster, objects)
        for hook in configuration["webhooks"]
    }


def test_the_chart_with_self_managed_certificates_serves_the_example(
    cluster: Cluster, installed: tuple[Objects, int], tmp_path: Path
) -> None:
    objects, port = installed
    cp = cluster.control_plane
    # The server may read and rewrite its Secret, never create one (create cannot be limited
    # to a name) or patch it: the chart ships it.
    assert secret_verbs(objects, "gpustack-webhook") == {"get", "update"}
    inputs, md = example_objects()
    namespace = md["metadata"]["namespace"]
    cluster.kubectl("create", "namespace", namespace, check=False)

    webhook_args = replace_flag(container_args(objects, "gpustack-webhook"), "--port", str(port))
    webhook_args = replace_flag(webhook_args, "--probe-port", str(free_port()))
    controller_args = replace_flag(
        container_args(objects, "gpustack-controller"), "--health-port", str(free_port())
    )
    webhook = WebhookProcess(
        kubeconfig=token_kubeconfig(cp, NAMESPACE, "gpustack-webhook", tmp_path / "wh.kubeconfig"),
        ca=cp.ca,
        namespace=NAMESPACE,
        workdir=tmp_path / "webhook",
        port=port,
        tls_secret=SECRET,
        # The Deployment's own arguments, then this host's: the cert-host (127.0.0.1, which the
        # configurations now call) and the listen address.
        extra_args=[a for a in webhook_args if not a.startswith("--tls-secret=")],
    )
    controller: ManagedProcess | None = None
    try:
        webhook.start()
        controller_kubeconfig = token_kubeconfig(
            cp, NAMESPACE, "gpustack-controller", tmp_path / "controller.kubeconfig"
        )
        controller = start_process(
            "gpustack-controller",
            [
                sys.executable, "-m", "gpustack_controller", *controller_args,
                f"--kubeconfig={controller_kubeconfig}", "--health-host=127.0.0.1",
            ],
            tmp_path / "controller.log",
        )  # fmt: skip

        # The server filled the chart's Secret (not one of its own: it kept the chart's labels
        # and type) and wrote its CA into every webhook of the chart.
        _, secret = cp.request("GET", f"/api/v1/namespaces/{NAMESPACE}/secrets/{SECRET}")
        assert secret["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm"
        assert secret["type"] == "Opaque"
        ca = base64.b64decode(secret["data"]["ca.crt"])
        assert bundles(cluster, objects) == {ca}  # a webhook without one would add b""

        # Applying the same objects again (an upgrade) leaves the caBundle the server wrote.
        kubectl_apply(
            cluster,
            [o for o in to_local(objects, port) if o["kind"].endswith("WebhookConfiguration")],
        )
        assert bundles(cluster, objects) == {ca}

        create_inputs(cluster, inputs)
        # Admitted (defaulted by the mutating webhook) and refused (the validating webhook),
        # through the API server; the first call may wait for it to see the new caBundle.
        probe = json.loads(json.dumps(md))
        probe["metadata"]["name"] = "probe"
        probe["spec"]["roles"][0]["resources"].pop("accelerator")
        bad = json.loads(json.dumps(md))
        bad["spec"]["roles"][0]["env"] = [{"name": "GPUSTACK_REPLICA_SIZE", "value": "1"}]
        admits_and_refuses(cp, probe, bad, settle=SETTLE_SECONDS)

        # The bundled example, applied as a user would, becomes Ready.
        kubectl_apply(cluster, [md])
        waited = cluster.kubectl(
            "wait", "-n", namespace, f"modeldeployment/{md['metadata']['name']}",
            "--for=condition=Ready", "--timeout=180s", check=False, timeout=240,
        )  # fmt: skip
        assert waited.returncode == 0, (
            f"{waited.stderr}\ncontroller:\n{controller.log_tail()}\nwebhook:\n{webhook.log_tail()}"
        )
        assert "condition met" in waited.stdout
        assert controller.popen.poll() is None, controller.log_tail()
        forbidden = forbidden_answers(
            [*webhook.log_lines(), *controller.log_path.read_text().splitlines()]
        )
        assert not forbidden, "\n".join(forbidden[:10])

        # Teardown while the controller runs (its finalizer), then the inputs.
        delete_if_present(cluster.control_plane, _path(md))
        deadline = time.monotonic() + 120
        while True:
            try:
                cp.request("GET", _path(md))
            except APIError as exc:
                if exc.status == 404:
                    break
                raise
            assert time.monotonic() < deadline, "the example was never torn down"
            time.sleep(0.5)
    finally:
        if controller is not None:
            controller.stop()
        webhook.close()
        for doc in reversed(inputs):
            delete_if_present(cluster.control_plane, _path(doc))
