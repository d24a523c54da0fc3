"""The error model: Kubernetes ``field.ErrorList`` shaped errors and admission verdicts.

Validators return an :class:`ErrorList`; they never raise. A :class:`Verdict` turns errors (or
a patch) into the ``response`` of an ``admission.k8s.io/v1`` AdmissionReview.
"""

from __future__ import annotations

import base64
import enum
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from gpustack_render.core.paths import FieldPath


class ErrorType(enum.StrEnum):
    """Kinds of field error; the values are the ``reason`` strings of a status cause."""

    REQUIRED = "FieldValueRequired"
    INVALID = "FieldValueInvalid"
    NOT_SUPPORTED = "FieldValueNotSupported"
    FORBIDDEN = "FieldValueForbidden"
    DUPLICATE = "FieldValueDuplicate"
    NOT_FOUND = "FieldValueNotFound"
    TOO_LONG = "FieldValueTooLong"
    TOO_MANY = "FieldValueTooMany"
    INTERNAL = "InternalError"


_SUMMARY = {
    ErrorType.REQUIRED: "Required value",
    ErrorType.INVALID: "Invalid value",
    ErrorType.NOT_SUPPORTED: "Unsupported value",
    ErrorType.FORBIDDEN: "Forbidden",
    ErrorType.DUPLICATE: "Duplicate value",
    ErrorType.NOT_FOUND: "Not found",
    ErrorType.TOO_LONG: "Too long",
    ErrorType.TOO_MANY: "Too many",
    ErrorType.INTERNAL: "Internal error",
}

_OMIT = object()


@dataclass(frozen=True, slots=True)
class FieldError:
    """One problem at one field.

    ``origin`` is a stable rule id (for example ``names.invalid-service-name``; docs/rules.md
    lists them) that tests match on; ``detail`` is the human message naming the facts the
    specification asks for.
    """

    type: ErrorType
    field: str
    bad_value: Any = _OMIT
    detail: str = ""
    origin: str = ""

    @property
    def has_value(self) -> bool:
        return self.bad_value is not _OMIT

    def message(self) -> str:
        """The message as Kubernetes formats it: ``<field>: <summary>[: <value>][: <detail>]``."""
        parts = [f"{self.field}: {_SUMMARY[self.type]}"] if self.field else [_SUMMARY[self.type]]
        if self.has_value and self.type in (
            ErrorType.INVALID,
            ErrorType.NOT_SUPPORTED,
            ErrorType.DUPLICATE,
            ErrorType.NOT_FOUND,
        ):
            parts.append(_quote(self.bad_value))
        if self.detail:
            parts.append(self.detail)
        return ": ".join(parts)

    def cause(self) -> dict[str, str]:
        """The ``status.details.causes[]`` entry."""
        detail = self.message()
        prefix = f"{self.field}: "
        if self.field and detail.startswith(prefix):
            detail = detail[len(prefix) :]
        return {"reason": self.type.value, "field": self.field, "message": detail}


def _quote(value: Any) -> str:
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _make(t: ErrorType, path: FieldPath | str, value: Any, detail: str, origin: str) -> FieldError:
    return FieldError(t, str(path), value, detail, origin)


def required(path: FieldPath | str, detail: str = "", *, origin: str = "") -> FieldError:
    return _make(ErrorType.REQUIRED, path, _OMIT, detail, origin)


def invalid(path: FieldPath | str, value: Any, detail: str, *, origin: str = "") -> FieldError:
    return _make(ErrorType.INVALID, path, value, detail, origin)


def not_supported(
    path: FieldPath | str, value: Any, supported: Iterable[str], *, origin: str = ""
) -> FieldError:
    choices = ", ".join(f'"{s}"' for s in supported)
    return _make(ErrorType.NOT_SUPPORTED, path, value, f"supported values: {choices}", origin)


def forbidden(path: FieldPath | str, detail: str, *, origin: str = "") -> FieldError:
    return _make(ErrorType.FORBIDDEN, path, _OMIT, detail, origin)


def duplicate(
    path: FieldPath | str, value: Any, detail: str = "", *, origin: str = ""
) -> FieldError:
    return _make(ErrorType.DUPLICATE, path, value, detail, origin)


def not_found(
    path: FieldPath | str, value: Any, detail: str = "", *, origin: str = ""
) -> FieldError:
    return _make(ErrorType.NOT_FOUND, path, value, detail, origin)


def too_long(path: FieldPath | str, max_len: int, *, origin: str = "") -> FieldError:
    return _make(ErrorType.TOO_LONG, path, _OMIT, f"may not be more than {max_len} bytes", origin)


def too_many(path: FieldPath | str, actual: int, max_items: int, *, origin: str = "") -> FieldError:
    detail = f"must have at most {max_items} items (got {actual})"
    return _make(ErrorType.TOO_MANY, path, _OMIT, detail, origin)


def internal(path: FieldPath | str, detail: str, *, origin: str = "") -> FieldError:
    return _make(ErrorType.INTERNAL, path, _OMIT, detail, origin)


class ErrorList(list[FieldError]):
    """An ordered collection of field errors; validators return one and never raise."""

    def has_internal(self) -> bool:
        return any(e.type is ErrorType.INTERNAL for e in self)

    def by_origin(self, origin: str) -> ErrorList:
        return ErrorList(e for e in self if e.origin == origin)


class VerdictKind(enum.Enum):
    ALLOWED = "allowed"
    INVALID = "invalid"
    FORBIDDEN = "forbidden"
    INTERNAL = "internal"


@dataclass(frozen=True)
class Verdict:
    """The outcome of one admission review, before it is encoded for the wire."""

    kind: VerdictKind
    errors: ErrorList = field(default_factory=ErrorList)
    message: str = ""
    patch: list[dict[str, Any]] = field(default_factory=list)
    warnings: tuple[str, ...] = ()
    group_kind: str = ""
    name: str = ""
    #: Stable rule id of a refusal without field causes (a forbidden verdict).
    origin: str = ""

    @property
    def allowed(self) -> bool:
        return self.kind is VerdictKind.ALLOWED

    @classmethod
    def allow(
        cls, *, patch: list[dict[str, Any]] | None = None, warnings: Iterable[str] = ()
    ) -> Verdict:
        return cls(VerdictKind.ALLOWED, patch=list(patch or []), warnings=tuple(warnings))

    @classmethod
    def from_errors(
        cls,
        errors: ErrorList,
        *,
        group_kind: str,
        name: str,
        patch: list[dict[str, Any]] | None = None,
        warnings: Iterable[str] = (),
    ) -> Verdict:
        """Allowed when ``errors`` is empty; internal when any is internal; else invalid."""
        if not errors:
            return cls.allow(patch=patch, warnings=warnings)
        kind = VerdictKind.INTERNAL if errors.has_internal() else VerdictKind.INVALID
        return cls(kind, errors=errors, group_kind=group_kind, name=name, warnings=tuple(warnings))

    @classmethod
    def forbid(cls, message: str, *, origin: str = "", warnings: Iterable[str] = ()) -> Verdict:
        return cls(VerdictKind.FORBIDDEN, message=message, origin=origin, warnings=tuple(warnings))

    @classmethod
    def internal_error(cls, message: str) -> Verdict:
        return cls(VerdictKind.INTERNAL, message=message)

    def status_code(self) -> int:
        return {
            VerdictKind.ALLOWED: 200,
            VerdictKind.INVALID: 422,
            VerdictKind.FORBIDDEN: 403,
            VerdictKind.INTERNAL: 500,
        }[self.kind]

    def status_reason(self) -> str:
        return {
            VerdictKind.ALLOWED: "",
            VerdictKind.INVALID: "Invalid",
            VerdictKind.FORBIDDEN: "Forbidden",
            VerdictKind.INTERNAL: "InternalError",
        }[self.kind]

    def status_message(self) -> str:
        if self.message or not self.errors:
            return self.message
        head = f'{self.group_kind} "{self.name}" is invalid' if self.group_kind else "invalid"
        msgs = [e.message() for e in self.errors]
        if len(msgs) == 1:
            return f"{head}: {msgs[0]}"
        return f"{head}: [{', '.join(msgs)}]"

    def to_response(self, uid: str = "", *, patch_encoding: str = "array") -> dict[str, Any]:
        """The AdmissionReview ``response``.

        ``patch_encoding`` is ``"array"`` for the command line (the JSON Patch as a decoded list)
        or ``"base64"`` for the wire, where the API server expects base64 of the JSON text. The
        wire form always echoes ``uid``; the command line's has none to echo and leaves it out.
        """
        response: dict[str, Any] = {}
        if uid or patch_encoding == "base64":
            response["uid"] = uid
        response["allowed"] = self.allowed
        if not self.allowed:
            status: dict[str, Any] = {
                "code": self.status_code(),
                "reason": self.status_reason(),
                "message": self.status_message(),
            }
            if self.errors:
                details: dict[str, Any] = {}
                if self.group_kind:
                    kind, _, group = self.group_kind.partition(".")
                    details = {"name": self.name, "group": group, "kind": kind}
                details["causes"] = [e.cause() for e in self.errors]
                status["details"] = details
            response["status"] = status
        elif self.patch:
            response["patchType"] = "JSONPatch"
            if patch_encoding == "base64":
                raw = json.dumps(self.patch, separators=(",", ":")).encode()
                response["patch"] = base64.b64encode(raw).decode()
            else:
                response["patch"] = self.patch
        response["warnings"] = list(self.warnings)
        return response

    def summary(self) -> dict[str, Any]:
        """What golden files pin: the outcome, status code and reason, and each cause's type,
        field and rule id; messages are left out (tests never assert on sentences)."""
        out: dict[str, Any] = {"allowed": self.allowed}
        if not self.allowed:
            out["code"] = self.status_code()
            out["reason"] = self.status_reason()
            if self.origin:
                out["origin"] = self.origin
            if self.errors:
                out["causes"] = [
                    {"type": e.type.value, "field": e.field, "origin": e.origin}
                    for e in self.errors
                ]
        if self.patch:
            out["patch"] = self.patch
        out["warnings"] = list(self.warnings)
        return out


class RenderError(Exception):
    """A deployment that cannot be rendered; the message names the cause and the object."""

    def __init__(self, message: str, *, field: str = "", origin: str = "") -> None:
        super().__init__(message)
        self.field = field
        self.origin = origin
