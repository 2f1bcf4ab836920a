"""The signals that stopped this process (SIGINT, SIGTERM, SIGHUP), in the order they came: the
one record, noted by the handlers of front/interrupt.Interrupt and cli/stops, read by
cli/main.stopped_code to pick the exit code (the first signal decides). Noted in signal handlers:
no lock, and nothing imported (start-up time)."""

from __future__ import annotations

_received: list[int] = []


def note(signum: int) -> None:
    if signum not in _received:
        _received.append(signum)


def first() -> int | None:
    """The first signal that came, or None."""
    return _received[0] if _received else None


def received(signum: int) -> bool:
    return signum in _received
