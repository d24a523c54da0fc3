"""Benchmarks: ``python -m bench`` runs every module of this package; each prints ``key=value``
pairs on its last line (figures are ratios against an in-run baseline where one exists)."""

import sys
from pathlib import Path

#: The repository root; the benchmarks drive the integration harness under tests/, which is
#: importable as ``integration`` once tests/ is on the path (put there once, for every module).
REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "tests"))
