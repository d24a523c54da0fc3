"""The quota demo of `make cluster-demo` (examples/quota/, issue 37 item 7): its deployment
renders, asks for more GPUs than the ClusterQueue shipped beside it holds, and that
ClusterQueue is the template of deploy/kueue/ with smaller quotas and the entrance's name."""

from __future__ import annotations

import copy
import io
from pathlib import Path
from typing import Any

from gpustack_render.cli.parser import build_parser
from gpustack_render.cli.verbs import render as render_verb
from gpustack_render.cli.yamlio import load_documents
from gpustack_render.core.quantity import parse_quantity

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "quota"


def _one(path: Path, kind: str) -> dict[str, Any]:
    (doc,) = [d for d in load_documents(path.read_text()) if d["kind"] == kind]
    return doc


def test_the_demo_asks_for_more_gpus_than_its_queue_holds() -> None:
    out, err = io.StringIO(), io.StringIO()
    args = build_parser().parse_args(["render", str(DEMO / "quota-demo.yaml"), "-o", "json"])
    assert render_verb.run(args, out, err) == 0, err.getvalue()
    pods = [o for o in load_documents(out.getvalue()) if o["kind"] == "Pod"]
    asked = sum(
        parse_quantity(c["resources"]["requests"].get("nvidia.com/gpu", 0))
        for p in pods
        for c in p["spec"]["containers"]
    )
    queue = _one(DEMO / "clusterqueue.yaml", "ClusterQueue")
    (flavor,) = queue["spec"]["resourceGroups"][0]["flavors"]
    holds = {r["name"]: r["nominalQuota"] for r in flavor["resources"]}
    assert holds["nvidia.com/gpu"] < asked, (holds, asked)
    entrance = _one(DEMO / "quota-demo.yaml", "InstanceType")["status"]["entrance"]
    assert queue["metadata"]["name"] == entrance


def test_the_demo_queue_is_the_template_but_for_its_name_and_quotas() -> None:
    template = _one(ROOT / "deploy" / "kueue" / "clusterqueue.yaml", "ClusterQueue")
    queue = copy.deepcopy(_one(DEMO / "clusterqueue.yaml", "ClusterQueue"))
    queue["metadata"] = template["metadata"]
    for ours, theirs in zip(
        queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"],
        template["spec"]["resourceGroups"][0]["flavors"][0]["resources"],
        strict=True,
    ):
        ours["nominalQuota"] = theirs["nominalQuota"]
    assert queue == template
