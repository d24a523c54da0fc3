"""Every object defined in more than one file under ``examples/`` (``examples/autoscaling/``
included) is defined identically in each (issue 37, item 7): ``make cluster-demo`` applies them
all, and two definitions of one InstanceType put one deployment on the other's ClusterQueue."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpustack_render.cli.yamlio import load_documents

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _key(doc: dict[str, Any]) -> tuple[str, str, str, str]:
    meta = doc.get("metadata") or {}
    return (
        str(doc.get("apiVersion")),
        str(doc.get("kind")),
        str(meta.get("namespace") or ""),
        str(meta.get("name")),
    )


def definitions() -> dict[tuple[str, str, str, str], list[tuple[str, dict[str, Any]]]]:
    """Each object of the examples by (apiVersion, kind, namespace, name): where and how."""
    out: dict[tuple[str, str, str, str], list[tuple[str, dict[str, Any]]]] = {}
    for path in sorted(EXAMPLES.rglob("*.yaml")):
        for doc in load_documents(path.read_text(), source=str(path)):
            out.setdefault(_key(doc), []).append((str(path.relative_to(EXAMPLES)), doc))
    return out


def test_an_object_in_several_examples_is_defined_the_same_in_each() -> None:
    found = definitions()
    assert len(found) > 10
    differ = {
        "/".join(key[1:]): [where for where, _ in defs]
        for key, defs in found.items()
        if any(doc != defs[0][1] for _, doc in defs[1:])
    }
    assert differ == {}, differ


def test_the_shared_instance_type_is_one_of_them() -> None:
    """The check above has something to compare: two examples share the L40S InstanceType."""
    key = ("worker.gpustack.ai/v1", "InstanceType", "", "gpustack-nvidia-l40s-linux-amd64")
    assert len(definitions()[key]) >= 2
