"""Rendering manifests with the real tools the envtest build provides (kubectl kustomize, helm).

Synchronous helpers shared by the packaging tests: each runs one command and returns the YAML
stream it printed as plain dicts.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

Objects = list[dict[str, Any]]


def yaml_stream(text: str) -> Objects:
    """Every non-empty document of a YAML stream."""
    return [dict(doc) for doc in YAML(typ="safe", pure=True).load_all(text) if doc]


def run(*argv: str | Path, timeout: float = 120) -> str:
    """Run a command; its stdout (a failure shows the command's stderr)."""
    result = subprocess.run(
        [str(a) for a in argv], capture_output=True, text=True, timeout=timeout, check=False
    )
    assert result.returncode == 0, f"{' '.join(map(str, argv))}:\n{result.stderr}"
    return result.stdout


def kustomize_overlay(
    kubectl: Path, workdir: Path, resources: Sequence[Path], components: Sequence[Path] = ()
) -> Objects:
    """``kubectl kustomize`` of an overlay in ``workdir`` over ``resources`` and ``components``."""
    workdir.mkdir(parents=True, exist_ok=True)

    def rel(path: Path) -> str:  # kustomize refuses absolute paths
        return os.path.relpath(path, workdir)

    lines = ["apiVersion: kustomize.config.k8s.io/v1beta1", "kind: Kustomization", "resources:"]
    lines += [f"  - {rel(p)}" for p in resources]
    if components:
        lines.append("components:")
        lines += [f"  - {rel(p)}" for p in components]
    (workdir / "kustomization.yaml").write_text("\n".join(lines) + "\n")
    return yaml_stream(run(kubectl, "kustomize", workdir))
