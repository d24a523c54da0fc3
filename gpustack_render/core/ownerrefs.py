"""Reading ``metadata.ownerReferences`` of a raw object: who controls it, who owns it.

Ownership is decided by references only (labels alone never adopt an object); the controller,
the planner's observations and the joint admission check all read references here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from gpustack_render.core import jsonview


class OwnedConflict(Exception):  # noqa: N818 (names the finding)
    """The one conflict of the owned-object path (``reconcile/owned.py``): a rendered object's
    name ``kind namespace/name`` is held. Either it is stored under another owner than the
    ModelDeployment ``deployment`` that renders it, or (a kind nobody owns, a LocalQueue) it is
    stored in a way that cannot serve, which ``detail`` says. Never written; the pass fails once
    its other writes are made, and is retried until the name is free."""

    #: The reason the failure is counted under: what the API server answers a create of a name
    #: that is taken.
    REASON: Final = "AlreadyExists"

    def __init__(
        self, kind: str, namespace: str, name: str, deployment: str = "", *, detail: str = ""
    ) -> None:
        super().__init__(
            detail
            or f"{kind} {namespace}/{name} exists and is not owned by "
            f"ModelDeployment {namespace}/{deployment}"
        )
        self.kind = kind
        self.namespace = namespace
        self.name = name
        self.deployment = deployment
        self.detail = detail

    @property
    def message(self) -> str:
        return str(self)


def references(obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The object's owner references that are objects (anything else reads as absent)."""
    refs = jsonview.items(jsonview.view(obj.get("metadata")).get("ownerReferences"))
    return [ref for ref in refs if isinstance(ref, Mapping)]


def controlled_by(obj: Mapping[str, Any], owner_uid: str) -> bool:
    """The ownership test: a ``controller: true`` reference to ``owner_uid``."""
    if not owner_uid:
        return False
    return any(
        ref.get("controller") is True and ref.get("uid") == owner_uid for ref in references(obj)
    )


def controller_of(obj: Mapping[str, Any], *, kind: str) -> Mapping[str, Any] | None:
    """The ``controller: true`` reference of ``kind``, if the object has one."""
    for ref in references(obj):
        if ref.get("controller") is True and ref.get("kind") == kind:
            return ref
    return None


def owners_of_kind(
    obj: Mapping[str, Any], *, kind: str, api_version: str
) -> list[Mapping[str, Any]]:
    """Every reference to an owner of ``kind`` in ``api_version`` (a Workload's Pods)."""
    return [
        ref
        for ref in references(obj)
        if ref.get("kind") == kind and ref.get("apiVersion") == api_version
    ]
