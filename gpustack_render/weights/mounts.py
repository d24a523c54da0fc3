"""Who may mount which tree: the node plugin's mount authorization rule (docs/node-store.md,
"The CSI node plugin"; docs/contract/model-delivery.md §4.5 and §8).

A Pod's inline CSI volume carries three attributes the renderer wrote (``artifact``,
``artifactUID``, ``manifestDigest``, :mod:`gpustack_render.rendering.weights`); kubelet adds the
Pod's own namespace, name and UID (the ``CSIDriver`` sets ``podInfoOnMount``) and merges them
over the Pod author's attributes, so the Pod's namespace cannot be forged from the Pod spec.

:func:`mount_attributes` reads the volume context (a missing or malformed key is an
:class:`AttributeProblem` naming it); :func:`authorize` decides: a mount is granted only for a
``Resolved=True`` hub-source artifact in the Pod's own namespace whose UID and manifest digest
are the volume's. Anything else is a :class:`MountRefusal` whose message names what did not
match, so no Pod author can mount another namespace's tree or another digest's. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ValidationError

from gpustack_render.api.artifact import DIGEST_PATTERN, ModelArtifact

#: The volume attributes the renderer writes.
ATTR_ARTIFACT = "artifact"
ATTR_ARTIFACT_UID = "artifactUID"
ATTR_MANIFEST_DIGEST = "manifestDigest"
#: What kubelet adds when the CSIDriver sets ``podInfoOnMount`` (kubelet's
#: pkg/volume/csi/csi_util.go, getPodInfoAttrs).
POD_NAMESPACE = "csi.storage.k8s.io/pod.namespace"
POD_NAME = "csi.storage.k8s.io/pod.name"
POD_UID = "csi.storage.k8s.io/pod.uid"
EPHEMERAL = "csi.storage.k8s.io/ephemeral"

_DIGEST = re.compile(DIGEST_PATTERN)
Hub = Literal["huggingFace", "modelScope"]


@dataclass(frozen=True)
class MountAttributes:
    """The volume context of one NodePublishVolume, read."""

    artifact: str
    artifact_uid: str
    manifest_digest: str
    pod_namespace: str
    pod_name: str
    pod_uid: str


@dataclass(frozen=True)
class AttributeProblem:
    """The volume context lacks a key or carries a bad value (``InvalidArgument``)."""

    field: str
    message: str


@dataclass(frozen=True)
class MountGrant:
    """The mount is allowed: what the node store is asked for."""

    digest: str
    hub: Hub
    repository: str
    commit: str
    allow_patterns: tuple[str, ...]
    ignore_patterns: tuple[str, ...]
    #: The Secret the artifact names (kubelet passes its data as the request's secrets).
    secret_name: str | None
    size_bytes: int | None
    #: The Pod's namespace, the one whose access to the digest the store checks.
    namespace: str = ""
    #: ``status.resolved.digestSource``: ``Hub`` or ``Expected`` (the anchor; see
    #: :func:`tree_access`).
    digest_source: str = "Expected"

    @property
    def source(self) -> str:
        """The record's ``source``: ``<hub>:<repository>@<commit>``."""
        return f"{self.hub}:{self.repository}@{self.commit}"


@dataclass(frozen=True)
class MountRefusal:
    """The mount is refused (``PermissionDenied``); the message names what did not match."""

    reason: str
    message: str


def mount_attributes(context: Mapping[str, str]) -> MountAttributes | AttributeProblem:
    """The attributes of a volume context, or the first problem with them."""
    values: dict[str, str] = {}
    for key in (ATTR_ARTIFACT, ATTR_ARTIFACT_UID, ATTR_MANIFEST_DIGEST):
        value = context.get(key, "")
        if not isinstance(value, str) or not value.strip():
            return AttributeProblem(
                key, f"volumeAttributes.{key} is required (the renderer writes it)"
            )
        values[key] = value.strip()
    if not _DIGEST.match(values[ATTR_MANIFEST_DIGEST]):
        return AttributeProblem(
            ATTR_MANIFEST_DIGEST,
            f"volumeAttributes.{ATTR_MANIFEST_DIGEST} {values[ATTR_MANIFEST_DIGEST]!r} is not "
            "sha256:<64 lowercase hex>",
        )
    for key in (POD_NAMESPACE, POD_NAME, POD_UID):
        value = context.get(key, "")
        if not isinstance(value, str) or not value:
            return AttributeProblem(
                key,
                f"{key} is missing: kubelet passes it when the CSIDriver "
                "model.csi.gpustack.ai sets podInfoOnMount: true",
            )
        values[key] = value
    if context.get(EPHEMERAL, "true") != "true":
        return AttributeProblem(
            EPHEMERAL,
            f"{EPHEMERAL} is {context.get(EPHEMERAL)!r}: the driver serves inline ephemeral "
            "volumes only",
        )
    return MountAttributes(
        artifact=values[ATTR_ARTIFACT],
        artifact_uid=values[ATTR_ARTIFACT_UID],
        manifest_digest=values[ATTR_MANIFEST_DIGEST],
        pod_namespace=values[POD_NAMESPACE],
        pod_name=values[POD_NAME],
        pod_uid=values[POD_UID],
    )


def authorize(attrs: MountAttributes, raw: Mapping[str, Any] | None) -> MountGrant | MountRefusal:
    """Grant or refuse the mount of ``attrs`` given the ``ModelArtifact`` read by name in the
    Pod's namespace (``None``: there is none)."""
    where = f"ModelArtifact {attrs.pod_namespace}/{attrs.artifact}"
    if raw is None:
        return MountRefusal(
            "ArtifactNotFound",
            f"{where} does not exist: a Pod mounts only an artifact of its own namespace",
        )
    try:
        artifact = ModelArtifact.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": str(exc)}
        field = ".".join(str(p) for p in first.get("loc", ()))
        return MountRefusal("ArtifactUnreadable", f"{where} is unreadable: {field}: {first['msg']}")
    meta = artifact.metadata
    if meta.namespace != attrs.pod_namespace or meta.name != attrs.artifact:
        return MountRefusal(
            "NamespaceMismatch",
            f"the artifact read is {meta.namespace}/{meta.name}, not {where}: a Pod mounts only "
            "an artifact of its own namespace",
        )
    if meta.uid != attrs.artifact_uid:
        return MountRefusal(
            "UIDMismatch",
            f"volumeAttributes.{ATTR_ARTIFACT_UID} {attrs.artifact_uid!r} is not the uid of "
            f"{where} ({meta.uid!r})",
        )
    hub_kind = artifact.spec.source.kind
    hub = artifact.spec.source.hub
    if hub is None or hub_kind not in ("huggingFace", "modelScope"):
        return MountRefusal(
            "NotHubSource",
            f"{where} has a {hub_kind or 'missing'} source: the node plugin mounts hub sources "
            "(huggingFace, modelScope) only",
        )
    resolved = artifact.condition("Resolved")
    if resolved is None or resolved.status != "True":
        state = (
            "has no Resolved condition"
            if resolved is None
            else f"is Resolved={resolved.status} ({resolved.reason or 'no reason'})"
        )
        return MountRefusal("ArtifactNotResolved", f"{where} {state}")
    status = artifact.status.resolved
    digest = status.manifest_digest if status is not None else None
    if digest != attrs.manifest_digest:
        return MountRefusal(
            "DigestMismatch",
            f"volumeAttributes.{ATTR_MANIFEST_DIGEST} {attrs.manifest_digest} is not the "
            f"resolved digest of {where} ({digest or 'none'})",
        )
    # An anchored artifact (digestSource Expected) has no commit: the node lists the spec's
    # revision and the store refuses a listing whose digest is not the anchor.
    commit = (status.revision if status is not None else None) or hub.revision or ""
    if not commit:
        return MountRefusal("ArtifactNotResolved", f"{where} names no revision to download")
    return MountGrant(
        digest=attrs.manifest_digest,
        hub="huggingFace" if hub_kind == "huggingFace" else "modelScope",
        repository=hub.repository,
        commit=commit,
        allow_patterns=tuple(artifact.spec.allow_patterns or ()),
        ignore_patterns=tuple(artifact.spec.ignore_patterns or ()),
        secret_name=hub.secret_ref.name if hub.secret_ref is not None else None,
        size_bytes=status.size_bytes if status is not None else None,
        namespace=attrs.pod_namespace,
        digest_source=(status.digest_source if status is not None else None) or "Expected",
    )


# ---- whose access to a digest is proven (the node store's half of the rule) -------------------

#: The reasons of a refused or unproven tree (the node service answers ``PermissionDenied`` or,
#: when the hub could not be asked, ``Unavailable``).
ACCESS_UNPROVEN = "AccessUnproven"
ACCESS_REFUSED = "AccessRefused"
#: The hub's reasons (weights/resolution.py) that are a refusal, not an outage.
_REFUSALS = frozenset({"AccessDenied", "RevisionNotFound"})

Access = Literal["Granted", "Prove"]


def tree_access(namespace: str | None, digest_source: str, proven: Collection[str]) -> Access:
    """Whether a tree of a digest goes to ``namespace``'s Pod as it is, or only after the store
    lists the repository with that Pod's token and finds the digest (``Prove``).

    ``proven``: the namespaces whose access to the digest the store has seen proven. A namespace
    is proven for a digest when its artifact resolved it from the hub (``digestSource: Hub``: the
    controller listed the repository with that namespace's token and got this digest), or when
    the store itself listed (or downloaded) the digest with that namespace's token. An anchored
    artifact (``Expected``: the digest is the spec's word) of a namespace not yet proven is
    never granted a tree on the anchor's word: knowing a digest must not open another
    namespace's private tree. ``namespace`` ``None``: not on behalf of a Pod (tests, benchmark).
    """
    if namespace is None or digest_source == "Hub" or namespace in proven:
        return "Granted"
    return "Prove"


@dataclass(frozen=True)
class AccessVerdict:
    """The outcome of the store's listing for a namespace: ``granted``, else the reason and a
    message, and ``retry`` when the hub did not answer (the next publish asks again)."""

    granted: bool
    reason: str = ""
    message: str = ""
    retry: bool = False


def access_verdict(
    *,
    digest: str,
    namespace: str,
    repository: str,
    revision: str,
    listed_digest: str | None,
    problem_reason: str = "",
    problem_message: str = "",
) -> AccessVerdict:
    """What the store's listing of ``repository`` at ``revision`` with ``namespace``'s token
    proves: the same ``digest`` grants; another digest or a refusal (no access, no such
    revision) refuses; a hub that did not answer refuses for now (``retry``), never a grant."""
    what = f"namespace {namespace} (its Pod's token) and {repository}@{revision}"
    if listed_digest is not None:
        if listed_digest == digest:
            return AccessVerdict(True)
        return AccessVerdict(
            False,
            ACCESS_REFUSED,
            f"the anchored artifact's digest {digest} is held on this node, but the hub lists "
            f"{listed_digest} for {what}: the tree is not mounted on the anchor's word",
        )
    if problem_reason in _REFUSALS:
        return AccessVerdict(
            False,
            ACCESS_REFUSED,
            f"the hub refuses {what} ({problem_reason}: {problem_message}): {digest} is not "
            "mounted on the anchor's word",
        )
    return AccessVerdict(
        False,
        ACCESS_UNPROVEN,
        f"the hub could not be asked whether {what} gives {digest} "
        f"({problem_reason or 'no answer'}: {problem_message}); the anchored artifact's tree is "
        "not mounted on the anchor's word; kubelet retries and the next publish asks again",
        retry=True,
    )
