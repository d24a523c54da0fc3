"""Kinds the command line does not read are skipped with a warning (issue 37, item 6).

Manifests kept for ``kubectl apply`` usually start with their Namespace and hold other objects
beside the deployments (a Deployment, a Secret, a chat-template ConfigMap). Every verb reads
such a file: each document of a kind it does not read is left out with one ``Warning:`` line
naming the file, the document and the kind. What stays an error is what would otherwise drop a
deployment or an input without a word: a kind of the project's group it does not know, one of
its kinds under another apiVersion, a ModelDeploymentScaler, a document with no kind
(docs/cli.md, "Inputs").
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from gpustack_render.cli import __main__ as cli
from gpustack_render.cli import live
from gpustack_render.cli.documents import read_bundle

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "qwen-chat.yaml"
POD_CASE = ROOT / "golden" / "inject-command-only" / "input.yaml"

#: What a person's manifests hold beside the deployment, in this order (documents 1 to 4).
OTHERS = """\
apiVersion: v1
kind: Namespace
metadata:
  name: team-a
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: team-a}
---
apiVersion: v1
kind: Secret
metadata: {name: hf-token, namespace: team-a}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: chat-template, namespace: team-a}
data: {template: "{{ messages }}"}
---
"""


def _warnings(path: Path) -> list[str]:
    return [
        f"Warning: {path}: document 1: skipped Namespace team-a (v1): gpustack-render does not "
        "read this kind",
        f"Warning: {path}: document 2: skipped Deployment web (apps/v1): gpustack-render does "
        "not read this kind",
        f"Warning: {path}: document 3: skipped Secret hf-token (v1): gpustack-render does not "
        "read this kind",
        f"Warning: {path}: document 4: skipped ConfigMap chat-template: only the ConfigMap "
        "gpustack-settings carries Settings",
    ]


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli.main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def manifests(tmp_path: Path) -> Path:
    """The example as a person keeps it: its Namespace first, then other objects, then it."""
    path = tmp_path / "manifests.yaml"
    path.write_text(OTHERS + EXAMPLE.read_text())
    return path


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["render"], id="render"),
        pytest.param(["render", "--summary"], id="render-summary"),
        pytest.param(["admit"], id="admit"),
        pytest.param(["admit", "--summary"], id="admit-summary"),
        pytest.param(["explain"], id="explain"),
        pytest.param(["explain", "-o", "json"], id="explain-json"),
    ],
)
def test_a_file_holding_a_namespace_is_read_by_every_verb(
    argv: list[str], manifests: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The answer is the example's own; each skipped document is one warning, once."""
    expected = run([*argv, str(EXAMPLE)], capsys)
    code, out, err = run([*argv, str(manifests)], capsys)
    assert code == expected[0] == 0, err
    assert out == expected[1].replace(str(EXAMPLE), str(manifests))
    assert err.splitlines() == _warnings(manifests) + expected[2].splitlines()


def test_inject_reads_a_pod_beside_a_namespace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "pod.yaml"
    path.write_text(OTHERS + POD_CASE.read_text())
    expected = run(["inject", str(POD_CASE)], capsys)
    code, out, err = run(["inject", str(path)], capsys)
    assert (code, out) == expected[:2] and code == 0
    assert err.splitlines() == _warnings(path) + expected[2].splitlines()


@pytest.mark.parametrize("verb", ["render", "admit", "explain"])
def test_the_stored_object_of_old_may_hold_a_namespace(
    verb: str, manifests: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run([verb, str(EXAMPLE), "--old", str(manifests)], capsys)
    assert code == 0, err
    assert err.splitlines()[:4] == _warnings(manifests)
    assert len([line for line in err.splitlines() if "skipped Namespace" in line]) == 1


def test_a_directory_of_manifests_is_read_with_its_namespace_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = tmp_path / "manifests"
    directory.mkdir()
    (directory / "00-namespace.yaml").write_text(OTHERS.split("---")[0])
    (directory / "10-qwen-chat.yaml").write_text(EXAMPLE.read_text())
    code, out, err = run(["render", "--summary", "-R", "-f", str(directory)], capsys)
    assert code == 0, err
    assert err.splitlines() == [
        f"Warning: {directory / '00-namespace.yaml'}: document 1: skipped Namespace team-a "
        "(v1): gpustack-render does not read this kind"
    ]
    assert out.split("\t")[:3] == [
        str(directory / "10-qwen-chat.yaml"),
        "team-a/qwen-chat",
        "rendered",
    ]


@pytest.mark.parametrize(
    ("document", "message"),
    [
        pytest.param(
            "apiVersion: worker.gpustack.ai/v1\nkind: ModelDeploymentScaler\n"
            "metadata: {name: qwen-chat-server, namespace: team-a}\n",
            "document 2: a ModelDeploymentScaler is not an input",
            id="scaler",
        ),
        pytest.param(
            "apiVersion: worker.gpustack.ai/v1\nkind: Instancetype\nmetadata: {name: x}\n",
            "document 2: unknown kind worker.gpustack.ai/v1/Instancetype; the kinds of "
            "worker.gpustack.ai are InstanceType, ",
            id="misspelt-kind-of-the-project",
        ),
        pytest.param(
            "apiVersion: worker.gpustack.ai/v1beta1\nkind: InstanceType\nmetadata: {name: x}\n",
            "document 2: worker.gpustack.ai/v1beta1/InstanceType: InstanceType is a kind of "
            "worker.gpustack.ai/v1; correct the apiVersion",
            id="other-version-of-the-project",
        ),
        pytest.param(
            "apiVersion: v1\nkind: ModelDeployment\nmetadata: {name: x}\n",
            "document 2: v1/ModelDeployment: ModelDeployment is a kind of worker.gpustack.ai/v1",
            id="kind-of-the-project-elsewhere",
        ),
        pytest.param(
            "metadata: {name: x}\n", "document 2: has no apiVersion and kind", id="no-kind"
        ),
        pytest.param(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: gpustack-settings}\n"
            "data: {native-sidecars: sometimes}\n",
            "document 2: ConfigMap gpustack-settings: ",
            id="bad-settings",
        ),
        pytest.param(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: [x]\n",
            "document 2: ConfigMap cannot be read: metadata: ",
            id="configmap-metadata-not-an-object",
        ),
    ],
)
def test_what_would_drop_a_deployment_or_an_input_stays_an_error(
    document: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "in.yaml"
    path.write_text(EXAMPLE.read_text().split("---")[0] + "---\n" + document)
    for verb in ("render", "admit", "explain"):
        code, out, err = run([verb, str(path)], capsys)
        assert code == 2 and out == "", (verb, err)
        assert f"{path}: {message}" in err, (verb, err)


def test_a_configmap_of_another_name_is_skipped_without_its_data_read() -> None:
    bundle = read_bundle(
        [
            (
                "in.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: other}\ndata: [not, a, map]\n"
                "---\napiVersion: v1\nkind: ConfigMap\n",
            )
        ]
    )
    assert bundle.skipped == [
        "in.yaml: document 1: skipped ConfigMap other: only the ConfigMap gpustack-settings "
        "carries Settings",
        "in.yaml: document 2: skipped ConfigMap (no name): only the ConfigMap gpustack-settings "
        "carries Settings",
    ]
    assert not bundle.has_settings


def test_the_edited_file_of_live_mode_may_hold_a_namespace(manifests: Path) -> None:
    """The edited file holds exactly the deployment among what the command line reads; a
    Namespace (or another kind it does not read) beside it is a warning."""
    path = manifests.with_name("edited.yaml")
    path.write_text(OTHERS + EXAMPLE.read_text().split("---")[0])
    warnings: list[str] = []
    doc = live.edited_deployment(
        str(path), io.StringIO(), namespace="team-a", name="qwen-chat", warnings=warnings
    )
    assert doc["kind"] == "ModelDeployment" and doc["metadata"]["name"] == "qwen-chat"
    assert ["Warning: " + w for w in warnings] == _warnings(path)
    with pytest.raises(live.LiveError, match="holds exactly the ModelDeployment"):
        live.edited_deployment(str(manifests), io.StringIO(), namespace="team-a", name="qwen-chat")
