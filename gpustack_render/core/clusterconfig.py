"""What the controller and the webhook server say when they cannot load a cluster configuration.

Both shells load their API client the same way (``--kubeconfig``, else the in-cluster service
account, else the default kubeconfig) and answer a failure with one line and exit 2. Finding and
reading the files is the client's (``gpustack_kube.config``, I/O); the line they print is
decided here, once, from what failed.
"""

from __future__ import annotations


def config_problem(
    exc: BaseException, *, kubeconfig: str | None = None, nothing_found: bool = False
) -> str:
    """One line saying why no cluster configuration could be loaded, naming ``exc`` by its class
    and the first line of its message: from ``--kubeconfig`` (``kubeconfig``) or the default
    kubeconfig, or, with ``nothing_found``, from anywhere (neither in a cluster nor with a
    kubeconfig file)."""
    lines = str(exc).strip().splitlines()
    why = f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
    if nothing_found:
        return (
            f"no cluster configuration: no usable in-cluster service account ({why}), and no "
            "kubeconfig ($KUBECONFIG, else ~/.kube/config); pass --kubeconfig"
        )
    source = f"--kubeconfig {kubeconfig}" if kubeconfig else "the default kubeconfig"
    return f"{source}: not a usable kubeconfig ({why})"
