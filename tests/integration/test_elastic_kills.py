"""An Elastic EP width change with the controller killed (SIGKILL) at random points, on the
simulated cluster with the real Kueue (docs/elastic-ep.md, "Width changes"; D29): the controller
is a process of its own (as in test_chaos.py), killed while a width of 2 grows to 4 and started
again. After each kill and at the end: no member is ever deleted (the boot members keep their
Pods and Workloads), no ordinal is held by two live members, the master's boot width never
moves, and once the controller is left running the change ends with four members and the
observation record at 4. The width-change table itself, with a kill between every pair of
states, runs in-process against the library (tests/unit/test_elastic_restart.py)."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import pytest

from gpustack_controller.kube import MODEL_DEPLOYMENTS, Kube
from gpustack_render.core import labels
from gpustack_render.rendering.elastic import BOOT_WIDTH_ANNOTATION

from .cluster import Cluster
from .controller_fixtures import (
    deployment,
    ensure_instance_type,
    eventually,
    get_md,
    new_entrance,
    new_namespace,
    pods_of,
    tear_down,
    workload_of,
)
from .test_chaos import ControllerProcess
from .test_elastic_width import NAME, ROLE, _observation, _set_width, heads, members, running

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

KILLS = 4
SEED = 20261207


async def _violations(kube: Kube, ns: str, boot: dict[int, str]) -> list[str]:
    """What must never be seen: a boot member gone or replaced, an ordinal held twice, the
    master's boot width moved, more than one head."""
    pods = [p for p in await pods_of(kube, ns, NAME) if not p["metadata"].get("deletionTimestamp")]
    found: list[str] = []
    by_ordinal: dict[int, list[str]] = {}
    for pod in pods:
        own = pod["metadata"].get("labels") or {}
        if own.get(labels.COMPONENT) == ROLE:
            by_ordinal.setdefault(int(own[labels.POD_ORDINAL]), []).append(pod["metadata"]["uid"])
    for ordinal, uids in by_ordinal.items():
        if len(uids) > 1:
            found.append(f"ordinal {ordinal} held by {len(uids)} live members")
    for ordinal, uid in boot.items():
        if by_ordinal.get(ordinal) != [uid]:
            found.append(f"boot member {ordinal} ({uid}) is not the one standing")
    master = members(pods).get(0)
    if master is not None and master["metadata"]["annotations"].get(BOOT_WIDTH_ANNOTATION) != "2":
        found.append("the master's boot width moved")
    if len(heads(pods)) > 1:
        found.append(f"{len(heads(pods))} Ray heads")
    return found


async def test_sigkill_during_a_width_change_deletes_no_member(
    cluster: Cluster, kube: Kube, kubeconfig_path: Path, tmp_path: Path
) -> None:
    rng = random.Random(SEED)
    await ensure_instance_type(kube)
    ns = await new_namespace(kube, "ekill")
    entrance = await new_entrance(kube, cluster, gpus=8)
    controller = ControllerProcess(kubeconfig_path, tmp_path)
    try:
        controller.start()
        await kube.create(
            MODEL_DEPLOYMENTS, deployment(NAME, ns, entrance.role(ROLE, elasticEp={"width": 2})), ns
        )

        async def started(n: int) -> dict[int, dict[str, Any]] | None:
            pods = await pods_of(kube, ns, NAME)
            found = members(pods)
            head = heads(pods)
            ok = sorted(found) == list(range(n)) and all(running(p) for p in found.values())
            return found if ok and len(head) == 1 and running(head[0]) else None

        before = await eventually(lambda: started(2), timeout=60, what="two members and the head")
        boot = {o: p["metadata"]["uid"] for o, p in before.items()}
        workloads = {o: await workload_of(kube, p) for o, p in before.items()}
        stored = await get_md(kube, ns, NAME)
        assert stored is not None
        uid = stored["metadata"]["uid"]

        await _set_width(kube, ns, 4)
        for kill in range(KILLS):
            await asyncio.sleep(rng.uniform(0.2, 2.0))
            controller.kill()
            problems = await _violations(kube, ns, boot)
            assert not problems, f"after kill {kill + 1}: {problems}"
            await asyncio.sleep(rng.uniform(0.0, 1.0))
            controller.start()

        after = await eventually(lambda: started(4), timeout=90, what="four members running")
        assert not await _violations(kube, ns, boot)
        for ordinal, wl in workloads.items():
            now = await workload_of(kube, after[ordinal])
            assert wl is not None and now is not None
            assert now["metadata"]["uid"] == wl["metadata"]["uid"]

        async def observed_4() -> dict[str, Any] | None:
            doc = await _observation(kube, ns, uid)
            layers = [(doc or {}).get(k) or {} for k in ("desired", "admitted", "allocated")]
            ok = all(layer.get("known") and layer.get("value") == 4 for layer in layers)
            return doc if ok else None

        await eventually(observed_4, timeout=60, what="the observation record at 4")
        await tear_down(kube, ns, NAME)
    finally:
        controller.stop()
