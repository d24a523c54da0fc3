"""Every object of every reviewed render case is one the real API server accepts.

The golden files pin what the renderer writes; this asks kube-apiserver (and the CRDs the cluster
serves: Kueue's, the project's, the Inference Extension's) whether each object would be created:
a server-side dry run (``dryRun=All``) runs defaulting, validation and the CRD schemas, and
stores nothing. A Pod with two mounts at one path, a Service port name too long, a Role the API
server cannot read: each would fail here with the API server's own words, not on a real cluster.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpustack_controller.kube import ApiError, Kube
from gpustack_render.cli import yamlio
from gpustack_render.schema.resources import (
    LOCAL_QUEUES,
    PODS,
    ROUTER_RESOURCES,
    SCALERS,
    Resource,
)

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

GOLDEN = Path(__file__).resolve().parents[2] / "golden"
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
#: Every kind a render case holds, by kind.
KINDS: dict[str, Resource] = {
    **ROUTER_RESOURCES,
    PODS.kind: PODS,
    LOCAL_QUEUES.kind: LOCAL_QUEUES,
    SCALERS.kind: SCALERS,
}


def _rendered() -> list[Any]:
    return [
        pytest.param(case, id=case.name)
        for case in sorted(GOLDEN.glob("render-*"))
        if (case / "rendered.yaml").exists()
    ]


async def _namespace(kube: Kube, name: str) -> None:
    try:
        await kube.create(
            NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        )
    except ApiError as exc:
        if not exc.conflict:
            raise


@pytest.mark.parametrize("case", _rendered())
async def test_every_rendered_object_is_accepted(kube: Kube, case: Path) -> None:
    documents = yamlio.load_documents((case / "rendered.yaml").read_text(), source=str(case))
    assert documents, f"{case.name}: no objects"
    refused: list[str] = []
    for doc in documents:
        kind = str(doc["kind"])
        assert kind in KINDS, f"{case.name}: a rendered kind this test does not know: {kind}"
        namespace = str(doc["metadata"].get("namespace") or "default")
        await _namespace(kube, namespace)
        try:
            await kube.request(
                "POST", KINDS[kind].path(namespace), query={"dryRun": "All"}, body=doc
            )
        except ApiError as exc:
            name = doc["metadata"].get("name") or doc["metadata"].get("generateName")
            refused.append(f"{kind} {namespace}/{name}: {exc}")
    assert refused == [], f"{case.name}: the API server refuses:\n" + "\n".join(refused)
