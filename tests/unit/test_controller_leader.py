"""Leader election (gpustack_controller/leader.py): the leader gives up before a standby can
take the Lease, however slowly the API server answers."""

from __future__ import annotations

import asyncio
import copy
from typing import Any, cast

import pytest

from gpustack_controller.kube import Kube, Resource
from gpustack_controller.leader import LeaderElector


class LeaseServer:
    """One Lease; once ``hang`` is set every request waits until the test ends."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.version = 0
        self.hang = False
        #: How many of the next requests are never answered.
        self.drop = 0
        self.requests = 0

    async def _gate(self) -> None:
        self.requests += 1
        if self.hang or self.drop > 0:
            self.drop = max(0, self.drop - 1)
            await asyncio.Event().wait()  # an API server that never answers

    def _store(self, body: dict[str, Any]) -> dict[str, Any]:
        self.version += 1
        self.lease = copy.deepcopy(body)
        self.lease["metadata"]["resourceVersion"] = str(self.version)
        return copy.deepcopy(self.lease)

    async def get(self, resource: Resource, name: str, namespace: str | None = None) -> Any:
        await self._gate()
        return copy.deepcopy(self.lease)

    async def create(self, resource: Resource, body: Any, namespace: str | None = None) -> Any:
        await self._gate()
        return self._store(body)

    async def replace(self, resource: Resource, body: Any, namespace: str | None = None) -> Any:
        await self._gate()
        return self._store(body)


def _elector(server: LeaseServer, **timing: Any) -> LeaderElector:
    return LeaderElector(
        cast(Kube, server),
        namespace="gpustack-system",
        name="gpustack-controller",
        identity="a",
        **timing,
    )


async def test_a_renewal_the_api_server_never_answers_loses_the_lease_within_the_deadline() -> None:
    """Without a bound on the attempt, the leader kept reconciling for the whole request
    timeout (30 s) past a 15 s Lease, while a standby had taken it: two leaders."""
    server = LeaseServer()
    elector = _elector(
        server, lease_seconds=1, renew_seconds=0.05, retry_seconds=0.05, renew_deadline=0.3
    )
    await elector.acquire()
    assert elector.leading
    server.hang = True
    # The guard only turns a hang into a failure; the deadline under test is 0.3 s.
    await asyncio.wait_for(elector.keep(), timeout=30)
    assert not elector.leading


async def test_an_unanswered_acquisition_is_abandoned_and_tried_again() -> None:
    """A candidate does not wait on one request for ever (nor lead on a Lease written
    longer ago than the renew deadline): the attempt is given up and made again."""
    server = LeaseServer()
    server.drop = 1
    elector = _elector(
        server, lease_seconds=1, renew_seconds=0.05, retry_seconds=0.01, renew_deadline=0.3
    )
    await asyncio.wait_for(elector.acquire(), timeout=30)  # a guard against a hang
    assert elector.leading and server.requests >= 2
    assert server.lease is not None and server.lease["spec"]["holderIdentity"] == "a"


async def test_a_leader_whose_renewals_succeed_keeps_the_lease() -> None:
    server = LeaseServer()
    elector = _elector(
        server, lease_seconds=60, renew_seconds=0.01, retry_seconds=0.01, renew_deadline=30
    )
    await elector.acquire()
    keeper = asyncio.create_task(elector.keep())
    while server.requests < 10:
        await asyncio.sleep(0.01)
    assert not keeper.done() and elector.leading
    keeper.cancel()
    with pytest.raises(asyncio.CancelledError):
        await keeper


@pytest.mark.parametrize("deadline", [0, 15, 20])
def test_the_renew_deadline_is_shorter_than_the_lease(deadline: float) -> None:
    with pytest.raises(ValueError, match="renew_deadline"):
        _elector(LeaseServer(), lease_seconds=15, renew_deadline=deadline)
