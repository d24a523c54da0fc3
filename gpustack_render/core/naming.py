"""Every name the renderer generates, as a pure function of (deployment, role, ordinal, member).

Nothing else in the project spells a generated name, and nothing recomputes identity by parsing
one: Pods carry their ordinal and member index in labels (``labels.py``).

Names (D5, docs/contract/render.md §3, §6, §19):

- size 1: ``metadata.generateName`` ``<md>-<role>-`` (the API server appends a suffix);
- size > 1: ``metadata.name`` and ``spec.hostname`` ``<md>-<role>-r<ordinal>-m<member>``,
  ``spec.subdomain`` and the instance's headless Service ``<md>-<role>-r<ordinal>``;
- the deployment-wide Service ``<md>``, the role Service ``<md>-<role>``; the router's objects
  ``<md>-router`` (Deployment, Service, ServiceAccount, Role, RoleBinding, ConfigMap) and its
  optional InferencePool ``<md>`` (D26);
- the Kueue group name ``gpustack-fnv64-<16 hex>`` of FNV-1a-64 over
  ``<namespace>/<md>/<role>/<ordinal>``.
"""

from __future__ import annotations

import re

#: The namespace of an object that names none (the API server's default; D18).
DEFAULT_NAMESPACE = "default"
#: Prefix of every Kueue pod-group name this project derives (docs/contract/render.md §6).
GROUP_NAME_PREFIX = "gpustack-fnv64-"

_FNV64_OFFSET_BASIS = 0xCBF29CE484222325
_FNV64_PRIME = 0x100000001B3
_MASK64 = 0xFFFFFFFFFFFFFFFF

#: A DNS-1123 label: what a hostname, a Pod's ``spec.hostname`` and most names must be.
DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
#: A DNS-1035 label: what a Service name must be.
DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
#: Longest DNS label.
MAX_LABEL_LENGTH = 63


def fnv1a64(data: bytes) -> int:
    """FNV-1a, 64 bit, of ``data``."""
    h = _FNV64_OFFSET_BASIS
    for byte in data:
        h ^= byte
        h = (h * _FNV64_PRIME) & _MASK64
    return h


def fnv_name(key: str) -> str:
    """``gpustack-fnv64-`` + 16 lowercase hex of FNV-1a-64 over the UTF-8 bytes of ``key``."""
    return f"{GROUP_NAME_PREFIX}{fnv1a64(key.encode('utf-8')):016x}"


def group_name(namespace: str, deployment: str, role: str, ordinal: int) -> str:
    """The Kueue pod-group name of one replica (D5); the member index is not an input."""
    return fnv_name(f"{namespace}/{deployment}/{role}/{ordinal}")


def role_base(deployment: str, role: str) -> str:
    """``<md>-<role>``: the role Service's name and the stem of every name in the role."""
    return f"{deployment}-{role}"


def generate_name(deployment: str, role: str) -> str:
    """``metadata.generateName`` of a size-1 replica Pod: ``<md>-<role>-``."""
    return f"{deployment}-{role}-"


def instance_name(deployment: str, role: str, ordinal: int) -> str:
    """``<md>-<role>-r<ordinal>``: the instance's headless Service and its Pods' subdomain."""
    return f"{deployment}-{role}-r{ordinal}"


def member_name(deployment: str, role: str, ordinal: int, member: int) -> str:
    """``<md>-<role>-r<ordinal>-m<member>``: a Pod's name and hostname above size 1."""
    return f"{deployment}-{role}-r{ordinal}-m{member}"


def leader_address(deployment: str, role: str, ordinal: int) -> str:
    """The leader's DNS name within its instance: ``<member 0>.<instance Service>``."""
    return f"{member_name(deployment, role, ordinal, 0)}.{instance_name(deployment, role, ordinal)}"


def deployment_service_name(deployment: str) -> str:
    """The deployment-wide Service: ``<md>``."""
    return deployment


def role_service_name(deployment: str, role: str) -> str:
    """The role Service: ``<md>-<role>``."""
    return role_base(deployment, role)


def router_service_name(deployment: str) -> str:
    """``<md>-router``: the router's Service (reserved in the Service claim order, R13)."""
    return router_name(deployment)


def router_name(deployment: str) -> str:
    """``<md>-router``: the name of every object of the router (D26): its Deployment, Service,
    ServiceAccount, Role, RoleBinding and ConfigMap."""
    return f"{deployment}-router"


def inference_pool_name(deployment: str) -> str:
    """``<md>``: the InferencePool of a deployment behind llm-d-router (D26)."""
    return deployment


def is_dns1123_label(name: str) -> bool:
    """True when ``name`` is a DNS-1123 label of at most 63 characters."""
    return len(name) <= MAX_LABEL_LENGTH and DNS1123_LABEL.match(name) is not None


def is_dns1035_label(name: str) -> bool:
    """True when ``name`` is a DNS-1035 label (a valid Service name) of at most 63 characters."""
    return len(name) <= MAX_LABEL_LENGTH and DNS1035_LABEL.match(name) is not None
