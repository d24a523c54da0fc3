"""KV-cache Pod injection: the mutating CREATE webhook and the validating UPDATE freeze.

Any Pod labelled ``kvcache.gpustack.ai/inject: "true"`` joins the KV-cache pool its
``KVCachePoolBinding`` names: at CREATE the webhook writes exactly the store-client
configuration its declared engine expects, or refuses, fail-closed, every case that would
produce a container that starts normally and caches nothing (``docs/contract/injection-notes.md``).

Modules by step: ``contract`` (the label and annotations), ``resolve`` (Binding → pool →
backend, tenant, transport), ``target`` (the container), ``collisions`` (keys refused rather
than overwritten), ``launch`` (does an appended argument reach the engine), ``mutate``,
``patch`` and ``record`` (what is written), ``freeze`` (the UPDATE freeze); ``pipeline`` runs
them in order.

The client documents and vehicles come from :mod:`gpustack_render.engines.connectors`, shared with
the deployment renderer.
"""

from gpustack_render.injection.freeze import freeze_pod
from gpustack_render.injection.pipeline import InjectionResult, inject_pod, review_pod
from gpustack_render.injection.record import InjectionRecord, parse_record
from gpustack_render.injection.refusal import Refusal

__all__ = [
    "InjectionRecord",
    "InjectionResult",
    "Refusal",
    "freeze_pod",
    "inject_pod",
    "parse_record",
    "review_pod",
]
