"""The shipped KVCachePoolBinding CRD on the real API server: the reuse domain is a DNS-1123
label, and neither it nor the pool reference changes once the Binding exists (a Binding names
the tenant its namespace's Pods are injected with)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from .controlplane import APIError, ControlPlane
from .webhook_fixtures import create_namespace

pytestmark = pytest.mark.integration

GROUP_PATH = "/apis/worker.gpustack.ai/v1"


def binding(name: str, domain_name: str | None = None) -> dict[str, Any]:
    domain: dict[str, Any] = {} if domain_name is None else {"name": domain_name}
    return {
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "KVCachePoolBinding",
        "metadata": {"name": name},
        "spec": {
            "poolRef": {"name": "dram-pool"},
            "domain": {"blockSize": 16, "dtype": "bfloat16", **domain},
        },
    }


def refused(call: Any, *args: Any) -> str:
    with pytest.raises(APIError) as info:
        call(*args)
    assert info.value.status == 422, info.value
    return info.value.body


def test_domain_pattern_and_immutable_identity(control_plane: ControlPlane) -> None:
    ns = f"crd-{uuid.uuid4().hex[:6]}"
    create_namespace(control_plane, ns, {})
    path = f"{GROUP_PATH}/namespaces/{ns}/kvcachepoolbindings"
    post = control_plane.request

    body = refused(post, "POST", path, binding("bad", "Team_B"))
    assert "spec.domain.name" in body and "should match" in body
    bad_pool = binding("bad-pool")
    bad_pool["spec"]["poolRef"]["name"] = "Not A Name"
    assert "spec.poolRef.name" in refused(post, "POST", path, bad_pool)

    post("POST", path, binding("named", "team-a-chat"))
    post("POST", path, binding("unnamed"))

    def patch(name: str, spec: dict[str, Any]) -> tuple[int, Any]:
        return post(
            "PATCH",
            f"{path}/{name}",
            {"spec": spec},
            content_type="application/merge-patch+json",
        )

    assert "spec.domain.name is immutable" in refused(
        patch, "named", {"domain": {"name": "team-b-chat"}}
    )
    assert "spec.domain.name is immutable" in refused(patch, "named", {"domain": {"name": None}})
    assert "spec.domain.name is immutable" in refused(
        patch, "unnamed", {"domain": {"name": "team-b-chat"}}
    )
    assert "spec.poolRef.name is immutable" in refused(
        patch, "named", {"poolRef": {"name": "other-pool"}}
    )
    # The rest of the Binding stays editable.
    patch("named", {"quotaCeiling": "32Gi"})
