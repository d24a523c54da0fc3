"""The admission request as the library sees it (decoded from ``admission.k8s.io/v1``).

Objects stay plain JSON data: schema decoding is part of a review, so the command line can answer
"would the API server accept this?" for objects that break the schema.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, cast

Operation = Literal["CREATE", "UPDATE", "DELETE", "CONNECT"]


@dataclass(frozen=True)
class AdmissionRequest:
    """One admission request: the operation, the new object and the stored one."""

    operation: Operation
    object: dict[str, Any] | None
    old_object: dict[str, Any] | None = None
    namespace: str = ""
    name: str = ""
    uid: str = ""
    dry_run: bool = False
    user_info: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_review(cls, review: dict[str, Any]) -> AdmissionRequest:
        """Decode the ``request`` of an AdmissionReview (missing parts become empty)."""
        req = review.get("request") or {}
        obj = req.get("object")
        old = req.get("oldObject")
        op = req.get("operation") or "CREATE"
        return cls(
            operation=cast(Operation, op),
            object=obj if isinstance(obj, dict) else None,
            old_object=old if isinstance(old, dict) else None,
            namespace=str(req.get("namespace") or ""),
            name=str(req.get("name") or ""),
            uid=str(req.get("uid") or ""),
            dry_run=bool(req.get("dryRun") or False),
            user_info=dict(req.get("userInfo") or {}),
        )
