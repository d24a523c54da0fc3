"""gpustack_webhook: the HTTPS admission server for the ModelDeployment and Pod KV-cache webhooks."""
