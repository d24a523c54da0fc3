"""Runs the joint multi-role AdmissionCheck (docs/contract/controller.md §9): the object, its
``Active`` condition, and one verdict per Workload, written by server-side apply with the check's
own field manager. The verdict itself is ``gpustack_render.reconcile.jointcheck.joint_verdict``.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from collections.abc import Callable, Mapping
from typing import Any, Final

from gpustack_controller.kube import (
    ADMISSION_CHECKS,
    MODEL_DEPLOYMENTS,
    PODS,
    WORKLOADS,
    ApiError,
    Kube,
)
from gpustack_controller.observe import WORKLOADS_BY_POD, indexed_workloads, owner_pod_uids
from gpustack_controller.watches import Informer
from gpustack_render.core.settings import Settings
from gpustack_render.reconcile.applied import apply_aligned
from gpustack_render.reconcile.jointcheck import (
    CHECK_NAME,
    CONTROLLER_NAME,
    PENDING,
    READY,
    CheckVerdict,
    JointDeployment,
    Uncertain,
    active_condition_apply,
    active_since,
    admission_check_object,
    check_entry_apply,
    controlling_deployment,
    joint_deployment,
    joint_verdict,
    needs_verdict,
    owner_pods,
    reads_members,
    resolve_deployment,
    resolve_owner,
    verdict_changed,
    waiting_since,
)
from gpustack_render.reconcile.keys import FIELD_MANAGER, deployment_selector, split_key
from gpustack_render.reconcile.observed import ObservedWorkload, observe_workload
from gpustack_render.reconcile.workloads import deployment_workloads

log = logging.getLogger(__name__)

#: Any read failure: never ``Ready`` on uncertainty, look again later.
READ_RETRY_SECONDS: Final = 15.0
#: A ``Pending`` verdict is looked at again this often (parking is time-based).
PENDING_RECHECK_SECONDS: Final = 60.0
#: The AdmissionCheck is ensured again this often while the controller runs.
ENSURE_EVERY_SECONDS: Final = 60.0


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


async def ensure_admission_check(kube: Kube, *, now: datetime.datetime | None = None) -> None:
    """Create or align the AdmissionCheck and report it ``Active``: each apply only when the
    stored check does not already say it (read first: a check in place costs one GET)."""
    stored = await kube.get(ADMISSION_CHECKS, CHECK_NAME)
    wanted = admission_check_object()
    if stored is None or not apply_aligned(stored, wanted, FIELD_MANAGER):
        stored = await kube.apply(ADMISSION_CHECKS, wanted, field_manager=FIELD_MANAGER)
    status = active_condition_apply(previous_since=active_since(stored), now=now or _now())
    if not apply_aligned(stored, status, CONTROLLER_NAME, subresource="status"):
        await kube.apply(
            ADMISSION_CHECKS, status, field_manager=CONTROLLER_NAME, subresource="status"
        )


async def keep_admission_check(kube: Kube, *, every: float = ENSURE_EVERY_SECONDS) -> None:
    """Ensure the AdmissionCheck every ``every`` seconds until cancelled. A deleted check would
    otherwise stay gone until the controller restarts, and every ClusterQueue listing it is
    inactive meanwhile (Kueue admits nothing through it); a failed attempt is logged and made
    again next time. A check in place costs a read, never a write."""
    while True:
        await asyncio.sleep(every)
        try:
            await ensure_admission_check(kube)
        except ApiError as exc:
            log.warning("ensuring AdmissionCheck %s failed: %s; retrying", CHECK_NAME, exc)


class AdmissionCheckReconciler:
    """One Workload per call (key ``<namespace>/<name>``)."""

    def __init__(
        self,
        kube: Kube,
        pods: Informer,
        *,
        clock: Callable[[], datetime.datetime] = _now,
        settings: Callable[[], Settings] = Settings,
        workloads: Informer | None = None,
        deployments: Informer | None = None,
    ) -> None:
        self.kube = kube
        self.pods = pods
        self.clock = clock
        self.settings = settings
        #: The Workload cache, indexed by owner Pod uid; without it the namespace's Workloads
        #: are listed on every call.
        self.workloads = workloads
        if workloads is not None:
            workloads.add_indexer(WORKLOADS_BY_POD, owner_pod_uids)
        #: The ModelDeployment cache: a Workload of a single-role deployment found there is
        #: judged from the caches alone (:meth:`_single_role`).
        self.deployments = deployments
        #: Verdicts given from the caches alone (no read), for the bench and the tests.
        self.cached_verdicts = 0

    async def __call__(self, key: str) -> float | None:
        namespace, name = split_key(key)
        if await self._answered_from_cache(key, namespace, name):
            return None
        try:
            obj = await self.kube.get(WORKLOADS, name, namespace)
        except ApiError:
            return READ_RETRY_SECONDS
        if obj is None:
            return None
        workload = observe_workload(obj)
        if not needs_verdict(workload):
            return None
        try:
            deployment = await self._deployment(obj, namespace)
        except ApiError as exc:
            log.info("joint check of %s waits: %s", key, exc)
            return READ_RETRY_SECONDS
        if isinstance(deployment, Uncertain):
            log.info("joint check of %s waits: %s", key, deployment.reason)
            return READ_RETRY_SECONDS
        park_after = self.settings().park_after_seconds
        verdict = joint_verdict(
            workload=workload, deployment=deployment, now=self.clock(), park_after=park_after
        )
        await self._write_verdict(namespace, name, workload, verdict)
        if verdict.park:
            for target in verdict.deactivate:
                try:
                    await self.kube.merge_patch(
                        WORKLOADS, target, {"spec": {"active": False}}, namespace
                    )
                except ApiError as exc:
                    if not exc.not_found:
                        raise
            return None
        if verdict.state != PENDING:
            return None
        since = waiting_since(workload)
        if since is None:
            return PENDING_RECHECK_SECONDS
        left = park_after - (self.clock() - since).total_seconds()
        return min(PENDING_RECHECK_SECONDS, max(1.0, left + 1.0))

    async def _write_verdict(
        self, namespace: str, name: str, workload: ObservedWorkload, verdict: CheckVerdict
    ) -> None:
        """Apply the check's entry on the Workload's status, only when the verdict changed."""
        previous = workload.checks.get(CHECK_NAME)
        if verdict_changed(previous, verdict):
            await self.kube.apply(
                WORKLOADS,
                check_entry_apply(
                    namespace=namespace,
                    workload=name,
                    verdict=verdict,
                    previous=previous,
                    now=self.clock(),
                ),
                field_manager=CONTROLLER_NAME,
                namespace=namespace,
                subresource="status",
            )

    async def _answered_from_cache(self, key: str, namespace: str, name: str) -> bool:
        """Whether the caches settle the call: no verdict needed, or one given from them."""
        cache = self.workloads
        if cache is None or not cache.synced.is_set():
            return False
        # Every change of the Workload is an event that queues it again once the cache has it,
        # so a cached state that asks for no verdict needs no read: most events do not.
        cached = cache.get(key)
        if cached is None or not needs_verdict(observe_workload(cached)):
            return True
        return await self._single_role(cached, namespace, name)

    async def _single_role(self, cached: dict[str, Any], namespace: str, name: str) -> bool:
        """Judge a Workload of a single-role deployment from the caches alone, when its owner
        Pod and its deployment (same uid) are both cached: such a verdict reads no member and
        is ``Ready`` (:func:`joint_verdict`), so the two live reads (the Workload and the
        deployment) would only confirm what the caches say, and they cost the group two round
        trips before Kueue may admit it. ``False`` when anything is not cached or the
        deployment has two roles or more: the caller reads live then, as before."""
        if self.deployments is None or not self.deployments.synced.is_set():
            return False
        pods: list[Mapping[str, Any] | None] = []
        for ref in owner_pods(cached):
            pod = self.pods.get(f"{namespace}/{ref.get('name')}")
            if pod is None or (pod.get("metadata") or {}).get("uid") != ref.get("uid"):
                return False
            pods.append(pod)
            if controlling_deployment(pod) is not None:
                break
        md_ref = resolve_owner(cached, pods)
        if md_ref is None or isinstance(md_ref, Uncertain):
            return False
        raw = self.deployments.get(f"{namespace}/{md_ref.get('name')}")
        md = resolve_deployment(md_ref, raw)
        if isinstance(md, Uncertain) or reads_members(len(md.spec.roles)):
            return False
        workload = observe_workload(cached)
        verdict = joint_verdict(
            workload=workload,
            deployment=joint_deployment(md, pods=[], workloads=[]),
            now=self.clock(),
            park_after=self.settings().park_after_seconds,
        )
        if verdict.state != READY:
            return False
        await self._write_verdict(namespace, name, workload, verdict)
        self.cached_verdicts += 1
        return True

    async def _deployment(
        self, workload: dict[str, Any], namespace: str
    ) -> JointDeployment | Uncertain | None:
        """The controlling deployment of the Workload's owner Pods (``None``: positively not
        one; :class:`Uncertain`: cannot tell yet)."""
        pods: list[Mapping[str, Any] | None] = []
        for ref in owner_pods(workload):
            pod = self.pods.get(f"{namespace}/{ref.get('name')}")
            if pod is None or (pod.get("metadata") or {}).get("uid") != ref.get("uid"):
                pod = await self.kube.get(PODS, str(ref.get("name")), namespace)
            if pod is not None and (pod.get("metadata") or {}).get("uid") != ref.get("uid"):
                pod = None  # another Pod of the same name: the owner is gone
            pods.append(pod)
            if pod is not None and controlling_deployment(pod) is not None:
                break
        md_ref = resolve_owner(workload, pods)
        if md_ref is None or isinstance(md_ref, Uncertain):
            return md_ref
        raw = await self.kube.get(MODEL_DEPLOYMENTS, str(md_ref.get("name")), namespace)
        md = resolve_deployment(md_ref, raw)
        if isinstance(md, Uncertain):
            return md
        if not reads_members(len(md.spec.roles)):
            return joint_deployment(md, pods=[], workloads=[])  # its verdict reads no member
        raw_pods, _ = await self.kube.list(
            PODS, namespace, label_selector=deployment_selector(md.metadata.name)
        )
        if self.workloads is None or not self.workloads.synced.is_set():
            raw_workloads, _ = await self.kube.list(WORKLOADS, namespace)
        else:
            raw_workloads = self._workloads_owning(namespace, raw_pods, workload)
        return joint_deployment(md, pods=raw_pods, workloads=raw_workloads)

    def _workloads_owning(
        self, namespace: str, pods: list[dict[str, Any]], judged: dict[str, Any]
    ) -> list[dict[str, Any]]:
        """The deployment's Workloads the verdict reads (the ones owning one of ``pods``: the
        library's rule, :mod:`gpustack_render.reconcile.workloads`), from the cache, with the
        Workload being judged as just read (its own owner Pods count as the deployment's: they
        led here), in name order as a list of the namespace gives them."""
        assert self.workloads is not None
        uids = {str((pod.get("metadata") or {}).get("uid") or "") for pod in pods}
        uids |= {str(ref.get("uid")) for ref in owner_pods(judged) if ref.get("uid")}
        candidates = [judged, *indexed_workloads(self.workloads, namespace, uids, frozenset())]
        return [
            dict(w)
            for w in deployment_workloads(
                candidates, namespace=namespace, pod_uids=uids, groups=frozenset()
            )
        ]
