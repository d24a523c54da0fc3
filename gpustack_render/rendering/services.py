"""The Services a deployment renders (docs/contract/render.md §19, D21).

- ``<md>``: deployment-wide, ClusterIP, selecting the **first** role's leaders;
- ``<md>-<role>``: per role, ClusterIP, selecting the role's leaders (member-index ``0``: harmless
  at size 1, where every Pod carries it); a KV-event publishing role also exposes 5557 and 5558;
- an Elastic EP role's serving Services select its master alone (``pod-ordinal`` ``0`` too);
- ``<md>-<role>-r<o>``: per instance above size 1, headless, publishing not-ready addresses (peers
  must resolve before the leader is Ready), selecting the instance by its pod-ordinal.

The Service's own port stays on the role's external port (first declared, else 8000); a role's
own ``--port`` moves only ``targetPort``. Ports are always numbers (D21).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from gpustack_render.core import naming
from gpustack_render.core.labels import (
    MEMBER_INDEX,
    NOTE_ROLE,
    POD_ORDINAL,
    RESOURCE_TYPE,
    RESOURCE_TYPE_VALUE,
    deployment_selector,
    role_selector,
)
from gpustack_render.engines.owned import KV_EVENTS_PORT, KV_REPLAY_PORT
from gpustack_render.engines.transfer import PORT_KV_EVENTS, PORT_KV_REPLAY

SERVICE_API_VERSION: Final = "v1"
SERVICE_KIND: Final = "Service"
CLUSTER_IP: Final = "ClusterIP"
HEADLESS: Final = "None"


@dataclass(frozen=True)
class ServicePort:
    """One Service port: its name, protocol, the Service's port and the container's port."""

    name: str
    protocol: str
    port: int
    target_port: int

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "protocol": self.protocol,
            "port": self.port,
            "targetPort": self.target_port,
        }


def kv_event_ports() -> list[ServicePort]:
    """The publisher and replay ports a publishing role's Service exposes (D9)."""
    return [
        ServicePort(PORT_KV_EVENTS, "TCP", KV_EVENTS_PORT, KV_EVENTS_PORT),
        ServicePort(PORT_KV_REPLAY, "TCP", KV_REPLAY_PORT, KV_REPLAY_PORT),
    ]


def _metadata(
    name: str,
    *,
    namespace: str,
    labels: dict[str, str],
    role: str | None,
    owner_references: list[dict[str, Any]],
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "labels": {**labels, RESOURCE_TYPE: RESOURCE_TYPE_VALUE},
    }
    if role is not None:
        meta["annotations"] = {NOTE_ROLE: role}
    if owner_references:
        meta["ownerReferences"] = [dict(ref) for ref in owner_references]
    return meta


def _serving(selector: dict[str, str], *, master_only: bool) -> dict[str, str]:
    """A serving selector: the leaders (member-index ``0``); with ``master_only`` the Elastic
    EP master alone, the only member serving HTTP (docs/contract/elastic-ep.md §3.1)."""
    out = {**selector, MEMBER_INDEX: "0"}
    if master_only:
        out[POD_ORDINAL] = "0"
    return out


def _service(metadata: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": SERVICE_API_VERSION,
        "kind": SERVICE_KIND,
        "metadata": metadata,
        "spec": spec,
    }


def deployment_service(
    deployment: str,
    *,
    namespace: str,
    first_role: str,
    port: ServicePort,
    owner_references: list[dict[str, Any]],
    master_only: bool = False,
) -> dict[str, Any]:
    """``<md>``: the deployment-wide Service, fronting the first role's leaders (its master
    alone, ``pod-ordinal`` ``0``, for an Elastic EP role)."""
    selector = _serving(role_selector(deployment, first_role), master_only=master_only)
    return _service(
        _metadata(
            naming.deployment_service_name(deployment),
            namespace=namespace,
            labels=deployment_selector(deployment),
            role=None,
            owner_references=owner_references,
        ),
        {"type": CLUSTER_IP, "selector": selector, "ports": [port.to_json()]},
    )


def role_service(
    deployment: str,
    role: str,
    *,
    namespace: str,
    port: ServicePort,
    kv_events: bool,
    owner_references: list[dict[str, Any]],
    master_only: bool = False,
) -> dict[str, Any]:
    """``<md>-<role>``: the role Service, fronting the role's leaders (its master alone for an
    Elastic EP role)."""
    selector = _serving(role_selector(deployment, role), master_only=master_only)
    ports = [port, *(kv_event_ports() if kv_events else [])]
    return _service(
        _metadata(
            naming.role_service_name(deployment, role),
            namespace=namespace,
            labels=role_selector(deployment, role),
            role=role,
            owner_references=owner_references,
        ),
        {"type": CLUSTER_IP, "selector": selector, "ports": [p.to_json() for p in ports]},
    )


def instance_service(
    deployment: str,
    role: str,
    ordinal: int,
    *,
    namespace: str,
    port: ServicePort,
    owner_references: list[dict[str, Any]],
) -> dict[str, Any]:
    """``<md>-<role>-r<o>``: the headless Service giving an instance's members their DNS."""
    selector = {**role_selector(deployment, role), POD_ORDINAL: str(ordinal)}
    return _service(
        _metadata(
            naming.instance_name(deployment, role, ordinal),
            namespace=namespace,
            labels=role_selector(deployment, role),
            role=role,
            owner_references=owner_references,
        ),
        {
            "type": CLUSTER_IP,
            "clusterIP": HEADLESS,
            "publishNotReadyAddresses": True,
            "selector": selector,
            "ports": [port.to_json()],
        },
    )
