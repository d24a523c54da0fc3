"""The weights examples (examples/weights/): one ModelArtifact per source, each named by a
ModelDeployment that gets the delivery docs/contract/model-delivery.md §4.1 gives that source.

test_examples_render.py renders the top-level examples only; these live in a subdirectory
because the renderer does not deliver artifact weights yet. What can be checked today is checked
here: the objects decode, each file holds what its deployment needs, and
gpustack_render.weights.delivery plans each deployment without a block. Rendering them is
:func:`test_each_weights_example_renders`, expected to fail until delivery lands in the renderer.
"""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import pytest

from gpustack_render.api.artifact import DIGEST_PATTERN, SOURCE_MEMBERS, ModelArtifact
from gpustack_render.api.inputs import InputObject
from gpustack_render.api.modeldeployment import ModelDeployment
from gpustack_render.api.storage import PersistentVolumeClaim
from gpustack_render.cli.documents import read_bundle
from gpustack_render.cli.parser import build_parser
from gpustack_render.cli.verbs import render as render_verb
from gpustack_render.cli.yamlio import load_documents
from gpustack_render.core.settings import Settings
from gpustack_render.schema.decoding import decode_model
from gpustack_render.schema.lookups import StaticLookups
from gpustack_render.weights.delivery import (
    CACHE_PATH,
    CACHE_VOLUME,
    MODEL_PATH,
    MODEL_VOLUME,
    WeightsPlan,
    weights_of,
)

DIR = Path(__file__).resolve().parents[2] / "examples" / "weights"
#: File → (the source member its artifact uses, the delivery its deployment gets by default).
EXPECTED = {
    "huggingface.yaml": ("huggingFace", "Engine"),
    "modelscope.yaml": ("modelScope", "Engine"),
    "claim.yaml": ("persistentVolumeClaim", "PVC"),
    "image.yaml": ("image", "Image"),
}


def _files() -> list[Path]:
    return sorted(DIR.glob("*.yaml"))


def _docs(path: Path) -> list[dict[str, Any]]:
    return load_documents(path.read_text(), source=str(path))


def _one(path: Path, kind: str) -> dict[str, Any]:
    found = [d for d in _docs(path) if d.get("kind") == kind]
    assert len(found) == 1, f"{path.name}: {len(found)} {kind} documents"
    return found[0]


def _inputs(path: Path) -> list[InputObject]:
    """The file's input objects as the command line reads them (the storage kinds included)."""
    return list(read_bundle([(str(path), path.read_text())]).inputs)


def _deployment(path: Path) -> ModelDeployment:
    md, errs = decode_model(ModelDeployment, _one(path, "ModelDeployment"))
    assert isinstance(md, ModelDeployment), [e.message() for e in errs]
    return md


def test_the_files_are_the_four_sources() -> None:
    assert sorted(p.name for p in _files()) == sorted(EXPECTED)
    assert sorted(source for source, _ in EXPECTED.values()) == sorted(SOURCE_MEMBERS)
    assert (DIR / "README.md").is_file()


@pytest.mark.parametrize("path", _files(), ids=lambda p: p.stem)
def test_each_file_says_what_it_shows_and_how_to_render_it(path: Path) -> None:
    text = path.read_text()
    assert text.startswith("#")
    assert f"gpustack-render render examples/weights/{path.name}" in text


@pytest.mark.parametrize("path", _files(), ids=lambda p: p.stem)
def test_the_artifact_is_resolved_as_the_controller_writes_it(path: Path) -> None:
    artifacts = [o for o in _inputs(path) if isinstance(o, ModelArtifact)]
    assert len(artifacts) == 1
    artifact = artifacts[0]
    source, _ = EXPECTED[path.name]
    assert artifact.spec.source.members() == [source]
    resolved = artifact.status.resolved
    assert resolved is not None and resolved.resolved_time
    cond = artifact.condition("Resolved")
    assert cond is not None and (cond.status, cond.reason) == ("True", "Resolved")
    assert artifact.status.observed_generation == artifact.metadata.generation == 1
    if artifact.spec.source.hub is not None:
        assert re.fullmatch(r"[0-9a-f]{40}", resolved.revision or "")
        assert re.fullmatch(DIGEST_PATTERN, resolved.manifest_digest or "")
        assert resolved.digest_source == "Hub"
        assert (resolved.file_count or 0) > 0 and (resolved.size_bytes or 0) > 0
    else:
        # A claim or an image records when it resolved and nothing else (§1.3).
        assert resolved.model_dump(exclude_none=True) == {"resolved_time": resolved.resolved_time}
    if artifact.spec.source.image is not None:
        assert re.search(r"@sha256:[0-9a-f]{64}$", artifact.spec.source.image.reference)


@pytest.mark.parametrize("path", _files(), ids=lambda p: p.stem)
def test_the_deployment_gets_its_delivery_without_a_block(path: Path) -> None:
    md = _deployment(path)
    inputs = _inputs(path)
    plan = weights_of(md, lookups=StaticLookups.of(inputs), settings=Settings())
    assert isinstance(plan, WeightsPlan), plan
    _, delivery = EXPECTED[path.name]
    assert plan.delivery == delivery
    assert md.spec.model.artifact_ref is not None
    assert plan.artifact.name == md.spec.model.artifact_ref.name


def test_the_hub_example_states_its_reuse_identity() -> None:
    path = DIR / "huggingface.yaml"
    plan = weights_of(
        _deployment(path), lookups=StaticLookups.of(_inputs(path)), settings=Settings()
    )
    assert isinstance(plan, WeightsPlan)
    assert plan.identity in path.read_text()


def test_the_claim_example_allows_its_replicas_to_share_the_claim() -> None:
    """Two replicas mount one claim: without a shared access mode the plan is blocked."""
    path = DIR / "claim.yaml"
    md = _deployment(path)
    assert sum(r.replicas for r in md.spec.roles) > 1
    inputs = _inputs(path)
    claims = [o for o in inputs if isinstance(o, PersistentVolumeClaim)]
    assert [c.bound for c in claims] == [True]
    narrowed = [
        o.model_copy(
            update={
                "spec": o.spec.model_copy(update={"access_modes": ["ReadWriteOnce"]}),
                "status": o.status.model_copy(update={"access_modes": []}),
            }
        )
        if isinstance(o, PersistentVolumeClaim)
        else o
        for o in inputs
    ]
    blocked = weights_of(md, lookups=StaticLookups.of(narrowed), settings=Settings())
    assert getattr(blocked, "reason", None) == "AccessModeConflict"


def _rendered(path: Path) -> list[dict[str, Any]]:
    out, err = io.StringIO(), io.StringIO()
    args = build_parser().parse_args(["render", str(path)])
    assert render_verb.run(args, out, err) == 0, err.getvalue()
    return load_documents(out.getvalue())


@pytest.mark.parametrize("path", _files(), ids=lambda p: p.stem)
def test_each_weights_example_renders(path: Path) -> None:
    pods = [o for o in _rendered(path) if o["kind"] == "Pod"]
    assert pods
    _, delivery = EXPECTED[path.name]
    for pod in pods:
        main = next(c for c in pod["spec"]["containers"] if c["name"] == "main")
        volumes = {v["name"] for v in pod["spec"].get("volumes", [])}
        mounts = {m["mountPath"] for m in main.get("volumeMounts", [])}
        if delivery == "Engine":
            assert CACHE_VOLUME in volumes and CACHE_PATH in mounts
            assert "--revision" in main["command"]
        else:
            assert MODEL_VOLUME in volumes and MODEL_PATH in mounts
            assert MODEL_PATH in main["command"]
