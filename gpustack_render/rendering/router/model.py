"""What the router part of a render produces: the router's objects, or why there are none."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

#: The kinds of the router's objects, in the order ``render`` prints them and the controller
#: applies them: identity and its grants first, then the configuration the Pods mount, then
#: the Service and the Deployment, the InferencePool last (docs/routers.md, "What each router
#: gets").
OBJECT_ORDER: Final = (
    "ServiceAccount",
    "Role",
    "RoleBinding",
    "ConfigMap",
    "Service",
    "Deployment",
    "InferencePool",
)


@dataclass(frozen=True, slots=True)
class RouterFailure:
    """Why the router's objects are not rendered (the engine Pods still are): the message names
    the cause and the way out, ``field`` the path, ``origin`` the rule id (docs/rules.md)."""

    message: str
    field: str
    origin: str


@dataclass(frozen=True)
class RouterRendering:
    """The router of one deployment (``spec.router``; D26).

    ``objects`` are fresh manifests in :data:`OBJECT_ORDER` (no InferencePool unless the
    Setting asks for one under llm-d-router); empty when ``failure`` says why the router cannot
    be rendered.
    """

    #: ``spec.router.name``: ``llm-d-router``, ``vllm-router`` or ``sglang-gateway``.
    router: str
    #: ``<md>-router``: the name of the Deployment, Service, ServiceAccount, Role, RoleBinding
    #: and ConfigMap.
    object_name: str
    namespace: str
    replicas: int
    #: The router Service's port: the engines' serving port.
    port: int
    #: The fixed port the router serves its Prometheus metrics on.
    metrics_port: int
    objects: tuple[dict[str, Any], ...] = ()
    failure: RouterFailure | None = None

    def of_kind(self, kind: str) -> dict[str, Any] | None:
        """The rendered object of ``kind``, if any."""
        for obj in self.objects:
            if obj["kind"] == kind:
                return obj
        return None

    @property
    def endpoint(self) -> str:
        """The router Service's URL (plain HTTP: the routers serve no TLS)."""
        return f"http://{self.object_name}.{self.namespace}.svc:{self.port}"
