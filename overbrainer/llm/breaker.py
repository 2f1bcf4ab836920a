"""The circuit breaker of one provider: stop sending once the provider is plainly unreachable.

Every attempt (each HTTP try, retries included) reports to the breaker. It trips when

- no connection could be made at all: every attempt so far (at least 3) failed the same way,
  connection refused, DNS or TLS, and the provider never answered (a dead port or host is dead
  whatever the concurrency; a timeout or a 5xx is not counted here: a server still loading its
  model says 503), or
- the last `3 × concurrency` attempts all failed the same transport way (connection refused, DNS,
  TLS, timeout, cut off, 5xx) with no answer in between, or
- transport failures went on for `max(10 min, 3 × request timeout)` without one success.

An answer of any kind (even a 4xx or a 429) breaks a streak: the provider is there. Only a
success restarts the clock. Once tripped it stays tripped for the command: no request is sent
any more, and every waiting retry stops at once.

The clock is injectable (`Breaker(clock=...)`), so the time limit is tested without waiting.
"""

from __future__ import annotations

import threading
import time
from typing import Callable

from overbrainer.support.fmt import duration
from overbrainer.support.failure import FailureKind
from overbrainer.support.threads import Signal

MIN_WINDOW = 600.0  # seconds
STREAK_PER_SLOT = 3
# Failures to connect at all (FailureKind.connecting): this many in a row with no answer ever
# trip the breaker.
NEVER_CONNECTED = 3


class Breaker:
    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.limit = STREAK_PER_SLOT  # attempts; set by configure()
        self.window = MIN_WINDOW
        self.tripped = Signal()  # a Signal: a wait that listens to it (llm/pacing.py) ends at once
        self.reason: str | None = None
        self._lock = threading.Lock()
        self._kind: FailureKind | None = None
        self._streak = 0
        self._failing_since: float | None = None
        self._answered_once = False  # the provider answered something in this command

    def configure(self, concurrency: int, request_timeout: float) -> None:
        """Limits for `concurrency` requests in flight (the largest of the roles using it)."""
        with self._lock:
            self.limit = max(self.limit, STREAK_PER_SLOT * max(1, int(concurrency)))
            self.window = max(self.window, MIN_WINDOW, 3.0 * float(request_timeout))

    def success(self) -> None:
        with self._lock:
            self._kind, self._streak, self._failing_since = None, 0, None
            self._answered_once = True

    def answered(self) -> None:
        """The provider answered, but not with a success (e.g. 400, 429): a streak ends."""
        with self._lock:
            self._kind, self._streak = None, 0
            self._answered_once = True

    def failure(self, kind: FailureKind, reason: str) -> bool:
        """A transport failure of `kind`; True when it trips the breaker (`reason` is kept)."""
        now = self.clock()
        with self._lock:
            if self.tripped.is_set():
                return True
            if kind is self._kind:
                self._streak += 1
            else:
                self._kind, self._streak = kind, 1
            if self._failing_since is None:
                self._failing_since = now
            never = not self._answered_once and kind.connecting
            if self._streak >= self.limit or (never and self._streak >= NEVER_CONNECTED):
                why = reason
            elif now - self._failing_since >= self.window:
                why = f"{reason} (no answer for {_duration(now - self._failing_since)})"
            else:
                return False
            self.reason = why
            self.tripped.set()
            return True


def _duration(seconds: float) -> str:
    """Whole minutes (`16 min`), or whole seconds under one."""
    return duration(60 * (seconds // 60) if seconds >= 60 else round(seconds), words=True)
