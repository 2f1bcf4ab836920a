"""The one interruptible sleep: until a deadline, or until something that stops the wait is set.

A stop is anything with `is_set()`: a `threading.Event` (waited on directly, so the sleep ends
the moment it is set), the provisioning flag, an `Interrupt`. A stop that is not an Event is
looked at every `POLL` seconds (real time, never scaled). Every wait of the tool that ends early
on Ctrl-C, a caller's stop Event or a tripped circuit breaker goes through here.
"""

from __future__ import annotations

import math
import threading
import time
from typing import Any, Callable

POLL = 0.02  # how often a stop that is not an Event is looked at (seconds)


def sleep_until(deadline: float, *stops: Any, clock: Callable[[], float] = time.monotonic,
                poll: float = POLL) -> bool:
    """Sleep until `clock()` reaches `deadline` (`math.inf`: no deadline) or one of `stops`
    (None entries ignored) is set. True when a stop is set (looked at first, so a stop already
    set returns at once), False when the deadline came. With `clock=time.time` (a deadline on
    the wall clock) and a stop that is looked at, a clock jump is noticed within `poll` s."""
    live = [s for s in stops if s is not None]
    event = next((s for s in live if isinstance(s, threading.Event)), None)
    polled = len(live) > (event is not None)
    while True:
        for stop in live:
            if stop.is_set():
                return True
        left = deadline - clock()
        if left <= 0:
            return False
        step = min(left, poll) if polled else left
        if event is not None:
            event.wait(None if step == math.inf else min(step, threading.TIMEOUT_MAX))
        elif step != math.inf:
            time.sleep(min(step, threading.TIMEOUT_MAX))
        else:  # no deadline and nothing to wait on: nothing could ever end this sleep
            raise ValueError("sleep_until: no deadline and no stop")


def pause(seconds: float, *stops: Any) -> bool:
    """Sleep `seconds` (≤ 0: not at all) or until a stop is set; True when a stop is set."""
    return sleep_until(time.monotonic() + max(seconds, 0.0), *stops)
