"""The rendered Engine delivery works (docs/weights.md, "Delivery"): the environment, the
``--revision`` and the cache path the renderer puts in an engine Pod, handed to the real hub
client in a process of its own (as the engine's weight loader calls it), fetch exactly the pinned
commit's files from the local test hub (tests/support/hubserver.py), and what they fetch matches
``status.resolved.manifestDigest``. Only the cache path moves (to a temporary folder) and the
``secretKeyRef`` is read from the Secret the test holds; everything else is the Pod's.

A branch that moves after resolution does not move the Pods: they download the commit the
artifact pinned.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from support.hubserver import HubServer, git_blob_sha1, throwaway_ca

from gpustack_controller.hubs import HubAccess, HubClient, HubTarget
from gpustack_render.api.artifact import ModelArtifact
from gpustack_render.api.inputs import InstanceType
from gpustack_render.core.settings import Settings
from gpustack_render.rendering.renderer import render
from gpustack_render.schema.decoding import decode_deployment
from gpustack_render.schema.lookups import StaticLookups
from gpustack_render.weights.delivery import CACHE_PATH
from gpustack_render.weights.manifest import Manifest

pytestmark = pytest.mark.asyncio(loop_scope="session")

TOKEN = "hf_pod_token"
SECRET = "hub-token"
#: A repository as a model's looks: weights in LFS, configs not, and files a loader skips.
FILES: dict[str, bytes | tuple[bytes, bool]] = {
    "config.json": b'{"model_type": "llama", "architectures": ["LlamaForCausalLM"]}\n',
    "generation_config.json": b"{}\n",
    "model-00001-of-00002.safetensors": (b"\x01" * 4096, True),
    "model-00002-of-00002.safetensors": (b"\x02" * 2048, True),
    "model.safetensors.index.json": b'{"weight_map": {}}\n',
    "original/consolidated.00.pth": (b"\x03" * 1024, True),
    "tokenizer.json": b'{"version": "1.0"}\n',
    "README.md": b"# a model\n",
}
LFS_SUFFIXES = (".safetensors", ".pth")

#: What vLLM's weight loader asks for (vllm/model_executor/model_loader/weight_utils.py,
#: download_weights_from_hf: the safetensors files, ``original/`` ignored) and the config and
#: tokenizer files its config loader fetches one by one.
LOADER = """
import json, sys
from huggingface_hub import hf_hub_download, snapshot_download
repo, revision = sys.argv[1], sys.argv[2]
folder = snapshot_download(repo, revision=revision, allow_patterns=["*.safetensors", "*.json"],
                           ignore_patterns=["original/**/*"])
hf_hub_download(repo, "tokenizer.json", revision=revision)
import pathlib
root = pathlib.Path(folder)
fetched = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
full = snapshot_download(repo, revision=revision)
print(json.dumps({"loader": folder, "fetched": fetched, "full": full}))
"""


def _manifest_lines(folder: Path) -> list[str]:
    """The manifest lines of what a download put in ``folder``, each file named as the hub
    names it (LFS files by sha256, the others by their git blob sha1)."""
    lines = []
    for path in sorted(folder.rglob("*"), key=lambda p: p.relative_to(folder).as_posix().encode()):
        if not path.is_file():
            continue
        rel = path.relative_to(folder).as_posix()
        data = path.read_bytes()
        if rel.endswith(LFS_SUFFIXES):
            lines.append(f"sha256:{hashlib.sha256(data).hexdigest()} {len(data)} {rel}")
        else:
            lines.append(f"gitsha1:{git_blob_sha1(data)} {len(data)} {rel}")
    return lines


@pytest_asyncio.fixture(loop_scope="session")
async def hub() -> AsyncIterator[HubServer]:
    server = HubServer(page_size=3)
    server.repo("org/llama", token=TOKEN).add_commit(FILES, ref="main")
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


def _artifact(manifest: Manifest, commit: str, source: dict[str, Any]) -> ModelArtifact:
    return ModelArtifact.model_validate(
        {
            "metadata": {"name": "llama", "namespace": "team-a", "uid": "u-1"},
            "spec": {"source": source},
            "status": {
                "resolved": {
                    "revision": commit,
                    "manifestDigest": manifest.digest,
                    "digestSource": "Hub",
                    "fileCount": manifest.file_count,
                    "sizeBytes": manifest.size_bytes,
                },
                "conditions": [{"type": "Resolved", "status": "True", "reason": "Resolved"}],
            },
        }
    )


def _main(artifact: ModelArtifact, settings: Settings, engine: str = "vLLM") -> dict[str, Any]:
    md, errs = decode_deployment(
        {
            "apiVersion": "worker.gpustack.ai/v1",
            "kind": "ModelDeployment",
            "metadata": {"name": "chat", "namespace": "team-a"},
            "spec": {
                "model": {"name": "llama", "artifactRef": {"name": "llama"}},
                "engine": {
                    "name": engine,
                    "image": "vllm/vllm-openai:v0.33.0"
                    if engine == "vLLM"
                    else "lmsysorg/sglang:v0.5.23",
                },
                "roles": [{"name": "server", "instanceType": "a10g"}],
            },
        }
    )
    assert md is not None, errs
    instance_type = InstanceType.model_validate(
        {
            "metadata": {"name": "a10g"},
            "spec": {"acceleratable": True, "unitResources": {"cpu": "8", "ram": "32Gi"}},
            "status": {
                "entrance": "q",
                "detail": {"manufacturer": "nvidia", "memory": "24Gi"},
                "accelerator": {"capacity": 8},
            },
        }
    )
    lookups = StaticLookups.of([instance_type, artifact], default_namespace="team-a")
    pod = render(md, lookups=lookups, settings=settings).pods()[0]
    return next(c for c in pod["spec"]["containers"] if c["name"] == "main")


def _pod_env(main: dict[str, Any], cache: Path, secrets: dict[str, str]) -> dict[str, str]:
    """The container's environment as the kubelet would set it: values as written, a
    ``secretKeyRef`` read from ``secrets`` (by Secret name; key ``token``), the cache path moved
    to ``cache``."""
    env: dict[str, str] = {}
    for entry in main.get("env") or ():
        if "value" in entry:
            value = str(entry["value"])
        else:
            ref = entry["valueFrom"]["secretKeyRef"]
            assert ref["key"] == "token"
            value = secrets[ref["name"]]
        env[entry["name"]] = value.replace(CACHE_PATH, str(cache))
    return env


async def test_the_rendered_engine_env_downloads_exactly_the_pinned_commit(
    hub: HubServer, tmp_path: Path
) -> None:
    outcome = await HubClient().resolve(
        HubTarget("huggingFace", "org/llama", "main", token=TOKEN), HubAccess(hub.url)
    )
    assert outcome.resolution is not None
    commit, manifest = outcome.resolution.revision, outcome.resolution.manifest
    source = {"huggingFace": {"repository": "org/llama", "secretRef": {"name": SECRET}}}
    settings = Settings(huggingface_endpoint=hub.url)
    main = _main(_artifact(manifest, commit, source), settings)
    argv = main["command"]
    assert argv[:3] == ["vllm", "serve", "org/llama"]
    revision = argv[argv.index("--revision") + 1]
    assert revision == commit

    # The branch moves after the artifact resolved: the Pods still fetch the pinned commit.
    hub.repos["org/llama"].add_commit({**FILES, "config.json": b'{"moved": true}\n'}, ref="main")
    assert hub.repos["org/llama"].refs["main"] != commit

    cache = tmp_path / "model-cache"
    env = _pod_env(main, cache, {SECRET: TOKEN})
    assert env["HF_HOME"] == str(cache) and env["HF_ENDPOINT"] == hub.url
    before = len(hub.requests)
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", LOADER, argv[2], revision],
        env={"PATH": os.environ.get("PATH", ""), **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    folders = json.loads(done.stdout.strip().splitlines()[-1])
    loader, full = Path(folders["loader"]), Path(folders["full"])
    assert loader.name == commit and full.name == commit  # the pinned snapshot
    assert loader.is_relative_to(cache)  # in the Pod's cache volume

    # What the loader fetched is a subset of the manifest, line for line; the whole snapshot is
    # the manifest itself, so its digest is the artifact's.
    resolved_lines = manifest.text().splitlines()[1:]
    by_path = {line.rsplit(" ", 1)[1]: line for line in _manifest_lines(full)}
    fetched = [by_path[path] for path in folders["fetched"]]
    assert fetched and set(fetched) <= set(resolved_lines)
    assert not any(path.startswith("original/") for path in folders["fetched"])
    text = "gpustack-manifest v1\n" + "".join(f"{line}\n" for line in _manifest_lines(full))
    assert "sha256:" + hashlib.sha256(text.encode()).hexdigest() == manifest.digest

    # Every request carried the Pod's token, and named no commit but the pinned one.
    # (The client also asks /api/agent-harnesses on its own, with no token; not a repo read.)
    sent = [r for r in hub.requests[before:] if "org/llama" in r[1]]
    assert sent and all(auth == f"Bearer {TOKEN}" for _, _, auth in sent)
    moved = hub.repos["org/llama"].refs["main"]
    assert not any(moved in path for _, path, _ in sent)


async def test_the_rendered_modelscope_env_downloads_the_pinned_commit(tmp_path: Path) -> None:
    """The same with ModelScope: ``MODELSCOPE_DOMAIN`` (host and port; the SDK adds https://),
    ``MODELSCOPE_CACHE`` and ``MODELSCOPE_API_TOKEN`` as rendered, the real SDK's
    ``snapshot_download`` at the rendered ``--revision``."""
    ca = throwaway_ca()
    server = HubServer(ssl_context=ca.server_context)
    ms_files = {p: (v[0] if isinstance(v, tuple) else v) for p, v in FILES.items()}
    server.repo("org/qwen").add_commit(ms_files, ref="master")
    await server.start()
    try:
        outcome = await HubClient().resolve(
            HubTarget("modelScope", "org/qwen", "master"), HubAccess(server.url, ca_pem=ca.ca_pem)
        )
        assert outcome.resolution is not None
        commit, manifest = outcome.resolution.revision, outcome.resolution.manifest
        source = {"modelScope": {"repository": "org/qwen", "secretRef": {"name": SECRET}}}
        settings = Settings(modelscope_endpoint=server.url)
        main = _main(_artifact(manifest, commit, source), settings, engine="SGLang")
        argv = main["command"]
        repo = argv[argv.index("--model-path") + 1]
        revision = argv[argv.index("--revision") + 1]
        assert (repo, revision) == ("org/qwen", commit)
        cache = tmp_path / "model-cache"
        env = _pod_env(main, cache, {SECRET: "ms_token"})
        assert env["MODELSCOPE_DOMAIN"] == f"127.0.0.1:{server.port}"
        assert env["SGLANG_USE_MODELSCOPE"] == "true"
        bundle = tmp_path / "ca.pem"
        bundle.write_text(ca.ca_pem)  # the test's CA: the only thing the Pod would not have
        script = (
            "import sys\nfrom modelscope import snapshot_download\n"
            "print(snapshot_download(sys.argv[1], revision=sys.argv[2]))\n"
        )
        done = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-c", script, repo, revision],
            env={"PATH": os.environ.get("PATH", ""), "REQUESTS_CA_BUNDLE": str(bundle), **env},
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        folder = Path(done.stdout.strip().splitlines()[-1])
        assert folder.is_relative_to(cache)
        lines = [
            f"sha256:{hashlib.sha256(p.read_bytes()).hexdigest()} {p.stat().st_size} "
            f"{p.relative_to(folder).as_posix()}"
            for p in sorted(
                (p for p in folder.rglob("*") if p.is_file() and not p.name.startswith(".")),
                key=lambda p: p.relative_to(folder).as_posix().encode(),
            )
        ]
        text = "gpustack-manifest v1\n" + "".join(f"{line}\n" for line in lines)
        assert "sha256:" + hashlib.sha256(text.encode()).hexdigest() == manifest.digest
    finally:
        await server.stop()
