"""The work queue's lanes (gpustack_controller/workqueue.py), the informer's indexes
(gpustack_controller/watches.py) and the owner index's memory of deleted Pods: the pieces that
keep an edit ahead of a fan-out and a pass's reads proportional to its own objects."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from controller_support import MemoryKube

from gpustack_controller.controller import Controller, Options
from gpustack_controller.kube import Kube, Resource
from gpustack_controller.watches import Informer
from gpustack_controller.workqueue import LOW_SHARE, Priority, WorkQueue
from gpustack_render.reconcile.claims import FINALIZER
from gpustack_render.reconcile.ownerindex import OwnerIndex

SERVICES = Resource("", "v1", "services", "Service")


def _takes(queue: WorkQueue, count: int) -> list[str]:
    async def main() -> list[str]:
        out = []
        for _ in range(count):
            key = await asyncio.wait_for(queue.get(), 1)
            out.append(key)
            queue.done(key)
        return out

    return asyncio.run(main())


def test_an_edit_is_served_before_a_full_lane_of_fan_outs() -> None:
    queue = WorkQueue("prio-edit")
    for i in range(100):
        queue.add(f"ns/fan-{i}", priority=Priority.LOW)
    queue.add("ns/event")
    queue.add("ns/edit", priority=Priority.HIGH)
    assert _takes(queue, 3) == ["ns/edit", "ns/event", "ns/fan-0"]
    assert len(queue) == 99


def test_a_key_added_again_higher_moves_up_and_never_down() -> None:
    queue = WorkQueue("prio-move")
    for key in ("ns/a", "ns/b", "ns/c"):
        queue.add(key, priority=Priority.LOW)
    queue.add("ns/c", priority=Priority.HIGH)
    queue.add("ns/a", priority=Priority.LOW)  # already waiting: once
    queue.add("ns/c", priority=Priority.LOW)  # never moves down
    assert len(queue) == 3
    assert _takes(queue, 3) == ["ns/c", "ns/a", "ns/b"]
    assert len(queue) == 0


def test_the_low_lane_gets_a_share_under_a_steady_stream_of_events() -> None:
    queue = WorkQueue("prio-share")
    queue.add("ns/fan", priority=Priority.LOW)
    for i in range(LOW_SHARE * 2):
        queue.add(f"ns/event-{i}")
    taken = _takes(queue, LOW_SHARE)
    assert taken[-1] == "ns/fan" and "ns/fan" not in taken[:-1]


def test_a_key_dirtied_while_processed_comes_back_with_the_highest_priority_asked() -> None:
    queue = WorkQueue("prio-dirty")

    async def main() -> list[str]:
        queue.add("ns/a", priority=Priority.LOW)
        key = await queue.get()
        queue.add("ns/b")
        queue.add(key, priority=Priority.LOW)
        queue.add(key, priority=Priority.HIGH)
        queue.done(key)
        return [await queue.get(), await queue.get()]

    assert asyncio.run(main()) == ["ns/a", "ns/b"]


def test_a_waiting_worker_is_woken_by_an_add() -> None:
    queue = WorkQueue("prio-wake")

    async def main() -> str:
        waiting = asyncio.create_task(queue.get())
        await asyncio.sleep(0.01)
        queue.add_after("ns/later", 0.01, priority=Priority.LOW)
        return await asyncio.wait_for(waiting, 1)

    assert asyncio.run(main()) == "ns/later"


def _service(name: str, owner_uid: str | None, rv: str = "1") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "resourceVersion": rv}
    if owner_uid:
        meta["ownerReferences"] = [
            {"kind": "ModelDeployment", "name": "md", "uid": owner_uid, "controller": True}
        ]
    meta["managedFields"] = [{"manager": "someone", "operation": "Update"}]
    return {"metadata": meta}


def _owner(obj: Any) -> list[str]:
    return [r["uid"] for r in obj["metadata"].get("ownerReferences", ())]


def test_an_informer_index_follows_adds_changes_and_deletes() -> None:
    # Never started: fed event by event.
    informer = Informer(cast(Kube, MemoryKube()), SERVICES, indexers={"owner": _owner})
    informer._apply("ADDED", _service("a", "u1"))
    informer._apply("ADDED", _service("b", "u1"))
    informer._apply("ADDED", _service("c", None))
    assert sorted(o["metadata"]["name"] for o in informer.by_index("owner", "u1")) == ["a", "b"]
    informer._apply("MODIFIED", _service("b", "u2", rv="2"))
    assert [o["metadata"]["name"] for o in informer.by_index("owner", "u2")] == ["b"]
    informer._apply("DELETED", _service("a", "u1", rv="3"))
    assert informer.by_index("owner", "u1") == []
    # Added later, an index covers what is cached already.
    informer.add_indexer("name", lambda o: [o["metadata"]["name"]])
    assert [o["metadata"]["name"] for o in informer.by_index("name", "c")] == ["c"]
    # The default transform drops every other manager's managedFields.
    assert "managedFields" not in informer.get("ns/c")["metadata"]  # type: ignore[index]


def test_a_deleted_pods_deployment_is_kept_while_a_workload_names_it() -> None:
    index = OwnerIndex()
    index.pod_changed("p0", "ns/md")
    index.workload_changed("ns/wl", {"p0"})
    index.pod_deleted("p0")
    assert index.deployments_owning({"p0"}) == set()
    assert index.deployments_owning({"p0"}, deleted_too=True) == {"ns/md"}
    index.workload_deleted("ns/wl")
    assert index.deployments_owning({"p0"}, deleted_too=True) == set()
    assert index.size() == 0
    # A Pod deleted with no Workload naming it is forgotten at once.
    index.pod_changed("p1", "ns/md")
    index.pod_deleted("p1")
    assert index.size() == 0


def test_with_max_low_a_fan_out_never_takes_every_worker() -> None:
    queue = WorkQueue("prio-max-low", max_low=2)

    async def main() -> list[str]:
        for i in range(5):
            queue.add(f"ns/fan-{i}", priority=Priority.LOW)
        first = [await queue.get(), await queue.get()]
        third = asyncio.create_task(queue.get())
        await asyncio.sleep(0.01)
        assert not third.done()  # two fan-out passes in flight: the third waits
        queue.add("ns/edit", priority=Priority.HIGH)
        edit = await asyncio.wait_for(third, 1)
        fourth = asyncio.create_task(queue.get())
        await asyncio.sleep(0.01)
        assert not fourth.done()
        queue.done(first[0])  # one fan-out pass done: the next may start
        return [*first, edit, await asyncio.wait_for(fourth, 1)]

    assert asyncio.run(main()) == ["ns/fan-0", "ns/fan-1", "ns/edit", "ns/fan-2"]


def _md(name: str, generation: int, roles: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "ModelDeployment",
        "metadata": {"name": name, "namespace": "ns", "generation": generation, "uid": name},
        "spec": {
            "model": {"name": "m"},
            "engine": {"name": "vLLM", "image": "i"},
            "roles": [{"name": f"r{i}", "replicas": 1} for i in range(roles)],
        },
    }


def _lanes(controller: Controller) -> dict[str, Priority]:
    return dict(controller.queue._queued)


def test_the_controllers_events_are_queued_by_what_they_are() -> None:
    controller = Controller(cast(Kube, MemoryKube()), Options())
    informer = controller.informers["deployments"]
    # The initial list: a resync of what may be converged already.
    informer._apply("ADDED", _md("listed", 1))
    assert _lanes(controller) == {"ns/listed": Priority.LOW}
    informer.synced.set()
    # A creation, then an edit of another deployment: a user's.
    informer._apply("ADDED", _md("created", 1))
    informer._apply("ADDED", _md("edited", 1))
    controller.queue = WorkQueue("events")
    informer._apply("MODIFIED", {**_md("edited", 2), "status": {"x": 1}})
    assert _lanes(controller) == {"ns/edited": Priority.HIGH}
    # The cache keeps the status: a pass reads its deployment from it
    # (gpustack_controller/deployments.py).
    assert (informer.get("ns/edited") or {}).get("status") == {"x": 1}
    # An input's change concerns every reader: the low lane.
    controller.queue = WorkQueue("fan-out")
    it = {"kind": "InstanceType", "metadata": {"name": "it", "resourceVersion": "1"}}
    reader_spec = _md("reader", 1)["spec"]
    reader_spec["roles"][0]["instanceType"] = "it"
    controller.inputs.deployment_changed("ns/reader", {**_md("reader", 1), "spec": reader_spec})
    controller.informers["instance_types"]._apply("ADDED", it)
    assert _lanes(controller) == {"ns/reader": Priority.LOW}


def _with_finalizers(md: dict[str, Any], *finalizers: str, rv: str) -> dict[str, Any]:
    meta = {**md["metadata"], "finalizers": list(finalizers), "resourceVersion": rv}
    return {**md, "metadata": meta}


def test_only_a_finalizer_of_ours_taken_away_queues_a_pass() -> None:
    controller = Controller(cast(Kube, MemoryKube()), Options())
    informer = controller.informers["deployments"]
    informer.synced.set()
    md = _md("fin", 1)
    informer._apply("ADDED", _with_finalizers(md, rv="1"))
    # The pass's own write of the finalizer, made before that pass goes on: no second pass.
    controller.queue = WorkQueue("finalizer-added")
    informer._apply("MODIFIED", _with_finalizers(md, FINALIZER, rv="2"))
    assert _lanes(controller) == {}
    # Another party's finalizer coming and going changes nothing a pass does.
    informer._apply("MODIFIED", _with_finalizers(md, FINALIZER, "other.io/keep", rv="3"))
    informer._apply("MODIFIED", _with_finalizers(md, FINALIZER, rv="4"))
    assert _lanes(controller) == {}
    # Ours taken away (by hand, without a deletion): a pass puts it back.
    informer._apply("MODIFIED", _with_finalizers(md, rv="5"))
    assert _lanes(controller) == {"ns/fin": Priority.NORMAL}
