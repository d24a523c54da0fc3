"""Write docs/explain.schema.json from gpustack_render.explain.schema. Run via `make docs`."""

from __future__ import annotations

import sys
from pathlib import Path

from gpustack_render.explain.schema import schema_text


def main() -> int:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/explain.schema.json")
    out.write_text(schema_text(), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
