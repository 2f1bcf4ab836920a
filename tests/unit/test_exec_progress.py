"""The byte meter of a transfer: start, throttled middle, end; never past its total."""

from __future__ import annotations

from overbrainer.exec.transfer import PROGRESS_SECS, Meter


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_a_meter_reports_the_start_at_most_one_line_per_interval_and_the_end():
    clock, seen = Clock(), []
    m = Meter(lambda done, total: seen.append((done, total)), 1000, clock=clock)
    for _ in range(5):  # within one interval: nothing new
        m.add(10)
    clock.now += PROGRESS_SECS
    m.add(10)
    clock.now += PROGRESS_SECS
    m.add(2000)  # tar headers and padding: shown as the total, never more
    m.finish()
    assert seen == [(0, 1000), (60, 1000), (1000, 1000), (1000, 1000)]


def test_an_unknown_total_ends_with_the_bytes_moved_and_a_failing_callback_is_harmless():
    clock, seen = Clock(), []
    m = Meter(lambda done, total: seen.append((done, total)), None, clock=clock)
    clock.now += PROGRESS_SECS
    m.add(7)
    m.finish()
    assert seen == [(0, None), (7, None), (7, 7)]

    def broken(done, total):
        raise RuntimeError("display gone")

    m = Meter(broken, 5, clock=clock)
    m.add(5)
    m.finish()
    assert m.done == 5
