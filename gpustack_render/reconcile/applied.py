"""Whether a server-side apply would change anything: the no-op apply is never sent.

The controller writes by forced server-side apply with one field manager per writer (its
Services, its status, the joint check's entries, the AdmissionCheck). An apply the API server
would answer without a change is still a write: it takes a request, a write to etcd when
managed-field timestamps move, and a watch event to every watcher. :func:`apply_aligned` tells
from the stored object alone when an apply of ``wanted`` by ``manager`` would change nothing, so
a converged cluster sees no writes (docs/design/0006-control-plane-at-scale.md). It works on any
kind: a cache keeps the manager's own ``managedFields`` entries for it
(:mod:`gpustack_render.reconcile.projection`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


def apply_aligned(
    existing: Mapping[str, Any], wanted: Mapping[str, Any], manager: str, *, subresource: str = ""
) -> bool:
    """True when applying ``wanted`` as ``manager`` (to ``subresource``, ``""``: the main
    resource) would change nothing in ``existing``.

    Two halves: every field of ``wanted`` is stored with the same value (:func:`_covers`), and
    the field set ``manager`` owns through apply (``metadata.managedFields``) names nothing
    ``wanted`` dropped — a label, annotation, list entry or key removed from ``wanted`` is still
    stored and still the manager's, and only a new apply removes it. An object without an apply
    entry of ``manager`` is not known to be aligned.
    """
    if not _covers(existing, wanted):
        return False
    owned = _applied_fields(existing, manager, subresource)
    return owned is not None and not _owns_more(owned, wanted)


def _applied_fields(
    obj: Mapping[str, Any], manager: str, subresource: str = ""
) -> Mapping[str, Any] | None:
    """The ``fieldsV1`` set ``manager`` owns by apply on ``subresource`` (``""``: the main
    resource), if any."""
    for entry in (obj.get("metadata") or {}).get("managedFields") or ():
        if (
            isinstance(entry, Mapping)
            and entry.get("manager") == manager
            and entry.get("operation") == "Apply"
            and (entry.get("subresource") or "") == subresource
        ):
            fields = entry.get("fieldsV1")
            return fields if isinstance(fields, Mapping) else {}
    return None


def _owns_more(fields: Mapping[str, Any], wanted: Any) -> bool:
    """True when the ``fieldsV1`` set ``fields`` names a path ``wanted`` does not carry.

    ``f:<name>`` is a map field, ``k:<json>`` a list element by its key fields, ``v:<json>``
    a set element, ``i:<n>`` a list index and ``.`` the element itself.
    """
    for key, sub in fields.items():
        if key == ".":
            continue
        kind, _, rest = str(key).partition(":")
        child: Any
        if kind == "f":
            if not isinstance(wanted, Mapping) or rest not in wanted:
                return True
            child = wanted[rest]
        elif kind in ("k", "v", "i"):
            if not isinstance(wanted, list):
                return True
            try:
                ident = json.loads(rest)
            except ValueError:
                return True
            if kind == "k":
                match = [
                    e
                    for e in wanted
                    if isinstance(e, Mapping)
                    and isinstance(ident, Mapping)
                    and all(e.get(k) == v for k, v in ident.items())
                ]
            elif kind == "v":
                match = [e for e in wanted if e == ident]
            else:
                match = [wanted[ident]] if isinstance(ident, int) and ident < len(wanted) else []
            if not match:
                return True
            child = match[0]
        else:
            return True
        if isinstance(sub, Mapping) and sub and _owns_more(sub, child):
            return True
    return False


def _covers(existing: Any, wanted: Any) -> bool:
    """Every field of ``wanted`` is present with the same value in ``existing`` (server
    defaults may add more); lists must match element by element."""
    if isinstance(wanted, Mapping):
        return isinstance(existing, Mapping) and all(
            k in existing and _covers(existing[k], v) for k, v in wanted.items()
        )
    if isinstance(wanted, list):
        return (
            isinstance(existing, list)
            and len(existing) == len(wanted)
            and all(_covers(e, w) for e, w in zip(existing, wanted, strict=True))
        )
    return bool(existing == wanted)
