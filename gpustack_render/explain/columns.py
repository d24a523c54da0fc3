"""Left-aligned text columns: the terminal tables of ``explain -o text`` (the explanation's and
the observed state's)."""

from __future__ import annotations

from collections.abc import Sequence


def table(rows: Sequence[Sequence[str]], *, indent: str = "") -> list[str]:
    """``rows`` (the header first, when there is one) as columns two spaces apart, each line
    after ``indent``, no trailing blanks; a short row leaves its last columns empty."""
    if not rows:
        return []
    widths = [max(len(r[i]) for r in rows if i < len(r)) for i in range(max(map(len, rows)))]
    return [
        (indent + "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row))).rstrip()
        for row in rows
    ]
