"""Writes the library's events as core ``v1`` Events on the ModelDeployment, de-duplicated here.

kubernetes-asyncio has no event correlator, so the controller does it itself (D24): a repeat of
the same (object, reason, message) within 10 minutes updates the existing Event's ``count`` and
``lastTimestamp`` instead of creating a new one.
"""

from __future__ import annotations

import datetime
import logging
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from gpustack_controller import metrics
from gpustack_controller.kube import EVENTS, ApiError, Kube
from gpustack_render.reconcile.events import DEDUP_WINDOW_SECONDS, Event, dedup_key

log = logging.getLogger(__name__)

COMPONENT: Final = "gpustack-controller"


def _micro(moment: datetime.datetime) -> str:
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class _Seen:
    name: str
    namespace: str
    count: int
    first: datetime.datetime
    last: datetime.datetime


class EventRecorder:
    """Records events on involved objects, counting repeats."""

    def __init__(
        self,
        kube: Kube,
        *,
        component: str = COMPONENT,
        instance: str | None = None,
        clock: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.UTC),
    ) -> None:
        self.kube = kube
        self.component = component
        self.instance = instance or socket.gethostname()
        self.clock = clock
        self._seen: dict[tuple[str, str, str, str], _Seen] = {}
        #: (namespace, name) → its keys in ``_seen``: forgetting one costs its own events.
        self._keys: dict[tuple[str, str], set[tuple[str, str, str, str]]] = {}

    def forget(self, namespace: str, name: str) -> None:
        """Drop the repeat memory of a deployment that is gone."""
        for key in self._keys.pop((namespace, name), ()):
            self._seen.pop(key, None)

    async def record(self, involved: dict[str, Any], event: Event) -> None:
        """Create the Event, or count a repeat; a failure is logged, never raised (events are
        best effort and must not fail a pass)."""
        meta = involved.get("metadata") or {}
        namespace, name = str(meta.get("namespace") or "default"), str(meta.get("name"))
        key = dedup_key(event, namespace=namespace, name=name)
        now = self.clock()
        seen = self._seen.get(key)
        try:
            if seen is not None and (now - seen.last).total_seconds() < DEDUP_WINDOW_SECONDS:
                seen.count += 1
                seen.last = now
                try:
                    await self.kube.merge_patch(
                        EVENTS,
                        seen.name,
                        {"count": seen.count, "lastTimestamp": _micro(now)},
                        seen.namespace,
                    )
                    metrics.EVENTS_RECORDED.labels(event.reason, "true").inc()
                    return
                except ApiError as exc:
                    if not exc.not_found:
                        raise
            body = {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"generateName": f"{name}.", "namespace": namespace},
                "involvedObject": {
                    "apiVersion": involved.get("apiVersion"),
                    "kind": involved.get("kind"),
                    "name": name,
                    "namespace": namespace,
                    "uid": meta.get("uid"),
                },
                "reason": event.reason,
                "message": event.message[:1024],
                "type": event.type,
                "count": 1,
                "firstTimestamp": _micro(now),
                "lastTimestamp": _micro(now),
                "source": {"component": self.component},
                "reportingComponent": self.component,
                "reportingInstance": self.instance,
            }
            created = await self.kube.create(EVENTS, body, namespace)
            self._seen[key] = _Seen(str(created["metadata"]["name"]), namespace, 1, now, now)
            self._keys.setdefault((namespace, name), set()).add(key)
            metrics.EVENTS_RECORDED.labels(event.reason, "false").inc()
        except ApiError as exc:
            log.warning(
                "recording event %s on %s/%s failed: %s", event.reason, namespace, name, exc
            )
