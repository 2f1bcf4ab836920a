"""Text tables: cells padded so that every column starts at the same place."""

from __future__ import annotations

import re

_GAP = re.compile(r" {2,}")


def table(rows: list[list[str]], gap: str = "  ") -> list[str]:
    """One line per row, every column but the last padded to its widest cell."""
    count = max((len(r) for r in rows), default=0)
    widths = [max((len(r[i]) for r in rows if i < len(r) - 1), default=0) for i in range(count)]
    return [gap.join(c.ljust(widths[i]) if i < len(r) - 1 else c for i, c in enumerate(r)).rstrip()
            for r in rows]


def realign(lines: list[str], cells: int, filler: str = "-") -> list[str]:
    """Lines whose first `cells - 1` fields are separated by two spaces or more, aligned; a line
    with fewer fields gets `filler` before its last one (a column it has no value for)."""
    rows = []
    for line in lines:
        row = _GAP.split(line, maxsplit=cells - 1)
        while len(row) < cells:
            row.insert(len(row) - 1, filler)
        rows.append(row)
    return table(rows)
