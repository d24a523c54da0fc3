"""An Elastic EP deployment through the real reconcile pass against an in-memory API server
(docs/elastic-ep.md, "In the controller's pass"): the members, the Ray head and its Service are
created; the observation record is written and ``ElasticResize`` joins the conditions; a raised
width adds members and touches nobody; an unreadable master is a hold that creates nothing."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from controller_support import MemoryKube, reconciler

from gpustack_controller.metrics import StatusGauges
from gpustack_controller.teardown import HOLD_SECONDS
from gpustack_render.cli.yamlio import load_documents
from gpustack_render.core import labels
from gpustack_render.elastic.records import observation_name
from gpustack_render.rendering.elastic import BOOT_WIDTH_ANNOTATION

EXAMPLE = Path(__file__).parents[2] / "examples" / "elastic" / "deepseek-elastic.yaml"
DOCS = {str(d["kind"]): d for d in load_documents(EXAMPLE.read_text())}
NS = DOCS["ModelDeployment"]["metadata"]["namespace"]
NAME = DOCS["ModelDeployment"]["metadata"]["name"]
KEY = f"{NS}/{NAME}"
HEAD = f"{NAME}-elastic-head"


def _pods(kube: MemoryKube, component: str = "server") -> dict[int, dict[str, Any]]:
    return {
        int(p["metadata"]["labels"][labels.POD_ORDINAL]): p
        for p in kube.of_kind("Pod")
        if p["metadata"]["labels"].get(labels.COMPONENT) == component
    }


def _md(kube: MemoryKube) -> dict[str, Any]:
    md = kube.stored("ModelDeployment", NS, NAME)
    assert md is not None
    return md


def _setup() -> MemoryKube:
    kube = MemoryKube()
    for doc in DOCS.values():
        kube.put(copy.deepcopy(doc))
    return kube


async def test_members_head_records_and_condition_then_a_raise_adds_members_only() -> None:
    kube = _setup()
    reconcile = reconciler(kube, StatusGauges())
    await reconcile(KEY)
    members = _pods(kube)
    assert sorted(members) == [0, 1, 2, 3]
    assert members[0]["metadata"]["annotations"][BOOT_WIDTH_ANNOTATION] == "4"
    assert len(_pods(kube, HEAD)) == 1
    assert kube.stored("Service", NS, HEAD) is not None
    md = _md(kube)
    uid = md["metadata"]["uid"]
    (resize,) = [c for c in md["status"]["conditions"] if c["type"] == "ElasticResize"]
    assert (resize["status"], resize["reason"]) == ("True", "NoRefusal")
    record = kube.stored("ConfigMap", NS, observation_name(uid))
    assert record is not None
    observation = json.loads(record["data"]["observation.json"])
    assert observation["desired"] == {"known": True, "value": 4, "reason": ""}

    # A second pass creates nothing more (the head is not a role gone from the spec).
    await reconcile(KEY)
    assert {p["metadata"]["uid"] for p in kube.of_kind("Pod")} == {
        p["metadata"]["uid"] for p in [*members.values(), *_pods(kube, HEAD).values()]
    }

    # Width 4 -> 6: two members added; nobody deleted; the master keeps its boot width.
    md = _md(kube)
    md["spec"]["roles"][0]["elasticEp"]["width"] = 6
    md["metadata"]["generation"] += 1
    await reconcile(KEY)
    after = _pods(kube)
    assert sorted(after) == [0, 1, 2, 3, 4, 5]
    assert all(after[o]["metadata"]["uid"] == p["metadata"]["uid"] for o, p in members.items())
    assert after[0]["metadata"]["annotations"][BOOT_WIDTH_ANNOTATION] == "4"
    assert after[5]["metadata"]["annotations"].get(BOOT_WIDTH_ANNOTATION) is None

    # An edit that moves the members' hash rolls nobody.
    md = _md(kube)
    md["spec"]["roles"][0]["extraArgs"].append("--max-model-len=4096")
    md["metadata"]["generation"] += 1
    await reconcile(KEY)
    assert {o: p["metadata"]["uid"] for o, p in _pods(kube).items()} == {
        o: p["metadata"]["uid"] for o, p in after.items()
    }


async def test_an_unreadable_master_holds_and_creates_nothing() -> None:
    kube = _setup()
    reconcile = reconciler(kube, StatusGauges())
    await reconcile(KEY)
    master = _pods(kube)[0]
    stored = kube.stored("Pod", NS, master["metadata"]["name"])
    assert stored is not None
    stored["metadata"]["annotations"][BOOT_WIDTH_ANNOTATION] = "many"
    other = _pods(kube)[3]
    del kube.objects[("Pod", NS, other["metadata"]["name"])]  # a member to recreate
    before = {p["metadata"]["uid"] for p in kube.of_kind("Pod")}

    assert await reconcile(KEY) == HOLD_SECONDS  # a hold, not a failure loop
    assert {p["metadata"]["uid"] for p in kube.of_kind("Pod")} == before
    conditions = {c["type"]: c for c in _md(kube)["status"]["conditions"]}
    stalled = conditions["Stalled"]
    assert stalled["status"] == "True" and "'many'" in stalled["message"]
    assert conditions["ElasticResize"]["reason"] == "NoRefusal"  # kept as the last pass left it
