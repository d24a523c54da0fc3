"""Run every benchmark module in ``bench/`` (each a script with a ``main()``), in name order."""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path


def main() -> int:
    here = Path(__file__).resolve().parent
    status = 0
    for info in sorted(pkgutil.iter_modules([str(here)]), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"bench.{info.name}")
        run = getattr(module, "main", None)
        if run is None:
            continue
        print(f"== bench.{info.name}", flush=True)
        status |= int(run() or 0)
    return status


if __name__ == "__main__":
    sys.exit(main())
