"""An Elastic EP width edit on the simulated cluster, with the controller in this event loop and
the real Kueue (docs/elastic-ep.md, "Width changes"; D29): a width of 2 renders two members and
the Ray head; raising it to 4 within quota adds two members that Kueue admits and KWOK runs,
while the original members' Pods and Workloads, the master's boot width and every container stay
as they were, and the observation record says desired, admitted and allocated 4 with Ray and the
engine unknown (no process runs on a KWOK node). With quota for three members a width of 4
leaves one member waiting, and ``ElasticResize`` names the ClusterQueue and the resource."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpustack_controller.kube import CONFIGMAPS, MODEL_DEPLOYMENTS, Kube
from gpustack_render.core import labels
from gpustack_render.elastic.records import observation_name
from gpustack_render.rendering.elastic import BOOT_WIDTH_ANNOTATION

from .cluster import Cluster
from .controller_fixtures import (
    condition,
    deployment,
    ensure_instance_type,
    eventually,
    get_md,
    live,
    new_entrance,
    new_namespace,
    pods_of,
    running_controller,
    tear_down,
    workload_of,
)

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

NAME = "moe"
ROLE = "server"


@pytest.fixture
async def kube(kubeconfig_path: Path) -> Any:
    client = await Kube.connect(kubeconfig=str(kubeconfig_path))
    try:
        await ensure_instance_type(client)
        yield client
    finally:
        await client.close()


def _labels(pod: dict[str, Any]) -> dict[str, str]:
    return dict(pod["metadata"].get("labels") or {})


def members(pods: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    return {
        int(_labels(p)[labels.POD_ORDINAL]): p
        for p in live(pods)
        if _labels(p).get(labels.COMPONENT) == ROLE
    }


def heads(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [p for p in live(pods) if _labels(p).get(labels.COMPONENT) == f"{NAME}-elastic-head"]


def running(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running"


def restarts(pod: dict[str, Any]) -> int:
    return sum(
        int(c.get("restartCount") or 0)
        for c in (pod.get("status") or {}).get("containerStatuses") or ()
    )


async def _observation(kube: Kube, ns: str, uid: str) -> dict[str, Any] | None:
    cm = await kube.get(CONFIGMAPS, observation_name(uid), ns)
    if cm is None:
        return None
    doc: dict[str, Any] = json.loads(cm["data"]["observation.json"])
    return doc


async def _set_width(kube: Kube, ns: str, width: int) -> None:
    stored = await get_md(kube, ns, NAME)
    assert stored is not None
    roles = stored["spec"]["roles"]
    roles[0]["elasticEp"] = {"width": width}
    await kube.merge_patch(MODEL_DEPLOYMENTS, NAME, {"spec": {"roles": roles}}, ns)


async def test_width_2_to_4_adds_members_and_restarts_nobody(cluster: Cluster, kube: Kube) -> None:
    ns = await new_namespace(kube, "elastic")
    entrance = await new_entrance(kube, cluster, gpus=8)
    md = deployment(NAME, ns, entrance.role(ROLE, elasticEp={"width": 2}))
    async with running_controller(cluster.control_plane.kubeconfig):
        await kube.create(MODEL_DEPLOYMENTS, md, ns)

        async def started(n: int) -> dict[int, dict[str, Any]] | None:
            pods = await pods_of(kube, ns, NAME)
            found = members(pods)
            head = heads(pods)
            ok = sorted(found) == list(range(n)) and all(running(p) for p in found.values())
            return found if ok and len(head) == 1 and running(head[0]) else None

        before = await eventually(lambda: started(2), timeout=40, what="two members and the head")
        master = before[0]
        assert master["metadata"]["annotations"][BOOT_WIDTH_ANNOTATION] == "2"
        workloads = {o: await workload_of(kube, p) for o, p in before.items()}
        assert all(w is not None for w in workloads.values())
        stored = await get_md(kube, ns, NAME)
        assert stored is not None
        uid = stored["metadata"]["uid"]

        await _set_width(kube, ns, 4)
        after = await eventually(lambda: started(4), timeout=40, what="four members running")
        for ordinal, pod in before.items():
            assert after[ordinal]["metadata"]["uid"] == pod["metadata"]["uid"]
            wl, was = await workload_of(kube, after[ordinal]), workloads[ordinal]
            assert wl is not None and was is not None
            assert wl["metadata"]["uid"] == was["metadata"]["uid"]
        assert after[0]["metadata"]["annotations"][BOOT_WIDTH_ANNOTATION] == "2"
        assert all(restarts(p) == 0 for p in after.values())

        async def observed_4() -> dict[str, Any] | None:
            doc = await _observation(kube, ns, uid)
            layers = [(doc or {}).get(k) or {} for k in ("desired", "admitted", "allocated")]
            ok = all(layer.get("known") and layer.get("value") == 4 for layer in layers)
            return doc if ok else None

        doc = await eventually(observed_4, timeout=30, what="the observation record at 4")
        for layer in ("ray", "effective"):
            assert doc[layer]["known"] is False, doc
            assert "simulated node" in doc[layer]["reason"] and "KWOK" in doc[layer]["reason"]
        resize = condition(await get_md(kube, ns, NAME) or {}, "ElasticResize") or {}
        assert (resize.get("status"), resize.get("reason")) == ("True", "NoRefusal"), resize
        assert "KWOK" in resize.get("message", "")
        await tear_down(kube, ns, NAME)


async def test_width_beyond_quota_waits_naming_the_queue_and_resource(
    cluster: Cluster, kube: Kube
) -> None:
    ns = await new_namespace(kube, "elastic-q")
    entrance = await new_entrance(kube, cluster, gpus=3)
    md = deployment(NAME, ns, entrance.role(ROLE, elasticEp={"width": 2}))
    async with running_controller(cluster.control_plane.kubeconfig):
        await kube.create(MODEL_DEPLOYMENTS, md, ns)

        async def two() -> bool:
            found = members(await pods_of(kube, ns, NAME))
            return sorted(found) == [0, 1] and all(running(p) for p in found.values())

        await eventually(two, timeout=40, what="two members running")
        await _set_width(kube, ns, 4)

        async def waits() -> dict[str, Any] | None:
            found = members(await pods_of(kube, ns, NAME))
            if sorted(found) != [0, 1, 2, 3]:
                return None
            resize = condition(await get_md(kube, ns, NAME) or {}, "ElasticResize") or {}
            message = resize.get("message", "")
            # Kueue admits member 2 or 3 first and reserves the other for a moment before it
            # finds no quota; wait for the settled state (three admitted), not the first read.
            settled = "width 4 waits for admitted (3 of 4)" in message
            return resize if settled and "lacks" in message and entrance.name in message else None

        resize = await eventually(waits, timeout=40, what="ElasticResize naming the quota")
        message = resize["message"]
        assert f"ClusterQueue {entrance.name} lacks" in message and "nvidia.com/gpu" in message

        async def three_run() -> dict[int, dict[str, Any]] | None:
            found = members(await pods_of(kube, ns, NAME))
            return found if sum(running(p) for p in found.values()) == 3 else None

        found = await eventually(three_run, timeout=20, what="three members running")
        waiting = [o for o, p in found.items() if not running(p)]
        assert len(waiting) == 1 and waiting[0] in (2, 3), waiting
        assert f"member {waiting[0]}: Kueue has not admitted it" in message, message
        assert f"member {5 - waiting[0]}:" not in message, message
        assert found[0]["metadata"]["annotations"][BOOT_WIDTH_ANNOTATION] == "2"
        await tear_down(kube, ns, NAME)
