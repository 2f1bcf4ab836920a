"""A testing aid: `OVERBRAINER_TIME_SCALE` shrinks (or stretches) the tool's own waits.

Every timing constant of the Runpod target (polls, reach and verdict timeouts, reconcile waits,
the gone interval, the deadline margin, the watchdog interval, probe waits), and the minute
between a stage's progress lines (front/render_lines.STAGE_INTERVAL), goes through `scaled()`,
so a test can run the real flows with `OVERBRAINER_TIME_SCALE=0.01`. Limits the user sets
(`max_hours`, `boot_grace_minutes`, `retrieve_grace_minutes`) are never scaled.
"""

from __future__ import annotations

import math
import os

from overbrainer.errors import ConfigError

ENV = "OVERBRAINER_TIME_SCALE"


def scaled(seconds: float) -> float:
    """`seconds` times `OVERBRAINER_TIME_SCALE` (a float > 0, default 1; read at each call).

    An unset or empty variable means 1; anything else that is not a finite number > 0 raises
    ConfigError naming the variable.
    """
    raw = os.environ.get(ENV, "").strip()
    if not raw:
        return seconds
    try:
        factor = float(raw)
    except ValueError:
        factor = math.nan
    if not math.isfinite(factor) or factor <= 0:
        raise ConfigError(f"{ENV} must be a number greater than 0 (a testing aid: it scales the tool's waits)")
    return seconds * factor
