"""Mount paths compared as paths: one mount at, above or below another shadows or hides it.

A mount below an owned path (``/etc/gpustack/kvcache/mooncake.json`` with a ``subPath``)
shadows the owned file; a mount above it (``/etc/gpustack``) hides what the owner expects to
find beside it. Both ways are refused where a path is owned, so the rule reads simply: nothing
of yours at, above or below that path.
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


def _inside(inner: str, outer: str) -> bool:
    return inner.startswith(outer if outer.endswith("/") else outer + "/")
