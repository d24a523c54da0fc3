"""Rendering: one ModelDeployment and the objects it names → Pods, Services and LocalQueues."""
