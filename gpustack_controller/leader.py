"""Leader election with a ``coordination.k8s.io/v1`` Lease.

One replica of the controller reconciles at a time. A candidate takes the Lease when it is free,
its own, or expired — judged by how long *this* process has watched the same record without a
renewal (as client-go does), so clock skew between replicas does not matter. The leader renews
every ``renew_seconds`` (retrying every ``retry_seconds`` after a failure); when no renewal
succeeds within ``renew_deadline`` — shorter than the lease duration, measured from the start
of the last successful attempt, and bounding every attempt, however slow the API server
answers — it has lost, and the caller must stop reconciling before a standby can take the
expired Lease (client-go's renew deadline). Writes are updates carrying ``resourceVersion``, so
two candidates never both win.
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
        renew_deadline: float = 10.0,
    ) -> None:
        if not 0 < renew_deadline < lease_seconds:
            raise ValueError("renew_deadline must be positive and shorter than lease_seconds")
        self.kube = kube
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_seconds = lease_seconds
        self.renew_seconds = renew_seconds
        self.retry_seconds = retry_seconds
        self.renew_deadline = renew_deadline
        self._observed: tuple[str, float] | None = None  # (record, monotonic time first seen)
        #: Loop time at the start of the last successful attempt (its renewTime is newer).
        self._renewed_at: float | None = None
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

    async def _attempt(self, timeout: float) -> bool:
        """One attempt abandoned after ``timeout`` seconds (then: not won)."""
        try:
            return await asyncio.wait_for(self.try_acquire_or_renew(), timeout)
        except TimeoutError:
            log.warning("lease %s/%s: the API server did not answer", self.namespace, self.name)
            return False

    async def acquire(self) -> None:
        """Return once this process leads, within the renew deadline of the attempt that won
        (a Lease written long before its answer came back may already look expired)."""
        loop = asyncio.get_running_loop()
        while True:
            started = loop.time()
            if await self._attempt(self.renew_deadline):
                self._renewed_at = started
                return
            await asyncio.sleep(self.retry_seconds)

    async def keep(self) -> None:
        """Renew until no renewal succeeds within the renew deadline; then return.

        The deadline runs from the start of the last successful attempt (the renewal it wrote
        is at least that recent) and bounds each attempt: a request the API server does not
        answer is abandoned, so this returns no later than ``renew_deadline`` after the last
        renewal, before a standby sees the Lease expire.
        """
        loop = asyncio.get_running_loop()
        last_ok = self._renewed_at if self._renewed_at is not None else loop.time()
        delay = self.renew_seconds
        while True:
            await asyncio.sleep(max(0.0, min(delay, last_ok + self.renew_deadline - loop.time())))
            started = loop.time()
            left = last_ok + self.renew_deadline - started
            renewed = left > 0 and await self._attempt(left)
            if renewed:
                last_ok = self._renewed_at = started
                delay = self.renew_seconds
            elif loop.time() - last_ok >= self.renew_deadline or not self.leading:
                self._lost()
                log.error("lost lease %s/%s", self.namespace, self.name)
                return
            else:
                delay = self.retry_seconds

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
