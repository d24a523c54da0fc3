"""gpustack_webhook: the HTTPS admission server for the ModelDeployment and Pod KV-cache webhooks.

Run it with ``python -m gpustack_webhook``; see :mod:`gpustack_webhook.server`.
"""
