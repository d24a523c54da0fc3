"""gpustack_controller: the ModelDeployment controller, a thin asyncio shell over the library.

It fetches (list+watch informers and uncached reads), calls ``gpustack_render`` (render, the
rollout planner, status, events, the joint admission check) and applies what comes back. It
talks to the API server through ``gpustack_kube`` (``kube.py`` holds its settings).
"""
