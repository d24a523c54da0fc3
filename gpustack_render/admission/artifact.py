"""ModelArtifact admission (``artifact.*``; docs/weights.md "Admission", D28): the mutating
default and the validating rules, as pure functions over an :class:`AdmissionRequest`.

The rules read the submitted object (and, on UPDATE, the stored one) alone: the Secret a hub
source names and the claim a claim source names are never read, so either may be created after
the artifact.

- :func:`default_revisions`: a hub source without a revision gets its hub's default branch
  (``main`` on Hugging Face, ``master`` on ModelScope), on CREATE and on UPDATE, so an update
  that restates the artifact without its revision still matches the stored spec.
- :func:`validate_model_artifact`: the whole ``spec`` is the artifact's identity, so an UPDATE
  may not change it, and an UPDATE that leaves it as stored is not judged again (an artifact
  stored under older rules keeps working; the controller reports what it cannot use). A new or
  changed spec names exactly one source, each member well formed.
- :func:`mutate_artifact` and :func:`validate_artifact` are the two webhooks;
  :func:`review_artifact` answers the whole question "would the API server accept this?"
  (schema, default, rules) for the command line, as
  :func:`~gpustack_render.admission.pipeline.review_deployment` does for a deployment.

DELETE (and CONNECT) are always allowed.
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any, Final

from gpustack_render.admission.pipeline import (
    JUDGED,
    NAME_REQUIRED,
    metadata_errors,
    mutation_patch,
)
from gpustack_render.api.artifact import (
    DEFAULT_REVISION,
    HUB_MEMBERS,
    SOURCE_MEMBERS,
    ClaimSource,
    HubSource,
    ImageSource,
    ModelArtifact,
)
from gpustack_render.core import errors
from gpustack_render.core.errors import ErrorList, Verdict
from gpustack_render.core.paths import SPEC, FieldPath
from gpustack_render.core.review import AdmissionRequest
from gpustack_render.core.settings import Settings
from gpustack_render.schema.decoding import decode_model
from gpustack_render.schema.lookups import Lookups

#: The group/kind a refusal names.
ARTIFACT_GROUP_KIND: Final = "ModelArtifact.worker.gpustack.ai"
SOURCE: Final = SPEC.child("source")

#: One part of a repository name (``owner`` or ``name``): a letter, digit or ``_`` at both ends,
#: letters, digits, ``_``, ``.`` and ``-`` between, at most 96 characters.
REPOSITORY_PART: Final = re.compile(r"[A-Za-z0-9_]([A-Za-z0-9_.-]{0,94}[A-Za-z0-9_])?")
MAX_REPOSITORY: Final = 256
MAX_REVISION: Final = 255
MAX_CLAIM_PATH: Final = 1024
#: An image reference pinned by digest: a name, then ``@sha256:`` and 64 lowercase hex digits.
PINNED_IMAGE: Final = re.compile(r"[^@\s]+@sha256:[a-f0-9]{64}")

_REPOSITORY_SHAPE: Final = (
    "a repository is owner/name or a bare name of at most 256 characters; each part starts and "
    "ends with a letter, a digit or '_', holds only letters, digits, '_', '.' and '-', is at "
    "most 96 characters long, and neither '--' nor '..' appears anywhere"
)
_REVISION_SHAPE: Final = (
    "a revision is a branch, a tag or a commit of at most 255 characters, without whitespace "
    "or control characters"
)


# --- shapes -------------------------------------------------------------------------------------


def repository_problem(repository: str) -> str | None:
    """Why ``repository`` is not a hub repository name, or ``None``."""
    if len(repository) > MAX_REPOSITORY:
        return f"{len(repository)} characters; {_REPOSITORY_SHAPE}"
    parts = repository.split("/")
    if len(parts) > 2:
        return f"{len(parts)} parts separated by '/'; {_REPOSITORY_SHAPE}"
    for needle in ("--", ".."):
        if needle in repository:
            return f"it holds {needle!r}; {_REPOSITORY_SHAPE}"
    bad = next((p for p in parts if not REPOSITORY_PART.fullmatch(p)), None)
    if bad is not None:
        return f"the part {bad!r} is malformed; {_REPOSITORY_SHAPE}"
    return None


def _is_blank_or_control(ch: str) -> bool:
    return ch.isspace() or unicodedata.category(ch) == "Cc"


def revision_problem(revision: str) -> str | None:
    """Why ``revision`` is not a branch, tag or commit name, or ``None`` (empty is not judged
    here: it is Required)."""
    if len(revision) > MAX_REVISION:
        return f"{len(revision)} characters; {_REVISION_SHAPE}"
    bad = next((ch for ch in revision if _is_blank_or_control(ch)), None)
    if bad is not None:
        return f"it holds the character U+{ord(bad):04X}; {_REVISION_SHAPE}"
    return None


def claim_path_problem(path: str) -> str | None:
    """Why ``path`` is not a folder relative to a volume's root, or ``None`` (empty: the
    root)."""
    if path.startswith("/"):
        return "the path is absolute; name the folder relative to the volume root (no leading '/')"
    if ".." in path.split("/"):
        return "the path has a '..' element; name the folder relative to the volume root, inside it"
    if len(path) > MAX_CLAIM_PATH:
        return f"{len(path)} characters; at most {MAX_CLAIM_PATH}"
    return None


# --- defaulting ---------------------------------------------------------------------------------


def _stored_without_revision(old: dict[str, Any] | None, member: str) -> bool:
    """Whether the stored object names ``member`` as its source with no revision: one stored
    while the mutating webhook was not installed."""
    spec = old.get("spec") if isinstance(old, dict) else None
    source = spec.get("source") if isinstance(spec, dict) else None
    hub = source.get(member) if isinstance(source, dict) else None
    return isinstance(hub, dict) and not hub.get("revision")


def default_revisions(obj: dict[str, Any], *, old: dict[str, Any] | None = None) -> dict[str, Any]:
    """``obj`` with every hub source that has no revision (absent, ``null`` or empty) given
    its hub's default branch; ``obj`` itself when nothing is filled. Never raises: a part that
    is not an object is left for the schema to refuse.

    ``old`` is the stored object on UPDATE. A source it holds without a revision (stored while
    the mutating webhook was not installed) is left without one, so the spec still matches the
    stored one and the update (a finalizer's removal, say) is not refused as a spec change.
    """
    spec = obj.get("spec")
    source = spec.get("source") if isinstance(spec, dict) else None
    if not isinstance(spec, dict) or not isinstance(source, dict):
        return obj
    filled = dict(source)
    for member in HUB_MEMBERS:
        hub = source.get(member)
        if (
            isinstance(hub, dict)
            and not hub.get("revision")
            and not _stored_without_revision(old, member)
        ):
            filled[member] = {**hub, "revision": DEFAULT_REVISION[member]}
    if filled == source:
        return obj
    return {**obj, "spec": {**spec, "source": filled}}


# --- validating ---------------------------------------------------------------------------------


def _spec_data(art: ModelArtifact) -> dict[str, Any]:
    data: dict[str, Any] = art.spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    return data


def _stored_spec(old: dict[str, Any]) -> Any:
    """The stored object's ``spec`` as decoding reads it (its schema defaults applied); the raw
    value when it no longer decodes."""
    art, _ = decode_model(ModelArtifact, old)
    return _spec_data(art) if art is not None else old.get("spec")


def _changed_members(new: dict[str, Any], old: Any) -> list[str]:
    """The ``spec`` members that differ (every member of either, when ``old`` is no object)."""
    if not isinstance(old, dict):
        return sorted(new)
    keys = [*new, *(k for k in old if k not in new)]
    return [k for k in keys if _canonical(new.get(k)) != _canonical(old.get(k))]


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def validate_spec_unchanged(art: ModelArtifact, old: dict[str, Any]) -> ErrorList:
    """``artifact.spec-changed``: an UPDATE whose ``spec`` differs from the stored one
    (compared deeply, after the default)."""
    out = ErrorList()
    changed = _changed_members(_spec_data(art), _stored_spec(old))
    if changed:
        out.append(
            errors.invalid(
                SPEC,
                ", ".join(changed),
                f"the spec of a ModelArtifact cannot change (changed: {', '.join(changed)}): an "
                f"artifact is an identity, the weights it names. Create a new ModelArtifact for "
                f"other weights and point spec.model.artifactRef at it",
                origin="artifact.spec-changed",
            )
        )
    return out


def _validate_hub(hub: HubSource, path: FieldPath) -> ErrorList:
    out = ErrorList()
    where = path.child("repository")
    if not hub.repository:
        out.append(
            errors.required(
                where,
                f"name the repository; {_REPOSITORY_SHAPE}",
                origin="artifact.repository-invalid",
            )
        )
    else:
        problem = repository_problem(hub.repository)
        if problem is not None:
            out.append(
                errors.invalid(where, hub.repository, problem, origin="artifact.repository-invalid")
            )
    where = path.child("revision")
    if not hub.revision:
        out.append(
            errors.required(
                where,
                f"name the revision (left out, it defaults to main on Hugging Face, master on "
                f"ModelScope); {_REVISION_SHAPE}",
                origin="artifact.revision-invalid",
            )
        )
    else:
        problem = revision_problem(hub.revision)
        if problem is not None:
            out.append(
                errors.invalid(where, hub.revision, problem, origin="artifact.revision-invalid")
            )
    return out


def _validate_claim(claim: ClaimSource, path: FieldPath) -> ErrorList:
    out = ErrorList()
    if not claim.claim_name:
        out.append(
            errors.required(
                path.child("claimName"),
                "name the PersistentVolumeClaim in this namespace that holds the weights",
                origin="artifact.claim-invalid",
            )
        )
    problem = claim_path_problem(claim.path)
    if problem is not None:
        out.append(
            errors.invalid(path.child("path"), claim.path, problem, origin="artifact.claim-invalid")
        )
    return out


def _validate_image(image: ImageSource, path: FieldPath) -> ErrorList:
    out = ErrorList()
    if not PINNED_IMAGE.fullmatch(image.reference):
        out.append(
            errors.invalid(
                path.child("reference"),
                image.reference,
                "tags are mutable: pin the image by its digest (<image>@sha256:<64 hex digits>) "
                "so the weights cannot change under a deployment that uses them",
                origin="artifact.image-not-pinned",
            )
        )
    return out


def validate_source(art: ModelArtifact) -> ErrorList:
    """``artifact.source-not-one`` and each member's own rules (every member given is judged,
    so a two-source object hears about both)."""
    out = ErrorList()
    source = art.spec.source
    members = source.members()
    if len(members) != 1:
        found = f"names {len(members)}: {', '.join(members)}" if members else "names none"
        out.append(
            errors.invalid(
                SOURCE,
                ", ".join(members),
                f"name exactly one source, one of {', '.join(SOURCE_MEMBERS)}; this one {found}",
                origin="artifact.source-not-one",
            )
        )
    for member, hub in (("huggingFace", source.hugging_face), ("modelScope", source.model_scope)):
        if hub is not None:
            out.extend(_validate_hub(hub, SOURCE.child(member)))
    if source.persistent_volume_claim is not None:
        out.extend(
            _validate_claim(source.persistent_volume_claim, SOURCE.child("persistentVolumeClaim"))
        )
    if source.image is not None:
        out.extend(_validate_image(source.image, SOURCE.child("image")))
    return out


def validate_hub_only(art: ModelArtifact) -> ErrorList:
    """``artifact.hub-only-field``: file patterns or an expected digest on a claim or image
    source, which is used whole and has no hub listing to filter or anchor."""
    out = ErrorList()
    members = art.spec.source.members()
    if len(members) != 1 or members[0] in HUB_MEMBERS:
        return out
    spec = art.spec
    given: list[tuple[str, str]] = []
    if spec.allow_patterns:
        given.append(("allowPatterns", ", ".join(spec.allow_patterns)))
    if spec.ignore_patterns:
        given.append(("ignorePatterns", ", ".join(spec.ignore_patterns)))
    if spec.expected_digest is not None:
        given.append(("expectedDigest", spec.expected_digest))
    for field, value in given:
        out.append(
            errors.invalid(
                SPEC.child(field),
                value,
                f"{field} applies to hub sources only ({', '.join(HUB_MEMBERS)}); a "
                f"{members[0]} source is used whole, with no hub listing to filter or check. "
                f"Remove the field",
                origin="artifact.hub-only-field",
            )
        )
    return out


def validate_model_artifact(art: ModelArtifact, *, old: dict[str, Any] | None) -> ErrorList:
    """Every validating rule on the (defaulted) ``art``; ``old`` is the stored object on UPDATE
    (``None`` on CREATE). An UPDATE leaving the spec as stored is not judged again. Never
    raises."""
    out = ErrorList()
    if old is not None:
        out.extend(validate_spec_unchanged(art, old))
        if not out:
            return out
    out.extend(validate_source(art))
    out.extend(validate_hub_only(art))
    return out


# --- the webhooks -------------------------------------------------------------------------------


def _name_of(obj: Any, request: AdmissionRequest) -> str:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    name = meta.get("name") if isinstance(meta, dict) else None
    return name if isinstance(name, str) and name else request.name


def _refuse(errs: ErrorList, name: str) -> Verdict:
    return Verdict.from_errors(errs, group_kind=ARTIFACT_GROUP_KIND, name=name)


def _old(request: AdmissionRequest) -> dict[str, Any] | None:
    if request.operation != "UPDATE":
        return None
    return request.old_object


def _decoded(request: AdmissionRequest, obj: Any) -> ModelArtifact | Verdict:
    art, errs = decode_model(ModelArtifact, obj)
    if art is None:
        return _refuse(errs, _name_of(obj, request))
    return art


def mutate_artifact(request: AdmissionRequest, *, lookups: Lookups, settings: Settings) -> Verdict:
    """The mutating webhook: the default revision as a JSON Patch of ``request.object``.

    An object the schema refuses is refused here with the schema's causes, as the deployment's
    mutating webhook does (the API server would refuse it after this webhook, with bare
    patterns). ``lookups`` and ``settings`` are accepted for symmetry; nothing is read.
    """
    del lookups, settings
    if request.operation not in JUDGED or request.object is None:
        return Verdict.allow()
    obj = request.object
    art = _decoded(request, obj)
    if isinstance(art, Verdict):
        return art
    mutated = default_revisions(obj, old=_old(request))
    return Verdict.allow(patch=mutation_patch(obj, mutated))


def validate_artifact(
    request: AdmissionRequest, *, lookups: Lookups, settings: Settings
) -> Verdict:
    """The validating webhook, on an object the API server has decoded and defaulted."""
    del lookups, settings
    if request.operation not in JUDGED:
        return Verdict.allow()
    obj = request.object
    name = _name_of(obj, request)
    if obj is None:
        return _refuse(ErrorList([_NO_OBJECT]), name)
    art = _decoded(request, obj)
    if isinstance(art, Verdict):
        return art
    return _refuse(validate_model_artifact(art, old=_old(request)), name)


def artifact_data(art: ModelArtifact) -> dict[str, Any]:
    """``art`` as plain JSON data with its schema defaults (unset optional fields left out)."""
    data: dict[str, Any] = art.model_dump(mode="json", by_alias=True, exclude_none=True)
    data["metadata"] = art.metadata.model_dump(mode="json", by_alias=True, exclude_unset=True)
    return data


def review_artifact(request: AdmissionRequest, *, lookups: Lookups, settings: Settings) -> Verdict:
    """Schema decoding, the default revision, the API server's own metadata checks, then the
    validating rules on the defaulted object; an allowed request carries the patch from the
    schema-defaulted object to the defaulted one."""
    del lookups, settings
    if request.operation not in JUDGED:
        return Verdict.allow()
    obj = request.object
    name = _name_of(obj, request)
    if obj is None:
        return _refuse(ErrorList([_NO_OBJECT]), name)
    art = _decoded(request, obj)
    if isinstance(art, Verdict):
        return art
    original = artifact_data(art)
    mutated = default_revisions(original, old=_old(request))
    if request.operation == "CREATE" and not name and not art.metadata.generate_name:
        return _refuse(NAME_REQUIRED, name)
    meta = metadata_errors(art)
    if meta:
        return _refuse(meta, name)
    if mutated is not original:
        art = ModelArtifact.model_validate(mutated)
    errs = validate_model_artifact(art, old=_old(request))
    return Verdict.from_errors(
        errs,
        group_kind=ARTIFACT_GROUP_KIND,
        name=name,
        patch=mutation_patch(original, mutated),
    )


_NO_OBJECT: Final = errors.required("", "the request carries no object", origin="schema.violation")
