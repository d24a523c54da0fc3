"""``ModelArtifact``: a pinned set of model weights (docs/weights.md, D28).

The spec names where the weights come from (exactly one source) and is immutable: other weights
are a new artifact. The controller writes the status: the commit and manifest digest a hub source
resolved to, and the ``Resolved``/``Degraded`` conditions. ``spec.model.artifactRef`` of a
``ModelDeployment`` names one in the same namespace.
"""

# Annotations are objects, not strings: see the note in common.py.

from typing import Annotated, Any, Literal

from pydantic import Field

from gpustack_render.api.common import (
    ATOMIC,
    Condition,
    Int32,
    Int64,
    LocalObjectReference,
    OpenModel,
    SpecModel,
    list_map,
)
from gpustack_render.api.inputs import InputObject

#: The finalizer that keeps an artifact while a deployment names it.
ARTIFACT_FINALIZER = "worker.gpustack.ai/model-artifact-protection"
#: The source members, in the order messages list them.
SOURCE_MEMBERS = ("huggingFace", "modelScope", "persistentVolumeClaim", "image")
#: The members that reach a hub (patterns and ``expectedDigest`` apply only to them).
HUB_MEMBERS = ("huggingFace", "modelScope")
#: The default revision of each hub source, filled on CREATE and UPDATE.
DEFAULT_REVISION = {"huggingFace": "main", "modelScope": "master"}
#: ``expectedDigest`` and ``manifestDigest``.
DIGEST_PATTERN = r"^sha256:[a-f0-9]{64}$"

DigestSource = Literal["Hub", "Expected"]

_PATTERNS = Annotated[
    list[Annotated[str, Field(min_length=1, max_length=256)]] | None,
    Field(max_length=32, json_schema_extra=ATOMIC),
]


class HubSource(SpecModel):
    """A repository on a model hub, at a branch, tag or commit."""

    repository: Annotated[
        str,
        Field(
            min_length=1,
            max_length=256,
            description="The repository: owner/name or a bare name.",
        ),
    ]
    revision: Annotated[
        str | None,
        Field(
            max_length=255,
            description="A branch, tag or commit; resolved once to a 40-hex commit. Defaults to "
            "main (Hugging Face) or master (ModelScope).",
        ),
    ] = None
    secret_ref: Annotated[
        LocalObjectReference | None,
        Field(
            description="A Secret in this namespace whose key token holds the hub token; "
            "without one, no token is sent."
        ),
    ] = None


class ClaimSource(SpecModel):
    """Weights already on a PersistentVolumeClaim in this namespace."""

    claim_name: Annotated[
        str, Field(min_length=1, max_length=253, description="The PersistentVolumeClaim.")
    ]
    path: Annotated[
        str,
        Field(
            max_length=1024,
            description="The weights' folder relative to the volume root; empty: the root.",
        ),
    ] = ""


class ImageSource(SpecModel):
    """Weights packaged in an OCI image, mounted as an image volume."""

    reference: Annotated[
        str,
        Field(
            min_length=1,
            max_length=1024,
            description="The image, pinned by digest (…@sha256:<hex>); a tag is refused.",
        ),
    ]


class ArtifactSource(SpecModel):
    """Where the weights come from: exactly one member."""

    hugging_face: Annotated[HubSource | None, Field(description="A Hugging Face repository.")] = (
        None
    )
    model_scope: Annotated[HubSource | None, Field(description="A ModelScope repository.")] = None
    persistent_volume_claim: Annotated[
        ClaimSource | None, Field(description="A PersistentVolumeClaim in this namespace.")
    ] = None
    image: Annotated[ImageSource | None, Field(description="A digest-pinned OCI image.")] = None

    def members(self) -> list[str]:
        """The members set, in :data:`SOURCE_MEMBERS` order."""
        return [
            m
            for m, v in zip(
                SOURCE_MEMBERS,
                (self.hugging_face, self.model_scope, self.persistent_volume_claim, self.image),
                strict=True,
            )
            if v is not None
        ]

    @property
    def hub(self) -> HubSource | None:
        """The hub member (Hugging Face or ModelScope), if that is the source."""
        return self.hugging_face or self.model_scope

    @property
    def kind(self) -> str:
        """The one member's name (the first when several are set); ``""`` when none is."""
        members = self.members()
        return members[0] if members else ""


class ModelArtifactSpec(SpecModel):
    """The weights; immutable once created."""

    source: Annotated[ArtifactSource, Field(description="Exactly one source.")]
    allow_patterns: Annotated[
        _PATTERNS,
        Field(description="Hub sources: keep only the files matching one (fnmatch); empty: all."),
    ] = None
    ignore_patterns: Annotated[
        _PATTERNS,
        Field(description="Hub sources: drop the files matching one; wins over allowPatterns."),
    ] = None
    expected_digest: Annotated[
        str | None,
        Field(
            pattern=DIGEST_PATTERN,
            description="Hub sources: the manifest digest the source must resolve to.",
        ),
    ] = None


class ResolvedArtifact(OpenModel):
    """What the source resolved to; written once, then only lastValidatedTime moves."""

    revision: Annotated[str | None, Field(description="The 40-hex commit (hub sources).")] = None
    manifest_digest: Annotated[
        str | None, Field(description="The digest of the files' manifest (hub sources).")
    ] = None
    digest_source: Annotated[
        DigestSource | None,
        Field(description="Hub: from the hub's listing; Expected: the spec's anchor."),
    ] = None
    file_count: Annotated[Int32 | None, Field(description="Files in the manifest.")] = None
    size_bytes: Annotated[Int64 | None, Field(description="Bytes in the manifest.")] = None
    resolved_time: Annotated[str | None, Field(description="When it resolved (RFC 3339).")] = None
    last_validated_time: Annotated[
        str | None, Field(description="When access was last confirmed (RFC 3339).")
    ] = None


class ArtifactNodes(OpenModel):
    """Nodes whose model store holds the digest, by state (node delivery)."""

    ready: Annotated[Int32, Field(description="Nodes holding the verified tree.")] = 0
    downloading: Annotated[Int32, Field(description="Nodes downloading it.")] = 0
    failed: Annotated[Int32, Field(description="Nodes whose download failed.")] = 0
    downloading_percent: Annotated[
        Int32 | None, Field(description="The downloading nodes' mean progress, by 5 %.")
    ] = None


class ModelArtifactStatus(OpenModel):
    """The resolution, written by the controller."""

    observed_generation: Annotated[
        int | None, Field(description="The generation this status was written for.")
    ] = None
    resolved: Annotated[
        ResolvedArtifact | None, Field(description="What the source resolved to.")
    ] = None
    nodes: Annotated[ArtifactNodes | None, Field(description="Node stores holding it.")] = None
    conditions: Annotated[
        list[Condition] | None,
        Field(json_schema_extra=list_map("type"), description="Resolved and Degraded."),
    ] = None


def _immutable_spec() -> dict[str, Any]:
    return {
        "x-kubernetes-validations": [
            {
                "rule": "self == oldSelf",
                "message": "spec is immutable: an artifact is an identity; create a new one",
            }
        ]
    }


class ModelArtifact(InputObject):
    """A pinned set of model weights that deployments name by ``spec.model.artifactRef``."""

    kind: Literal["ModelArtifact"] = "ModelArtifact"
    spec: Annotated[
        ModelArtifactSpec,
        Field(description="Where the weights come from.", json_schema_extra=_immutable_spec()),
    ]
    status: Annotated[
        ModelArtifactStatus,
        Field(default_factory=ModelArtifactStatus, description="The resolution."),
    ]

    def condition(self, type_: str) -> Condition | None:
        for cond in self.status.conditions or ():
            if cond.type == type_:
                return cond
        return None
