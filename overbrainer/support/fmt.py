"""One way to write a duration, a byte count, a moment, a count, a table and an amount of money,
for every message and file.

- `duration(seconds)`: `0.05s`, `1.3s`, `45s`, `12m05s`, `3h07m` (a zero last unit is left
  out: `30m`, `2h`); under 10 s with one decimal (two under 0.1 s), else whole seconds, and two
  units at most (the rest cut, not rounded). `words=True` spells the units for prose and
  sentences: `0.5 s`, `45 s`, `12 min 05 s`, `3 h 07 min`, `30 min`.
- `size(n)`: decimal units, `12 B`, `100.0 kB`, `1.5 MB`, `4.1 GB`, `2.0 TB`.
- `stamp(when=None)`: RFC 3339 in UTC with `Z`, to the second: `2026-09-22T14:30:05Z`, of a
  Unix time, an aware datetime (a naive one is local time), or now.
- `plural(n, word)`: a count in words, `1 subtopic`, `2 subtopics`, `0 answers`.
- `table(rows)`, `realign(lines, cells)`: text tables, cells padded so that every column starts at
  the same place.
- Money (what a pod, or any target, costs): `usd(amount)`: `$0.64`, `$19.00`, and `<$0.01` for
  an amount under a cent but above zero; `usd_per_hour(rate)`: `$0.53/h`, or `-` for no known
  rate (None, zero, or not a finite number); `about_usd(amount)`: `about $0.64` (a spend estimated
  from the local clock), or `cost unknown` for None.
"""

from __future__ import annotations

import math
import re
import time
from typing import Any

_UNITS = {False: ("h", "m", "s", ""), True: ("h", "min", "s", " ")}


def duration(seconds: float, *, words: bool = False) -> str:
    hours, minutes, secs, gap = _UNITS[words]
    seconds = max(float(seconds), 0.0)
    if seconds < 10:
        text = f"{seconds:.2f}" if 0 < seconds < 0.1 else f"{seconds:.1f}"
        text = text.rstrip("0").rstrip(".") if "." in text else text
        return f"{text}{gap}{secs}"
    whole = int(round(seconds))
    if whole < 60:
        return f"{whole}{gap}{secs}"
    if whole < 3600:
        big, small, units = whole // 60, whole % 60, (minutes, secs)
    else:
        big, small, units = whole // 3600, whole % 3600 // 60, (hours, minutes)
    head = f"{big}{gap}{units[0]}"
    if not small:
        return head
    return f"{head}{' ' if words else ''}{small:02d}{gap}{units[1]}"


def size(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if abs(n) < 1000:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


def stamp(when: "float | Any | None" = None) -> str:
    if when is not None and not isinstance(when, (int, float)):
        when = when.timestamp()  # a datetime (not imported here: start-up time)
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() if when is None else when))


_IRREGULAR = {"entry": "entries", "is": "are", "was": "were"}


def plural(n: int, word: str, many: str | None = None) -> str:
    """`n word` with the word in the plural unless n is 1 (`many` when the plural is irregular)."""
    if n == 1:
        return f"{n} {word}"
    return f"{n} {many or _IRREGULAR.get(word) or word + 's'}"


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


def usd(amount: float) -> str:
    if 0 < amount < 0.005:
        return "<$0.01"
    return f"${amount:.2f}"


def usd_per_hour(rate: float | None) -> str:
    if rate is None or isinstance(rate, bool) or not math.isfinite(rate) or rate <= 0:
        return "-"
    return f"${float(rate):.2f}/h"


def about_usd(amount: float | None) -> str:
    return "cost unknown" if amount is None else f"about {usd(amount)}"
