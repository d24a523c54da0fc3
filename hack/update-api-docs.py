"""Write docs/api.md from the models. Run via `make docs`."""

from __future__ import annotations

import sys
from pathlib import Path

from gpustack_render.reconcile.readinessdoc import readiness_reference
from gpustack_render.schema.apidoc import api_reference

#: What docs/api.md holds beyond the models' fields, by kind (tests/unit/test_docs.py reads it).
EXTRA = {"ModelDeployment": readiness_reference()}


def main() -> int:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/api.md")
    out.write_text(api_reference(EXTRA), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
