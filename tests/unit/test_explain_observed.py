"""Explain against observed state (``gpustack_render.explain.observed``): the next pass the real
planner makes on observed Pods and Workloads, the timeline to completion, the reasons a replica
is not serving and the upgrade impact (docs/explain.md, "Observed state")."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from explain_support import (
    as_list,
    deployment,
    pd_roles,
    pod_object,
    rendered,
    replicas_of,
    role_spec,
    workload_object,
)

from gpustack_render.api import ModelDeployment
from gpustack_render.cli.documents import read_bundle
from gpustack_render.cli.yamlio import load_documents
from gpustack_render.core import labels
from gpustack_render.core.settings import Settings
from gpustack_render.explain.observed import (
    OBSERVED_JSON_SCHEMA,
    ObservedReport,
    explain_observed,
    observed_text,
    observed_to_json,
    split_observed,
)
from gpustack_render.explain.reasons import ReplicaReasons
from gpustack_render.rendering.renderer import render
from gpustack_render.schema.decoding import decode_deployment

OLD_ARGS = ("--max-model-len", "8192")
NEW_ARGS = ("--max-model-len", "16384")
NEWER_ARGS = ("--max-model-len", "32768")
QUEUED = (
    "Pending",
    "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in "
    "flavor a10g, 1 more needed",
)
KUEUE_GATE = "kueue.x-k8s.io/admission"
DATA = Path(__file__).resolve().parent / "data" / "explain"


def explain(md: ModelDeployment, objects: Sequence[Mapping[str, Any]], **kw: Any) -> ObservedReport:
    report = explain_observed(
        md, rendered(md), split_observed([as_list(objects)]), settings=Settings(), **kw
    )
    jsonschema.validate(observed_to_json(report), OBSERVED_JSON_SCHEMA)
    assert all(isinstance(line, str) for line in observed_text(report))
    return report


def actions(report: ObservedReport) -> list[str]:
    """Each pass as a short string: deletions (with why), creations, or ``wait``."""
    out = []
    for step in report.timeline:
        parts = [f"-{d.role}/{d.ordinal}:{d.why}" for d in step.deletes]
        parts += [f"+{c.role}/{c.ordinal}" for c in step.creates]
        out.append(" ".join(parts) or "wait")
    return out


def min_serving(report: ObservedReport, role: str) -> list[int]:
    return [next(c.serving for c in s.min_serving if c.role == role) for s in report.timeline]


def reasons_of(report: ObservedReport, role: str, ordinal: int) -> ReplicaReasons:
    return next(r for r in report.not_serving if (r.role, r.ordinal) == (role, ordinal))


def kinds(replica: ReplicaReasons) -> list[str]:
    return [r.kind for r in replica.reasons]


# ---- rollouts --------------------------------------------------------------------------------


def test_a_healthy_roll_in_flight_continues_one_replica_at_a_time() -> None:
    old = rendered(deployment(role_spec(replicas=3, args=OLD_ARGS)))
    md = deployment(role_spec(replicas=3, args=NEW_ARGS), replacing={"server": 2})
    # Replica 2 was replaced and its replacement is admitted and Ready.
    objects = replicas_of(old, "server", [0, 1]) + replicas_of(rendered(md), "server", [2])
    report = explain(md, objects)

    first = report.next_pass
    assert first is not None
    assert [(d.role, d.ordinal, d.why) for d in first.deletes] == [("server", 1, "healthy")]
    assert first.delete_workloads == (old.role("server").groups()[1],)  # type: ignore[union-attr]
    assert first.replacing == {"server": 1}
    assert actions(report) == [
        "-server/1:healthy",
        "+server/1",
        "-server/0:healthy",
        "+server/0",
        "wait",
    ]
    assert min_serving(report, "server") == [2, 2, 2, 2, 3]
    assert report.converged and not report.stuck
    assert report.replaced == 2 and report.rolls
    assert [(i.ordinal, i.verdict) for i in report.upgrade] == [(0, "will roll"), (1, "will roll")]
    assert not report.not_serving


def test_a_one_replica_role_stops_serving_while_it_rolls() -> None:
    old = rendered(deployment(role_spec(replicas=1, args=OLD_ARGS)))
    md = deployment(role_spec(replicas=1, args=NEW_ARGS))
    report = explain(md, replicas_of(old, "server"))
    assert actions(report) == ["-server/0:healthy", "+server/0", "wait"]
    assert min_serving(report, "server") == [0, 0, 1]


def test_a_replacement_queued_by_kueue_holds_the_roll_with_the_workloads_reason() -> None:
    old = rendered(deployment(role_spec(replicas=2, args=OLD_ARGS)))
    md = deployment(role_spec(replicas=2, args=NEW_ARGS), replacing={"server": 1})
    new = rendered(md)
    seat = new.role("server").instance(1)[0]  # type: ignore[union-attr]
    pod = pod_object(seat, gates=[KUEUE_GATE])
    queued = workload_object(seat.group_name, [pod], admitted=False, quota=QUEUED)
    report = explain(md, [*replicas_of(old, "server", [0]), pod, queued])

    first = report.next_pass
    assert first is not None and first.idle
    assert [(w.role, w.ordinal, w.on) for w in first.waits] == [("server", 1, "admission")]
    replica = reasons_of(report, "server", 1)
    assert kinds(replica) == ["queued", "gated", "not-ready"]
    assert replica.reasons[0].message == (
        f"Workload {seat.group_name} QuotaReserved=False Pending: {QUEUED[1]}"
    )
    assert KUEUE_GATE in replica.reasons[1].message
    # Assuming it is admitted, the roll goes on with replica 0.
    assert actions(report) == ["wait", "-server/0:healthy", "+server/0", "wait"]
    assert report.converged and report.replaced == 1


def test_the_joint_check_names_the_role_that_lacks_quota() -> None:
    md = deployment(*pd_roles())
    new = rendered(md)
    prefill = [pod_object(s, gates=[KUEUE_GATE]) for s in new.role("prefill").instance(0)]  # type: ignore[union-attr]
    decode = [pod_object(s, gates=[KUEUE_GATE]) for s in new.role("decode").instance(0)]  # type: ignore[union-attr]
    held = workload_object(
        new.role("prefill").groups()[0],  # type: ignore[union-attr]
        prefill,
        admitted=False,
        reserved=True,
        joint=("Pending", "waiting"),
    )
    waiting = workload_object(
        new.role("decode").groups()[0],  # type: ignore[union-attr]
        decode,
        admitted=False,
        quota=QUEUED,
        joint=("Pending", "waiting"),
    )
    objects = [
        *prefill,
        held,
        *decode,
        waiting,
        *replicas_of(new, "prefill", [1]),
        *replicas_of(new, "decode", [1]),
    ]
    report = explain(md, objects)
    chain = reasons_of(report, "prefill", 0)
    assert kinds(chain) == ["joint-check", "gated", "not-ready"]
    assert "lacking quota: role(s) decode" in chain.reasons[0].message
    assert "3 of 4 replicas reserved quota" in chain.reasons[0].message
    assert kinds(reasons_of(report, "decode", 0)) == ["queued", "gated", "not-ready"]
    assert not report.rolls and report.replaced == 0


def test_a_parked_deployment_says_so_after_the_check() -> None:
    md = deployment(*pd_roles())
    new = rendered(md)
    seat = new.role("prefill").instance(0)[0]  # type: ignore[union-attr]
    pod = pod_object(seat, gates=[KUEUE_GATE])
    parked = workload_object(
        seat.group_name, [pod], admitted=False, active=False, joint=("Pending", "parked: …")
    )
    objects = [pod, parked, *replicas_of(new, "prefill", [1]), *replicas_of(new, "decode")]
    assert kinds(reasons_of(explain(md, objects), "prefill", 0)) == ["parked", "gated", "not-ready"]


def test_a_broken_replica_during_a_roll_is_replaced_first() -> None:
    old = rendered(deployment(role_spec(replicas=3, args=OLD_ARGS)))
    md = deployment(role_spec(replicas=3, args=NEW_ARGS))
    objects = replicas_of(old, "server", [0, 2]) + replicas_of(
        old, "server", [1], phase="Failed", ready=False
    )
    report = explain(md, objects)
    first = report.next_pass
    assert first is not None
    assert [(d.ordinal, d.why) for d in first.deletes] == [(1, "broken")]
    assert kinds(reasons_of(report, "server", 1)) == ["broken", "not-ready"]
    assert actions(report)[:2] == ["-server/1:broken", "+server/1"]
    assert report.converged and report.replaced == 3


def test_a_replica_missing_a_member_index_is_broken_as_the_planner_and_status_read_it() -> None:
    # Two Ready Pods of a size-2 replica that both read member 0: as many Pods as the group
    # declares, but not every member 0..n-1, so the status does not count it ready and the
    # planner replaces it as broken; explain lists it as not serving, broken.
    md = deployment(role_spec(replicas=1, size=2))
    objects = replicas_of(rendered(md), "server")
    pods = [o for o in objects if o["kind"] == "Pod"]
    pods[1]["metadata"]["labels"][labels.MEMBER_INDEX] = "0"
    report = explain(md, objects)
    assert min_serving(report, "server")[0] == 0
    assert [(c.role, c.serving) for c in report.serving] == [("server", 0)]
    first = report.next_pass
    assert first is not None and [(d.ordinal, d.why) for d in first.deletes] == [(0, "broken")]
    broken = reasons_of(report, "server", 0)
    assert kinds(broken) == ["broken"]
    assert "member" in broken.reasons[0].message


def test_a_queued_replacement_superseded_by_a_newer_edit_is_rebuilt_at_once() -> None:
    old = rendered(deployment(role_spec(replicas=2, args=OLD_ARGS)))
    edit = rendered(deployment(role_spec(replicas=2, args=NEW_ARGS)))
    md = deployment(role_spec(replicas=2, args=NEWER_ARGS), replacing={"server": 1})
    seat = edit.role("server").instance(1)[0]  # type: ignore[union-attr]
    pod = pod_object(seat, gates=[KUEUE_GATE])
    queued = workload_object(seat.group_name, [pod], admitted=False, quota=QUEUED)
    report = explain(md, [*replicas_of(old, "server", [0]), pod, queued])
    first = report.next_pass
    assert first is not None
    # Rebuilt without waiting for the admission gate (tier "outdated": the remembered one).
    assert [(d.ordinal, d.why) for d in first.deletes] == [(1, "outdated")]
    assert first.delete_workloads == (seat.group_name,)
    assert actions(report) == [
        "-server/1:outdated",
        "+server/1",
        "-server/0:healthy",
        "+server/0",
        "wait",
    ]


def test_an_unschedulable_pod_names_the_schedulers_message() -> None:
    md = deployment(role_spec(replicas=1))
    new = rendered(md)
    seat = new.role("server").instance(0)[0]  # type: ignore[union-attr]
    message = "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."
    pod = pod_object(seat, unschedulable=message)
    report = explain(md, [pod, workload_object(seat.group_name, [pod])])
    chain = reasons_of(report, "server", 0)
    assert kinds(chain) == ["unschedulable", "not-ready"]
    assert (
        chain.reasons[0].message
        == f"Pod {pod['metadata']['name']} PodScheduled=False Unschedulable: {message}"
    )
    # Nothing for the planner to do: it converges at once, the replica is assumed to start.
    assert report.converged and actions(report) == ["wait"]


def test_scheduling_gates_are_listed_by_name() -> None:
    md = deployment(role_spec(replicas=1))
    seat = rendered(md).role("server").instance(0)[0]  # type: ignore[union-attr]
    pod = pod_object(seat, gates=[KUEUE_GATE, "example.com/topology"])
    report = explain(md, [pod])
    chain = reasons_of(report, "server", 0)
    assert kinds(chain) == ["queued", "gated", "not-ready"]
    assert chain.reasons[0].message == "no Workload yet: Kueue composes one per complete group"
    assert chain.reasons[1].message == (
        f"1 of 1 Pod(s) carry scheduling gate(s) example.com/topology, {KUEUE_GATE}"
    )


def test_a_missing_replica_is_created_by_the_next_pass() -> None:
    md = deployment(role_spec(replicas=2))
    report = explain(md, replicas_of(rendered(md), "server", [0]))
    assert kinds(reasons_of(report, "server", 1)) == ["missing"]
    assert actions(report) == ["+server/1", "wait"]


def test_a_pod_of_another_owner_holding_the_group_name_never_lets_the_ordinal_be_created() -> None:
    md = deployment(role_spec(replicas=2))
    new = rendered(md)
    stranger = pod_object(new.role("server").instance(1)[0])  # type: ignore[union-attr]
    stranger["metadata"]["ownerReferences"] = []
    report = explain(md, [*replicas_of(new, "server", [0]), stranger])
    assert not report.converged
    assert "group-name" in [w.on for w in report.timeline[-1].waits]
    assert "no pass changes anything" in report.stuck


def _local_queue(name: str, cluster_queue: str) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": rendered(deployment()).namespace},
        "spec": {"clusterQueue": cluster_queue},
    }


def test_a_local_queue_feeding_another_cluster_queue_blocks_its_roles_seats() -> None:
    """The controller's planner input (docs/contract/controller.md §10): no Pod of a role using
    the queue is created, and explain says which replicas wait on it and why."""
    md = deployment(role_spec(replicas=2))
    new = rendered(md)
    queue = new.role("server").queue  # type: ignore[union-attr]
    objects = [*replicas_of(new, "server", [0]), _local_queue(queue, "someone-elses")]
    report = explain(md, objects)
    first = report.next_pass
    assert first is not None and first.creates == ()
    [wait] = first.waits
    assert (wait.role, wait.ordinal, wait.on) == ("server", None, "local-queue")
    assert wait.message.startswith(
        f"replica(s) 1 are not created: LocalQueue {new.namespace}/{queue} feeds ClusterQueue "
        f"someone-elses, not {queue}"
    )
    assert not report.converged and "local-queue" not in report.stuck
    assert f"LocalQueue {new.namespace}/{queue}" in report.stuck
    [missing] = reasons_of(report, "server", 1).reasons
    assert missing.kind == "missing"
    assert missing.message.startswith(
        f"no live Pod: it is not created while LocalQueue {new.namespace}/{queue} feeds "
        "ClusterQueue someone-elses"
    )
    # The same queue pointing at its own ClusterQueue blocks nothing.
    report = explain(md, [*replicas_of(new, "server", [0]), _local_queue(queue, queue)])
    assert actions(report) == ["+server/1", "wait"] and report.converged


def test_a_pd_pair_where_only_decode_rolls_leaves_prefill_serving() -> None:
    old = rendered(deployment(*pd_roles(decode_args=OLD_ARGS)))
    md = deployment(*pd_roles(decode_args=NEW_ARGS))
    report = explain(md, replicas_of(old, "prefill") + replicas_of(old, "decode"))
    assert actions(report) == [
        "-decode/1:healthy",
        "+decode/1",
        "-decode/0:healthy",
        "+decode/0",
        "wait",
    ]
    assert min_serving(report, "prefill") == [2] * 5
    assert min_serving(report, "decode") == [1, 1, 1, 1, 2]
    assert {i.role for i in report.upgrade} == {"decode"}
    assert report.replaced == 2 and report.rolls


# ---- upgrade impact ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("annotations", "version", "args", "verdict", "says"),
    [
        pytest.param(None, "2", OLD_ARGS, "will roll", "pod-spec-hash", id="hash-differs"),
        pytest.param(None, "1", NEW_ARGS, "stays", "compatible", id="older-compatible-stays"),
        pytest.param(
            {"modeldeployment.gpustack.ai/min-render-version": "2"},
            "1",
            NEW_ARGS,
            "will roll",
            "below the floor 2",
            id="below-the-floor-rolls",
        ),
    ],
)
def test_upgrade_impact(
    annotations: dict[str, str] | None, version: str, args: tuple[str, ...], verdict: str, says: str
) -> None:
    md = deployment(role_spec(replicas=1, args=NEW_ARGS), annotations=annotations)
    ran = rendered(deployment(role_spec(replicas=1, args=args), annotations=annotations))
    report = explain(md, replicas_of(ran, "server", render_version=version))
    [impact] = report.upgrade
    assert (impact.verdict, impact.ordinal) == (verdict, 0)
    assert says in impact.reason
    assert report.rolls is (verdict == "will roll")
    assert report.replaced == (1 if verdict == "will roll" else 0)


def test_a_current_deployment_has_no_impact_and_nothing_to_do() -> None:
    md = deployment(role_spec(replicas=2))
    report = explain(md, replicas_of(rendered(md), "server"))
    assert report.upgrade == () and report.not_serving == ()
    assert actions(report) == ["wait"] and report.converged
    assert not report.rolls and report.replaced == 0


# ---- input ---------------------------------------------------------------------------------


def test_malformed_items_are_skipped_and_named() -> None:
    md = deployment(role_spec(replicas=1))
    good = replicas_of(rendered(md), "server")
    weird_pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "weird", "labels": ["not", "a", "map"], "annotations": 7},
        "status": "Running",
        "spec": {"schedulingGates": "x"},
    }
    documents: list[Any] = [
        {
            "apiVersion": "v1",
            "kind": "List",
            "items": [
                42,
                {"kind": "Pod", "metadata": {}},
                {"metadata": {"name": "kindless"}},
                {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}},
                weird_pod,
                *good,
            ],
        },
        None,
        {"apiVersion": "v1", "kind": "List", "items": "nope"},
        "a string",
    ]
    state = split_observed(documents)
    assert state.malformed == (
        "documents[0].items[0]: not an object",
        "documents[0].items[1] (Pod): documents[0].items[1].metadata.name is missing",
        "documents[0].items[2]: no kind",
        "documents[2].items: not a list of objects",
        "documents[3]: not an object",
    )
    assert state.ignored == ("ConfigMap/cm",)
    assert len(state.pods) == 2 and len(state.workloads) == 1
    report = explain_observed(md, rendered(md), state, settings=Settings())
    # The weird Pod carries none of the deployment's labels: it is not one of its Pods.
    assert report.pods == 1 and report.converged
    jsonschema.validate(observed_to_json(report), OBSERVED_JSON_SCHEMA)


def test_a_stream_of_documents_and_several_lists_read_alike() -> None:
    md = deployment(role_spec(replicas=2))
    objects = replicas_of(rendered(md), "server")
    one = split_observed([as_list(objects)])
    assert split_observed(objects) == one
    assert split_observed([as_list(objects[:2]), as_list(objects[2:])]) == one


def test_pods_of_another_namespace_or_deployment_are_not_read() -> None:
    md = deployment(role_spec(replicas=1))
    objects = replicas_of(rendered(md), "server")
    other = replicas_of(rendered(deployment(role_spec(replicas=1), name="other")), "server")
    elsewhere = [{**o, "metadata": {**o["metadata"], "namespace": "team-b"}} for o in objects]
    report = explain(md, [*other, *elsewhere])
    assert report.pods == 0 and report.workloads == 0
    assert kinds(reasons_of(report, "server", 0)) == ["missing"]


def test_a_refused_edit_heads_every_chain() -> None:
    md = deployment(role_spec(replicas=1))
    report = explain(md, [], refused=["spec.model.name: Forbidden: the field is frozen"])
    assert kinds(reasons_of(report, "server", 0)) == ["refused", "missing"]
    # Each replica that is not serving names every cause of the refusal first.
    two = deployment(role_spec(replicas=2))
    causes = ["spec.model.name: Forbidden: the field is frozen", "spec.roles[0].size: Invalid"]
    report = explain(two, replicas_of(rendered(two), "server", [0], ready=False), refused=causes)
    assert [(r.ordinal, r.reasons[0].kind) for r in report.not_serving] == [
        (0, "refused"),
        (1, "refused"),
    ]
    assert all(r.reasons[0].message.endswith("; ".join(causes)) for r in report.not_serving)


# ---- output ---------------------------------------------------------------------------------


def test_the_text_is_a_compact_table() -> None:
    old = rendered(deployment(role_spec(replicas=2, args=OLD_ARGS)))
    md = deployment(role_spec(replicas=2, args=NEW_ARGS))
    lines = observed_text(explain(md, replicas_of(old, "server")))
    assert lines[0] == "observed team-a/qwen-chat: 2 Pod(s), 2 Workload(s), 0 Service(s)"
    assert "serving now: server 2/2" in lines
    assert "  PASS  ACTIONS                    MIN SERVING" in lines
    assert "  1     delete server/1 (healthy)  server 1/2" in lines
    assert lines[-1] == "replaced: 2 replica(s); rolls: yes"


def test_the_json_shape_is_closed() -> None:
    report = ObservedReport()
    jsonschema.validate(observed_to_json(report), OBSERVED_JSON_SCHEMA)
    bad = {**observed_to_json(report), "extra": 1}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, OBSERVED_JSON_SCHEMA)
    jsonschema.Draft202012Validator.check_schema(OBSERVED_JSON_SCHEMA)


# ---- the reusable fixtures -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fixture", "example", "expect"),
    [
        pytest.param("qwen-chat-roll.yaml", "qwen-chat.yaml", "roll", id="roll-in-flight"),
        pytest.param("qwen-chat-queued.yaml", "qwen-chat.yaml", "queued", id="stuck-queued"),
        pytest.param("pd-joint-held.yaml", "pd-vllm-llm-d.yaml", "joint", id="pd-joint-held"),
        pytest.param(
            "qwen-chat-unschedulable.yaml", "qwen-chat.yaml", "unschedulable", id="unschedulable"
        ),
    ],
)
def test_the_observed_fixtures_explain_as_their_names_say(
    fixture: str, example: str, expect: str
) -> None:
    examples = Path(__file__).resolve().parents[2] / "examples"
    bundle = read_bundle([(example, (examples / example).read_text())])
    md, errs = decode_deployment(bundle.deployments[0])
    assert md is not None, errs
    rendering = render(md, lookups=bundle.lookups(), settings=bundle.settings)
    documents = load_documents((DATA / fixture).read_text())
    report = explain_observed(md, rendering, split_observed(documents), settings=bundle.settings)
    jsonschema.validate(observed_to_json(report), OBSERVED_JSON_SCHEMA)
    assert report.converged and not report.malformed
    found = {r.kind for replica in report.not_serving for r in replica.reasons}
    if expect == "roll":
        assert report.rolls and report.replaced >= 1 and not report.not_serving
    elif expect == "queued":
        assert "queued" in found and report.timeline[0].waits
    elif expect == "joint":
        assert "joint-check" in found
    else:
        assert "unschedulable" in found


def test_the_stuck_rollout_session_in_the_docs_is_what_explain_prints() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "explain.md").read_text()
    section = doc[doc.index("## Observed state") :]
    block = section[section.index("```text\n") + len("```text\n") :]
    shown = block[: block.index("```")].splitlines()
    examples = Path(__file__).resolve().parents[2] / "examples"
    bundle = read_bundle([("qwen-chat.yaml", (examples / "qwen-chat.yaml").read_text())])
    md, _ = decode_deployment(bundle.deployments[0])
    assert md is not None
    rendering = render(md, lookups=bundle.lookups(), settings=bundle.settings)
    observed = split_observed(load_documents((DATA / "qwen-chat-queued.yaml").read_text()))
    report = explain_observed(md, rendering, observed, settings=bundle.settings)
    assert observed_text(report) == shown


# ---- scale, status and departures ---------------------------------------------------------


def test_a_scale_down_removes_the_highest_ordinals_and_touches_no_survivor() -> None:
    md = deployment(role_spec(replicas=1))
    ran = rendered(deployment(role_spec(replicas=3)))
    report = explain(md, replicas_of(ran, "server"))
    first = report.next_pass
    assert first is not None
    assert [(d.ordinal, d.why) for d in first.deletes] == [(2, "scale-down"), (1, "scale-down")]
    assert report.replaced == 0 and not report.rolls and report.upgrade == ()
    assert report.converged


def test_the_stored_status_supplies_the_remembered_replacement() -> None:
    old = rendered(deployment(role_spec(replicas=2, args=OLD_ARGS)))
    edit = deployment(role_spec(replicas=2, args=NEW_ARGS))
    stored = deployment(role_spec(replicas=2, args=OLD_ARGS), replacing={"server": 1})
    seat = rendered(edit).role("server").instance(1)[0]  # type: ignore[union-attr]
    pod = pod_object(seat, gates=[KUEUE_GATE])
    queued = workload_object(seat.group_name, [pod], admitted=False, quota=QUEUED)
    objects = [*replicas_of(old, "server", [0]), pod, queued]
    observed = split_observed([as_list(objects)])

    def waits(report: ObservedReport) -> list[tuple[int | None, str]]:
        assert report.next_pass is not None
        return [(w.ordinal, w.on) for w in report.next_pass.waits]

    remembered = explain_observed(
        edit, rendered(edit), observed, settings=Settings(), stored=stored
    )
    assert waits(remembered) == [(1, "admission")]
    # Without the stored status the same Pods read as an ordinary roll held by the gate.
    assert waits(explain(edit, objects)) == [(None, "admission-gate")]


def test_a_drained_replica_frees_its_slot_through_its_stranded_workload() -> None:
    md = deployment(role_spec(replicas=2))
    new = rendered(md)
    objects = replicas_of(new, "server")
    objects[2]["metadata"]["deletionTimestamp"] = "2026-11-30T09:00:00Z"  # replica 1's Pod
    report = explain(md, objects)
    first = report.next_pass
    assert first is not None
    assert first.delete_workloads == (new.role("server").groups()[1],)  # type: ignore[union-attr]
    assert kinds(reasons_of(report, "server", 1)) == ["missing"]
    assert "1 still terminating" in reasons_of(report, "server", 1).reasons[0].message
    assert actions(report) == ["wait", "+server/1", "wait"]
    assert report.converged and report.replaced == 0


def test_a_workload_that_outlived_its_pods_is_read_by_its_group_name_and_deleted() -> None:
    # Replica 1's Pod is gone, its Workload is not (it owns no Pod any more): it is the
    # deployment's by its name alone, holds the group name, and the next pass deletes it.
    md = deployment(role_spec(replicas=2))
    new = rendered(md)
    objects = replicas_of(new, "server")
    del objects[2]  # replica 1's Pod
    report = explain(md, objects)
    assert report.workloads == 2
    first = report.next_pass
    assert first is not None
    assert first.delete_workloads == (new.role("server").groups()[1],)  # type: ignore[union-attr]
    assert actions(report) == ["wait", "+server/1", "wait"]
    assert report.converged
