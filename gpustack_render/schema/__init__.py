"""The schema layer: decoding plain objects into the API models (:mod:`gpustack_render.api`),
the object lookups the rules read through, the CRDs and the API reference."""
