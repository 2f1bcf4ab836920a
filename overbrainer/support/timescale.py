"""The tool's own waits, as multiples of one factor.

Every timing constant of the Runpod target (polls, reach and verdict timeouts, reconcile waits,
the gone interval, the deadline margin, the watchdog interval, probe waits), the job poll
(jobs/polling.py) and the minute between a stage's progress lines (front/render_lines.py) go
through `scaled()`. `FACTOR` is 1: nothing in the package or its configuration changes it. The
tests set it, in their own process and in the commands they start (tests/fixtures/timescale.py),
so that the real flows run in milliseconds. Limits the user sets (`max_hours`,
`boot_grace_minutes`, `retrieve_grace_minutes`) are never scaled.
"""

from __future__ import annotations

FACTOR = 1.0


def scaled(seconds: float) -> float:
    """`seconds` times `FACTOR` (read at each call)."""
    return seconds * FACTOR
