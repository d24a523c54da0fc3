"""``model-manager``: the node plugin that keeps model weights on each node (docs/node-store.md).

A CSI node plugin (driver ``model.csi.gpustack.ai``) for inline ephemeral volumes: it downloads
each manifest digest once per node, verifies every byte against the manifest while it streams,
publishes the tree atomically, mounts it read-only into Pods of the artifact's namespace, and
reports what the node holds in its ``NodeModelStore``. Like the controller and the webhook
server it is a shell: the rules it follows live in ``gpustack_render`` (``weights/``).
"""
