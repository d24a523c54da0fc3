"""Field paths built from JSON names, never typed by hand.

``ROLES.index(0).child("size")`` renders ``spec.roles[0].size``, the form Kubernetes uses in
``field.Path`` and in AdmissionReview causes.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class FieldPath:
    """An immutable path into an object, rendered with JSON field names."""

    parts: tuple[str | int, ...] = ()

    @classmethod
    def root(cls, name: str) -> FieldPath:
        """A path starting at the top-level field ``name``."""
        return cls((name,))

    def child(self, name: str, *more: str) -> FieldPath:
        """The path to a named member (or a chain of named members)."""
        return FieldPath((*self.parts, name, *more))

    def index(self, i: int) -> FieldPath:
        """The path to list element ``i``."""
        return FieldPath((*self.parts, i))

    def key(self, k: str) -> FieldPath:
        """The path to map entry ``k`` (rendered ``[k]``, as Kubernetes does)."""
        return FieldPath((*self.parts, f"[{k}]"))

    def __str__(self) -> str:
        out: list[str] = []
        for part in self.parts:
            if isinstance(part, int):
                out.append(f"[{part}]")
            elif part.startswith("[") and out:
                out.append(part)
            else:
                if out:
                    out.append(".")
                out.append(part)
        return "".join(out)

    def __repr__(self) -> str:
        return f"FieldPath({str(self)!r})"

    def resolve(self, obj: object) -> tuple[bool, object]:
        """Walk ``obj`` (plain JSON data) along this path; returns (found, value)."""
        cur = obj
        for part in self.parts:
            if isinstance(part, int):
                if not isinstance(cur, list) or not -len(cur) <= part < len(cur):
                    return False, None
                cur = cur[part]
            else:
                key = part[1:-1] if part.startswith("[") else part
                if not isinstance(cur, dict) or key not in cur:
                    return False, None
                cur = cur[key]
        return True, cur


METADATA = FieldPath.root("metadata")
SPEC = FieldPath.root("spec")
STATUS = FieldPath.root("status")
MODEL = SPEC.child("model")
ENGINE = SPEC.child("engine")
KV_CACHE = SPEC.child("kvCache")
ROUTER = SPEC.child("router")
KV_TRANSFER = SPEC.child("kvTransfer")
ROLES = SPEC.child("roles")
SCALING_GROUPS = SPEC.child("scalingGroups")
