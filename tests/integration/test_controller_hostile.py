"""One hostile object stops nothing: a KVCachePoolBinding nested 1,200 levels deep (the API
server stores it; the CRD keeps unknown fields under ``spec``) is reported as unreadable while
the controller starts and reconciles every other namespace."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from gpustack_controller.kube import BINDINGS, EVENTS, MODEL_DEPLOYMENTS, Kube
from gpustack_render.reconcile.events import INPUT_UNREADABLE

from .controller_fixtures import (
    deployment,
    ensure_instance_type,
    eventually,
    live,
    new_namespace,
    pods_of,
    role,
    running_controller,
)

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

DEPTH = 1200


def deep_binding(name: str, namespace: str) -> dict[str, Any]:
    nested: dict[str, Any] = {"leaf": True}
    for _ in range(DEPTH):
        nested = {"x": nested}
    return {
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "KVCachePoolBinding",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "poolRef": {"name": "somewhere"},
            "domain": {"blockSize": 16, "dtype": "bfloat16"},
            "unknownField": nested,
        },
    }


async def create_deep(kube: Kube, name: str, namespace: str) -> None:
    # Only the test's own client needs the deeper stack, to send the object once.
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(20_000)
    try:
        await kube.create(BINDINGS, deep_binding(name, namespace), namespace)
    finally:
        sys.setrecursionlimit(limit)


async def test_a_deeply_nested_binding_stops_only_its_own_deployments(
    kubeconfig_path: Path,
) -> None:
    kube = await Kube.connect(kubeconfig=str(kubeconfig_path))
    try:
        await ensure_instance_type(kube)
        hostile, other = await new_namespace(kube, "hostile"), await new_namespace(kube, "other")
        # Only the test's own client needs the deeper stack, to send the object once.
        await create_deep(kube, "deep", hostile)
        victim = deployment("victim", hostile, role(replicas=1))
        victim["spec"]["kvCache"] = {"poolRef": {"name": "deep"}}
        await kube.create(MODEL_DEPLOYMENTS, victim, hostile)
        await kube.create(MODEL_DEPLOYMENTS, deployment("fine", other, role(replicas=1)), other)

        # Start-up lists every Binding, the hostile one included: it must sync.
        async with running_controller(kubeconfig_path, admission_check=False):

            async def reconciled() -> list[dict[str, Any]]:
                return live(await pods_of(kube, other, "fine"))

            await eventually(reconciled, what="Pods of the deployment in another namespace")

            async def reported() -> list[dict[str, Any]]:
                items, _ = await kube.list(EVENTS, hostile)
                return [
                    e
                    for e in items
                    if e.get("reason") == INPUT_UNREADABLE
                    and e["involvedObject"]["name"] == "victim"
                ]

            (event, *_) = await eventually(reported, what="an InputUnreadable Event on victim")
            message = event["message"]
            assert f"KVCachePoolBinding {hostile}/deep" in message
            assert "spec.unknownField.x.x" in message and "nested deeper than" in message

            # A second one arriving through the watch stops nothing either.
            await create_deep(kube, "deeper", hostile)
            await kube.create(
                MODEL_DEPLOYMENTS, deployment("later", other, role(replicas=1)), other
            )

            async def later() -> list[dict[str, Any]]:
                return live(await pods_of(kube, other, "later"))

            await eventually(later, what="Pods of a deployment created after the second one")
    finally:
        await kube.close()
