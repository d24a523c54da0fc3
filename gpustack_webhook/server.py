"""The HTTPS admission server: decode an AdmissionReview, call the library, encode the answer.

Six webhooks, each a ``POST`` of an ``admission.k8s.io/v1`` AdmissionReview (paths are the ones
``deploy/webhook`` registers):

* ``/mutate-worker-gpustack-ai-v1-modeldeployment``: ModelDeployment default (CREATE, UPDATE)
* ``/validate-worker-gpustack-ai-v1-modeldeployment``: ModelDeployment validation (CREATE, UPDATE)
* ``/mutate-worker-gpustack-ai-v1-modelartifact``: ModelArtifact default revision (CREATE, UPDATE)
* ``/validate-worker-gpustack-ai-v1-modelartifact``: ModelArtifact validation (CREATE, UPDATE)
* ``/mutate-gpustack-worker-kvcache-core-v1-pod``: Pod KV-cache injection (CREATE)
* ``/validate-gpustack-worker-kvcache-core-v1-pod``: Pod freeze (UPDATE)

plus ``GET /healthz``, ``/readyz`` and ``/metrics``. Every rule lives in the library; this module
only routes, bounds and reports. A body that is not a v1 AdmissionReview for the webhook's kind is
answered ``400`` with the problem named, never ``5xx`` (nesting past the bound and members of
the wrong JSON type included); a body over the limit ``413``; a body slower than the body
timeout ``408``. Each listener's connections go through :mod:`gpustack_webhook.limits`
(header and idle timeouts, a connection cap). Objects are read while the library runs: live
for the ModelDeployment hooks (:mod:`gpustack_webhook.lookups`; the ModelArtifact hooks read
nothing), through watch-fed caches for
the Pod hooks when the server has them (:mod:`gpustack_webhook.cache`: a miss, an object being
deleted or a cache cut off from the API server is read live); a read that fails is raised to
the library where it asked, which reports it as the specification says (an ``InternalError``
cause on a ModelDeployment; a refusal naming the error on a Pod, ``inject.*-unreadable``).
Settings that cannot be read, a failure that escapes the library, or a library crash are
answered ``allowed: false`` with an ``InternalError`` (500) status and logged: never a verdict
on the object.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from gpustack_render.admission import (
    mutate_artifact,
    mutate_deployment,
    validate_artifact,
    validate_deployment,
)
from gpustack_render.api.common import GROUP
from gpustack_render.api.inputs import InputObject
from gpustack_render.core import nesting
from gpustack_render.core.errors import Verdict
from gpustack_render.core.review import AdmissionRequest
from gpustack_render.core.settings import Settings
from gpustack_render.injection import review_pod
from gpustack_render.schema.lookups import LookupFailed, Lookups
from gpustack_webhook.limits import ConnectionLimits, Guard, GuardedSite
from gpustack_webhook.logs import LOGGER_NAME, fields, frames
from gpustack_webhook.lookups import (
    NeedRead,
    ReadKey,
    Resolver,
    ResolvingSources,
    ReviewReads,
    Sources,
)
from gpustack_webhook.metrics import CONTENT_TYPE, MALFORMED, Metrics

log = logging.getLogger(f"{LOGGER_NAME}.server")

#: ``apiVersion`` of the only AdmissionReview version this server speaks.
ADMISSION_API_VERSION = "admission.k8s.io/v1"

#: Paths of the six webhooks (controller-runtime style for the ModelDeployment and ModelArtifact
#: pairs; the Pod pair as docs/contract/injection-notes.md §12 gives them).
#: deploy/webhook/webhooks.yaml uses the same.
PATH_MODELDEPLOYMENT_MUTATE = "/mutate-worker-gpustack-ai-v1-modeldeployment"
PATH_MODELDEPLOYMENT_VALIDATE = "/validate-worker-gpustack-ai-v1-modeldeployment"
PATH_MODELARTIFACT_MUTATE = "/mutate-worker-gpustack-ai-v1-modelartifact"
PATH_MODELARTIFACT_VALIDATE = "/validate-worker-gpustack-ai-v1-modelartifact"
PATH_POD_INJECT = "/mutate-gpustack-worker-kvcache-core-v1-pod"
PATH_POD_FREEZE = "/validate-gpustack-worker-kvcache-core-v1-pod"

#: Default request body limit: the API server's own limit for an object is 3 MiB.
DEFAULT_MAX_BODY_BYTES = 3 * 1024 * 1024
#: Longest refusal text of a request that is not a review (the rest is cut).
MAX_PROBLEM_CHARS = 500
#: Causes named in a review's log line (``causesTotal`` counts them all when there are more).
MAX_LOGGED_CAUSES = 20
#: Default time budget of one review; below the registrations' ``timeoutSeconds: 10``.
DEFAULT_REVIEW_TIMEOUT = 9.0


class Review(Protocol):
    """A library entry point: one admission request in, one verdict out."""

    def __call__(
        self, request: AdmissionRequest, *, lookups: Lookups, settings: Settings
    ) -> Verdict: ...


@dataclass(frozen=True)
class Webhook:
    """One served webhook: its path, the kind it accepts and the library call that decides."""

    #: Label in metrics and logs.
    name: str
    path: str
    #: The ``request.kind`` it accepts (group, version, kind); anything else is a bad request.
    group: str
    version: str
    kind: str
    review: Review
    #: False for a validating webhook: the API server refuses a validating answer that carries
    #: a patch (and then applies the failure policy), so none is ever sent from one.
    mutating: bool = True
    #: Reads through the server's watch-fed sources when it has them (the Pod hooks:
    #: gpustack_webhook.cache); False reads live (the ModelDeployment hooks).
    cached: bool = False


def default_webhooks() -> tuple[Webhook, ...]:
    """The six webhooks wired to the library's admission and injection entry points."""
    return (
        Webhook(
            "modeldeployment-mutate",
            PATH_MODELDEPLOYMENT_MUTATE,
            GROUP,
            "v1",
            "ModelDeployment",
            mutate_deployment,
        ),
        Webhook(
            "modeldeployment-validate",
            PATH_MODELDEPLOYMENT_VALIDATE,
            GROUP,
            "v1",
            "ModelDeployment",
            validate_deployment,
            mutating=False,
        ),
        Webhook(
            "modelartifact-mutate",
            PATH_MODELARTIFACT_MUTATE,
            GROUP,
            "v1",
            "ModelArtifact",
            mutate_artifact,
        ),
        Webhook(
            "modelartifact-validate",
            PATH_MODELARTIFACT_VALIDATE,
            GROUP,
            "v1",
            "ModelArtifact",
            validate_artifact,
            mutating=False,
        ),
        Webhook("pod-inject", PATH_POD_INJECT, "", "v1", "Pod", review_pod, cached=True),
        Webhook(
            "pod-freeze",
            PATH_POD_FREEZE,
            "",
            "v1",
            "Pod",
            review_pod,
            mutating=False,
            cached=True,
        ),
    )


class BadReview(ValueError):  # noqa: N818 (a refusal of the request, reported as HTTP 400, not an internal error)
    """The body is not an AdmissionReview this webhook can answer."""


def parse_review(raw: bytes, hook: Webhook) -> dict[str, Any]:
    """The decoded AdmissionReview; raises :class:`BadReview` naming the first problem."""
    try:
        review = nesting.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadReview(f"body is not JSON: {exc}") from None
    if not isinstance(review, dict):
        raise BadReview("body is not a JSON object")
    deep = nesting.too_deep(review)
    if deep is not None:
        raise BadReview(
            f"body nests deeper than {nesting.MAX_DEPTH} levels of objects and lists at {deep}"
        )
    if review.get("apiVersion") != ADMISSION_API_VERSION or review.get("kind") != "AdmissionReview":
        raise BadReview(
            f"expected apiVersion {ADMISSION_API_VERSION} kind AdmissionReview, got "
            f"{review.get('apiVersion')!r} {review.get('kind')!r}"
        )
    request = review.get("request")
    if not isinstance(request, dict):
        raise BadReview("request is missing")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise BadReview("request.uid is missing")
    check_request_fields(request)
    if request.get("operation") not in ("CREATE", "UPDATE", "DELETE", "CONNECT"):
        raise BadReview(f"request.operation {request.get('operation')!r} is not an operation")
    _check_kind(request, hook)
    _check_objects(request)
    return review


def _check_kind(request: Mapping[str, Any], hook: Webhook) -> None:
    """``request.kind`` names the kind ``hook`` reviews."""
    kind = request.get("kind")
    if not isinstance(kind, dict):
        raise BadReview("request.kind is missing")
    for key in ("group", "version", "kind"):
        if kind.get(key) is not None and not isinstance(kind.get(key), str):
            raise BadReview(f"request.kind.{key} must be a string")
    got = (kind.get("group") or "", kind.get("version"), kind.get("kind"))
    if got != (hook.group, hook.version, hook.kind):
        group, version, name = got
        raise BadReview(
            f"{hook.path} reviews {hook.kind} ({hook.group or 'core'}/{hook.version}), "
            f"not {name} ({group or 'core'}/{version})"
        )


def _check_objects(request: Mapping[str, Any]) -> None:
    """``request.object`` and ``request.oldObject`` are objects where the operation needs them."""
    for key in ("object", "oldObject"):
        if request.get(key) is not None and not isinstance(request.get(key), dict):
            raise BadReview(f"request.{key} is not an object")
    if request.get("operation") in ("CREATE", "UPDATE") and not isinstance(
        request.get("object"), dict
    ):
        raise BadReview(f"request.object is missing on {request.get('operation')}")
    if request.get("operation") == "UPDATE" and not isinstance(request.get("oldObject"), dict):
        raise BadReview("request.oldObject is missing on UPDATE")


#: Optional members of an ``admission.k8s.io/v1`` AdmissionRequest, by the JSON type they must
#: have when present (``null`` counts as absent).
_REQUEST_STRINGS = ("name", "namespace", "subResource", "requestSubResource")
_REQUEST_OBJECTS = ("resource", "requestKind", "requestResource", "options", "userInfo")
_USER_STRINGS = ("username", "uid")


def _fail_unless(ok: bool, path: str, what: str) -> None:
    if not ok:
        raise BadReview(f"{path} must be {what}")


def check_request_fields(request: Mapping[str, Any]) -> None:
    """Raise :class:`BadReview` naming the first member of ``request`` whose JSON type is not
    the one ``admission.k8s.io/v1`` gives it (an API server never sends one; anything else
    that does is answered 400, never a crash)."""
    for key in _REQUEST_STRINGS:
        value = request.get(key)
        _fail_unless(value is None or isinstance(value, str), f"request.{key}", "a string")
    for key in _REQUEST_OBJECTS:
        value = request.get(key)
        _fail_unless(value is None or isinstance(value, dict), f"request.{key}", "an object")
    dry_run = request.get("dryRun")
    _fail_unless(dry_run is None or isinstance(dry_run, bool), "request.dryRun", "a boolean")
    user = request.get("userInfo") or {}
    for key in _USER_STRINGS:
        value = user.get(key)
        _fail_unless(value is None or isinstance(value, str), f"request.userInfo.{key}", "a string")
    groups = user.get("groups")
    _fail_unless(
        groups is None or (isinstance(groups, list) and all(isinstance(g, str) for g in groups)),
        "request.userInfo.groups",
        "a list of strings",
    )
    extra = user.get("extra")
    _fail_unless(
        extra is None
        or (
            isinstance(extra, dict)
            and all(
                isinstance(v, list) and all(isinstance(s, str) for s in v) for v in extra.values()
            )
        ),
        "request.userInfo.extra",
        "an object of lists of strings",
    )


#: Characters the API server will not put in a ``Warning`` header (Go's ``unicode.IsControl``:
#: C0, DEL and C1). A warning holding one is dropped whole, with no trace, so they are escaped.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def wire_warning(text: str) -> str:
    """``text`` with every control character escaped (``\\n``, ``\\x1b``): the API server
    drops a warning holding one instead of showing it."""
    return _CONTROL.sub(lambda m: _ESCAPES.get(m[0], f"\\x{ord(m[0]):02x}"), text)


def encode_review(verdict: Verdict, uid: str) -> dict[str, Any]:
    """The AdmissionReview answering request ``uid`` (patch as base64 JSON Patch; warnings as
    :func:`wire_warning` writes them, empty ones left out as the API server would)."""
    response = verdict.to_response(uid, patch_encoding="base64")
    response["warnings"] = [wire_warning(w) for w in response["warnings"] if w]
    return {"apiVersion": ADMISSION_API_VERSION, "kind": "AdmissionReview", "response": response}


def _object_name(request: AdmissionRequest) -> str:
    if request.name:
        return request.name
    meta = (request.object or request.old_object or {}).get("metadata") or {}
    if not isinstance(meta, Mapping):
        return ""
    if meta.get("name"):
        return str(meta["name"])
    return f"{meta['generateName']}*" if meta.get("generateName") else ""


def _verdict_fields(verdict: Verdict) -> dict[str, Any]:
    """What a log line says about a verdict: outcome, codes, field paths and rule ids only."""
    out: dict[str, Any] = {"allowed": verdict.allowed, "verdict": verdict.kind.value}
    if not verdict.allowed:
        out["code"] = verdict.status_code()
        out["reason"] = verdict.status_reason()
    if verdict.origin:
        out["rule"] = verdict.origin
    if verdict.errors:
        # The first causes only: a refusal can have thousands (one per entry of a long list),
        # and a log line must not grow with the object.
        out["causes"] = [
            {"field": e.field, "reason": e.type.value, "rule": e.origin}
            for e in verdict.errors[:MAX_LOGGED_CAUSES]
        ]
        if len(verdict.errors) > MAX_LOGGED_CAUSES:
            out["causesTotal"] = len(verdict.errors)
    if verdict.patch:
        out["patchOps"] = len(verdict.patch)
    if verdict.warnings:
        out["warnings"] = len(verdict.warnings)
    return out


class WebhookServer:
    """The aiohttp application(s) and their lifecycle.

    ``start`` binds the HTTPS listener (webhooks, probes, metrics) and optionally a plain-HTTP
    probe listener (probes and metrics only); ``stop`` reports not-ready, waits ``drain_delay``
    for endpoints to be withdrawn, then stops accepting and lets in-flight reviews finish.
    """

    def __init__(
        self,
        sources: Sources,
        *,
        webhooks: Sequence[Webhook] | None = None,
        metrics: Metrics | None = None,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        review_timeout: float = DEFAULT_REVIEW_TIMEOUT,
        max_reads: int = 64,
        shutdown_timeout: float = 15.0,
        limits: ConnectionLimits | None = None,
        cached_sources: Sources | None = None,
    ) -> None:
        self.sources = sources
        #: What the hooks marked ``cached`` read through (None: they read ``sources`` too).
        self.cached_sources = cached_sources
        self.webhooks = tuple(webhooks if webhooks is not None else default_webhooks())
        self.metrics = metrics or Metrics()
        self.metrics.prepare(hook.name for hook in self.webhooks)
        self.max_body_bytes = max_body_bytes
        self.review_timeout = review_timeout
        self.shutdown_timeout = shutdown_timeout
        self.ready = False
        self.port = 0
        self.probe_port = 0
        self.max_reads = max_reads
        self.limits = limits or ConnectionLimits()
        #: One per listener: the HTTPS one, then the plain-HTTP probe one.
        self.guards = (
            Guard(self.limits, observe=self.metrics.observe_closed),
            Guard(self.limits, observe=self.metrics.observe_closed),
        )
        self._runners: list[web.AppRunner] = []
        #: id(sources) → (sources, its resolver or None): see :meth:`_resolver`.
        self._resolvers: dict[int, tuple[Sources, Resolver | None]] = {}

    # ---- applications ----------------------------------------------------------------------

    def app(self) -> web.Application:
        """The HTTPS application: the webhooks, the probes and the metrics."""
        # One byte of slack: aiohttp refuses a body whose size reaches client_max_size.
        app = web.Application(
            client_max_size=self.max_body_bytes + 1, middlewares=[self.guards[0].middleware()]
        )
        for hook in self.webhooks:
            app.router.add_post(hook.path, functools.partial(self._handle, hook=hook))
        self._add_probes(app)
        return app

    def probe_app(self) -> web.Application:
        """The plain-HTTP application: probes and metrics only."""
        app = web.Application(client_max_size=1024, middlewares=[self.guards[1].middleware()])
        self._add_probes(app)
        return app

    def _add_probes(self, app: web.Application) -> None:
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/metrics", self._metrics)

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _readyz(self, request: web.Request) -> web.Response:
        if self.ready:
            return web.Response(text="ok")
        return web.Response(status=503, text="not ready")

    async def _metrics(self, request: web.Request) -> web.Response:
        body = self.metrics.render()
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})

    # ---- reviews ---------------------------------------------------------------------------

    async def _handle(self, request: web.Request, *, hook: Webhook) -> web.Response:
        started = time.perf_counter()
        length = request.content_length
        if length is not None and length > self.max_body_bytes:
            return self._refuse_request(
                hook, started, 413, f"body of {length} bytes is over {self.max_body_bytes}"
            )
        try:
            async with asyncio.timeout(self.limits.body_timeout):
                raw = await request.read()
        except web.HTTPRequestEntityTooLarge:
            return self._refuse_request(
                hook, started, 413, f"body is over {self.max_body_bytes} bytes"
            )
        except TimeoutError:
            self.metrics.observe_closed("body_timeout")
            response = self._refuse_request(
                hook, started, 408, f"body did not arrive within {self.limits.body_timeout:g}s"
            )
            response.force_close()
            return response
        except web.RequestPayloadError as exc:
            # A body aiohttp cannot decode (its Content-Encoding, chunked framing, a length it
            # does not reach): the sender's fault. The rest of the stream is unusable, so the
            # connection closes after the answer instead of draining it.
            cause = exc.__cause__ if isinstance(exc.__cause__, HttpProcessingError) else exc
            problem = " ".join(str(getattr(cause, "message", "") or cause).split())
            response = self._refuse_request(
                hook, started, 400, f"body could not be read: {problem}"
            )
            response.force_close()
            request.content.feed_eof()
            return response
        try:
            review = parse_review(raw, hook)
            admission = AdmissionRequest.from_review(review)
        except BadReview as exc:
            return self._refuse_request(hook, started, 400, str(exc))
        except Exception as exc:  # RecursionError, MemoryError: still the body's fault
            log.error(
                "request could not be read",
                extra=fields(webhook=hook.name, error=type(exc).__name__, frames=frames(exc)),
            )
            return self._refuse_request(
                hook, started, 400, f"body could not be read as an AdmissionReview ({exc!r:.200})"
            )
        verdict = await self.review(hook, admission)
        if verdict.patch and not hook.mutating:
            # The Pod freeze path shares the injection's entry point: a CREATE sent to it (a
            # registration that lists CREATE) is judged there, but only the mutating path
            # may change the object.
            verdict = replace(verdict, patch=[])
        elapsed = time.perf_counter() - started
        self.metrics.observe_review(hook.name, verdict.kind.value, elapsed)
        if log.isEnabledFor(logging.INFO):
            self._log_review(hook, admission, verdict, elapsed)
        return web.json_response(encode_review(verdict, admission.uid))

    @staticmethod
    def _log_review(
        hook: Webhook, admission: AdmissionRequest, verdict: Verdict, elapsed: float
    ) -> None:
        log.info(
            "review",
            extra=fields(
                webhook=hook.name,
                uid=admission.uid,
                operation=admission.operation,
                namespace=admission.namespace,
                name=_object_name(admission),
                user=str(admission.user_info.get("username") or ""),
                dryRun=admission.dry_run,
                durationMs=round(elapsed * 1000, 3),
                **_verdict_fields(verdict),
            ),
        )

    def _refuse_request(
        self, hook: Webhook, started: float, status: int, problem: str
    ) -> web.Response:
        self.metrics.observe_review(hook.name, MALFORMED, time.perf_counter() - started)
        if len(problem) > MAX_PROBLEM_CHARS:
            # A problem may quote the sender's value (a kind of megabytes): cut, so neither the
            # answer nor the log line grows with it.
            problem = f"{problem[:MAX_PROBLEM_CHARS]}... ({len(problem)} characters)"
        log.warning(
            "request refused", extra=fields(webhook=hook.name, status=status, problem=problem)
        )
        return web.Response(status=status, text=problem + "\n")

    async def review(self, hook: Webhook, request: AdmissionRequest) -> Verdict:
        """Run ``hook``'s library call for ``request`` within the review's time budget.

        The library runs on the loop; each object it asks for that this review has not read yet
        stops it (:class:`NeedRead`), is read live, and the library runs again (see
        :mod:`gpustack_webhook.lookups`).
        """
        began = time.monotonic()
        deadline = began + self.review_timeout
        sources = self.sources
        if hook.cached and self.cached_sources is not None:
            sources = self.cached_sources
        reads = ReviewReads(self._resolver(sources))
        try:
            async with asyncio.timeout(self.review_timeout):
                settings = await sources.settings()
            for _ in range(self.max_reads + 1):
                try:
                    return hook.review(request, lookups=reads, settings=settings)
                except NeedRead as need:
                    reads.answers[need.key] = await self._read(sources, need.key, began, deadline)
            raise LookupFailed(
                "review", request.uid, f"the review asked for more than {self.max_reads} objects"
            )
        except LookupFailed as exc:
            log.warning(
                "a read failed; answering an internal error",
                extra=fields(
                    webhook=hook.name,
                    uid=request.uid,
                    kind=exc.kind,
                    namespace=exc.namespace,
                    name=exc.name,
                    error=exc.reason,
                ),
            )
            return Verdict.internal_error(f"{exc}; the request was not judged, retry")
        except TimeoutError:
            log.warning(
                "review timed out; answering an internal error",
                extra=fields(webhook=hook.name, uid=request.uid, budget=self.review_timeout),
            )
            return Verdict.internal_error(
                f"the review did not finish within {self.review_timeout:g}s; retry"
            )
        except Exception as exc:
            log.error(
                "review failed; answering an internal error",
                extra=fields(
                    webhook=hook.name,
                    uid=request.uid,
                    error=type(exc).__name__,
                    frames=frames(exc),
                ),
            )
            return Verdict.internal_error(
                f"the {hook.name} webhook failed while reviewing this request "
                f"({type(exc).__name__}); the request was not judged"
            )

    def _resolver(self, sources: Sources) -> Resolver | None:
        """``sources``'s synchronous side, if it has one (asked once per sources object: an
        ``isinstance`` against a runtime-checkable protocol inspects its members each time)."""
        found = self._resolvers.get(id(sources))
        if found is None or found[0] is not sources:
            resolver = sources.resolve if isinstance(sources, ResolvingSources) else None
            found = self._resolvers[id(sources)] = (sources, resolver)
        return found[1]

    async def _read(
        self, sources: Sources, key: ReadKey, began: float, deadline: float
    ) -> InputObject | LookupFailed | None:
        """One live read within what is left of the review's budget; a failure is returned so
        the library meets it where it asked. A GET of the same object that another review sent
        after this one ``began`` may answer it (see :mod:`gpustack_webhook.lookups`)."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return LookupFailed(
                key.kind, key.name, "the review's time budget ran out", namespace=key.namespace
            )
        try:
            async with asyncio.timeout(remaining):
                return await sources.read(key, since=began)
        except LookupFailed as exc:
            return exc
        except TimeoutError:
            return LookupFailed(
                key.kind,
                key.name,
                f"no answer within the review's remaining {remaining:.2f}s",
                namespace=key.namespace,
            )

    # ---- lifecycle -------------------------------------------------------------------------

    async def start(
        self,
        *,
        host: str,
        port: int,
        ssl_context: Any,
        probe_host: str | None = None,
        probe_port: int | None = None,
    ) -> None:
        """Listen for reviews on ``host:port`` (TLS; an empty host is every address);
        optionally probes and metrics on plain HTTP (unless :meth:`start_probes` already
        does); then report ready."""
        self.port = await self._listen(self.app(), host, port, ssl_context, self.guards[0])
        if probe_port is not None and not self.probe_port:
            await self.start_probes(host=probe_host or host, port=probe_port)
        self.ready = True
        log.info(
            "listening",
            extra=fields(host=host, port=self.port, probePort=self.probe_port or None),
        )

    async def start_probes(self, *, host: str, port: int) -> None:
        """Listen for probes and metrics on plain HTTP, not ready yet: before :meth:`start`,
        a server still waiting for its certificate answers ``/healthz`` (alive) and ``/readyz``
        503, so it is neither restarted nor sent reviews."""
        self.probe_port = await self._listen(self.probe_app(), host, port, None, self.guards[1])

    async def _listen(
        self, app: web.Application, host: str, port: int, ssl_context: Any, guard: Guard
    ) -> int:
        runner = web.AppRunner(
            app,
            access_log=None,
            shutdown_timeout=self.shutdown_timeout,
            keepalive_timeout=self.limits.idle_timeout,
            lingering_time=self.limits.linger,
        )
        await runner.setup()
        self._runners.append(runner)
        site = GuardedSite(runner, host or None, port, ssl_context=ssl_context, guard=guard)
        await site.start()
        bound: Iterable[Any] = runner.addresses
        return int(next(iter(bound))[1])

    async def stop(self, *, drain_delay: float = 0.0) -> None:
        """Report not-ready, wait ``drain_delay``, then finish in-flight reviews and close."""
        self.ready = False
        if drain_delay > 0:
            log.info("draining", extra=fields(seconds=drain_delay))
            await asyncio.sleep(drain_delay)
        for runner in reversed(self._runners):
            await runner.cleanup()
        self._runners.clear()
        log.info("stopped")
