"""Leader election with a ``coordination.k8s.io/v1`` Lease.

One replica of the controller reconciles at a time. A candidate takes the Lease when it is free,
its own, or expired — judged by how long *this* process has watched the same record without a
renewal (as client-go does), so clock skew between replicas does not matter. The leader renews
every ``renew_seconds``; when it cannot renew within the lease duration it has lost, and the
caller must stop reconciling. Writes are updates carrying ``resourceVersion``, so two candidates
never both win.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from typing import Any

from gpustack_controller import metrics
from gpustack_controller.kube import LEASES, ApiError, Kube

log = logging.getLogger(__name__)


def _micro(moment: datetime.datetime) -> str:
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """Acquires and keeps one Lease."""

    def __init__(
        self,
        kube: Kube,
        *,
        namespace: str,
        name: str,
        identity: str,
        lease_seconds: int = 15,
        renew_seconds: float = 5.0,
        retry_seconds: float = 2.0,
    ) -> None:
        self.kube = kube
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_seconds = lease_seconds
        self.renew_seconds = renew_seconds
        self.retry_seconds = retry_seconds
        self._observed: tuple[str, float] | None = None  # (record, monotonic time first seen)
        self.leading = False

    def _body(self, previous: dict[str, Any] | None) -> dict[str, Any]:
        now = _micro(datetime.datetime.now(datetime.UTC))
        spec = dict((previous or {}).get("spec") or {})
        transitions = int(spec.get("leaseTransitions") or 0)
        if spec.get("holderIdentity") != self.identity:
            spec["acquireTime"] = now
            if previous is not None:
                transitions += 1
        spec.update(
            holderIdentity=self.identity,
            leaseDurationSeconds=self.lease_seconds,
            renewTime=now,
            leaseTransitions=transitions,
        )
        metadata: dict[str, Any] = {"name": self.name, "namespace": self.namespace}
        if previous is not None:
            metadata["resourceVersion"] = previous["metadata"]["resourceVersion"]
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": metadata,
            "spec": spec,
        }

    async def try_acquire_or_renew(self) -> bool:
        """One attempt; True while this process holds the Lease."""
        loop = asyncio.get_running_loop()
        try:
            lease = await self.kube.get(LEASES, self.name, self.namespace)
            if lease is None:
                await self.kube.create(LEASES, self._body(None), self.namespace)
                return self._won()
            spec = lease.get("spec") or {}
            holder = spec.get("holderIdentity")
            record = f"{holder}|{spec.get('renewTime')}"
            if self._observed is None or self._observed[0] != record:
                self._observed = (record, loop.time())
            duration = float(spec.get("leaseDurationSeconds") or self.lease_seconds)
            expired = loop.time() - self._observed[1] > duration
            if holder and holder != self.identity and not expired:
                return self._lost()
            await self.kube.replace(LEASES, self._body(lease), self.namespace)
            return self._won()
        except ApiError as exc:
            if not exc.conflict:
                log.warning("lease %s/%s: %s", self.namespace, self.name, exc)
            return False

    def _won(self) -> bool:
        if not self.leading:
            log.info("acquired lease %s/%s as %s", self.namespace, self.name, self.identity)
        self.leading = True
        metrics.LEADER.set(1)
        return True

    def _lost(self) -> bool:
        self.leading = False
        metrics.LEADER.set(0)
        return False

    async def acquire(self) -> None:
        """Return once this process leads."""
        while not await self.try_acquire_or_renew():
            await asyncio.sleep(self.retry_seconds)

    async def keep(self) -> None:
        """Renew until a renewal cannot be made within the lease duration; then return."""
        loop = asyncio.get_running_loop()
        last_ok = loop.time()
        while True:
            await asyncio.sleep(self.renew_seconds)
            if await self.try_acquire_or_renew():
                last_ok = loop.time()
            elif loop.time() - last_ok >= self.lease_seconds or not self.leading:
                self._lost()
                log.error("lost lease %s/%s", self.namespace, self.name)
                return

    async def release(self) -> None:
        """Give the Lease up (a successor need not wait for it to expire)."""
        if not self.leading:
            return
        try:
            lease = await self.kube.get(LEASES, self.name, self.namespace)
            if (
                lease is not None
                and (lease.get("spec") or {}).get("holderIdentity") == self.identity
            ):
                body = self._body(lease)
                body["spec"]["leaseDurationSeconds"] = 1
                body["spec"]["holderIdentity"] = ""
                await self.kube.replace(LEASES, body, self.namespace)
        except ApiError as exc:
            log.warning("releasing lease %s/%s: %s", self.namespace, self.name, exc)
        self._lost()
