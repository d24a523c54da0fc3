"""The five layers (docs/contract/elastic-ep.md §4.2, D29) from the facts a pass read; a layer
not read is unknown with its reason, never borrowed from a neighbour."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from elastic_support import (
    GPU,
    QUEUE,
    ROLE,
    engine,
    facts,
    head,
    member,
    ray_body,
    workload,
)

from gpustack_render.elastic.engine import EngineAnswers
from gpustack_render.elastic.layers import (
    RAY_NODES_PATH,
    RayNodes,
    Unread,
    admitted_layer,
    allocated_layer,
    behind,
    layers_of,
    live_members,
    ray_layer,
    read_ray_nodes,
)
from gpustack_render.reconcile.observed import observe_pod

PODS = [member(o) for o in range(4)]


def test_live_members_leave_out_what_is_not_a_member() -> None:
    pods = [
        *PODS,
        member(4, terminating=True),
        member(5, phase="Failed"),
        member(6, owned=False),
        replace(member(7), ordinal=None),
    ]
    assert [p.ordinal for p in live_members(pods)] == [0, 1, 2, 3]
    # The head carries ordinal 0 too: the component tells it apart.
    assert [p.uid for p in live_members([*PODS, head()], ROLE)] == [p.uid for p in PODS]
    assert len(live_members([*PODS, head()])) == 5


# ---- admitted ----------------------------------------------------------------------------------


def test_admitted_counts_groups_of_one_admitted_by_a_named_cluster_queue() -> None:
    layer = admitted_layer(PODS, [workload(p.uid) for p in PODS])
    assert (layer.known, layer.value, layer.reason) == (True, 4, "")
    assert layer.covers(4) and not layer.covers(5)


@pytest.mark.parametrize(
    ("wl", "says"),
    [
        (None, "no Workload yet"),
        (
            workload(
                "pod-3",
                admitted=False,
                message="couldn't assign flavors to pod set main: insufficient quota for "
                f"{GPU} in flavor default, request > maximum capacity of 0",
            ),
            f"Kueue has not admitted it: ClusterQueue {QUEUE} lacks {GPU} in flavor default",
        ),
        (workload("pod-3", admitted=False), f"ClusterQueue {QUEUE} has not reserved its quota"),
        (
            workload("pod-3", admitted=False, reserved=True),
            f"quota reserved in ClusterQueue {QUEUE}, not admitted",
        ),
        (workload("pod-3", pods=("pod-3", "pod-9")), "groups 2 Pods, not the member alone"),
        (
            workload("pod-3", pod_sets=[{"name": "main", "count": 2}]),
            "is not one PodSet of count 1",
        ),
        (
            workload(
                "pod-3",
                pod_sets=[{"name": "a", "count": 1}, {"name": "b", "count": 1}],
            ),
            "is not one PodSet of count 1",
        ),
        (
            workload("pod-3", assignments=[{"name": "other", "count": 1}]),
            "is not assigned its one PodSet main",
        ),
        (workload("pod-3", assignments=[]), "is not assigned its one PodSet main"),
        (workload("pod-3", cluster_queue=None), "names no ClusterQueue"),
    ],
)
def test_admitted_says_why_a_member_is_not(wl: object, says: str) -> None:
    workloads = [workload(p.uid) for p in PODS[:3]] + ([wl] if wl is not None else [])
    layer = admitted_layer(PODS, workloads)  # type: ignore[arg-type]
    assert layer.known and layer.value == 3 and not layer.covers(4)
    assert layer.reason.startswith("member 3: ") and says in layer.reason


def test_two_workloads_claiming_a_member() -> None:
    workloads = [workload(p.uid) for p in PODS] + [workload("pod-1", pods=("pod-1",))]
    layer = admitted_layer(PODS, workloads)
    assert "member 1: 2 Workloads claim it" in layer.reason


def test_admitted_unread() -> None:
    layer = admitted_layer(PODS, Unread("the Workloads could not be listed"))
    assert not layer.known and layer.reason == "the Workloads could not be listed"
    assert layer.record().value == 0


# ---- allocated ---------------------------------------------------------------------------------


def test_allocated_sums_the_cards_of_the_members_a_node_holds() -> None:
    pods = [member(0, node="a"), member(1, node="a"), member(2, node="b"), member(3, node="")]
    layer = allocated_layer(pods, {"a": 8, "b": 2}, cards=4, resource=GPU)
    assert layer.ordinals == frozenset({0, 1})
    assert f"member 2: node b has 2 {GPU} allocatable, its members need 4" in layer.reason
    assert "member 3: not scheduled on a node yet" in layer.reason


def test_allocated_node_not_found_and_unread() -> None:
    layer = allocated_layer([member(0, node="gone")], {}, cards=1, resource=GPU)
    assert layer.reason == "member 0: node gone is not found"
    unread = allocated_layer(PODS, Unread("nodes: forbidden"), cards=1, resource=GPU)
    assert not unread.known and unread.reason == "nodes: forbidden"


def test_an_unscheduled_member_quotes_the_scheduler() -> None:
    pod = member(0, node="", unscheduled_message="0/3 nodes are available")
    layer = allocated_layer([pod], {}, cards=1, resource=GPU)
    assert "(0/3 nodes are available)" in layer.reason


# ---- ray ---------------------------------------------------------------------------------------


def test_the_state_api_answer_is_read() -> None:
    got = read_ray_nodes(200, ray_body(["pod-0", "pod-1"]))
    assert isinstance(got, RayNodes)
    assert [n.labels.get("gpustack-pod-uid") for n in got.nodes] == ["pod-0", "pod-1", "head-uid"]
    assert [n.is_head for n in got.nodes] == [False, False, True]
    assert "filter_values=ALIVE" in RAY_NODES_PATH and "limit=" in RAY_NODES_PATH


def _page(**changes: object) -> str:
    doc = json.loads(ray_body(["pod-0"]))
    doc["data"]["result"].update(changes)
    return json.dumps(doc)


@pytest.mark.parametrize(
    ("status", "body", "says"),
    [
        (500, '{"result": false, "msg": "GCS unavailable"}', "answered HTTP 500"),
        (200, '{"result": false, "msg": "GCS unavailable", "data": {}}', "GCS unavailable"),
        (200, "<html>", "not JSON"),
        (200, '{"result": true, "data": {"result": {}}}', "has no node list"),
        (200, _page(total=None), "lacks its counts"),
        (200, _page(total=200), "truncated"),
        (200, _page(num_filtered=9), "truncated (2 of 9 matching nodes"),
        (200, _page(partial_failure_warning="raylet down"), "partial"),
    ],
)
def test_a_state_api_answer_that_could_leave_a_member_out_is_unread(
    status: int, body: str, says: str
) -> None:
    got = read_ray_nodes(status, body)
    assert isinstance(got, Unread) and says in got.reason


def test_ray_needs_exactly_one_alive_node_per_member() -> None:
    body = json.loads(ray_body(["pod-0", "pod-1", "pod-1"], dead=("pod-2",)))
    nodes = read_ray_nodes(200, json.dumps(body))
    layer = ray_layer(PODS[:3], nodes)
    assert layer.ordinals == frozenset({0})
    assert "member 1: 2 ALIVE Ray nodes carry its Pod uid" in layer.reason
    assert "member 2: not joined to Ray" in layer.reason  # a DEAD node does not count


def test_ray_unread_is_unknown() -> None:
    layer = ray_layer(PODS, Unread("no Ray process runs on a simulated cluster"))
    assert not layer.known and "simulated" in layer.reason


# ---- effective ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("eng", "says"),
    [
        (None, "the engine was not asked this pass"),
        (Unread("connection refused"), "connection refused"),
        (engine("pod-9", width=4), "not the live master"),
        (EngineAnswers("pod-0", None, scaling_problem="timeout"), "timeout"),
        (engine(scaling=True), "the engine is scaling"),
        (engine(width=None), "the bound probe answered HTTP 503"),
        (
            EngineAnswers("pod-0", False, bound_before=4, bound_after=3, forwards=("",) * 4),
            "did not name one width",
        ),
        (engine(width=4, served=False), "4 of its 4 ranks did not serve (rank 0 answered HTTP 503"),
        (
            EngineAnswers("pod-0", False, bound_before=4, bound_after=4, forwards=("", "")),
            "only 2 of its 4 ranks were asked to serve",
        ),
    ],
)
def test_effective_unproven(eng: object, says: str) -> None:
    layers = layers_of(replace(facts(4, 4), engine=eng))  # type: ignore[arg-type]
    assert not layers.effective.known and says in layers.effective.reason
    # Never borrowed: the other layers are all at 4.
    assert layers.effective.value == 0 and layers.admitted.value == 4


def test_effective_proven_by_the_engines_own_answers() -> None:
    layers = layers_of(facts(4, 4, eng=engine(width=4)))
    assert (layers.effective.known, layers.effective.value) == (True, 4)
    assert (layers.native, layers.scaling) == (4, False)
    assert layers.effective.covers(4)


def test_native_width_without_every_rank_serving() -> None:
    layers = layers_of(facts(4, 4, eng=engine(width=4, served=False)))
    assert layers.native == 4 and not layers.effective.known


def test_behind_names_the_first_layer_short_of_the_width() -> None:
    layers = layers_of(facts(4, 4, joined=2))
    assert behind(layers, 4).startswith("width 4 waits for ray (2 of 4): 2 members 2, 3")
    assert behind(layers, 2) == ""
    missing = layers_of(facts(4, 2))
    assert behind(missing, 4) == "width 4 waits for admitted (2 of 4): no live member 2, 3 yet"


def test_the_rendered_pods_read_as_members_and_head() -> None:
    """The renderer's own Pods (main's rendering/elastic.py): every rendered member is a member
    by its component, the head is not, and the master is ordinal 0."""
    from test_render_elastic import _doc, _render

    role = _render(_doc(4)).roles[0]
    assert role.elastic is not None
    pods = []
    for i, pod in enumerate(role.pods()):
        pod = {**pod, "metadata": {**pod["metadata"], "name": f"p{i}", "uid": f"uid-{i}"}}
        pods.append(observe_pod(pod, owner_uid="md-uid"))
    component = pods[0].role
    assert component is not None
    members = live_members(pods, component)
    assert [p.ordinal for p in members] == [0, 1, 2, 3]
    assert all(p.group_total == 1 for p in members)
    head_pod = pods[-1]
    assert head_pod.role != component and head_pod not in members
