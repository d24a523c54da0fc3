"""Mount paths compared as paths: one mount at, above or below another.

Two mounts at one path make an invalid container. A mount below another
(``/etc/gpustack/kvcache/mooncake.json`` with a ``subPath``) shadows what the outer one put
there; a mount above it (``/etc/gpustack``) is mounted first and the inner one on top of it, as
kubelet sorts mounts by depth. Each caller says which of these it refuses: the Pod injection
refuses all three where a path is held; a deployment's own volumes are refused only at an
operator path (D22 amended, ``admission/volumes.py``).
"""

from __future__ import annotations

import posixpath


def normalize(path: object) -> str:
    """``path`` as the container runtime resolves it (``//``, ``.``, ``..`` and a trailing
    ``/`` removed); a non-string is the empty path."""
    if not isinstance(path, str) or not path:
        return ""
    clean = posixpath.normpath(path)
    return "/" + clean.lstrip("/") if clean.startswith("/") else clean


def rooted(path: object) -> str:
    """``path`` where the kubelet mounts it: a relative ``mountPath`` is taken from ``/`` (as
    the kubelet's ``makeAbsolutePath`` does on Linux), then normalized."""
    if isinstance(path, str) and path and not path.startswith("/"):
        path = "/" + path
    return normalize(path)


def overlap(a: object, b: object) -> bool:
    """Whether mounts at ``a`` and ``b`` are at one path or one lies inside the other."""
    x, y = normalize(a), normalize(b)
    if not x or not y:
        return False
    if x == y:
        return True
    return _inside(x, y) or _inside(y, x)


def inside(inner: object, outer: object) -> bool:
    """Whether a mount at ``inner`` lies strictly below one at ``outer``."""
    x, y = normalize(inner), normalize(outer)
    return bool(x and y) and x != y and _inside(x, y)


def _inside(inner: str, outer: str) -> bool:
    return inner.startswith(outer if outer.endswith("/") else outer + "/")
