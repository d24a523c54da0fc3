"""Builders shared by the autoscaling unit tests: a serving replica Pod of one role and ordinal,
as the controller observes it (size 1, Running and Ready unless told otherwise)."""

from __future__ import annotations

from dataclasses import replace

from gpustack_render.reconcile.observed import ObservedPod


def pod(role: str, ordinal: int, **kw: object) -> ObservedPod:
    """The Pod ``<role>-<ordinal>`` (uid ``u-<role>-<ordinal>``); ``kw`` overrides fields."""
    return replace(
        ObservedPod(
            name=f"{role}-{ordinal}",
            uid=f"u-{role}-{ordinal}",
            role=role,
            ordinal=ordinal,
            group_total=1,
            phase="Running",
            ready=True,
        ),
        **kw,  # type: ignore[arg-type]
    )
