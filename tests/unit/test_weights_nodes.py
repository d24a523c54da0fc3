"""What the node stores say about a digest (docs/node-store.md, "The controller's side"):
``status.nodes``, the preferred nodes of a node-delivered Pod (outside the pod-spec-hash),
``WeightsReady`` ``Materializing``/``MaterializationFailed``, and the input graph's answer.

Expected values come from the contract (docs/contract/model-delivery.md §1.3, §7.2): the mean
of the downloading nodes' percent, rounded down to a multiple of 5, absent when none downloads;
a node is preferred when it lists the digest ``Ready`` and its store is not ``CapacityLow``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_weights_delivery import (
    CSI,
    DIGEST,
    NODE,
    decoded,
    hashes,
    hub_artifact,
    lookups,
    md_data,
    render_of,
)

from gpustack_render.api.artifact import ArtifactNodes, ModelArtifact
from gpustack_render.api.nodestore import NodeModelStore
from gpustack_render.cli.documents import read_bundle
from gpustack_render.core.settings import Settings
from gpustack_render.reconcile.conditions.weights import weights_ready
from gpustack_render.reconcile.inputs import InputGraph, Read
from gpustack_render.reconcile.observed import ObservedPod
from gpustack_render.rendering.renderer import render
from gpustack_render.weights import nodes
from gpustack_render.weights.delivery import WeightsPlan, weights_of

OTHER = "sha256:" + "e" * 64


def entry(
    state: str,
    *,
    digest: str = DIGEST,
    done: int | None = None,
    size: int | None = 1000,
    **extra: Any,
) -> dict[str, Any]:
    out: dict[str, Any] = {"digest": digest, "state": state}
    if size is not None:
        out["sizeBytes"] = size
    if done is not None:
        out["downloadedBytes"] = done
    out.update(extra)
    return out


def store(name: str, *entries: dict[str, Any], low: bool = False) -> NodeModelStore:
    status: dict[str, Any] = {"models": list(entries)}
    if low:
        status["conditions"] = [{"type": "CapacityLow", "status": "True", "reason": "AboveHigh"}]
    return NodeModelStore.model_validate({"metadata": {"name": name}, "status": status})


# --- status.nodes --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stores", "expected"),
    [
        ([], ArtifactNodes()),
        ([store("a", entry("Ready"))], ArtifactNodes(ready=1)),
        # one downloading at 37 %: rounded down to 35
        (
            [store("a", entry("Downloading", done=370))],
            ArtifactNodes(downloading=1, downloading_percent=35),
        ),
        # 10 % and 29 %: mean 19.5 → 19 → 15
        (
            [
                store("a", entry("Downloading", done=100)),
                store("b", entry("Downloading", done=290)),
            ],
            ArtifactNodes(downloading=2, downloading_percent=15),
        ),
        # the exact mean, not a mean of rounded percents: 9.9 % and 10.2 % → 10.05 → 10
        (
            [store("a", entry("Downloading", done=99)), store("b", entry("Downloading", done=102))],
            ArtifactNodes(downloading=2, downloading_percent=10),
        ),
        # a Ready node does not count in the mean; a Failed one neither
        (
            [
                store("a", entry("Ready")),
                store("b", entry("Downloading", done=999)),
                store("c", entry("Failed", reason="DigestMismatch")),
            ],
            ArtifactNodes(ready=1, downloading=1, failed=1, downloading_percent=95),
        ),
        # an unknown size is 0 %; more than the size is 100 %
        (
            [
                store("a", entry("Downloading", size=None, done=5)),
                store("b", entry("Downloading", done=5000)),
            ],
            ArtifactNodes(downloading=2, downloading_percent=50),
        ),
        # another digest, a store without a name: nothing
        ([store("a", entry("Ready", digest=OTHER)), store("", entry("Ready"))], ArtifactNodes()),
    ],
)
def test_aggregate(stores: list[NodeModelStore], expected: ArtifactNodes) -> None:
    assert nodes.aggregate(stores, DIGEST) == expected


def test_nodes_written_when_changed_and_at_most_every_30_seconds() -> None:
    one = ArtifactNodes(ready=1)
    assert (
        nodes.nodes_write_in(None, ArtifactNodes(), since_last_write=None) is None
    )  # absent = zeros
    assert nodes.nodes_write_in(one, one, since_last_write=1.0) is None
    assert nodes.nodes_write_in(None, one, since_last_write=None) == 0.0
    assert nodes.nodes_write_in(None, one, since_last_write=30.0) == 0.0
    assert nodes.nodes_write_in(None, one, since_last_write=10.0) == pytest.approx(20.0)
    assert nodes.nodes_write_in(one, ArtifactNodes(), since_last_write=None) == 0.0


# --- the preference ------------------------------------------------------------------------


def test_holding_nodes_are_ready_and_not_capacity_low() -> None:
    stores = [
        store("n3", entry("Ready")),
        store("n1", entry("Ready")),
        store("n2", entry("Ready"), low=True),
        store("n4", entry("Downloading", done=1)),
        store("n5", entry("Failed")),
        store("n6", entry("Ready", digest=OTHER)),
    ]
    assert nodes.holding_nodes(stores, DIGEST) == ("n1", "n3")
    assert nodes.node_preference(()) is None
    assert nodes.node_preference(["b", "a"]) == {
        "weight": 100,
        "preference": {
            "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a", "b"]}]
        },
    }


def _pod(rendering: Any) -> dict[str, Any]:
    pod: dict[str, Any] = rendering.roles[0].seats[0].pod
    return pod


def test_a_node_pod_prefers_the_holding_nodes_outside_the_hash() -> None:
    held = [store("gpu-2", entry("Ready")), store("gpu-1", entry("Downloading", done=5))]
    without = render_of(md_data(), hub_artifact(), CSI, settings=NODE)
    with_nodes = render_of(md_data(), hub_artifact(), CSI, *held, settings=NODE)
    assert "affinity" not in _pod(without)["spec"]
    assert _pod(with_nodes)["spec"]["affinity"] == {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "preference": {
                        "matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": ["gpu-2"]}
                        ]
                    },
                }
            ]
        }
    }
    # which nodes hold the weights never rolls anyone
    assert hashes(without) == hashes(with_nodes)


def test_engine_delivery_has_no_preference() -> None:
    held = [store("gpu-2", entry("Ready"))]
    rendering = render_of(md_data(), hub_artifact(), *held)
    assert "affinity" not in _pod(rendering)["spec"]


def test_weights_of_reads_the_records_of_the_digest() -> None:
    held = [store("gpu-2", entry("Ready")), store("gpu-1", entry("Failed", reason="X"))]
    plan = weights_of(
        decoded(md_data()), lookups=lookups(hub_artifact(), CSI, *held), settings=NODE
    )
    assert isinstance(plan, WeightsPlan)
    assert plan.holding_nodes == ("gpu-2",)
    assert sorted(plan.node_records) == ["gpu-1", "gpu-2"]
    engine = weights_of(
        decoded(md_data()), lookups=lookups(hub_artifact(), CSI, *held), settings=Settings()
    )
    assert isinstance(engine, WeightsPlan) and engine.holding_nodes == ()


# --- WeightsReady ----------------------------------------------------------------------------


def _plan(*stores: NodeModelStore) -> WeightsPlan:
    artifact = ModelArtifact.model_validate(hub_artifact())
    return WeightsPlan(
        artifact=artifact,
        delivery="Node",
        settings=NODE,
        node_records=nodes.records_by_node(stores, DIGEST),
    )


def test_materializing_names_the_node_and_its_bytes() -> None:
    plan = _plan(store("gpu-1", entry("Downloading", done=250)))
    verdict = weights_ready(plan, [ObservedPod(name="p-0", node_name="gpu-1")])
    assert (verdict.status, verdict.reason) == ("False", "Materializing")
    assert "p-0 (node gpu-1 has 250 of 1000 bytes (25 %))" in verdict.message


def test_a_failure_wins_and_carries_reason_and_retry_time() -> None:
    plan = _plan(
        store("gpu-1", entry("Downloading", done=250)),
        store(
            "gpu-2",
            entry(
                "Failed",
                reason="DigestMismatch",
                message="config.json: sha1 differs",
                retryTime="2026-12-07T12:00:00Z",
            ),
        ),
    )
    pods = [ObservedPod(name="p-0", node_name="gpu-1"), ObservedPod(name="p-1", node_name="gpu-2")]
    verdict = weights_ready(plan, pods)
    assert verdict.reason == "MaterializationFailed"
    assert "DigestMismatch (config.json: sha1 differs)" in verdict.message
    assert "2026-12-07T12:00:00Z" in verdict.message


@pytest.mark.parametrize(
    ("pod", "reason"),
    [
        # not scheduled yet, or its node lists nothing: the kubelet's mount is what it waits on
        (ObservedPod(name="p", node_name=""), "WeightsNotMounted"),
        (ObservedPod(name="p", node_name="gpu-9"), "WeightsNotMounted"),
        # a Ready record: the mount is on its way
        (ObservedPod(name="p", node_name="gpu-3"), "WeightsNotMounted"),
        # mounted: the node's record no longer matters
        (ObservedPod(name="p", node_name="gpu-1", volumes_ready=True), "Mounted"),
        (ObservedPod(name="p", node_name="gpu-1", terminating=True), "Mounted"),
    ],
)
def test_only_a_waiting_pod_on_a_listing_node_materializes(pod: ObservedPod, reason: str) -> None:
    plan = _plan(store("gpu-1", entry("Downloading", done=1)), store("gpu-3", entry("Ready")))
    assert weights_ready(plan, [pod]).reason == reason


# --- the input graph -----------------------------------------------------------------------


def _raw_store(name: str, *entries: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "NodeModelStore",
        "metadata": {"name": name, "resourceVersion": "7"},
        "status": {"models": list(entries)},
    }


def test_the_graph_asks_for_the_digest_and_takes_the_records() -> None:
    graph = InputGraph(decoded(md_data()))
    read = next(r for r in graph.pending() if r.kind is ModelArtifact)
    graph.answer(read, hub_artifact())
    assert graph.node_store_digests() == [DIGEST]
    bad = _raw_store("gpu-9", {"digest": DIGEST, "state": "Sideways"})
    graph.answer_node_stores([_raw_store("gpu-2", entry("Ready")), bad])
    assert [s.name for s in graph.lookups.all_of(NodeModelStore)] == ["gpu-2"]
    assert [u.read for u in graph.unreadable] == [Read(NodeModelStore, "", "gpu-9")]


def test_an_unresolved_or_claim_artifact_needs_no_record() -> None:
    graph = InputGraph(decoded(md_data()))
    read = next(r for r in graph.pending() if r.kind is ModelArtifact)
    unresolved = hub_artifact()
    del unresolved["status"]["resolved"]
    graph.answer(read, unresolved)
    assert graph.node_store_digests() == []


# --- lenient reading for the indexes ---------------------------------------------------------


def test_listed_digests_and_changes_are_read_leniently() -> None:
    assert nodes.listed_digests(
        {"status": {"models": [{"digest": DIGEST}, "x", {"digest": 3}]}}
    ) == [DIGEST]
    assert nodes.listed_digests({"status": "broken"}) == []
    old = _raw_store("n", entry("Downloading", done=1))
    progressed = _raw_store("n", entry("Downloading", done=500))
    ready = _raw_store("n", entry("Ready"))
    # progress: the artifact recounts, no deployment looks again
    assert nodes.changed_digests(old, progressed) == (set(), {DIGEST})
    assert nodes.changed_digests(old, ready) == ({DIGEST}, {DIGEST})
    assert nodes.changed_digests(None, ready) == ({DIGEST}, {DIGEST})
    assert nodes.changed_digests(ready, None) == ({DIGEST}, {DIGEST})
    low = {
        **ready,
        "status": {**ready["status"], "conditions": [{"type": "CapacityLow", "status": "True"}]},
    }
    assert nodes.changed_digests(ready, low) == ({DIGEST}, {DIGEST})


def test_artifact_digest_is_for_resolved_hub_sources_only() -> None:
    assert nodes.artifact_digest(hub_artifact()) == [DIGEST]
    image = {
        "spec": {"source": {"image": {"reference": "x"}}},
        "status": {"resolved": {"manifestDigest": DIGEST}},
    }
    assert nodes.artifact_digest(image) == []
    assert nodes.artifact_digest({"spec": "x"}) == []


# --- the example -----------------------------------------------------------------------------

EXAMPLE = (
    Path(__file__).resolve().parents[2] / "examples" / "weights" / "node-store" / "qwen-node.yaml"
)


def test_the_node_store_example_renders_what_it_says() -> None:
    text = EXAMPLE.read_text()
    bundle = read_bundle([(str(EXAMPLE), text)])
    (md,) = [decoded(d) for d in bundle.deployments]
    lookups_ = bundle.lookups(default_namespace="team-a")
    rendering = render(md, lookups=lookups_, settings=bundle.settings)
    for seat in rendering.iter_seats():
        terms = seat.pod["spec"]["affinity"]["nodeAffinity"][
            "preferredDuringSchedulingIgnoredDuringExecution"
        ]
        assert terms[0]["preference"]["matchFields"][0]["values"] == ["gpu-node-1"]
    stores = lookups_.all_of(NodeModelStore)
    (artifact,) = [o for o in bundle.inputs if isinstance(o, ModelArtifact)]
    digest = artifact.status.resolved.manifest_digest if artifact.status.resolved else ""
    counted = nodes.aggregate(stores, digest or "")
    shown = "{ready: 2, downloading: 1, failed: 0, downloadingPercent: 25}"
    assert counted == ArtifactNodes(ready=2, downloading=1, failed=0, downloading_percent=25)
    assert shown in " ".join(text.split())
    assert "gpustack-render render examples/weights/node-store/qwen-node.yaml" in text
