"""How often flows poll a job. Tests shorten it with OVERBRAINER_TEST_POLL_SECS."""

from __future__ import annotations

import os

POLL_SECS = 2.0
FAILURE_BUDGET = 5           # retried polls; the next consecutive failure ends the follow
STOP_GRACE_SECS = 30 * 60    # no snapshot this long after `train stop` asked: cancel
PROOF_GRACE_SECS = 10 * 60   # a proof but the job still runs this long after: cancel


def poll_secs() -> float:
    raw = os.environ.get("OVERBRAINER_TEST_POLL_SECS")
    if raw:
        try:
            value = float(raw)
            if 0 < value <= 60:
                return value
        except ValueError:
            pass
    return POLL_SECS
