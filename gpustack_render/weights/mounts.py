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
from collections.abc import Mapping
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
    )
