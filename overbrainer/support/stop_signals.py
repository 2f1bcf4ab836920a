"""The signals that stopped this process (SIGINT, SIGTERM, SIGHUP), in the order they came: the
one record, noted by the handlers of front/interrupt.Interrupt and cli/stops, read by
cli/main.stopped_code to pick the exit code (the first signal decides). Noted in signal handlers:
no lock, and nothing imported but `time` (start-up time).

**A repeat is not a second interrupt.** Cron, CI and service managers often deliver one stop
twice: GNU `timeout` sends its signal to the command and then to the command's process group
(the command again), a CI runner signals the whole group of a job's shell. So the same signal
again within `REPEAT` seconds of the last one that counted is the same stop (`note` returns
False), whichever handler gets it (an Interrupt's, or cli/stops' once the Interrupt is gone); a
later one, or another signal, is a separate interrupt (a second Ctrl-C: the requests in flight
are abandoned)."""

from __future__ import annotations

import time

REPEAT = 1.0  # seconds: the same signal again within this is the same stop, delivered twice

_received: list[int] = []
_counted: dict[int, float] = {}  # signal -> when it last counted as a stop (time.monotonic)


def note(signum: int) -> bool:
    """Record `signum` (once per delivery); True when it is a new stop, False when it repeats the
    last one that counted within REPEAT seconds."""
    now = time.monotonic()
    if signum not in _received:
        _received.append(signum)
    last = _counted.get(signum)
    if last is not None and now - last < REPEAT:
        return False
    _counted[signum] = now
    return True


def forget() -> None:
    """Back to a new process's record (tests that run commands in-process)."""
    _received.clear()
    _counted.clear()


def first() -> int | None:
    """The first signal that came, or None."""
    return _received[0] if _received else None

