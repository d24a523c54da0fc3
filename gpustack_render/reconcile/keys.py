"""The controller's own names: the field manager of its writes, its work-queue keys, and the
label selector it lists a deployment's Pods with."""

from __future__ import annotations

from typing import Final

from gpustack_render.core import labels

#: The one field manager of the controller's own writes (Services, LocalQueues, status, the
#: AdmissionCheck object). Service alignment reads the fields this manager owns.
FIELD_MANAGER: Final = "gpustack-controller"


def split_key(key: str) -> tuple[str, str]:
    """A work-queue key ``<namespace>/<name>`` as (namespace, name)."""
    namespace, _, name = key.partition("/")
    return namespace, name


def deployment_selector(name: str) -> str:
    """The label selector of a deployment's Pods and Services (name + instance), as text."""
    return ",".join(f"{k}={v}" for k, v in labels.deployment_selector(name).items())
