"""Benchmarks: ``python -m bench`` runs every module of this package; each prints ``key=value``
pairs on its last line (figures are ratios against an in-run baseline where one exists)."""
