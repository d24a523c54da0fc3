"""Write the generated CRDs into deploy/crds/ (one file per kind). Run via `make crds`."""

from __future__ import annotations

import sys
from pathlib import Path

from gpustack_render.cli.yamlio import dump_yaml_one
from gpustack_render.schema.crd import all_crds, crd_file_name


def main() -> int:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "deploy/crds")
    out.mkdir(parents=True, exist_ok=True)
    wanted = set()
    for crd in all_crds():
        name = crd_file_name(crd)
        wanted.add(name)
        (out / name).write_text(dump_yaml_one(crd), encoding="utf-8")
    for stale in out.glob("*.yaml"):
        if stale.name not in wanted and stale.name != "kustomization.yaml":
            stale.unlink()
    names = sorted(wanted)
    (out / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n"
        + "".join(f"- {n}\n" for n in names),
        encoding="utf-8",
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
