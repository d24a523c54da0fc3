"""The joint AdmissionCheck object is kept while the controller runs
(docs/contract/controller.md §9): a ClusterQueue listing a missing check is inactive, so a
deleted check must come back without a restart."""

from __future__ import annotations

import asyncio
from typing import cast

from controller_support import MemoryKube

from gpustack_controller.admissioncheck import ensure_admission_check, keep_admission_check
from gpustack_controller.kube import ApiError, Kube
from gpustack_render.reconcile.jointcheck import CHECK_NAME


def _active(kube: MemoryKube) -> bool:
    stored = kube.stored("AdmissionCheck", "", CHECK_NAME)
    conditions = ((stored or {}).get("status") or {}).get("conditions") or []
    return any(c["type"] == "Active" and c["status"] == "True" for c in conditions)


async def _until_active(kube: MemoryKube) -> None:
    while not _active(kube):
        await asyncio.sleep(0.01)


async def test_a_deleted_admission_check_is_ensured_again() -> None:
    kube = MemoryKube()
    await ensure_admission_check(cast(Kube, kube))
    assert _active(kube)
    del kube.objects[("AdmissionCheck", "", CHECK_NAME)]
    kube.fail("apply", "AdmissionCheck", ApiError(503, "ServiceUnavailable"))
    keeper = asyncio.create_task(keep_admission_check(cast(Kube, kube), every=0.01))
    try:
        await asyncio.sleep(0.05)
        assert not keeper.done(), "a failed attempt is retried, not the end of the keeper"
        kube.fail("apply", "AdmissionCheck", None)
        await asyncio.wait_for(_until_active(kube), timeout=30)  # a guard against a hang
    finally:
        keeper.cancel()
    stored = kube.stored("AdmissionCheck", "", CHECK_NAME)
    assert stored is not None
    assert stored["spec"] == {"controllerName": "worker.gpustack.ai/model-deployment-joint"}
