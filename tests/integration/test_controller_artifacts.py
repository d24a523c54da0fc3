"""ModelArtifacts on the simulated API server, resolved against the local test hub
(tests/support/hubserver.py) by the controller running as its own ServiceAccount under the
shipped RBAC (docs/weights.md, "Resolution"; docs/operations.md, "What the controller may read
for artifacts"): an artifact resolves to the commit and the hand-built manifest's digest, a
missing revision is ``RevisionNotFound``, a private repository resolves with the Secret's token
and is ``AccessDenied`` without one, a rejected token is an ``InvalidToken`` Warning and a fixed
Secret takes effect without an edit, and an artifact a deployment names keeps its finalizer until
the deployment is gone."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from support.hubserver import HubServer, git_blob_sha1

from gpustack_controller.controller import Controller, Options
from gpustack_controller.kube import (
    CONFIGMAPS,
    EVENTS,
    MODEL_ARTIFACTS,
    MODEL_DEPLOYMENTS,
    SECRETS,
    ApiError,
    Kube,
    Resource,
)
from gpustack_render.api.artifact import ARTIFACT_FINALIZER
from gpustack_render.core.settings import Settings, settings_to_data

from .controller_fixtures import deployment, eventually, new_namespace, role, steady
from .controlplane import REPO_ROOT, ControlPlane, load_yaml_documents

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

SERVICE_ACCOUNT_USER = "system:serviceaccount:gpustack-system:gpustack-controller"
RBAC = {
    "ServiceAccount": Resource("", "v1", "serviceaccounts", "ServiceAccount"),
    "ClusterRole": Resource(
        "rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", namespaced=False
    ),
    "ClusterRoleBinding": Resource(
        "rbac.authorization.k8s.io",
        "v1",
        "clusterrolebindings",
        "ClusterRoleBinding",
        namespaced=False,
    ),
    "Role": Resource("rbac.authorization.k8s.io", "v1", "roles", "Role"),
    "RoleBinding": Resource("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding"),
}
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)

README = b"# weights\n"
CONFIG = b'{"model_type": "llama"}\n'
WEIGHTS = b"\x05" * 4096
TOKENIZER = b"{}\n"
FILES: dict[str, bytes | tuple[bytes, bool]] = {
    "config.json": CONFIG,
    "model.safetensors": (WEIGHTS, True),
    "README.md": README,
    "tokenizer/tokenizer.json": TOKENIZER,
}
#: The manifest of FILES, written out by hand: the LFS file named by its sha256, the others by
#: their git blob sha1, sorted by the paths' bytes (upper case first).
MANIFEST = (
    "gpustack-manifest v1\n"
    f"gitsha1:{git_blob_sha1(README)} 10 README.md\n"
    f"gitsha1:{git_blob_sha1(CONFIG)} 24 config.json\n"
    f"sha256:{hashlib.sha256(WEIGHTS).hexdigest()} 4096 model.safetensors\n"
    f"gitsha1:{git_blob_sha1(TOKENIZER)} 3 tokenizer/tokenizer.json\n"
)


@pytest_asyncio.fixture(loop_scope="session")
async def hub() -> AsyncIterator[HubServer]:
    server = HubServer(page_size=2)
    server.repo("org/model").add_commit(FILES, ref="main")
    server.repo("org/private", token="hf_good").add_commit(FILES, ref="main")
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


async def _apply_rbac(admin: Kube) -> None:
    try:
        await admin.create(
            NAMESPACES,
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpustack-system"}},
        )
    except ApiError as exc:
        if not exc.conflict:
            raise
    for name in ("serviceaccount.yaml", "rbac.yaml"):
        for doc in load_yaml_documents(REPO_ROOT / "deploy" / "controller" / name):
            await admin.apply(
                RBAC[doc["kind"]],
                doc,
                field_manager="artifact-test",
                namespace=doc["metadata"].get("namespace"),
            )


def artifact(name: str, repository: str, revision: str = "main", **hub: Any) -> dict[str, Any]:
    return {
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "ModelArtifact",
        "metadata": {"name": name},
        "spec": {
            "source": {"huggingFace": {"repository": repository, "revision": revision, **hub}}
        },
    }


def resolved(obj: dict[str, Any] | None) -> dict[str, Any]:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or ():
        if cond.get("type") == "Resolved":
            return dict(cond)
    return {}


async def test_artifacts_resolve_under_the_shipped_rbac(
    kube: Kube, control_plane: ControlPlane, hub: HubServer, tmp_path: Path
) -> None:
    await _apply_rbac(kube)
    system = await new_namespace(kube, "art-sys")
    ns = await new_namespace(kube, "art")
    settings = Settings(system_namespace=system, huggingface_endpoint=hub.url)
    await kube.create(
        CONFIGMAPS,
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "gpustack-settings"},
            "data": settings_to_data(settings),
        },
        system,
    )
    token = base64.b64encode(b"hf_good").decode()
    await kube.create(
        SECRETS,
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "hub"},
            "data": {"token": token},
        },
        ns,
    )
    await kube.create(
        SECRETS,
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "stale"},
            "data": {"token": base64.b64encode(b"hf_stale").decode()},
        },
        ns,
    )
    for obj in (
        artifact("stale", "org/private", secretRef={"name": "stale"}),
        artifact("good", "org/model"),
        artifact("missing", "org/model", "no-such-branch"),
        artifact("private", "org/private", secretRef={"name": "hub"}),
        artifact("no-secret", "org/private"),
    ):
        await kube.create(MODEL_ARTIFACTS, obj, ns)
    config = control_plane.user_kubeconfig(
        SERVICE_ACCOUNT_USER,
        groups=("system:serviceaccounts", "system:serviceaccounts:gpustack-system"),
    )
    identity = await Kube.connect(kubeconfig=str(config))
    controller = Controller(
        identity, Options(system_namespace=system, leader_election=False, admission_check=False)
    )
    # Secrets cannot be watched: the controller looks at each named one on a cadence (a minute
    # in production), shortened here so a changed token shows within the test.
    controller.artifacts.secret_check = 1.0
    try:
        await controller.start(sync_timeout=30)

        async def answered(name: str) -> dict[str, Any] | None:
            obj = await kube.get(MODEL_ARTIFACTS, name, ns)
            return obj if resolved(obj).get("status") in ("True", "False") else None

        good = await eventually(lambda: answered("good"), what="artifact good answered")
        assert resolved(good)["status"] == "True", resolved(good)
        status = good["status"]["resolved"]
        assert status["revision"] == hub.repos["org/model"].refs["main"]
        assert status["manifestDigest"] == "sha256:" + hashlib.sha256(MANIFEST.encode()).hexdigest()
        assert (status["digestSource"], status["fileCount"], status["sizeBytes"]) == (
            "Hub",
            4,
            10 + 24 + 4096 + 3,
        )
        assert ARTIFACT_FINALIZER in good["metadata"]["finalizers"]

        missing = await eventually(lambda: answered("missing"), what="artifact missing answered")
        assert (resolved(missing)["status"], resolved(missing)["reason"]) == (
            "False",
            "RevisionNotFound",
        )
        private = await eventually(lambda: answered("private"), what="artifact private answered")
        assert resolved(private)["status"] == "True", resolved(private)
        denied = await eventually(lambda: answered("no-secret"), what="no-secret answered")
        assert (resolved(denied)["status"], resolved(denied)["reason"]) == ("False", "AccessDenied")
        # A token the hub rejects: AccessDenied, and one InvalidToken Warning naming the Secret.
        stale = await eventually(lambda: answered("stale"), what="artifact stale answered")
        assert resolved(stale)["reason"] == "AccessDenied"

        # A token went out only for an artifact naming a Secret, and only that Secret's. Read once
        # every artifact that calls org/private has answered, so each one's request has arrived.
        private_calls = {auth for _, path, auth in hub.requests if "org/private" in path}
        assert private_calls == {"", "Bearer hf_good", "Bearer hf_stale"}
        assert {auth for _, path, auth in hub.requests if "org/model" in path} == {""}

        async def warned() -> list[dict[str, Any]]:
            events, _ = await kube.list(EVENTS, ns)
            return [e for e in events if e.get("reason") == "InvalidToken"]

        warning = (await eventually(warned, what="the InvalidToken event"))[0]
        assert warning["involvedObject"]["name"] == "stale"
        assert f"Secret {ns}/stale" in warning["message"]
        # The Secret is fixed: the artifact resolves without any edit of its own.
        await kube.merge_patch(SECRETS, "stale", {"data": {"token": token}}, ns)

        async def fixed() -> bool:
            return resolved(await kube.get(MODEL_ARTIFACTS, "stale", ns)).get("status") == "True"

        await eventually(fixed, what="the artifact resolved with the changed Secret")

        # A deployment names "missing": deleting the artifact leaves it terminating, its
        # finalizer in place, until the deployment is gone.
        md = deployment("user", ns, role(replicas=1))
        md["spec"]["model"]["artifactRef"] = {"name": "missing"}
        await kube.create(MODEL_DEPLOYMENTS, md, ns)
        await kube.delete(MODEL_ARTIFACTS, "missing", ns)

        async def held() -> bool:
            obj = await kube.get(MODEL_ARTIFACTS, "missing", ns)
            return obj is not None and ARTIFACT_FINALIZER in obj["metadata"]["finalizers"]

        await steady(held, seconds=3, what="the artifact a deployment names is kept")
        await kube.delete(MODEL_DEPLOYMENTS, "user", ns)

        async def gone() -> bool:
            return await kube.get(MODEL_ARTIFACTS, "missing", ns) is None

        await eventually(gone, what="the artifact deleted once no deployment names it")
        # An artifact nothing names goes at once.
        await kube.delete(MODEL_ARTIFACTS, "good", ns)
        await eventually(
            lambda: _absent(kube, "good", ns), what="an unnamed artifact deleted at once"
        )
    finally:
        await controller.stop()
        await identity.close()


async def _absent(kube: Kube, name: str, ns: str) -> bool:
    return await kube.get(MODEL_ARTIFACTS, name, ns) is None
