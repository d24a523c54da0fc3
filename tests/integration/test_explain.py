"""``kubectl explain`` on the simulated cluster: the API server publishes the shipped CRDs'
descriptions, and the real kubectl prints them for spec and status fields of every kind."""

from __future__ import annotations

import re
from typing import Any

import pytest

from gpustack_render.schema.crd import all_crds

from .cluster import Cluster

pytestmark = [pytest.mark.integration]


def _words(text: str) -> str:
    return " ".join(text.split())


def _children(crd: dict[str, Any], part: str) -> dict[str, Any]:
    (version,) = crd["spec"]["versions"]
    node = version["schema"]["openAPIV3Schema"]["properties"].get(part) or {}
    return dict(node.get("properties") or {})


#: (CRD, part) for every spec and status that declares fields.
PARTS = [
    pytest.param(crd, part, id=f"{crd['spec']['names']['kind']}.{part}")
    for crd in all_crds()
    for part in ("spec", "status")
    if _children(crd, part)
]


@pytest.mark.parametrize(("crd", "part"), PARTS)
def test_kubectl_explain_prints_every_field_description(
    cluster: Cluster, crd: dict[str, Any], part: str
) -> None:
    children = _children(crd, part)
    plural = crd["spec"]["names"]["plural"]
    out = cluster.kubectl("explain", f"{plural}.{part}", f"--api-version={crd['spec']['group']}/v1")
    text = _words(out.stdout)
    for name, schema in children.items():
        assert re.search(rf"\b{re.escape(name)}\b", text), name
        # kubectl wraps long lines: compare the description's words, not its layout.
        assert _words(schema["description"]) in text, (name, schema["description"])
