"""Model weights (D28, docs/weights.md): the manifest digest, pattern filtering, the hub answers'
reasons, and how an artifact's weights reach a role's Pods (delivery). Pure: no I/O."""
