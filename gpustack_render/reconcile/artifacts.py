"""What the artifact pass reads about the deployments (docs/weights.md, "Revalidation"): which
deployments name an artifact (its finalizer stays while one does), which artifact an event of a
deployment concerns, and the Warning a rejected token records.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from gpustack_render.core import jsonview
from gpustack_render.reconcile.events import WARNING, Event

#: The hub refused the token of an artifact's Secret (``whoami``); conditions do not change.
INVALID_TOKEN: Final = "InvalidToken"


def artifact_ref(deployment: Mapping[str, Any] | None) -> str:
    """The artifact a deployment names in ``spec.model.artifactRef.name`` (``""``: none)."""
    if deployment is None:
        return ""
    model = jsonview.view(jsonview.view(deployment.get("spec")).get("model"))
    name = jsonview.view(model.get("artifactRef")).get("name")
    return name if isinstance(name, str) else ""


def naming(deployments: Iterable[Mapping[str, Any]], namespace: str, artifact: str) -> list[str]:
    """The deployments in ``namespace`` that name ``artifact``, by name (sorted)."""
    return sorted(
        str(jsonview.view(d.get("metadata")).get("name") or "")
        for d in deployments
        if jsonview.view(d.get("metadata")).get("namespace") == namespace
        and artifact_ref(d) == artifact
    )


def artifacts_to_recheck(
    event: str, new: Mapping[str, Any], old: Mapping[str, Any] | None
) -> list[str]:
    """The artifacts (``namespace/name`` keys) a deployment's event concerns: the one a deleted
    deployment named, and the one an edit stopped naming; a deployment that starts naming one
    changes nothing (its finalizer is already there)."""
    namespace = str(jsonview.view(new.get("metadata")).get("namespace") or "")
    if event == "DELETED":
        names = {artifact_ref(new)}
    elif event == "MODIFIED" and old is not None and artifact_ref(old) != artifact_ref(new):
        names = {artifact_ref(old)}
    else:
        return []
    return sorted(f"{namespace}/{n}" for n in names if n)


def claiming(artifacts: Iterable[Mapping[str, Any]], claim: Mapping[str, Any]) -> list[str]:
    """The artifacts (``namespace/name`` keys, sorted) whose claim source names ``claim``: a
    claim created, changed or deleted concerns them (``ClaimNotFound`` clears at once)."""
    meta = jsonview.view(claim.get("metadata"))
    namespace, name = meta.get("namespace"), meta.get("name")
    out = []
    for artifact in artifacts:
        own = jsonview.view(artifact.get("metadata"))
        source = jsonview.view(jsonview.view(artifact.get("spec")).get("source"))
        named = jsonview.view(source.get("persistentVolumeClaim")).get("claimName")
        if own.get("namespace") == namespace and named == name:
            out.append(f"{namespace}/{own.get('name')}")
    return sorted(out)


def invalid_token(namespace: str, secret: str, hub: str, endpoint: str) -> Event:
    """The Warning recorded once per new token the hub rejects."""
    return Event(
        INVALID_TOKEN,
        f"{hub} at {endpoint} rejects the token in Secret {namespace}/{secret} (key token): "
        "replace it with a valid token; the artifact's conditions are unchanged until the hub "
        "refuses the repository itself",
        WARNING,
    )
