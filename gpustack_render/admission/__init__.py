"""ModelDeployment admission: the mutating accelerator default and every validating rule of
``docs/contract/admission.md``, as pure functions over an :class:`AdmissionRequest`, lookups and
Settings.

Modules by rule family: ``objectrules`` (§5, §12), ``arguments`` (``args.*``, ``degrees.*``,
``env.*``, §8.1, §10.3), ``ports`` (``ports.*``, §6), ``router`` (§7), ``hostaccess`` (§8.2),
``identity`` (§11), ``instancetypes`` (§9), ``cache`` (§10.1, §10.2); ``pipeline`` runs them in
order.
"""

from gpustack_render.admission.context import GROUP_KIND
from gpustack_render.admission.pipeline import (
    mutate_deployment,
    review_deployment,
    validate_deployment,
    validate_model_deployment,
)

__all__ = [
    "GROUP_KIND",
    "mutate_deployment",
    "review_deployment",
    "validate_deployment",
    "validate_model_deployment",
]
