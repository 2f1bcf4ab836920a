"""The `train stop` limits of a followed training job (docs/runs.md#following-a-job): once its
`snapshot.request` exists (looked for every 30 s; `train stop` starts from its own request), no
proof (`snapshot.json`) 30 min later cancels the job, and a proof but the job still running
10 min later cancels it too. The follow (jobs/follow.py) asks `due` at each poll and runs the
cancel shielded."""

from __future__ import annotations

import logging
import time
from typing import Callable

from overbrainer.errors import OverbrainerError
from overbrainer.support.fmt import duration

log = logging.getLogger(__name__)

REQUEST_CHECK_SECS = 30.0
STOP_GRACE_SECS = 30 * 60    # no snapshot this long after `train stop` asked: cancel
PROOF_GRACE_SECS = 10 * 60   # a proof but the job still runs this long after: cancel


class StopLimits:
    """The limits of one follow of run `run_id`; `stop_since` (monotonic): when `train stop` asked."""

    def __init__(self, run_id: str, stop_since: float | None = None):
        self.run_id = run_id
        self.stop_since = stop_since
        self.proof_since: float | None = None
        self.next_request_check = time.monotonic() + REQUEST_CHECK_SECS

    def due(self, read: Callable[[str], bytes]) -> str | None:
        """Why the job must be cancelled now, or None (a failed read is a warning, and waits)."""
        now = time.monotonic()
        try:
            if self.stop_since is None and now >= self.next_request_check:
                self.next_request_check = now + REQUEST_CHECK_SECS
                if read("snapshot.request").strip():
                    self.stop_since = now
            if self.stop_since is None:
                return None
            if self.proof_since is None and read("snapshot.json").strip():
                self.proof_since = now
        except OverbrainerError as e:
            log.warning("cannot check the snapshot of run %s: %s", self.run_id, e)
            return None
        if self.proof_since is None and now - self.stop_since > STOP_GRACE_SECS:
            return f"no snapshot {duration(STOP_GRACE_SECS, words=True)} after it was asked for: the job was cancelled"
        if self.proof_since is not None and now - self.proof_since > PROOF_GRACE_SECS:
            grace = duration(PROOF_GRACE_SECS, words=True)
            return f"the job still ran {grace} after its snapshot: the job was cancelled"
        return None

    def cancelled(self) -> None:
        self.stop_since = self.proof_since = None
        self.next_request_check = float("inf")
