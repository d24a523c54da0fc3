"""The one cache rule (``gpustack_kube/cachedread.py``): a synced, current informer answers for
an object not being deleted; anything else is read live; an authoritative kind's miss is an
absence."""

from __future__ import annotations

from typing import Any, cast

import pytest

from gpustack_kube.cachedread import UNANSWERED, CachedReader, from_cache
from gpustack_kube.client import Kube
from gpustack_kube.informer import Informer
from gpustack_render.schema.resources import SERVICES


def _svc(name: str, **meta: Any) -> dict[str, Any]:
    return {"kind": "Service", "metadata": {"name": name, "namespace": "ns", **meta}}


def _informer(*, synced: bool = True, current: bool = True) -> Informer:
    informer = Informer(cast(Kube, None), SERVICES)
    informer.cache = {
        "ns/a": _svc("a"),
        "ns/gone": _svc("gone", deletionTimestamp="2026-01-01T00:00:00Z"),
    }
    if synced:
        informer.synced.set()
    informer.current = current
    return informer


@pytest.mark.parametrize(
    ("informer", "key", "authoritative", "answer"),
    [
        pytest.param(_informer(), "ns/a", False, "a", id="held"),
        pytest.param(_informer(), "ns/b", False, UNANSWERED, id="miss-read-live"),
        pytest.param(_informer(), "ns/b", True, None, id="miss-authoritative-absent"),
        pytest.param(_informer(), "ns/gone", False, UNANSWERED, id="being-deleted"),
        pytest.param(_informer(), "ns/gone", True, UNANSWERED, id="being-deleted-authoritative"),
        pytest.param(_informer(synced=False), "ns/a", True, UNANSWERED, id="not-synced"),
        pytest.param(_informer(current=False), "ns/a", True, UNANSWERED, id="not-current"),
        pytest.param(None, "ns/a", True, UNANSWERED, id="no-cache"),
    ],
)
def test_when_the_cache_answers(
    informer: Informer | None, key: str, authoritative: bool, answer: Any
) -> None:
    found = from_cache(informer, key, authoritative=authoritative)
    if isinstance(answer, str):
        assert isinstance(found, dict) and found["metadata"]["name"] == answer
    else:
        assert found is answer


class _Live:
    def __init__(self) -> None:
        self.gets: list[tuple[str, str | None]] = []

    async def get(self, resource: Any, name: str, namespace: str | None = None) -> Any:
        self.gets.append((name, namespace))
        return {"live": name}


async def test_the_reader_goes_live_only_when_the_cache_cannot_answer() -> None:
    live = _Live()
    reader = CachedReader(cast(Kube, live))
    informer = _informer()
    held = await reader.get(SERVICES, "a", "ns", informer=informer)
    assert held is not None and held["metadata"]["name"] == "a"
    assert await reader.get(SERVICES, "b", "ns", informer=informer, authoritative=True) is None
    assert live.gets == []
    assert await reader.get(SERVICES, "b", "ns", informer=informer) == {"live": "b"}
    assert await reader.get(SERVICES, "gone", "ns", informer=informer) == {"live": "gone"}
    assert live.gets == [("b", "ns"), ("gone", "ns")]
