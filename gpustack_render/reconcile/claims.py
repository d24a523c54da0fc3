"""What a ModelDeployment holds on other objects: its finalizer and its Binding claim.

- The finalizer ``gpustack.ai/controlled`` is added on the first pass, before converging, and
  removed at the end of teardown (docs/contract/controller.md §1, §3, §12).
- The claim is the deployment's entry ``{kind: ModelDeployment, namespace: "", name: <md>}`` in
  its ``KVCachePoolBinding``'s ``status.usedBy`` (sorted; ``namespace: ""`` = the Binding's own
  namespace). It is ensured every converging pass and removed once no owned Pod remains.

Both return ``None`` when nothing needs writing, so the controller writes only on a change.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from gpustack_render.api.modeldeployment import KIND

#: The deployment's finalizer (written by the controller, read by the controller).
FINALIZER: Final = "gpustack.ai/controlled"


def with_finalizer(finalizers: Sequence[str] | None) -> list[str] | None:
    """The finalizer list with ours appended, or ``None`` when it is already there."""
    current = list(finalizers or ())
    return None if FINALIZER in current else [*current, FINALIZER]


def without_finalizer(finalizers: Sequence[str] | None) -> list[str] | None:
    """The finalizer list without ours, or ``None`` when it is not there."""
    current = list(finalizers or ())
    return [f for f in current if f != FINALIZER] if FINALIZER in current else None


def with_finalizers(raw: Mapping[str, Any], finalizers: Sequence[str]) -> dict[str, Any]:
    """The update (PUT) body that sets a deployment's finalizers: the object as read, its
    ``resourceVersion`` kept (a concurrent write answers 409), ``metadata.managedFields`` left
    out. The API server keeps the stored field managers when an update carries none, while a
    non-empty list sent would replace them, and a cached copy keeps only the controller's own."""
    meta = {k: v for k, v in (raw.get("metadata") or {}).items() if k != "managedFields"}
    return {**raw, "metadata": {**meta, "finalizers": list(finalizers)}}


def finalizer_removed(old: Sequence[str] | None, new: Sequence[str] | None) -> bool:
    """Whether a change of a deployment's finalizers took ours away (someone else did: a pass
    must put it back). Its addition is the pass's own write, made before that same pass goes
    on, and another finalizer coming or going changes nothing a pass does."""
    return FINALIZER in (old or ()) and FINALIZER not in (new or ())


def claim_entry(deployment: str) -> dict[str, str]:
    """The deployment's ``usedBy`` entry."""
    return {"kind": KIND, "namespace": "", "name": deployment}


def _key(entry: Mapping[str, Any]) -> tuple[str, str, str]:
    return (str(entry.get("kind") or ""), str(entry.get("namespace") or ""), str(entry.get("name")))


def _sorted(entries: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    unique = {_key(e): dict(e) for e in entries}
    return [unique[k] for k in sorted(unique)]


def claimed(
    used_by: Sequence[Mapping[str, Any]] | None, deployment: str
) -> list[dict[str, Any]] | None:
    """``usedBy`` with the deployment's claim, sorted; ``None`` when already so."""
    current = [dict(e) for e in used_by or ()]
    wanted = _sorted([*current, claim_entry(deployment)])
    return None if wanted == current else wanted


def released(
    used_by: Sequence[Mapping[str, Any]] | None, deployment: str
) -> list[dict[str, Any]] | None:
    """``usedBy`` without the deployment's claim; ``None`` when it holds none."""
    current = [dict(e) for e in used_by or ()]
    mine = _key(claim_entry(deployment))
    if all(_key(e) != mine for e in current):
        return None
    return [e for e in current if _key(e) != mine]


def release_from(raw_binding: Mapping[str, Any], deployment: str) -> list[dict[str, Any]] | None:
    """The Binding's ``usedBy`` without the deployment's claim (``None``: nothing to write)."""
    used_by: Sequence[Mapping[str, Any]] | None = (raw_binding.get("status") or {}).get("usedBy")
    return released(used_by, deployment)


def claim_on(raw_binding: Mapping[str, Any], deployment: str) -> list[dict[str, Any]] | None:
    """The Binding's ``usedBy`` with the deployment's claim (``None``: nothing to write)."""
    used_by: Sequence[Mapping[str, Any]] | None = (raw_binding.get("status") or {}).get("usedBy")
    return claimed(used_by, deployment)
