"""Resolution and revalidation of a ``ModelArtifact`` (docs/weights.md, "Resolution" and
"Revalidation"; D28). Pure: the controller (``gpustack_controller/hubs.py``,
``gpustack_controller/artifacts.py``) makes the requests and hands the answers here.

Three parts:

- **The answer tables**: what a hub's HTTP answer means (:func:`hugging_face_reason`,
  :func:`model_scope_reason`), and the problem, with its message, a request ran into
  (:func:`hugging_face_problem`, :func:`model_scope_problem`, :func:`unreachable`). A
  :class:`HubProblem` carries the reason and whether the hub answered at all (``silent``): only
  a hub that never answered may let the anchor stand in (:func:`next_status`).
- **The listings**: a hub's tree becomes a manifest (:func:`hugging_face_manifest`,
  :func:`model_scope_manifest`), or a problem: an unreadable entry, no file, too many entries,
  an LFS object id the hub hides. :func:`first_root_file` picks the file a revalidation asks for.
- **The staircase** (:func:`next_status`): from the stored status and the outcome of this pass
  (:class:`Outcome`), the new status and the seconds before the source is asked again.
  :func:`resolving_status` is the status written alone before the first answer;
  :func:`due_in` says when the source is next asked when nothing in memory says so (a
  controller that just started, a pass an event asked for).

Conditions' ``lastTransitionTime`` moves when the status, the reason, or whether the hub
answered at all changes: the staircase measures "a minute after the first refusal" from the
``Degraded`` stamp, and "two silent passes a minute apart" from the ``Resolved`` stamp.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from gpustack_render.api.artifact import (
    HUB_MEMBERS,
    ModelArtifact,
    ModelArtifactStatus,
    ResolvedArtifact,
)
from gpustack_render.api.common import Condition
from gpustack_render.weights.manifest import (
    MAX_ENTRIES,
    InvalidManifest,
    Manifest,
    ManifestEntry,
    build_manifest,
    filtered,
    hugging_face_entry,
    model_scope_entry,
)

# ---- reasons and conditions ---------------------------------------------------------------------

REVISION_NOT_FOUND: Final = "RevisionNotFound"
ACCESS_DENIED: Final = "AccessDenied"
SOURCE_UNAVAILABLE: Final = "SourceUnavailable"
EMPTY_MANIFEST: Final = "EmptyManifest"
INVALID_MANIFEST: Final = "InvalidManifest"
MANIFEST_TOO_LARGE: Final = "ManifestTooLarge"
DIGEST_MISMATCH: Final = "DigestMismatch"
SECRET_NOT_FOUND: Final = "SecretNotFound"
CLAIM_NOT_FOUND: Final = "ClaimNotFound"
UNSUPPORTED_SOURCE: Final = "UnsupportedSource"
#: Every reason a failing ``Resolved`` or ``Degraded`` condition may carry.
REASONS: Final = (
    REVISION_NOT_FOUND,
    ACCESS_DENIED,
    SOURCE_UNAVAILABLE,
    EMPTY_MANIFEST,
    INVALID_MANIFEST,
    MANIFEST_TOO_LARGE,
    DIGEST_MISMATCH,
    SECRET_NOT_FOUND,
    CLAIM_NOT_FOUND,
    UNSUPPORTED_SOURCE,
)

#: The condition types, and the reasons of their good states.
RESOLVED: Final = "Resolved"
DEGRADED: Final = "Degraded"
RESOLVING: Final = "Resolving"
HEALTHY: Final = "Healthy"

#: How long the source is left alone after a pass: a hub that did not answer (and each step of
#: the revalidation staircase) is asked again after a minute, any other failure after ten.
QUICK_RETRY_SECONDS: Final = 60
SLOW_RETRY_SECONDS: Final = 600
#: One resolution (every request it makes) is bounded to this.
RESOLUTION_TIMEOUT_SECONDS: Final = 300
#: A hub answer body larger than this is not read (``SourceUnavailable``).
MAX_BODY_BYTES: Final = 16 * 1024 * 1024
#: A ModelScope listing of exactly this many entries was cut short by the hub.
MODEL_SCOPE_PAGE_LIMIT: Final = 3000
#: The object id Hugging Face shows in place of an LFS file's sha256 it will not reveal.
HIDDEN_LFS_OID: Final = "*" * 64

HUB_NAMES: Final = {"huggingFace": "Hugging Face", "modelScope": "ModelScope"}

#: How a message says the hub did not answer at all (the anchor fallback reads it back).
_SILENT_PREFIX: Final = "the hub did not answer"


# ---- the answer tables ------------------------------------------------------------------------


class HubProblem(Exception):  # noqa: N818 (a value: the reason a request ran into)
    """Why a request to a source did not pass: the reason, a message, and whether the hub did
    not answer at all (a network error, a timeout, a 5xx)."""

    def __init__(self, reason: str, message: str, *, silent: bool = False) -> None:
        super().__init__(reason, message)
        self.reason = reason
        self.message = message
        self.silent = silent

    def __str__(self) -> str:
        return f"{self.reason}: {self.message}"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, HubProblem) and (self.reason, self.message, self.silent) == (
            other.reason,
            other.message,
            other.silent,
        )

    def __hash__(self) -> int:
        return hash((self.reason, self.message, self.silent))


def _header(headers: Mapping[str, str], name: str) -> str:
    wanted = name.lower()
    for key, value in headers.items():
        if key.lower() == wanted:
            return value
    return ""


def hugging_face_reason(status: int, headers: Mapping[str, str]) -> str:
    """The reason a Hugging Face answer gives (``""``: it passes).

    | Answer | Reason |
    |---|---|
    | 2xx, 3xx | passes |
    | 404 with ``X-Error-Code: RevisionNotFound`` | ``RevisionNotFound`` |
    | ``X-Error-Code: GatedRepo`` (any status); 401; 403; any other 404 | ``AccessDenied`` |
    | 5xx, 429, anything else | ``SourceUnavailable`` |
    """
    if 200 <= status < 400:
        return ""
    code = _header(headers, "X-Error-Code")
    if status == 404 and code == "RevisionNotFound":
        return REVISION_NOT_FOUND
    if code == "GatedRepo" or status in (401, 403, 404):
        return ACCESS_DENIED
    return SOURCE_UNAVAILABLE


def hugging_face_silent(status: int) -> bool:
    """Whether a Hugging Face answer counts as no answer at all (a 5xx)."""
    return status >= 500


#: ModelScope body codes (the JSON answer's ``Code``).
MODEL_SCOPE_NO_FILE_TREE: Final = "10990101004"
MODEL_SCOPE_NO_ACCESS: Final = ("10010205001", "10010200001")


def model_scope_reason(status: int, code: object = None) -> str:
    """The reason a ModelScope answer gives (``""``: it passes); ``code`` is the body's
    ``Code``.

    | Answer | Reason |
    |---|---|
    | 2xx | passes |
    | 404 with code ``10990101004`` (no file tree) | ``RevisionNotFound`` |
    | 404 with code ``10010205001`` or ``10010200001``; any other 401, 403, 404 | ``AccessDenied`` |
    | 5xx, 429, anything else | ``SourceUnavailable`` |
    """
    if 200 <= status < 300:
        return ""
    if status == 404 and str(code) == MODEL_SCOPE_NO_FILE_TREE:
        return REVISION_NOT_FOUND
    if status in (401, 403, 404):
        return ACCESS_DENIED
    return SOURCE_UNAVAILABLE


def model_scope_head_reason(status: int) -> str:
    """A ModelScope revalidation HEAD: 200 passes, every 404 is ``AccessDenied`` (a HEAD has no
    body to tell a missing tree apart), else the table of :func:`model_scope_reason`."""
    if status == 200:
        return ""
    if status == 404:
        return ACCESS_DENIED
    return model_scope_reason(status) or SOURCE_UNAVAILABLE


@dataclass(frozen=True)
class HubRequest:
    """What a problem's message names: the hub, the endpoint, the repository and revision asked
    for, and the step (``revision``, ``listing``, ``revalidation``)."""

    hub: str
    endpoint: str
    repository: str
    revision: str
    step: str

    @property
    def field(self) -> str:
        return f"spec.source.{self.hub}"

    @property
    def name(self) -> str:
        return HUB_NAMES.get(self.hub, self.hub)


def _problem(request: HubRequest, reason: str, answer: str, *, silent: bool) -> HubProblem:
    hub, field = request.name, request.field
    repo, rev = request.repository, request.revision
    if reason == REVISION_NOT_FOUND:
        message = (
            f"{hub} has no revision {rev!r} in repository {repo!r} ({field}.revision; the "
            f"{request.step} request answered {answer}); name an existing branch, tag or commit "
            "in a new ModelArtifact"
        )
    elif reason == ACCESS_DENIED:
        message = (
            f"{hub} repository {repo!r} does not exist or is not accessible ({field}.repository; "
            f"the {request.step} request answered {answer}); check the name, accept the "
            f"repository's terms if it is gated, or name a Secret whose key token can read it in "
            f"{field}.secretRef"
        )
    elif silent:
        message = (
            f"{_SILENT_PREFIX} ({hub} at {request.endpoint}, the {request.step} request for "
            f"{repo!r}: {answer}); asked again in a minute"
        )
    else:
        message = (
            f"{hub} at {request.endpoint} gave no usable answer to the {request.step} request for "
            f"{repo!r} ({answer}); asked again in a minute"
        )
    return HubProblem(reason, message, silent=silent)


def hugging_face_problem(
    request: HubRequest, status: int, headers: Mapping[str, str]
) -> HubProblem | None:
    """The problem a Hugging Face answer is (``None``: it passes)."""
    reason = hugging_face_reason(status, headers)
    if not reason:
        return None
    code = _header(headers, "X-Error-Code")
    answer = f"HTTP {status}" + (f", X-Error-Code {code}" if code else "")
    return _problem(request, reason, answer, silent=hugging_face_silent(status))


def model_scope_problem(
    request: HubRequest, status: int, code: object = None, *, head: bool = False
) -> HubProblem | None:
    """The problem a ModelScope answer is (``None``: it passes); ``head``: the revalidation
    HEAD's own table."""
    reason = model_scope_head_reason(status) if head else model_scope_reason(status, code)
    if not reason:
        return None
    answer = f"HTTP {status}" + (f", code {code}" if code not in (None, "") else "")
    return _problem(request, reason, answer, silent=status >= 500)


def unreachable(request: HubRequest, error: str) -> HubProblem:
    """The hub did not answer: a network error or a timeout."""
    return _problem(request, SOURCE_UNAVAILABLE, error or "no answer", silent=True)


def unusable(request: HubRequest, what: str) -> HubProblem:
    """The hub answered something that cannot be used (an unreadable or oversized body, a
    commit that is not 40 hex, a Link to another host): ``SourceUnavailable``, but it answered."""
    return _problem(request, SOURCE_UNAVAILABLE, what, silent=False)


def is_commit(text: object) -> bool:
    """A full commit id: 40 lowercase hex digits."""
    return isinstance(text, str) and len(text) == 40 and all(c in "0123456789abcdef" for c in text)


def revision_problem(request: HubRequest, sha: object) -> HubProblem | None:
    """The revision answer's ``sha`` must be a 40-hex commit (else ``SourceUnavailable``)."""
    if is_commit(sha):
        return None
    return unusable(request, f"the revision answer's commit is {sha!r}, not 40 hex digits")


# ---- the listings -------------------------------------------------------------------------------


def _too_large(request: HubRequest, count: int) -> HubProblem:
    return HubProblem(
        MANIFEST_TOO_LARGE,
        f"{request.name} repository {request.repository!r} at {request.revision} lists {count} "
        f"entries, more than {MAX_ENTRIES}; narrow it with spec.allowPatterns in a new "
        "ModelArtifact or split the repository",
    )


def _manifest(
    request: HubRequest,
    entries: list[ManifestEntry],
    allow: Sequence[str] | None,
    ignore: Sequence[str] | None,
) -> Manifest:
    where = f"{request.name} repository {request.repository!r} at {request.revision}"
    if not entries:
        raise HubProblem(
            EMPTY_MANIFEST, f"{where} holds no file; name a revision that holds the weights"
        )
    kept = filtered(entries, allow, ignore)
    if not kept:
        raise HubProblem(
            EMPTY_MANIFEST,
            f"spec.allowPatterns {list(allow or [])} and spec.ignorePatterns {list(ignore or [])} "
            f"keep none of the {len(entries)} files of {where}; create a new ModelArtifact whose "
            "patterns keep the weights",
        )
    try:
        return build_manifest(kept)
    except InvalidManifest as exc:
        raise HubProblem(
            INVALID_MANIFEST,
            f"{where} lists a file the manifest cannot hold: {exc}; leave it out with "
            "spec.ignorePatterns in a new ModelArtifact",
        ) from exc


def hugging_face_manifest(
    items: Iterable[Mapping[str, object]],
    request: HubRequest,
    *,
    allow: Sequence[str] | None = None,
    ignore: Sequence[str] | None = None,
) -> Manifest:
    """The manifest of a recursive Hugging Face tree listing (every page's items, in order):
    ``directory`` entries skipped, ``file`` entries kept, any other type ``InvalidManifest``; an
    LFS object id of 64 ``*`` (the hub hides it) ``AccessDenied``; more than
    :data:`~gpustack_render.weights.manifest.MAX_ENTRIES` entries ``ManifestTooLarge``; no file,
    or none the patterns keep, ``EmptyManifest``. Raises :class:`HubProblem`."""
    entries: list[ManifestEntry] = []
    count = 0
    for item in items:
        count += 1
        if count > MAX_ENTRIES:
            raise _too_large(request, count)
        kind = item.get("type")
        if kind == "directory":
            continue
        if kind != "file":
            raise HubProblem(
                INVALID_MANIFEST,
                f"{request.name} lists {item.get('path')!r} as a {kind!r}, neither a file nor a "
                f"directory, in {request.repository!r} at {request.revision}",
            )
        lfs = item.get("lfs")
        if isinstance(lfs, Mapping) and lfs.get("oid") == HIDDEN_LFS_OID:
            raise _problem(
                request,
                ACCESS_DENIED,
                f"the object id of {item.get('path')!r} is hidden",
                silent=False,
            )
        try:
            entries.append(hugging_face_entry(dict(item)))
        except InvalidManifest as exc:
            raise HubProblem(
                INVALID_MANIFEST,
                f"{request.name} repository {request.repository!r} at {request.revision}: {exc}",
            ) from exc
    return _manifest(request, entries, allow, ignore)


def model_scope_manifest(
    items: Iterable[Mapping[str, object]],
    request: HubRequest,
    *,
    allow: Sequence[str] | None = None,
    ignore: Sequence[str] | None = None,
) -> Manifest:
    """The manifest of a ModelScope listing (``Type: tree`` skipped, ``blob`` kept, every file
    carrying ``Sha256``); the rules of :func:`hugging_face_manifest` otherwise."""
    entries: list[ManifestEntry] = []
    count = 0
    for item in items:
        count += 1
        if count > MAX_ENTRIES:
            raise _too_large(request, count)
        kind = item.get("Type")
        if kind == "tree":
            continue
        if kind != "blob":
            raise HubProblem(
                INVALID_MANIFEST,
                f"{request.name} lists {item.get('Path')!r} as a {kind!r}, neither a file nor a "
                f"directory, in {request.repository!r} at {request.revision}",
            )
        try:
            entries.append(model_scope_entry(dict(item)))
        except InvalidManifest as exc:
            raise HubProblem(
                INVALID_MANIFEST,
                f"{request.name} repository {request.repository!r} at {request.revision}: {exc}",
            ) from exc
    return _manifest(request, entries, allow, ignore)


def model_scope_truncated(count: int) -> bool:
    """A ModelScope listing of exactly :data:`MODEL_SCOPE_PAGE_LIMIT` entries was cut short:
    each child directory is listed again on its own."""
    return count == MODEL_SCOPE_PAGE_LIMIT


def model_scope_unenumerable(request: HubRequest, directory: str) -> HubProblem:
    """A directory with :data:`MODEL_SCOPE_PAGE_LIMIT` direct children or more cannot be listed
    whole (``SourceUnavailable``)."""
    return unusable(
        request,
        f"directory {directory or '/'!r} has {MODEL_SCOPE_PAGE_LIMIT} direct children or more and "
        "cannot be listed whole",
    )


def _utf8(path: str) -> bytes:
    return path.encode("utf-8", "surrogatepass")


def first_root_file(
    items: Iterable[Mapping[str, object]], *, path_key: str = "path", file_type: str = "file"
) -> str | None:
    """The file a revalidation asks for: the first, by the path's UTF-8 bytes, of the files at
    the repository's root; else of every file listed (``None``: no file)."""
    files = [
        str(item.get(path_key))
        for item in items
        if item.get("type" if path_key == "path" else "Type") == file_type
        and isinstance(item.get(path_key), str)
        and item.get(path_key)
    ]
    root = [p for p in files if "/" not in p]
    pool = root or files
    return min(pool, key=_utf8) if pool else None


# ---- outcomes -----------------------------------------------------------------------------------


class OutcomeKind(enum.Enum):
    """What one pass found."""

    #: The source answered and passed (a resolution carries what it resolved to).
    PASSED = "passed"
    #: The source answered no, with a reason.
    REFUSED = "refused"
    #: No usable answer (``SourceUnavailable``): the hub, or the Secret could not be read.
    UNAVAILABLE = "unavailable"
    #: The Secret the source names is missing, or has no non-blank ``token``.
    SECRET_MISSING = "secret-missing"


@dataclass(frozen=True)
class Resolution:
    """What a hub source resolved to (a first resolution, or an anchored revalidation's
    re-listing)."""

    revision: str
    manifest: Manifest


@dataclass(frozen=True)
class Outcome:
    """The outcome of one pass."""

    kind: OutcomeKind
    reason: str = ""
    message: str = ""
    resolution: Resolution | None = None
    #: ``UNAVAILABLE`` because the hub did not answer at all (not a Secret, not a 429).
    silent: bool = False

    @classmethod
    def passed(cls, resolution: Resolution | None = None) -> Outcome:
        return cls(OutcomeKind.PASSED, resolution=resolution)

    @classmethod
    def refused(cls, reason: str, message: str) -> Outcome:
        return cls(OutcomeKind.REFUSED, reason, message)

    @classmethod
    def unavailable(cls, message: str, *, silent: bool = False) -> Outcome:
        return cls(OutcomeKind.UNAVAILABLE, SOURCE_UNAVAILABLE, message, silent=silent)

    @classmethod
    def secret_missing(cls, message: str) -> Outcome:
        return cls(OutcomeKind.SECRET_MISSING, SECRET_NOT_FOUND, message)

    @classmethod
    def of(cls, problem: HubProblem) -> Outcome:
        """A request's problem as the pass's outcome."""
        if problem.reason == SOURCE_UNAVAILABLE:
            return cls.unavailable(problem.message, silent=problem.silent)
        if problem.reason == SECRET_NOT_FOUND:
            return cls.secret_missing(problem.message)
        return cls.refused(problem.reason, problem.message)


def secret_missing(artifact: ModelArtifact, secret: str, why: str) -> Outcome:
    """The Secret an artifact names is absent (``why``: ``"does not exist"``) or holds no
    token."""
    hub = artifact.spec.source.kind
    return Outcome.secret_missing(
        f"Secret {artifact.metadata.namespace}/{secret} (spec.source.{hub}.secretRef.name) "
        f"{why}; create it with the hub token under the key token"
    )


def secret_unreadable(artifact: ModelArtifact, secret: str, error: str) -> Outcome:
    """The Secret could not be read (not a 404): never revokes, asked again in a minute."""
    return Outcome.unavailable(
        f"Secret {artifact.metadata.namespace}/{secret} could not be read ({error}); asked again "
        "in a minute"
    )


def claim_not_found(artifact: ModelArtifact) -> Outcome:
    claim = artifact.spec.source.persistent_volume_claim
    name = claim.claim_name if claim is not None else ""
    return Outcome.refused(
        CLAIM_NOT_FOUND,
        f"PersistentVolumeClaim {artifact.metadata.namespace}/{name} "
        "(spec.source.persistentVolumeClaim.claimName) does not exist; create it",
    )


def source_problem(artifact: ModelArtifact) -> Outcome | None:
    """A stored source that admission no longer accepts (``UnsupportedSource``): not exactly one
    member, or an image not pinned by digest. ``None``: the source can be resolved."""
    members = artifact.spec.source.members()
    if len(members) != 1:
        return Outcome.refused(
            UNSUPPORTED_SOURCE,
            f"spec.source names {members or 'no member'}; exactly one of huggingFace, "
            "modelScope, persistentVolumeClaim, image is accepted: create a new ModelArtifact",
        )
    image = artifact.spec.source.image
    if image is not None and "@sha256:" not in image.reference:
        return Outcome.refused(
            UNSUPPORTED_SOURCE,
            f"spec.source.image.reference {image.reference!r} is not pinned by digest "
            "(…@sha256:<hex>); create a new ModelArtifact with a digest",
        )
    return None


# ---- the staircase ------------------------------------------------------------------------------


def stamp(now: datetime) -> str:
    """RFC 3339, seconds, UTC: what conditions and ``resolved`` carry."""
    return now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_stamp(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def _seconds_since(text: str | None, now: datetime) -> float | None:
    at = parse_stamp(text)
    return None if at is None else (now - at).total_seconds()


def _silent(message: str) -> bool:
    return message.startswith(_SILENT_PREFIX)


def _condition(
    previous: Condition | None,
    type_: str,
    status: str,
    reason: str,
    message: str,
    *,
    now: datetime,
    generation: int,
) -> Condition:
    moved = (
        previous is None
        or previous.status != status
        or previous.reason != reason
        or _silent(previous.message) != _silent(message)
        or previous.last_transition_time is None
    )
    return Condition(
        type=type_,
        status=status,
        reason=reason,
        message=message,
        last_transition_time=(
            stamp(now) if moved or previous is None else previous.last_transition_time
        ),
        observed_generation=generation,
    )


def _find(status: ModelArtifactStatus, type_: str) -> Condition | None:
    return next((c for c in status.conditions or () if c.type == type_), None)


@dataclass(frozen=True)
class Step:
    """A pass's result: the new status, and the seconds before the source is asked again
    (``None``: never; only events bring the artifact back)."""

    status: ModelArtifactStatus
    requeue_after: float | None


def is_hub(artifact: ModelArtifact) -> bool:
    return artifact.spec.source.kind in HUB_MEMBERS


def resolving_status(artifact: ModelArtifact, *, now: datetime) -> ModelArtifactStatus | None:
    """The status written before the first answer: ``Resolved=Unknown Resolving`` alone.
    ``None`` when a ``Resolved`` condition is already stored (an answer came before)."""
    if _find(artifact.status, RESOLVED) is not None:
        return None
    generation = artifact.metadata.generation
    source = artifact.spec.source.kind or "source"
    return ModelArtifactStatus(
        observed_generation=generation,
        conditions=[
            Condition(
                type=RESOLVED,
                status="Unknown",
                reason=RESOLVING,
                message=f"resolving the {source} source",
                last_transition_time=stamp(now),
                observed_generation=generation,
            )
        ],
    )


def due_in(artifact: ModelArtifact, *, now: datetime, interval: float) -> float | None:
    """Seconds until the source is asked again, read from the stored status alone (``0``: now;
    ``None``: never): a pass that an event asked for, or a controller that just started.

    Nothing resolved yet: now. A claim or an image once resolved, or an anchor standing in
    (``digestSource: Expected``): never. A hub source: a minute after a first revalidation
    refusal's ``Degraded`` stamp; now while any other failure is stored; else the interval
    after ``lastValidatedTime``."""
    resolved = artifact.status.resolved
    if resolved is None:
        return 0.0
    if not is_hub(artifact) or resolved.digest_source == "Expected":
        return None
    resolved_cond = _find(artifact.status, RESOLVED)
    degraded = _find(artifact.status, DEGRADED)
    if degraded is not None and degraded.status == "True":
        if (
            resolved_cond is not None
            and resolved_cond.status == "True"
            and degraded.reason not in (SOURCE_UNAVAILABLE, SECRET_NOT_FOUND)
        ):
            since = _seconds_since(degraded.last_transition_time, now)
            return max(0.0, QUICK_RETRY_SECONDS - since) if since is not None else 0.0
        return 0.0
    if resolved_cond is None or resolved_cond.status != "True":
        return 0.0
    since = _seconds_since(resolved.last_validated_time, now)
    return max(0.0, interval - since) if since is not None else 0.0


def next_status(  # noqa: C901 (the staircase's table, row by row)
    artifact: ModelArtifact, outcome: Outcome, *, now: datetime, interval: float
) -> Step:
    """The status after this pass's ``outcome``, and when the source is asked again.

    A first resolution (no ``status.resolved`` yet):

    - passed: ``resolved`` written, ``Resolved=True``, ``Degraded=False Healthy``; next after
      the interval (a claim or an image: never);
    - passed with a digest other than ``expectedDigest``: the refusal ``DigestMismatch``, whose
      message carries both digests;
    - refused, or the Secret missing: ``Resolved=False`` and ``Degraded=True`` with the reason;
      next after 10 min;
    - unavailable: the same with ``SourceUnavailable``; next after 1 min;
    - the hub silent again at least a minute after the first silent pass, ``expectedDigest``
      set: the anchor stands in (``resolved{manifestDigest: <anchor>, digestSource:
      Expected}``, no revision, ``Resolved=True``); the hub is never asked again.

    A revalidation (``resolved`` stored; only its ``lastValidatedTime`` ever moves):

    - passed: ``Resolved=True``, ``Degraded=False Healthy``, ``lastValidatedTime`` now; next
      after the interval;
    - refused, the first time: ``Degraded=True`` only, stamped; next a minute after the stamp;
    - the same refusal at least a minute after the stamp: ``Resolved=False`` too; next after
      10 min;
    - unavailable (the hub, or the Secret unreadable): ``Degraded=True SourceUnavailable``
      only, never revoking; next after 1 min;
    - the Secret missing: ``Resolved=False`` at once; next after 10 min.

    An anchored revalidation passes a :class:`Resolution`; a digest other than the stored one
    is a ``DigestMismatch`` refusal.
    """
    status = artifact.status
    generation = artifact.metadata.generation
    spec = artifact.spec
    hub = is_hub(artifact)
    previous_resolved = _find(status, RESOLVED)
    previous_degraded = _find(status, DEGRADED)
    stored = status.resolved

    def cond(type_: str, state: str, reason: str, message: str) -> Condition:
        previous = previous_resolved if type_ == RESOLVED else previous_degraded
        return _condition(previous, type_, state, reason, message, now=now, generation=generation)

    def healthy(resolved: ResolvedArtifact, message: str, after: float | None) -> Step:
        return Step(
            status.model_copy(
                update={
                    "observed_generation": generation,
                    "resolved": resolved,
                    "conditions": [
                        cond(RESOLVED, "True", RESOLVED, message),
                        cond(DEGRADED, "False", HEALTHY, "the source answered as expected"),
                    ],
                }
            ),
            after,
        )

    def failing(reason: str, message: str, after: float, *, revoke: bool = True) -> Step:
        resolved_cond = (
            cond(RESOLVED, "False", reason, message)
            if revoke or previous_resolved is None
            else previous_resolved.model_copy(update={"observed_generation": generation})
        )
        return Step(
            status.model_copy(
                update={
                    "observed_generation": generation,
                    "conditions": [resolved_cond, cond(DEGRADED, "True", reason, message)],
                }
            ),
            after,
        )

    # Refusals found in the outcome itself: an anchor the digest does not match.
    if outcome.kind is OutcomeKind.PASSED and outcome.resolution is not None:
        digest = outcome.resolution.manifest.digest
        want = stored.manifest_digest if stored is not None else spec.expected_digest
        if want and digest != want:
            what = "the digest resolved before" if stored is not None else "spec.expectedDigest"
            outcome = Outcome.refused(
                DIGEST_MISMATCH,
                f"the files listed at {outcome.resolution.revision} digest to {digest}, but "
                f"{what} is {want}; the source changed or the anchor is wrong: create a new "
                "ModelArtifact",
            )

    if stored is None:
        # ---- a first resolution ----
        if outcome.kind is OutcomeKind.PASSED:
            when = stamp(now)
            if outcome.resolution is None:
                # A claim or an image: the time alone.
                return healthy(
                    ResolvedArtifact(resolved_time=when),
                    f"the {spec.source.kind} source is available",
                    interval if hub else None,
                )
            manifest = outcome.resolution.manifest
            return healthy(
                ResolvedArtifact(
                    revision=outcome.resolution.revision,
                    manifest_digest=manifest.digest,
                    digest_source="Hub",
                    file_count=manifest.file_count,
                    size_bytes=manifest.size_bytes,
                    resolved_time=when,
                    last_validated_time=when,
                ),
                f"resolved to commit {outcome.resolution.revision}, {manifest.file_count} files, "
                f"{manifest.digest}",
                interval,
            )
        if outcome.kind is OutcomeKind.UNAVAILABLE:
            if (
                hub
                and outcome.silent
                and spec.expected_digest
                and previous_resolved is not None
                and previous_resolved.status == "False"
                and previous_resolved.reason == SOURCE_UNAVAILABLE
                and _silent(previous_resolved.message)
            ):
                since = _seconds_since(previous_resolved.last_transition_time, now)
                if since is not None and since >= QUICK_RETRY_SECONDS:
                    when = stamp(now)
                    return healthy(
                        ResolvedArtifact(
                            manifest_digest=spec.expected_digest,
                            digest_source="Expected",
                            resolved_time=when,
                            last_validated_time=when,
                        ),
                        f"the hub did not answer twice a minute apart; spec.expectedDigest "
                        f"{spec.expected_digest} stands in and the hub is not asked again",
                        None,
                    )
            return failing(SOURCE_UNAVAILABLE, outcome.message, QUICK_RETRY_SECONDS)
        return failing(outcome.reason, outcome.message, SLOW_RETRY_SECONDS)

    # ---- a revalidation ----
    if outcome.kind is OutcomeKind.PASSED:
        if not hub:
            return Step(status.model_copy(update={"observed_generation": generation}), None)
        message = (
            previous_resolved.message
            if previous_resolved is not None and previous_resolved.status == "True"
            else f"access to commit {stored.revision} confirmed again"
        )
        return healthy(
            stored.model_copy(update={"last_validated_time": stamp(now)}), message, interval
        )
    if outcome.kind is OutcomeKind.SECRET_MISSING:
        return failing(outcome.reason, outcome.message, SLOW_RETRY_SECONDS)
    if outcome.kind is OutcomeKind.UNAVAILABLE:
        return failing(SOURCE_UNAVAILABLE, outcome.message, QUICK_RETRY_SECONDS, revoke=False)
    # A refusal: the staircase.
    repeated = (
        previous_degraded is not None
        and previous_degraded.status == "True"
        and previous_degraded.reason == outcome.reason
    )
    if not repeated:
        return failing(outcome.reason, outcome.message, QUICK_RETRY_SECONDS, revoke=False)
    assert previous_degraded is not None
    since = _seconds_since(previous_degraded.last_transition_time, now)
    if since is not None and since < QUICK_RETRY_SECONDS:
        # Asked again before the minute is up (an event): the first step stands.
        return failing(outcome.reason, outcome.message, QUICK_RETRY_SECONDS - since, revoke=False)
    return failing(outcome.reason, outcome.message, SLOW_RETRY_SECONDS)
