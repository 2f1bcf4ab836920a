"""Test time scale: every timing constant of the Runpod target (polls, retry waits, reach and
verdict timeouts, reconcile waits, the gone interval, the deadline margin, the watchdog interval)
is multiplied by `OVERBRAINER_TIME_SCALE` (a float, default 1), so that tests run the real code
paths in milliseconds. A testing aid: users leave it unset. A value that is not a positive number
counts as 1. The user's own limits (`max_hours`, grace minutes) are never scaled."""

from __future__ import annotations

import math
import os


def scaled(seconds: float) -> float:
    """`seconds` × OVERBRAINER_TIME_SCALE (read at each call)."""
    try:
        scale = float(os.environ.get("OVERBRAINER_TIME_SCALE") or 1.0)
    except ValueError:
        scale = 1.0
    if not math.isfinite(scale) or scale <= 0:
        scale = 1.0
    return seconds * scale
