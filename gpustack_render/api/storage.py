"""The Kubernetes storage kinds weight delivery reads (D28): claims, volumes, classes, drivers.

Only the fields the rules read are modelled; everything else is kept as given. These are core
kinds: the project ships no CRD for them. ``render`` and ``explain`` read them when given; one
not given counts as not found.
"""

# Annotations are objects, not strings: see the note in common.py.

from typing import Any, Literal

from pydantic import Field

from gpustack_render.api.common import OpenModel
from gpustack_render.api.inputs import InputObject


class ClaimSpec(OpenModel):
    access_modes: list[str] = Field(default_factory=list)
    storage_class_name: str | None = None
    volume_name: str = ""


class ClaimStatus(OpenModel):
    phase: str = ""
    access_modes: list[str] = Field(default_factory=list)


class PersistentVolumeClaim(InputObject):
    """A claim (``v1``)."""

    api_version: str = Field(default="v1", alias="apiVersion")
    kind: Literal["PersistentVolumeClaim"] = "PersistentVolumeClaim"
    spec: ClaimSpec = Field(default_factory=ClaimSpec)
    status: ClaimStatus = Field(default_factory=ClaimStatus)

    @property
    def bound(self) -> bool:
        return self.status.phase == "Bound" and bool(self.spec.volume_name)

    @property
    def modes(self) -> list[str]:
        """The bound volume's access modes, else the requested ones."""
        return list(self.status.access_modes or self.spec.access_modes)


class VolumeNodeAffinity(OpenModel):
    required: dict[str, Any] | None = None


class VolumeSpec(OpenModel):
    node_affinity: VolumeNodeAffinity | None = None
    access_modes: list[str] = Field(default_factory=list)


class PersistentVolume(InputObject):
    """A volume (``v1``, cluster-scoped)."""

    api_version: str = Field(default="v1", alias="apiVersion")
    kind: Literal["PersistentVolume"] = "PersistentVolume"
    spec: VolumeSpec = Field(default_factory=VolumeSpec)


class StorageClass(InputObject):
    """A storage class (``storage.k8s.io/v1``, cluster-scoped)."""

    api_version: str = Field(default="storage.k8s.io/v1", alias="apiVersion")
    kind: Literal["StorageClass"] = "StorageClass"
    provisioner: str = ""
    volume_binding_mode: str = "Immediate"


class CSIDriver(InputObject):
    """A CSI driver's registration (``storage.k8s.io/v1``, cluster-scoped)."""

    api_version: str = Field(default="storage.k8s.io/v1", alias="apiVersion")
    kind: Literal["CSIDriver"] = "CSIDriver"
