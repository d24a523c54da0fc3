"""The ModelArtifact pass: its finalizer, resolution and revalidation (docs/weights.md,
"Resolution" and "Revalidation"; D28).

Artifacts have their own work queue, keyed ``<namespace>/<name>`` (``controller.py`` starts it
beside the deployments' queue), and read and write the way every other pass does: the artifact
through the cached reader (:class:`~gpustack_kube.cachedread.CachedReader` over the artifact
informer), its finalizer through the one owned-object writer
(:meth:`~gpustack_controller.owned.OwnedWriter.keep_finalizer`, the library's
:data:`~gpustack_render.reconcile.owned.ARTIFACT_FINALIZER_POLICY`), its status by server-side
apply of the status subresource. Every decision is the library's
(:mod:`gpustack_render.weights.resolution`); the hub requests are :mod:`gpustack_controller.hubs`.

A pass:

1. reads the artifact (gone: its memory here is dropped);
2. **finalizer**: adds ``worker.gpustack.ai/model-artifact-protection`` on the first pass; once
   the artifact is being deleted, removes it when no ModelDeployment in the namespace names it
   in ``spec.model.artifactRef`` (the deployments' cache first; an absence there is confirmed
   by a live list), and otherwise waits: a deployment's deletion or edit queues the artifact
   again (``controller.py``). A deleted artifact is not resolved any more;
3. **the source**: an image resolves at once; a claim when its PersistentVolumeClaim exists (one
   GET); a hub source when it is due (:func:`~gpustack_render.weights.resolution.due_in`, or
   the delay the last pass returned): ``Resolved=Unknown Resolving`` is written alone before
   the first answer, then the answer's status;
4. returns the delay before the next pass.

**The nodes** (:meth:`ArtifactReconciler.count_nodes`, a queue of its own): a hub source's
``status.nodes`` counted from the NodeModelStores listing its digest
(:mod:`gpustack_render.weights.nodes`), written by its own field manager when it changed, at
most once every 30 s; ``controller.py`` queues an artifact when a record's entry of its digest
changes and when its digest appears.

**Secrets**: only the Secret the artifact names, in its namespace, by a direct GET, never
listed, watched or cached. The controller cannot watch Secrets, so a changed Secret is seen by
looking: every artifact with a ``secretRef`` is looked at every :data:`SECRET_CHECK_SECONDS`
(one GET of its Secret); a token that changed (or a Secret that appeared, vanished or lost its
key) makes the source due at once. Only a fingerprint of the token is kept in memory. A new
token is checked once with the hub (``whoami``); a rejected one records an ``InvalidToken``
Warning naming the Secret and changes no condition.

This pass never reads, writes or deletes a Pod: a hub outage changes the artifact's conditions
and nothing else (the deployments read ``Resolved`` and stop new consumption only).
"""

from __future__ import annotations

import base64
import binascii
import datetime
import hashlib
import logging
import time
from collections.abc import Callable
from typing import Any, Final

from pydantic import ValidationError

from gpustack_controller.caches import NODE_STORES_BY_DIGEST
from gpustack_controller.hubs import HubAccess, HubClient, HubTarget
from gpustack_controller.kube import (
    CONFIGMAPS,
    MODEL_ARTIFACTS,
    MODEL_DEPLOYMENTS,
    PERSISTENT_VOLUME_CLAIMS,
    SECRETS,
    ApiError,
    Kube,
)
from gpustack_controller.owned import OwnedWriter
from gpustack_controller.recorder import EventRecorder
from gpustack_controller.watches import Informer
from gpustack_kube.cachedread import CachedReader, usable
from gpustack_render.api.artifact import DEFAULT_REVISION, ModelArtifact, ModelArtifactStatus
from gpustack_render.api.common import Condition
from gpustack_render.api.nodestore import NodeModelStore
from gpustack_render.core.settings import Settings
from gpustack_render.reconcile import artifacts as uses
from gpustack_render.reconcile.keys import FIELD_MANAGER, split_key
from gpustack_render.reconcile.owned import ARTIFACT_FINALIZER_POLICY
from gpustack_render.weights import nodes as node_rules
from gpustack_render.weights import resolution as rules
from gpustack_render.weights.resolution import Outcome

log = logging.getLogger(__name__)

#: How often an artifact's Secret is looked at (it cannot be watched): a changed token takes
#: effect within this.
SECRET_CHECK_SECONDS: Final = 60.0
#: The key of the token in the artifact's Secret, and of the CA in the bundle's ConfigMap.
TOKEN_KEY: Final = "token"
#: The field manager of ``status.nodes`` (the resolution's is ``FIELD_MANAGER``).
NODES_FIELD_MANAGER: Final = "gpustack-controller-nodes"
CA_KEY: Final = "ca.crt"


def _utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _fingerprint(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class ArtifactReconciler:
    """Reconciles one ModelArtifact per call (a work-queue key ``<namespace>/<name>``); returns
    the seconds before the next pass (``None``: only on events)."""

    def __init__(
        self,
        kube: Kube,
        *,
        artifacts: Informer,
        deployments: Informer,
        recorder: EventRecorder,
        settings: Callable[[], Settings],
        hubs: HubClient | None = None,
        now: Callable[[], datetime.datetime] = _utc_now,
        secret_check: float = SECRET_CHECK_SECONDS,
        node_stores: Informer | None = None,
    ) -> None:
        self.kube = kube
        self.artifacts = artifacts
        self.deployments = deployments
        self.recorder = recorder
        self.settings = settings
        self.hubs = hubs or HubClient()
        self.now = now
        self.secret_check = secret_check
        #: The node plugin's records, indexed by digest (``caches.NODE_STORES_BY_DIGEST``).
        self.node_stores = node_stores
        #: When each artifact's ``status.nodes`` was last written (monotonic seconds).
        self._nodes_written: dict[str, float] = {}
        self.reader = CachedReader(kube)
        self.owned = OwnedWriter(kube)
        #: When each artifact's source is next due (monotonic seconds), as its last pass said.
        self._due: dict[str, float] = {}
        #: The fingerprint of each artifact's token as last read ("" none, "-" Secret missing).
        self._tokens: dict[str, str] = {}
        #: Token fingerprints already checked with the hub.
        self._checked: set[str] = set()

    def forget(self, key: str) -> None:
        """Drop what is remembered of an artifact that is gone."""
        self._due.pop(key, None)
        self._tokens.pop(key, None)
        self._nodes_written.pop(key, None)

    def settings_changed(self) -> None:
        """The endpoints, proxy or CA may have changed: every source is due as its stored
        status says (a failing one at once)."""
        self._due.clear()

    async def __call__(self, key: str) -> float | None:
        namespace, name = split_key(key)
        raw = await self.reader.get(MODEL_ARTIFACTS, name, namespace, informer=self.artifacts)
        if raw is None:
            self.forget(key)
            return None
        if (raw.get("metadata") or {}).get("deletionTimestamp") is not None:
            held = await self._named(namespace, name)
            await self.owned.keep_finalizer(
                MODEL_ARTIFACTS, raw, ARTIFACT_FINALIZER_POLICY, held=bool(held)
            )
            if not held:
                self.forget(key)
            return None
        current = await self.owned.keep_finalizer(
            MODEL_ARTIFACTS, raw, ARTIFACT_FINALIZER_POLICY, held=True
        )
        if current is None:
            return None
        try:
            artifact = ModelArtifact.model_validate(current)
        except ValidationError as exc:
            await self._write_unreadable(current, exc)
            return None
        return await self._converge(key, artifact)

    # ---- the finalizer -------------------------------------------------------------------------

    async def _named(self, namespace: str, name: str) -> list[str]:
        """The deployments in ``namespace`` naming the artifact: from the cache; an absence is
        confirmed live (a deployment created a moment ago may not be cached yet)."""
        if usable(self.deployments):
            found = uses.naming(self.deployments.items(), namespace, name)
            if found:
                return found
        items, _ = await self.kube.list(MODEL_DEPLOYMENTS, namespace)
        return uses.naming(items, namespace, name)

    # ---- the source ------------------------------------------------------------------------

    async def _converge(self, key: str, artifact: ModelArtifact) -> float | None:
        settings = self.settings()
        interval = float(settings.artifact_revalidate_interval)
        unsupported = rules.source_problem(artifact)
        source = artifact.spec.source
        if unsupported is not None:
            return await self._answer(key, artifact, unsupported, interval)
        if source.image is not None:
            if artifact.status.resolved is not None:
                return None
            return await self._answer(key, artifact, Outcome.passed(), interval)
        if source.persistent_volume_claim is not None:
            if artifact.status.resolved is not None:
                return None
            claim = await self.kube.get(
                PERSISTENT_VOLUME_CLAIMS,
                source.persistent_volume_claim.claim_name,
                artifact.metadata.namespace,
            )
            outcome = Outcome.passed() if claim is not None else rules.claim_not_found(artifact)
            return await self._answer(key, artifact, outcome, interval)
        return await self._hub(key, artifact, settings, interval)

    # ---- status.nodes --------------------------------------------------------------------------

    async def count_nodes(self, key: str) -> float | None:
        """The nodes queue's pass (``controller.py`` queues an artifact when a NodeModelStore
        entry of its digest changes, and when its digest appears): write ``status.nodes`` from
        the node stores listing the digest, at most once every
        :data:`~gpustack_render.weights.nodes.NODES_WRITE_SECONDS`; the delay before the next
        look when a change must wait. Its own queue, so a record's progress never runs the
        resolution pass (nor its Secret read). Written by its own field manager, so the
        resolution's writes never carry (or undo) it."""
        namespace, name = split_key(key)
        raw = await self.reader.get(MODEL_ARTIFACTS, name, namespace, informer=self.artifacts)
        if raw is None or (raw.get("metadata") or {}).get("deletionTimestamp") is not None:
            self._nodes_written.pop(key, None)
            return None
        try:
            artifact = ModelArtifact.model_validate(raw)
        except ValidationError:
            return None  # the resolution pass says why
        if artifact.spec.source.hub is None:
            return None
        resolved = artifact.status.resolved
        digest = resolved.manifest_digest if resolved is not None else None
        if not digest or not usable(self.node_stores):
            return None
        assert self.node_stores is not None
        stores = []
        for raw in self.node_stores.by_index(NODE_STORES_BY_DIGEST, digest):
            try:
                stores.append(NodeModelStore.model_validate(raw))
            except ValidationError:
                continue  # an unreadable record counts for no node (the deployments say so)
        wanted = node_rules.aggregate(stores, digest)
        last = self._nodes_written.get(key)
        wait = node_rules.nodes_write_in(
            artifact.status.nodes,
            wanted,
            since_last_write=None if last is None else time.monotonic() - last,
        )
        if wait is None or wait > 0:
            return wait
        meta = artifact.metadata
        await self._apply_status(
            meta.namespace,
            meta.name,
            {"nodes": wanted.model_dump(by_alias=True, exclude_none=True, mode="json")},
            field_manager=NODES_FIELD_MANAGER,
        )
        self._nodes_written[key] = time.monotonic()
        return None

    async def _hub(
        self, key: str, artifact: ModelArtifact, settings: Settings, interval: float
    ) -> float | None:
        hub = artifact.spec.source.hub
        assert hub is not None
        secret = hub.secret_ref.name if hub.secret_ref is not None else ""
        if rules.due_in(artifact, now=self.now(), interval=interval) is None:
            return None  # resolved for good: an anchor stands in and the hub is not asked again
        token, secret_outcome, changed = await self._token(key, artifact, secret)
        due = self._due_in(key, artifact, interval)
        if due > 0 and not changed:
            return self._next(due, secret)
        resolving = rules.resolving_status(artifact, now=self.now())
        if resolving is not None:
            await self._write_status(artifact, resolving)
            artifact = artifact.model_copy(update={"status": resolving})
        outcome = secret_outcome or await self._ask(artifact, token, settings)
        after = await self._answer(key, artifact, outcome, interval)
        if token:
            await self._check_token(artifact, secret, token, settings)
        return self._next(after, secret)

    def _due_in(self, key: str, artifact: ModelArtifact, interval: float) -> float:
        """Seconds until the source is due: as the last pass here said, else as the stored
        status says (a controller that just started)."""
        stored = rules.due_in(artifact, now=self.now(), interval=interval) or 0.0
        remembered = self._due.get(key)
        if remembered is None:
            return stored
        return remembered - time.monotonic()

    def _next(self, after: float | None, secret: str) -> float | None:
        """The requeue: the source's own delay, shortened to the Secret check when there is a
        Secret to look at."""
        if not secret:
            return after
        return self.secret_check if after is None else min(after, self.secret_check)

    async def _ask(self, artifact: ModelArtifact, token: str, settings: Settings) -> Outcome:
        """The hub request this pass makes: a first resolution, an anchored re-listing, or the
        one-file revalidation."""
        source = artifact.spec.source
        hub_name = "modelScope" if source.model_scope is not None else "huggingFace"
        hub = source.hub
        assert hub is not None
        target = HubTarget(
            hub_name,
            hub.repository,
            # Admission fills it; an artifact stored before that gets the hub's default.
            hub.revision or DEFAULT_REVISION[hub_name],
            token=token,
            allow=tuple(artifact.spec.allow_patterns or ()),
            ignore=tuple(artifact.spec.ignore_patterns or ()),
        )
        ca_pem, problem = await self._ca_bundle(
            settings, target.request(HubAccess.of(settings, hub_name), "revision")
        )
        if problem is not None:
            return problem
        access = HubAccess.of(settings, hub_name, ca_pem=ca_pem)
        resolved = artifact.status.resolved
        if resolved is None:
            return await self.hubs.resolve(target, access)
        commit = resolved.revision or ""
        if artifact.spec.expected_digest:
            return await self.hubs.relist(target, access, commit)
        return await self.hubs.revalidate(target, access, commit)

    async def _ca_bundle(
        self, settings: Settings, request: rules.HubRequest
    ) -> tuple[str, Outcome | None]:
        """The PEM of the ConfigMap the ``model-artifact-ca-bundle`` Setting names (key
        ``ca.crt``, in the controller's namespace); ``""`` when the Setting is blank."""
        name = settings.artifact_ca_bundle.strip()
        if not name:
            return "", None
        where = f"ConfigMap {settings.system_namespace}/{name} (Setting model-artifact-ca-bundle)"
        try:
            config_map = await self.kube.get(CONFIGMAPS, name, settings.system_namespace)
        except ApiError as exc:
            return "", Outcome.of(rules.unusable(request, f"{where} could not be read: {exc}"))
        pem = ((config_map or {}).get("data") or {}).get(CA_KEY)
        if not isinstance(pem, str) or not pem.strip():
            return "", Outcome.of(
                rules.unusable(request, f"{where} has no key {CA_KEY}; add the CA certificates")
            )
        return pem, None

    async def _token(
        self, key: str, artifact: ModelArtifact, secret: str
    ) -> tuple[str, Outcome | None, bool]:
        """The token (``""``: none), the outcome a missing or unreadable Secret is, and whether
        the Secret changed since the last look."""
        if not secret:
            return "", None, self._remember(key, "")
        namespace = artifact.metadata.namespace
        try:
            obj = await self.kube.get(SECRETS, secret, namespace)
        except ApiError as exc:
            return "", rules.secret_unreadable(artifact, secret, str(exc)), False
        if obj is None:
            return (
                "",
                rules.secret_missing(artifact, secret, "does not exist"),
                self._remember(key, "-"),
            )
        encoded = (obj.get("data") or {}).get(TOKEN_KEY)
        try:
            token = base64.b64decode(str(encoded or ""), validate=True).decode().strip()
        except (binascii.Error, UnicodeDecodeError):
            token = ""
        if not token:
            outcome = rules.secret_missing(artifact, secret, f"has no non-blank key {TOKEN_KEY}")
            return "", outcome, self._remember(key, "-")
        return token, None, self._remember(key, _fingerprint(token))

    def _remember(self, key: str, fingerprint: str) -> bool:
        """Remember the token's fingerprint; whether it changed (a first look is no change)."""
        before = self._tokens.get(key)
        self._tokens[key] = fingerprint
        return before is not None and before != fingerprint

    async def _check_token(
        self, artifact: ModelArtifact, secret: str, token: str, settings: Settings
    ) -> None:
        fingerprint = _fingerprint(token)
        if fingerprint in self._checked:
            return
        hub_name = "modelScope" if artifact.spec.source.model_scope is not None else "huggingFace"
        plain = HubAccess.of(settings, hub_name)
        request = rules.HubRequest(hub_name, plain.endpoint, "", "", "token check")
        ca_pem, problem = await self._ca_bundle(settings, request)
        if problem is not None:
            return  # the resolution says why; the token is checked with a later pass
        access = HubAccess.of(settings, hub_name, ca_pem=ca_pem)
        valid = await self.hubs.token_valid(hub_name, token, access)
        if valid is None:
            return  # could not tell: asked again with the next pass
        self._checked.add(fingerprint)
        if not valid:
            event = uses.invalid_token(
                artifact.metadata.namespace, secret, rules.HUB_NAMES[hub_name], access.endpoint
            )
            await self.recorder.record(_involved(artifact), event)

    # ---- status --------------------------------------------------------------------------------

    async def _answer(
        self, key: str, artifact: ModelArtifact, outcome: Outcome, interval: float
    ) -> float | None:
        step = rules.next_status(artifact, outcome, now=self.now(), interval=interval)
        if step.status != artifact.status:
            await self._write_status(artifact, step.status)
        if step.requeue_after is None:
            self._due.pop(key, None)
        else:
            self._due[key] = time.monotonic() + step.requeue_after
        return step.requeue_after

    async def _write_status(self, artifact: ModelArtifact, status: ModelArtifactStatus) -> None:
        meta = artifact.metadata
        await self._apply_status(
            meta.namespace,
            meta.name,
            # status.nodes has its own manager (_nodes): never carried, so never undone
            status.model_dump(by_alias=True, exclude_none=True, mode="json", exclude={"nodes"}),
        )

    async def _apply_status(
        self,
        namespace: str,
        name: str,
        status: dict[str, Any],
        *,
        field_manager: str = FIELD_MANAGER,
    ) -> None:
        await self.kube.apply(
            MODEL_ARTIFACTS,
            {
                "apiVersion": MODEL_ARTIFACTS.api_version,
                "kind": MODEL_ARTIFACTS.kind,
                "metadata": {"name": name, "namespace": namespace},
                "status": status,
            },
            field_manager=field_manager,
            namespace=namespace,
            subresource="status",
        )

    async def _write_unreadable(self, raw: dict[str, Any], error: ValidationError) -> None:
        """A stored artifact this version cannot decode: ``UnsupportedSource``, written once."""
        meta = raw.get("metadata") or {}
        errors = error.errors()
        where = ".".join(str(p) for p in errors[0]["loc"]) if errors else "spec"
        why = errors[0]["msg"] if errors else "not readable"
        message = (
            f"{where or 'spec'}: {why}; this controller cannot resolve the stored source: "
            "create a new ModelArtifact"
        )
        now = rules.stamp(self.now())
        generation = meta.get("generation")
        conditions = [
            Condition(
                type=type_,
                status=state,
                reason=rules.UNSUPPORTED_SOURCE,
                message=message,
                last_transition_time=now,
                observed_generation=generation if isinstance(generation, int) else None,
            ).model_dump(by_alias=True, exclude_none=True)
            for type_, state in ((rules.RESOLVED, "False"), (rules.DEGRADED, "True"))
        ]
        stored = [
            (c.get("type"), c.get("reason"), c.get("message"))
            for c in ((raw.get("status") or {}).get("conditions") or ())
        ]
        if stored == [(c["type"], c["reason"], c["message"]) for c in conditions]:
            return
        await self._apply_status(
            str(meta.get("namespace")), str(meta.get("name")), {"conditions": conditions}
        )


def _involved(artifact: ModelArtifact) -> dict[str, Any]:
    meta = artifact.metadata
    return {
        "apiVersion": MODEL_ARTIFACTS.api_version,
        "kind": MODEL_ARTIFACTS.kind,
        "metadata": {"name": meta.name, "namespace": meta.namespace, "uid": meta.uid},
    }
