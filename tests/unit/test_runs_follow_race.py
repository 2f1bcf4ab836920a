"""The follower stops when its race ends: once the interrupt it follows under is caught (Ctrl-C, or
the client's deadline on a pod, after which the client deletes the pod), the abandoned loop makes
no more calls to the target and logs no `cannot reach the job` warning, even when the call in
flight fails because the target just went away."""

from __future__ import annotations

import threading

from overbrainer.errors import OverbrainerError
from overbrainer.exec.base import JobId
from overbrainer.front.bus import EventBus
from overbrainer.front.interrupt import Interrupt
from overbrainer.jobs.follow import follow
from overbrainer.jobs.run_record import RunRecord

DEADLINE = 10.0


class VanishingTarget:
    """A target that goes away while a poll is in flight: that poll ends the race (the deadline
    trips), and fails once the race has returned (the client deleted the pod meanwhile)."""

    def __init__(self, tripped: threading.Event):
        self.tripped = tripped
        self.race_returned = threading.Event()
        self.calls: list[str] = []
        self.poller: threading.Thread | None = None

    def read_from(self, path: str, offset: int, limit: int) -> bytes:
        self.calls.append("read")
        return b""

    def status(self, job):
        self.calls.append("status")
        self.poller = threading.current_thread()
        self.tripped.set()
        self.race_returned.wait(DEADLINE)
        raise OverbrainerError("connection lost")


def test_the_abandoned_follower_makes_no_call_and_no_warning_once_the_race_ended(caplog):
    caplog.set_level("WARNING", logger="overbrainer")
    tripped = threading.Event()
    target = VanishingTarget(tripped)
    record = RunRecord("r1", "pod", "2026-01-01T00:00:00Z", "/workspace/overbrainer/r1", state="running",
                       job=JobId("/workspace/overbrainer/r1", 4242))
    assert follow(target, record, EventBus(), Interrupt.on(tripped)) is None
    target.race_returned.set()
    target.poller.join(DEADLINE)
    assert not target.poller.is_alive(), "the follower kept running"
    assert target.calls == ["read", "status"]  # nothing after the poll in flight
    assert "cannot reach the job" not in caplog.text
