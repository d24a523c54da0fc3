"""docs/autoscaling.md names objects that exist on `make cluster` after `make cluster-demo`
(issue 37, item 7): every deployment, scaler, InstanceType, entrance (ClusterQueue), HPA and
namespace it names concretely is one the examples define or the controller renders from them;
placeholders are written `<…>`."""

from __future__ import annotations

import re
from pathlib import Path

from example_objects import rendered_scalers
from test_examples_agree import definitions

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "autoscaling.md"
#: Where an object name stands in the guide's commands, YAML and sample output.
NAMED = (
    r"mdscaler/([a-z0-9][-a-z0-9]*)",
    r"\bmd/([a-z0-9][-a-z0-9]*)",
    r"kubectl get (?:md|hpa|mdscaler) ([a-z0-9][-a-z0-9]*)",
    r"\s-n ([a-z0-9][-a-z0-9]*)",
    r"instanceType: ([a-z0-9][-a-z0-9]*)",
    r"kind: ModelDeploymentScaler, name: ([a-z0-9][-a-z0-9]*)",
    r"\bscaler ([a-z0-9][-a-z0-9]*-[-a-z0-9]*)",
    r"(gpustack-fnv64-[0-9a-f]{16})",
    r"app\.kubernetes\.io/instance=([a-z0-9][-a-z0-9]*)",
)


def created() -> set[str]:
    """Every name `make cluster-demo` (and the examples the guide applies) creates: the objects
    of examples/, their namespaces and entrances, and the scalers the controller renders."""
    docs = [doc for defs in definitions().values() for _, doc in defs]
    names = {str(d["metadata"]["name"]) for d in docs}
    names |= {str(d["metadata"]["namespace"]) for d in docs if d["metadata"].get("namespace")}
    names |= {str(d["status"]["entrance"]) for d in docs if d["kind"] == "InstanceType"}
    names |= {str(s["metadata"]["name"]) for s in rendered_scalers(docs)}
    return names


def test_every_object_the_autoscaling_guide_names_exists_on_make_cluster() -> None:
    text = DOC.read_text()
    named = {m for pattern in NAMED for m in re.findall(pattern, text)}
    assert {"qwen3-pd-pd", "quota-demo-server", "team-b"} <= named  # the patterns find names
    missing = sorted(named - created())
    assert missing == [], missing
