"""The record policy of the owned-object path (D28; gpustack_render/reconcile/owned.py,
``WriteMode.RECORD``): records a state machine must never lose are created only when none was
read, replaced at the resourceVersion read (compare-and-swap), deleted with uid and
resourceVersion preconditions, and never pruned; and the writer that carries them out
(gpustack_controller/owned.py) against an API server that enforces both."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from controller_support import MemoryKube

from gpustack_controller.kube import CONFIGMAPS, ApiError
from gpustack_controller.owned import OwnedKind, OwnedWriter
from gpustack_render.core.ownerrefs import OwnedConflict
from gpustack_render.reconcile.owned import (
    ELASTIC_RECORD_POLICY,
    OwnedPolicy,
    Owner,
    RecordDelete,
    WriteMode,
    plan_owned,
    plan_record_delete,
)

NS = "team-a"
OWNER = Owner(NS, "moe", "md-uid")


def record(value: str, *, owner_uid: str = "md-uid") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "elastic-resize-md-uid",
            "namespace": NS,
            "labels": {"gpustack.ai/elastic-operation": "true"},
            "ownerReferences": [
                {"kind": "ModelDeployment", "name": "moe", "uid": owner_uid, "controller": True}
            ],
        },
        "data": {"operation.json": value},
    }


def stored(obj: dict[str, Any], version: str = "7") -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["metadata"].update(uid="cm-uid", resourceVersion=version)
    return out


def plan(wanted: dict[str, Any], read: dict[str, Any] | None, **kw: Any) -> Any:
    return plan_owned(
        ELASTIC_RECORD_POLICY,
        [wanted],
        stored={"elastic-resize-md-uid": read},
        owner=OWNER,
        manager="m",
        **kw,
    )


def test_none_read_is_a_create_without_a_version() -> None:
    wanted = stored(record("a"))  # a version on the wanted object is not sent on a create
    p = plan(wanted, None)
    assert [c["data"] for c in p.creates] == [{"operation.json": "a"}]
    assert "resourceVersion" not in p.creates[0]["metadata"]
    assert "uid" not in p.creates[0]["metadata"]
    assert p.replaces == () and p.prunes == () and p.writes == 1


def test_a_change_is_a_replace_at_the_version_read() -> None:
    p = plan(record("b"), stored(record("a"), "41"))
    (put,) = p.replaces
    assert put["metadata"]["resourceVersion"] == "41" and put["metadata"]["uid"] == "cm-uid"
    assert put["data"] == {"operation.json": "b"}
    assert p.creates == () and p.writes == 1


def test_in_line_writes_nothing() -> None:
    assert plan(record("a"), stored(record("a"))).writes == 0


def test_someone_elses_is_a_conflict_never_written() -> None:
    p = plan(record("b"), stored(record("a", owner_uid="other")))
    assert p.writes == 0 and len(p.conflicts) == 1
    assert isinstance(p.conflicts[0], OwnedConflict)


def test_never_pruned() -> None:
    """A record no longer wanted stays: only the machine's own delete removes it."""
    p = plan_owned(
        ELASTIC_RECORD_POLICY,
        [],
        stored={"elastic-resize-md-uid": stored(record("a"))},
        others=[stored(record("a"))],
        owner=OWNER,
        manager="m",
    )
    assert p.writes == 0


def test_a_record_policy_refuses_pruning_and_cache_answers() -> None:
    with pytest.raises(ValueError, match="never prunes"):
        OwnedPolicy("ConfigMap", WriteMode.RECORD)
    with pytest.raises(ValueError, match="read live"):
        OwnedPolicy("ConfigMap", WriteMode.RECORD, prune=False, cache_authoritative=True)


def test_the_delete_pins_uid_and_version() -> None:
    assert plan_record_delete(ELASTIC_RECORD_POLICY, stored(record("a"), "9"), owner=OWNER) == (
        RecordDelete("elastic-resize-md-uid", "cm-uid", "9")
    )
    foreign = plan_record_delete(
        ELASTIC_RECORD_POLICY, stored(record("a", owner_uid="x")), owner=OWNER
    )
    assert isinstance(foreign, OwnedConflict)
    unpinned = plan_record_delete(ELASTIC_RECORD_POLICY, record("a"), owner=OWNER)
    assert isinstance(unpinned, OwnedConflict) and "resourceVersion" in unpinned.message
    with pytest.raises(ValueError, match="only a record policy"):
        plan_record_delete(OwnedPolicy("Service", WriteMode.APPLY), record("a"), owner=OWNER)


# ---- the writer against an API server enforcing the preconditions ----------------------------

KIND = OwnedKind(ELASTIC_RECORD_POLICY, CONFIGMAPS)


async def test_writer_creates_then_replaces_at_the_version_read() -> None:
    kube = MemoryKube()
    writer = OwnedWriter(kube)  # type: ignore[arg-type]
    result = await writer.sync(KIND, [record("a")], owner=OWNER, stored={})
    assert result.failures == []
    first = kube.stored("ConfigMap", NS, "elastic-resize-md-uid")
    assert first is not None and first["data"] == {"operation.json": "a"}
    read = copy.deepcopy(first)
    result = await writer.sync(
        KIND, [record("b")], owner=OWNER, stored={"elastic-resize-md-uid": read}
    )
    assert result.failures == []
    second = kube.stored("ConfigMap", NS, "elastic-resize-md-uid")
    assert second is not None and second["data"] == {"operation.json": "b"}
    # A decision made on the first read is stale now: 409, nothing written.
    result = await writer.sync(
        KIND, [record("c")], owner=OWNER, stored={"elastic-resize-md-uid": read}
    )
    assert len(result.failures) == 1 and isinstance(result.failures[0], ApiError)
    assert result.failures[0].conflict
    assert kube.stored("ConfigMap", NS, "elastic-resize-md-uid")["data"] == {  # type: ignore[index]
        "operation.json": "b"
    }


async def test_writer_create_of_a_name_taken_since_is_a_failure_not_done() -> None:
    kube = MemoryKube()
    kube.put(stored(record("theirs")))
    writer = OwnedWriter(kube)  # type: ignore[arg-type]
    result = await writer.sync(KIND, [record("mine")], owner=OWNER, stored={})
    assert len(result.failures) == 1 and result.failures[0].conflict  # type: ignore[attr-defined]
    assert kube.stored("ConfigMap", NS, "elastic-resize-md-uid")["data"] == {  # type: ignore[index]
        "operation.json": "theirs"
    }


async def test_writer_deletes_only_the_version_read() -> None:
    kube = MemoryKube()
    writer = OwnedWriter(kube)  # type: ignore[arg-type]
    await writer.sync(KIND, [record("a")], owner=OWNER, stored={})
    read = copy.deepcopy(kube.stored("ConfigMap", NS, "elastic-resize-md-uid"))
    assert read is not None
    await writer.sync(KIND, [record("b")], owner=OWNER, stored={"elastic-resize-md-uid": read})
    stale = plan_record_delete(ELASTIC_RECORD_POLICY, read, owner=OWNER)
    assert isinstance(stale, RecordDelete)
    with pytest.raises(ApiError) as caught:
        await writer.delete_record(KIND, NS, stale)
    assert caught.value.conflict
    current = kube.stored("ConfigMap", NS, "elastic-resize-md-uid")
    assert current is not None
    fresh = plan_record_delete(ELASTIC_RECORD_POLICY, copy.deepcopy(current), owner=OWNER)
    assert isinstance(fresh, RecordDelete)
    assert await writer.delete_record(KIND, NS, fresh) is True
    assert kube.stored("ConfigMap", NS, "elastic-resize-md-uid") is None
    assert await writer.delete_record(KIND, NS, fresh) is False  # gone: done
