"""What explain says about the router's objects (``explain/router.py``; D26)."""

from __future__ import annotations

from typing import Any

from property.strategies import Case, deployment, instance_type, render_case, role

from gpustack_render.core.settings import Settings
from gpustack_render.explain.router import explain_router
from gpustack_render.rendering.renderer import Rendering


def _render(router: dict[str, Any] | None, settings: Settings | None = None) -> Rendering:
    rendering: Rendering = render_case(
        Case(
            deployment([role(replicas=2)], router=router), [instance_type()], settings or Settings()
        )
    )
    return rendering


def _changes(old: Rendering | None, new: Rendering) -> list[tuple[str, str]]:
    answer = explain_router(old, new)
    assert answer is not None
    return [(c.kind, c.change) for c in answer.changes]


def test_created_with_the_deployment_or_the_router_block() -> None:
    new = _render({"name": "vllm-router"})
    expected = [
        (kind, "created")
        for kind in ("ServiceAccount", "Role", "RoleBinding", "Service", "Deployment")
    ]
    assert _changes(None, new) == expected
    assert _changes(_render(None), new) == expected


def test_scaled_rolled_unchanged_and_removed() -> None:
    base = _render({"name": "vllm-router"})
    assert _changes(base, _render({"name": "vllm-router", "replicas": 3})) == [
        ("Deployment", "scaled 1 -> 3")
    ]
    assert _changes(
        base, _render({"name": "vllm-router", "extraArgs": ["--policy", "random"]})
    ) == [("Deployment", "updated; its Pods roll")]
    assert _changes(base, base) == []
    removed = explain_router(base, _render(None))
    assert removed is not None and removed.removed
    assert {c.change for c in removed.changes} == {"deleted"}
    assert explain_router(None, _render(None)) is None


def test_a_router_that_cannot_render_says_why() -> None:
    emptied = Settings(router_image_vllm_router="")
    answer = explain_router(None, _render({"name": "vllm-router", "image": None}, emptied))
    assert answer is not None and answer.changes == ()
    assert "spec.router.image" in answer.failure
