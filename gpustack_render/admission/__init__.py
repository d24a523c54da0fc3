"""ModelDeployment and ModelArtifact admission: the mutating defaults and every validating rule
of ``docs/contract/admission.md`` and ``docs/weights.md`` ("Admission"), as pure functions over an
:class:`AdmissionRequest`, lookups and Settings.

Modules by rule family: ``objectrules`` (§5, §12), ``arguments`` (``args.*``, ``degrees.*``,
``env.*``, §8.1, §10.3), ``ports`` (``ports.*``, §6), ``router`` (§7), ``hostaccess`` (§8.2),
``identity`` (§11), ``instancetypes`` (§9), ``cache`` (§10.1, §10.2), ``weights`` (a deployment
naming a ModelArtifact); ``pipeline`` runs them in order. ``artifact`` is the ModelArtifact's own
admission.
"""

from gpustack_render.admission.artifact import (
    ARTIFACT_GROUP_KIND,
    mutate_artifact,
    review_artifact,
    validate_artifact,
    validate_model_artifact,
)
from gpustack_render.admission.context import GROUP_KIND
from gpustack_render.admission.pipeline import (
    mutate_deployment,
    review_deployment,
    validate_deployment,
    validate_model_deployment,
)

__all__ = [
    "ARTIFACT_GROUP_KIND",
    "GROUP_KIND",
    "mutate_artifact",
    "mutate_deployment",
    "review_artifact",
    "review_deployment",
    "validate_artifact",
    "validate_deployment",
    "validate_model_artifact",
    "validate_model_deployment",
]
