"""How often flows poll a job. OVERBRAINER_TIME_SCALE (support.timescale) shrinks it in tests."""

from __future__ import annotations

from overbrainer.support.timescale import scaled

POLL_SECS = 2.0
FAILURE_BUDGET = 5           # retried polls; the next consecutive failure ends the follow
STOP_GRACE_SECS = 30 * 60    # no snapshot this long after `train stop` asked: cancel
PROOF_GRACE_SECS = 10 * 60   # a proof but the job still runs this long after: cancel


def poll_secs() -> float:
    """The poll interval: 2 s, times OVERBRAINER_TIME_SCALE."""
    return scaled(POLL_SECS)
