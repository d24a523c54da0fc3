"""Currency of a replica: the pod-spec-hash (D4, D10) and the render-version (D4, D15).

The pod-spec-hash is a function of **inputs**, never of the rendered Pod: the explicit fields of
the deployment and the role, the resolved external bindings, and the seat. Its canonical JSON
object has exactly the keys D10 fixes (``model``, ``engine``, ``router``, ``kvCache``,
``kvTransfer``, ``role``, ``bindings``, ``seat``); absent values are ``null``; quantities are
written in canonical Kubernetes form. Changing this serialization rolls every replica: treat it
as a breaking change (the golden files pin it).

The render-version is the renderer's rendering baseline; a replica is outdated when its hash
differs from its seat's or its render-version is below the effective floor.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpustack_render.api.modeldeployment import ModelDeployment, RoleSpec
from gpustack_render.core.labels import MIN_RENDER_VERSION, POD_SPEC_HASH, RENDER_VERSION
from gpustack_render.core.quantity import QuantityError, canonical

#: The rendering baseline of this renderer; raised whenever synthesized output changes.
#: 2: members of an instance of size > 1 carry ``kueue.x-k8s.io/pod-group-pod-index-label``.
CURRENT_RENDER_VERSION = 2
#: The oldest baseline whose replicas are still kept in place (D15).
MIN_SUPPORTED_RENDER_VERSION = 1

#: Role fields that are quantities, written canonically in the hash input.
_ROLE_QUANTITIES = ("shmSize",)
_RESOURCE_QUANTITIES = ("accelerator", "interface")


def canonical_json(value: Any) -> bytes:
    """Keys sorted, no spaces, UTF-8: the byte string both hashes are taken over."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode(
        "utf-8"
    )


def _quantity(value: Any) -> Any:
    if value is None:
        return None
    try:
        return canonical(value)
    except QuantityError:
        return str(value)


@dataclass(frozen=True)
class HashBindings:
    """The resolved external bindings of one role (D10 ``bindings``).

    ``instance_type``, ``pool`` and ``binding`` are the plain objects D10 names (or ``None``);
    ``peer_leg`` is set only on a role whose transfer leg carries both halves' degrees.
    ``artifact`` is D28's ``bindings.artifact`` (``rendering/weights.py``): set only for a
    deployment naming a ``ModelArtifact``, and then written; without one the key is left out
    (not ``null``), so a deployment without an artifact keeps the hash it had before weights.
    """

    instance_type: Mapping[str, Any] | None
    pool: Mapping[str, Any] | None = None
    binding: Mapping[str, Any] | None = None
    interface_key: str | None = None
    runtime_class_name: str | None = None
    peer_leg: str | None = None
    artifact: Mapping[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "instanceType": dict(self.instance_type) if self.instance_type is not None else None,
            "pool": dict(self.pool) if self.pool is not None else None,
            "binding": dict(self.binding) if self.binding is not None else None,
            "interfaceKey": self.interface_key,
            "runtimeClassName": self.runtime_class_name,
        }
        if self.peer_leg is not None:
            out["peerLeg"] = self.peer_leg
        if self.artifact is not None:
            out["artifact"] = dict(self.artifact)
        return out


def role_hash_input(role: RoleSpec) -> dict[str, Any]:
    """The role after defaulting, without ``replicas`` and ``scaling`` (who sets the count
    changes no Pod); a take-over role's ``extraArgs`` are inert and written ``null``. An Elastic
    EP role's ``elasticEp`` is written without its ``width`` (D29): a width change adds members
    and restarts nobody."""
    data: dict[str, Any] = role.model_dump(
        mode="json", by_alias=True, exclude={"replicas", "scaling"}
    )
    elastic = data.get("elasticEp")
    if isinstance(elastic, dict):
        data["elasticEp"] = {k: v for k, v in elastic.items() if k != "width"}
    for key in _ROLE_QUANTITIES:
        data[key] = _quantity(data.get(key))
    resources = data.get("resources")
    if isinstance(resources, dict):
        for key in _RESOURCE_QUANTITIES:
            resources[key] = _quantity(resources.get(key))
    if not role.managed:
        data["extraArgs"] = None
    return data


def spec_hash_input(
    md: ModelDeployment, role: RoleSpec, *, bindings: HashBindings
) -> dict[str, Any]:
    """The D10 object of one role, without its ``seat``."""
    spec = md.spec
    return {
        "model": spec.model.model_dump(mode="json", by_alias=True),
        "engine": spec.engine.model_dump(mode="json", by_alias=True),
        "router": {"name": spec.router.name} if spec.router is not None else None,
        "kvCache": (
            spec.kv_cache.model_dump(mode="json", by_alias=True)
            if spec.kv_cache is not None
            else None
        ),
        "kvTransfer": (
            spec.kv_transfer.model_dump(mode="json", by_alias=True)
            if spec.kv_transfer is not None
            else None
        ),
        "role": role_hash_input(role),
        "bindings": bindings.to_json(),
    }


def seat_json(ordinal: int, member: int) -> dict[str, int]:
    """The D10 ``seat`` object."""
    return {"ordinal": ordinal, "member": member}


def hash_of(value: Mapping[str, Any]) -> str:
    """Lowercase hex SHA-256 of the canonical JSON of ``value``."""
    return hashlib.sha256(canonical_json(value)).hexdigest()


def pod_spec_hash(
    md: ModelDeployment, role: RoleSpec, *, bindings: HashBindings, ordinal: int, member: int
) -> str:
    """The pod-spec-hash of one seat (the reference computation; see :class:`SeatHasher`)."""
    data = spec_hash_input(md, role, bindings=bindings)
    data["seat"] = seat_json(ordinal, member)
    return hash_of(data)


class SeatHasher:
    """The pod-spec-hash of every seat of one role, from one serialization of its inputs.

    ``seat`` sorts after every other D10 key, so the canonical JSON of a seat's object is the
    role's object with ``,"seat":{…}}`` in place of its closing brace: the digest of the common
    prefix is computed once and copied per seat.
    """

    def __init__(self, base: Mapping[str, Any]) -> None:
        if "seat" in base:
            raise ValueError("the base object of a SeatHasher carries no seat")
        self._base = dict(base)
        self._fast = all(key < "seat" for key in base)
        prefix = canonical_json(self._base)[:-1] + (b',"seat":' if base else b'"seat":')
        self._prefix = hashlib.sha256(prefix)

    def hash(self, ordinal: int, member: int) -> str:
        """The pod-spec-hash of seat (``ordinal``, ``member``)."""
        if not self._fast:
            return hash_of({**self._base, "seat": seat_json(ordinal, member)})
        h = self._prefix.copy()
        h.update(b'{"member":%d,"ordinal":%d}}' % (member, ordinal))
        return h.hexdigest()


# --- render-version ------------------------------------------------------------------------


def _positive_int(value: str | None) -> int | None:
    if value is None:
        return None
    text = value.strip()
    if not text or not text.isascii() or not text.isdigit():
        return None
    try:
        number = int(text)
    except ValueError:  # more digits than Python converts (4300): unparsable, not a crash
        return None
    return number if number > 0 else None


def effective_floor(
    annotations: Mapping[str, str] | None,
    *,
    minimum: int = MIN_SUPPORTED_RENDER_VERSION,
    current: int = CURRENT_RENDER_VERSION,
) -> int:
    """The render-version floor of a deployment: its ``min-render-version`` annotation clamped
    to [minimum supported, current]; absent or unparsable reads as the minimum supported."""
    requested = _positive_int((annotations or {}).get(MIN_RENDER_VERSION))
    if requested is None:
        return minimum
    return max(minimum, min(requested, current))


def pod_render_version(annotations: Mapping[str, str] | None) -> int:
    """The render-version a Pod carries; absent or unparsable reads as 0
    (docs/contract/render.md §7)."""
    return _positive_int((annotations or {}).get(RENDER_VERSION)) or 0


def is_outdated(pod_annotations: Mapping[str, str] | None, *, seat_hash: str, floor: int) -> bool:
    """A Pod is outdated when its pod-spec-hash differs from its seat's, or its render-version
    is below the effective floor. A Pod at or above the floor but below the current baseline is
    compatible and kept."""
    annotations = pod_annotations or {}
    if annotations.get(POD_SPEC_HASH) != seat_hash:
        return True
    return pod_render_version(annotations) < floor
