"""The one Kubernetes API client of the project's shells and of ``explain``'s live mode.

* :mod:`gpustack_kube.config`: the cluster configuration (``--kubeconfig``, the in-cluster
  service account, the default kubeconfig), loaded fresh each time, and the one line a failure
  is.
* :mod:`gpustack_kube.client`: :class:`~gpustack_kube.client.Kube`, JSON over one aiohttp
  session (GET, LIST, WATCH, POST, PUT, PATCH as merge, strategic merge or server-side apply,
  DELETE with a uid precondition), and :class:`~gpustack_kube.client.ApiError`.

The REST paths are the library's (:mod:`gpustack_render.schema.resources`). This is the one
package importing ``kubernetes_asyncio`` (an import contract in pyproject.toml holds it); the
controller (``gpustack_controller.kube``), the webhook server (``gpustack_webhook.kube``) and
``gpustack_render.cli.live`` each keep only what their own callers need on top of it
(docs/design/0005-kube-client.md).
"""
