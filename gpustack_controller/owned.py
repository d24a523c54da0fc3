"""The owned-object path in the controller: one cached reader, one writer, for every kind a pass
keeps beside a ModelDeployment (Services, the router's objects, LocalQueues, scalers).

The rules are the library's (:mod:`gpustack_render.reconcile.owned`: one :class:`OwnedPolicy`
per kind, one plan function); this module only reads the stored objects and carries the plan
out. Adding a kind means a policy in the library and an :class:`OwnedKind` here (its resource,
its informer, how to find a deployment's stored objects beyond the rendered names), then one
``sync`` call in the pass.

- **Reading**: by name, through :class:`~gpustack_kube.cachedread.CachedReader` (the one cache
  rule, shared with the webhook server: a synced and current cache answers for an object not
  being deleted, else a live read; a policy's ``cache_authoritative`` kind takes a usable
  cache's miss as an absence).
- **Writing** (:class:`OwnedWriter`): at most :data:`WRITE_CONCURRENCY` requests in flight;
  creates, applies (server-side, forced, by the controller's field manager) and kept-field
  patches first, prunes later (after the pass's status write: a status that remembers what is
  being removed is written before it goes). **The failure rule**: every write of a plan is
  attempted whatever another one answered; a create answered 409 (the name exists now: the
  cache had not seen it, and its watch event brings the deployment back) and a delete answered
  404 count as done; every other failure, and each conflict of the plan, is collected, and the
  pass raises the first one after writing its status, so the work queue retries it with
  backoff.
- **Records** (a ``record`` policy, D28): a create answered 409 is a failure, not done (the
  record the decision did not see must not be taken as written); a replace is a PUT carrying the
  resourceVersion the decision read, so a record changed since answers 409 and the pass is
  retried; :meth:`OwnedWriter.delete_record` deletes with uid and resourceVersion
  preconditions. Pass the records as read (``stored``): a record is never read from a cache
  alone.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Final, TypeVar

from gpustack_controller.kube import ApiError, Kube, Resource
from gpustack_controller.watches import Handler, Informer
from gpustack_kube.cachedread import CachedReader
from gpustack_render.core import labels
from gpustack_render.reconcile.keys import FIELD_MANAGER
from gpustack_render.reconcile.owned import (
    FinalizerPolicy,
    OwnedPlan,
    OwnedPolicy,
    Owner,
    PassFacts,
    RecordDelete,
    WriteMode,
    name_of,
    plan_finalizer,
    plan_owned,
)
from gpustack_render.schema.resources import INFERENCE_POOLS, ROUTER_RESOURCES

log = logging.getLogger(__name__)

#: Concurrent writes of one pass.
WRITE_CONCURRENCY: Final = 32

T = TypeVar("T")


async def bounded(
    jobs: Iterable[Callable[[], Awaitable[T]]], *, limit: int = WRITE_CONCURRENCY
) -> list[T | BaseException]:
    """Run ``jobs`` with at most ``limit`` in flight; results or exceptions, in order."""
    gate = asyncio.Semaphore(limit)

    async def one(job: Callable[[], Awaitable[T]]) -> T:
        async with gate:
            return await job()

    return list(await asyncio.gather(*(one(j) for j in jobs), return_exceptions=True))


def failures(results: Sequence[object]) -> list[BaseException]:
    return [r for r in results if isinstance(r, BaseException)]


#: Finds a deployment's stored objects of a kind beyond its rendered names (what may be pruned).
Candidates = Callable[[Owner], Iterable[Mapping[str, Any]]]


def _none(owner: Owner) -> Iterable[Mapping[str, Any]]:
    return ()


@dataclass
class OwnedKind:
    """One kind on the owned-object path: its policy, where it is stored, its cache, and how a
    deployment's stored objects of the kind are found (none: nothing is pruned but by name)."""

    policy: OwnedPolicy
    resource: Resource
    informer: Informer | None = None
    candidates: Candidates = _none


@dataclass
class OwnedResult:
    """One kind's pass: its plan, what was stored before it, what the API server answered each
    write, and the failures (write errors, then the plan's conflicts)."""

    kind: OwnedKind
    owner: Owner
    plan: OwnedPlan
    stored: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    written: dict[str, dict[str, Any]] = field(default_factory=dict)
    failures: list[BaseException] = field(default_factory=list)

    def current(self, name: str) -> dict[str, Any] | None:
        """The object under ``name`` as this pass leaves it (``None``: absent)."""
        return self.written.get(name) or self.stored.get(name)


class OwnedWriter:
    """Reads and writes every owned kind (see the module docstring)."""

    def __init__(self, kube: Kube, *, limit: int = WRITE_CONCURRENCY) -> None:
        self.kube = kube
        self.reader = CachedReader(kube)
        self.limit = limit

    async def stored(
        self, kind: OwnedKind, names: Iterable[str], namespace: str
    ) -> dict[str, dict[str, Any] | None]:
        """The stored object under each name (``None``: absent), read by the one cache rule."""
        unique = list(dict.fromkeys(names))
        reads = await asyncio.gather(
            *(
                self.reader.get(
                    kind.resource,
                    name,
                    namespace,
                    informer=kind.informer,
                    authoritative=kind.policy.cache_authoritative,
                )
                for name in unique
            )
        )
        return dict(zip(unique, reads, strict=True))

    async def sync(
        self,
        kind: OwnedKind,
        wanted: Sequence[Mapping[str, Any]],
        *,
        owner: Owner,
        facts: PassFacts | None = None,
        names: Iterable[str] = (),
        stored: Mapping[str, dict[str, Any] | None] | None = None,
    ) -> OwnedResult:
        """Plan ``kind`` for ``owner`` and carry out its creates, applies and patches (prunes
        wait for :meth:`prune`). ``names`` are more names to look up (stored objects the kind
        may have had); ``stored`` objects already read this pass. A record policy's ``stored``
        is what its decision read (a name left out was read absent)."""
        known = dict(stored or {})
        missing = [n for n in (*(name_of(o) for o in wanted), *names) if n not in known]
        if kind.policy.write is WriteMode.RECORD:
            # A record is written against what the decision read, never a fresher read: a name
            # not given was read absent (a create; 409 if it exists now).
            known.update(dict.fromkeys(missing))
        else:
            known.update(await self.stored(kind, missing, owner.namespace))
        plan = plan_owned(
            kind.policy,
            wanted,
            stored=known,
            others=kind.candidates(owner),
            owner=owner,
            manager=FIELD_MANAGER,
            facts=facts,
        )
        result = OwnedResult(kind, owner, plan, stored=known)
        ns, resource = owner.namespace, kind.resource
        record = kind.policy.write is WriteMode.RECORD
        jobs: list[tuple[str, Callable[[], Awaitable[dict[str, Any]]]]] = [
            (name_of(o), partial(self.kube.create if record else self._create, resource, o, ns))
            for o in plan.creates
        ]
        jobs += [(name_of(o), partial(self.kube.replace, resource, o, ns)) for o in plan.replaces]
        jobs += [
            (
                name_of(o),
                partial(self.kube.apply, resource, o, field_manager=FIELD_MANAGER, namespace=ns),
            )
            for o in plan.applies
        ]
        jobs += [
            (name, partial(self.kube.merge_patch, resource, name, body, ns))
            for name, body in plan.patches
        ]
        answers = await bounded((job for _, job in jobs), limit=self.limit)
        for (name, _), answer in zip(jobs, answers, strict=True):
            if isinstance(answer, BaseException):
                result.failures.append(answer)
            elif answer:
                result.written[name] = answer
        result.failures.extend(plan.conflicts)
        return result

    async def _create(
        self, resource: Resource, obj: Mapping[str, Any], namespace: str
    ) -> dict[str, Any]:
        try:
            return await self.kube.create(resource, obj, namespace)
        except ApiError as exc:
            if exc.conflict:
                return {}  # created since the cache looked: its watch event brings us back
            raise

    async def keep_finalizer(
        self,
        resource: Resource,
        stored: dict[str, Any],
        policy: FinalizerPolicy,
        *,
        held: bool,
    ) -> dict[str, Any] | None:
        """Add or remove ``policy``'s finalizer on ``stored`` as the library plans it
        (:func:`~gpustack_render.reconcile.owned.plan_finalizer`): a merge patch carrying the
        resourceVersion just read, so a concurrent change answers 409 (the pass is retried). The
        object as it is now (``None``: gone)."""
        patch = plan_finalizer(policy, stored, held=held)
        if patch is None:
            return stored
        meta = stored.get("metadata") or {}
        try:
            return await self.kube.merge_patch(
                resource, str(meta.get("name")), patch, meta.get("namespace") or None
            )
        except ApiError as exc:
            if exc.not_found:
                return None
            raise

    async def delete_record(self, kind: OwnedKind, namespace: str, delete: RecordDelete) -> bool:
        """Delete a record as the machine decided (uid and resourceVersion preconditions: a
        record written since answers 409, raised); ``False`` when it was already gone."""
        return await self.kube.delete(
            kind.resource,
            delete.name,
            namespace,
            uid=delete.uid,
            resource_version=delete.resource_version,
        )

    async def prune(self, result: OwnedResult) -> list[BaseException]:
        """Delete what ``result``'s plan prunes (the uid the precondition; gone counts as
        done); the failures."""
        ns = result.owner.namespace
        answers = await bounded(
            (
                partial(self.kube.delete, result.kind.resource, name, ns, uid=uid or None)
                for name, uid in result.plan.prunes
            ),
            limit=self.limit,
        )
        return failures(answers)


# ---- the kinds' informers ----------------------------------------------------------------------

#: The label selector of the informers of the router's kinds: every router object carries it
#: and no engine object does, so the caches hold the routers' objects and nothing else.
ROUTER_SELECTOR: Final = f"{labels.NAME}={labels.ROUTER_NAME_VALUE}"


def instance_candidates(informer: Informer | None) -> Candidates:
    """A deployment's stored objects of a label-selected kind: the cached ones of its namespace
    carrying its instance label."""

    def found(owner: Owner) -> Iterable[Mapping[str, Any]]:
        if informer is None:
            return ()
        return [
            obj
            for obj in informer.items()
            if (obj.get("metadata") or {}).get("namespace") == owner.namespace
            and ((obj.get("metadata") or {}).get("labels") or {}).get(labels.INSTANCE) == owner.name
        ]

    return found


def router_informers(kube: Kube, handler: Handler) -> dict[str, Informer]:
    """An informer per router kind but InferencePool (:func:`pool_informer`), each listing only
    objects labelled as a router's."""
    return {
        kind: Informer(kube, resource, label_selector=ROUTER_SELECTOR, handlers=[handler])
        for kind, resource in ROUTER_RESOURCES.items()
        if resource is not INFERENCE_POOLS
    }


async def pool_informer(kube: Kube, handler: Handler) -> Informer | None:
    """An InferencePool informer when the API server serves the kind (its CRD is installed when
    the controller starts); else ``None``: a pool is then read live before it is applied and
    never pruned by a pass."""
    try:
        await kube.list(INFERENCE_POOLS, label_selector=ROUTER_SELECTOR)
    except ApiError as exc:
        if exc.not_found:
            log.info("InferencePools are not served: their CRD is not installed")
            return None
        if exc.status == 403:
            log.warning("InferencePools are not watched: this controller may not list them")
            return None
        raise
    return Informer(kube, INFERENCE_POOLS, label_selector=ROUTER_SELECTOR, handlers=[handler])
