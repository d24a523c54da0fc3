"""The simulated cluster's autoscaling option, end to end with the real components: KWOK emulates
the kubelet's resource metrics of its fake Pods, metrics-server scrapes them and serves
``metrics.k8s.io`` through the API server's aggregation layer, and the real HPA of
kube-controller-manager scales a Deployment, and a custom resource through its ``scale``
subresource (the shape of issue 24's ModelDeploymentScaler), up and back down.

Nothing here is product code: this proves the ground the autoscaling tests stand on.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from fractions import Fraction
from typing import Any, TypeVar

import pytest

from gpustack_render.core.quantity import parse_quantity

from .autoscaling import cpu_hpa
from .cluster import Cluster
from .controlplane import APIError

pytestmark = [pytest.mark.integration]

T = TypeVar("T")

#: The scale-target CRD the test makes up: a ``scale`` subresource like the product's scaler.
PROBE_GROUP = "autoscaling-probe.gpustack.ai"
PROBE_PLURAL = "scaleprobes"
PROBE_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"{PROBE_PLURAL}.{PROBE_GROUP}"},
    "spec": {
        "group": PROBE_GROUP,
        "scope": "Namespaced",
        "names": {
            "kind": "ScaleProbe",
            "listKind": "ScaleProbeList",
            "plural": PROBE_PLURAL,
            "singular": "scaleprobe",
        },
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "properties": {"replicas": {"type": "integer", "minimum": 0}},
                            },
                            "status": {
                                "type": "object",
                                "properties": {
                                    "replicas": {"type": "integer"},
                                    "selector": {"type": "string"},
                                },
                            },
                        },
                    }
                },
                "subresources": {
                    "status": {},
                    "scale": {
                        "specReplicasPath": ".spec.replicas",
                        "statusReplicasPath": ".status.replicas",
                        "labelSelectorPath": ".status.selector",
                    },
                },
            }
        ],
    },
}

CPU_REQUEST = "100m"
#: 50% of the request: the HPAs below aim at 50m of CPU per Pod.
TARGET_UTILIZATION = 50


def _wait(probe: Callable[[], T | None], timeout: float, what: str, why: Callable[[], str]) -> T:
    """Poll ``probe`` every second until it returns something other than None/False."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value is not None and value is not False:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"{what} within {timeout:.0f}s; {why()}")
        time.sleep(1)


@pytest.fixture
def namespaces(autoscaling_cluster: Cluster) -> Iterator[tuple[str, str]]:
    """One namespace for the Deployment, one for the ScaleProbes (HPAs whose selectors find
    the same Pods would both refuse to act: AmbiguousSelector)."""
    created = ("hpa-deployment", "hpa-scale-subresource")
    for name in created:
        autoscaling_cluster.apply(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        )
    try:
        yield created
    finally:
        for name in created:
            autoscaling_cluster.control_plane.request("DELETE", f"/api/v1/namespaces/{name}")


def _container() -> dict[str, Any]:
    return {
        "name": "server",
        "image": "registry.invalid/server:1",
        "resources": {"requests": {"cpu": CPU_REQUEST, "memory": "64Mi"}},
    }


def _hpa(namespace: str, name: str, target: dict[str, str], max_replicas: int) -> dict[str, Any]:
    return cpu_hpa(
        namespace, name, target, max_replicas=max_replicas, utilization=TARGET_UTILIZATION
    )


def hpa_path(namespace: str, name: str) -> str:
    return f"/apis/autoscaling/v2/namespaces/{namespace}/horizontalpodautoscalers/{name}"


def _get(cluster: Cluster, path: str) -> dict[str, Any]:
    _, body = cluster.control_plane.request("GET", path)
    return dict(body)


def _running_pods(cluster: Cluster, namespace: str, selector: str) -> list[str]:
    pods = _get(cluster, f"/api/v1/namespaces/{namespace}/pods?labelSelector={selector}")
    return sorted(
        p["metadata"]["name"]
        for p in pods["items"]
        if p.get("status", {}).get("phase") == "Running"
        and not p["metadata"].get("deletionTimestamp")
    )


def _running(
    cluster: Cluster, namespace: str, selector: str, count: int
) -> Callable[[], list[str] | None]:
    """A probe: the names of the Running Pods ``selector`` finds, once there are ``count``."""

    def probe() -> list[str] | None:
        pods = _running_pods(cluster, namespace, selector)
        return pods if len(pods) == count else None

    return probe


def _pod_usage(cluster: Cluster, namespace: str, pod: str) -> tuple[Fraction, Fraction] | None:
    """(CPU cores, memory bytes) of a Pod as metrics.k8s.io serves it, or None before any."""
    try:
        metrics = _get(cluster, f"/apis/metrics.k8s.io/v1beta1/namespaces/{namespace}/pods/{pod}")
    except APIError as exc:
        if exc.status == 404:
            return None
        raise
    usage = [c["usage"] for c in metrics["containers"]]
    return (
        sum((parse_quantity(u["cpu"]) for u in usage), Fraction(0)),
        sum((parse_quantity(u["memory"]) for u in usage), Fraction(0)),
    )


def _hpa_story(cluster: Cluster, namespace: str, name: str) -> Callable[[], str]:
    """What to print when a wait fails: the HPA's status and the namespace's events."""

    def story() -> str:
        hpa = _get(cluster, hpa_path(namespace, name))
        events = cluster.kubectl("get", "events", "-n", namespace, check=False).stdout
        return f"HPA status: {hpa.get('status')}\nevents:\n{events}"

    return story


def _usage_reaches(
    cluster: Cluster, namespace: str, pod: str, cpu: Fraction, memory: Fraction
) -> Callable[[], tuple[Fraction, Fraction] | None]:
    """A probe: the served usage of ``pod``, once CPU is within 5% of ``cpu`` and memory equal."""

    def probe() -> tuple[Fraction, Fraction] | None:
        usage = _pod_usage(cluster, namespace, pod)
        if usage is None or abs(usage[0] - cpu) > cpu / 20 or usage[1] != memory:
            return None
        return usage

    return probe


def _deployment(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": namespace},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [_container()]},
            },
        },
    }


def _probe_pod(namespace: str, index: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"served-{index}",
            "namespace": namespace,
            "labels": {"probe": "with-selector"},
        },
        "spec": {"containers": [_container()]},
    }


def _replicas(cluster: Cluster, path: str, count: int) -> Callable[[], bool]:
    return lambda: _get(cluster, path)["spec"]["replicas"] == count


def test_the_real_hpa_scales_a_deployment_and_a_scale_subresource_on_emulated_cpu(
    autoscaling_cluster: Cluster, namespaces: tuple[str, str]
) -> None:
    """Both targets go through the same phases side by side (the waits overlap, which keeps
    the test near one scale-up and one scale-down of wall time)."""
    cluster, (web_ns, probe_ns) = autoscaling_cluster, namespaces
    started = time.monotonic()

    def at() -> str:
        return f"{time.monotonic() - started:.0f}s"

    # A Deployment of one replica; a ScaleProbe with a selector (2 replicas) and one without
    # (1 replica). Nobody creates Pods for a ScaleProbe: two bare Pods stand for its serving
    # Pods, found only through the selector its scale subresource reports.
    # (A kind made while kube-controller-manager runs is unknown to the HPA until its discovery
    # cache is reset, every 30s: FailedGetScale until then, hidden here behind the ~30s the
    # first metrics of new Pods take.)
    cluster.control_plane.install_crds([PROBE_CRD])
    cluster.apply(_deployment(web_ns))
    probes = f"/apis/{PROBE_GROUP}/v1/namespaces/{probe_ns}/{PROBE_PLURAL}"
    for name, replicas in (("with-selector", 2), ("without-selector", 1)):
        cluster.control_plane.request(
            "POST",
            probes,
            {
                "apiVersion": f"{PROBE_GROUP}/v1",
                "kind": "ScaleProbe",
                "metadata": {"name": name},
                "spec": {"replicas": replicas},
            },
        )
    cluster.control_plane.request(
        "PATCH",
        f"{probes}/with-selector/status",
        {"status": {"replicas": 2, "selector": "probe=with-selector"}},
        content_type="application/merge-patch+json",
    )
    for i in range(2):
        cluster.apply(_probe_pod(probe_ns, i))
    scale = _get(cluster, f"{probes}/with-selector/scale")
    assert scale["kind"] == "Scale"
    assert scale["status"] == {"replicas": 2, "selector": "probe=with-selector"}

    # Far above the 50% target: 400m on the Deployment's Pod, 300m on each probe Pod (KWOK
    # ResourceUsages), and the HPAs.
    no_story = lambda: ""  # noqa: E731
    (web_pod,) = _wait(_running(cluster, web_ns, "app=web", 1), 60, "no web Pod ran", no_story)
    probe_pods = _wait(
        _running(cluster, probe_ns, "probe=with-selector", 2), 60, "no probe Pods ran", no_story
    )
    cluster.set_pod_usage(web_ns, web_pod, cpu="400m", memory="100Mi")
    for pod in probe_pods:
        cluster.set_pod_usage(probe_ns, pod, cpu="300m", memory="80Mi")
    deployment = f"/apis/apps/v1/namespaces/{web_ns}/deployments/web"
    cluster.apply(
        _hpa(web_ns, "web", {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}, 4)
    )
    probe_target = {"apiVersion": f"{PROBE_GROUP}/v1", "kind": "ScaleProbe"}
    for name in ("with-selector", "without-selector"):
        cluster.apply(_hpa(probe_ns, name, {**probe_target, "name": name}, 5))

    # The emulated usage, read back through the aggregated metrics API and `kubectl top`
    # (metrics-server rates KWOK's CPU counter).
    _wait(
        _usage_reaches(cluster, web_ns, web_pod, Fraction(4, 10), Fraction(100 * 2**20)),
        60,
        "metrics.k8s.io never served the emulated 400m / 100Mi",
        lambda: f"served: {_pod_usage(cluster, web_ns, web_pod)}",
    )
    served = at()
    top = cluster.kubectl("top", "pod", web_pod, "-n", web_ns, "--no-headers").stdout.split()
    assert top[0] == web_pod
    assert abs(int(top[1].removesuffix("m")) - 400) <= 20, top
    assert top[2] == "100Mi", top

    # Up: the Deployment to its cap, 4 (the new Pods run at KWOK's default 1m, so the average
    # stays far above 50%); the ScaleProbe to its cap, 5, written through /scale.
    web_story = _hpa_story(cluster, web_ns, "web")
    probe_story = _hpa_story(cluster, probe_ns, "with-selector")
    _wait(_replicas(cluster, deployment, 4), 60, "no Deployment scale-up to 4", web_story)
    web_up = at()
    _wait(
        _replicas(cluster, f"{probes}/with-selector", 5), 60, "no ScaleProbe scale-up", probe_story
    )
    probe_up = at()
    (current,) = _get(cluster, hpa_path(web_ns, "web"))["status"]["currentMetrics"]
    assert current["resource"]["name"] == "cpu"
    assert current["resource"]["current"]["averageUtilization"] > TARGET_UTILIZATION

    # On its next sync the probe's HPA reads spec.replicas back as its current count, although
    # status.replicas, which nobody updated, stays 2; and the utilization averages over the
    # Pods the selector finds (2 at 300%), not over 5 replicas.
    def counted_five() -> dict[str, Any] | None:
        hpa = _get(cluster, hpa_path(probe_ns, "with-selector"))
        return hpa if hpa["status"]["currentReplicas"] == 5 else None

    hpa = _wait(counted_five, 30, "the HPA never counted 5 current replicas", probe_story)
    assert _get(cluster, f"{probes}/with-selector")["status"]["replicas"] == 2
    (current,) = hpa["status"]["currentMetrics"]
    assert abs(current["resource"]["current"]["averageUtilization"] - 300) <= 15, current

    # Without status.selector the HPA refuses to compute anything and leaves replicas alone.
    def refused() -> dict[str, Any] | None:
        status = _get(cluster, hpa_path(probe_ns, "without-selector")).get("status") or {}
        by_type = {c["type"]: c for c in status.get("conditions") or ()}
        active = by_type.get("ScalingActive")
        return active if active and active["status"] == "False" else None

    refusal = _wait(
        refused, 30, "no InvalidSelector", _hpa_story(cluster, probe_ns, "without-selector")
    )
    assert refusal["reason"] == "InvalidSelector"
    assert refusal["message"] == "the HPA target's scale is missing a selector"
    reasons = cluster.kubectl(
        "get",
        "events",
        "-n",
        probe_ns,
        "--field-selector=involvedObject.name=without-selector",
        "-o",
        "jsonpath={.items[*].reason}",
    ).stdout.split()
    assert "SelectorRequired" in reasons
    assert _get(cluster, f"{probes}/without-selector")["spec"]["replicas"] == 1

    # Down: 10m everywhere; once the 15s stabilization window has passed, the minimum, 1.
    _wait(_running(cluster, web_ns, "app=web", 4), 60, "4 web Pods not Running", web_story)
    cluster.set_pod_usage(web_ns, web_pod, cpu="10m", memory="100Mi")
    for pod in probe_pods:
        cluster.set_pod_usage(probe_ns, pod, cpu="10m", memory="80Mi")
    _wait(_replicas(cluster, deployment, 1), 90, "no Deployment scale-down", web_story)
    web_down = at()
    _wait(
        _replicas(cluster, f"{probes}/with-selector", 1),
        90,
        "no ScaleProbe scale-down",
        probe_story,
    )
    conditions = _get(cluster, hpa_path(web_ns, "web"))["status"]["conditions"]
    assert {c["type"]: c["status"] for c in conditions}["ScalingActive"] == "True"
    print(
        f"metrics served at {served}; Deployment up at {web_up}, down at {web_down}; "
        f"ScaleProbe up at {probe_up}, down at {at()}"
    )
