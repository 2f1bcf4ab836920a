"""The one interruptible sleep (overbrainer/support/sleep.py)."""

from __future__ import annotations

import math
import threading
import time

import pytest

from overbrainer.support.sleep import pause, sleep_until


class Flag:
    """A stop that is no Event (as the provisioning flag): looked at, not waited on."""

    def __init__(self):
        self.set_at = math.inf

    def is_set(self) -> bool:
        return time.monotonic() >= self.set_at


def test_a_pause_lasts_its_time_without_stops():
    start = time.monotonic()
    assert pause(0.05) is False and pause(-1) is False and pause(0, None) is False
    assert time.monotonic() - start >= 0.05


def test_an_event_ends_the_wait_at_once():
    stop = threading.Event()
    threading.Timer(0.05, stop.set).start()
    start = time.monotonic()
    assert pause(30, stop) is True
    assert time.monotonic() - start < 5
    assert pause(30, stop) is True  # already set: at once


def test_a_flag_is_looked_at_and_any_stop_ends_the_wait():
    flag, event = Flag(), threading.Event()
    flag.set_at = time.monotonic() + 0.05
    start = time.monotonic()
    assert pause(30, event, flag) is True  # the Event is waited on, the flag looked at
    assert time.monotonic() - start < 5 and not event.is_set()
    assert pause(0.03, Flag()) is False


def test_until_a_deadline_or_forever_with_a_stop():
    stop = threading.Event()
    start = time.monotonic()
    assert sleep_until(start + 0.05, stop) is False and time.monotonic() - start >= 0.05
    threading.Timer(0.05, stop.set).start()
    assert sleep_until(math.inf, stop) is True
    with pytest.raises(ValueError):
        sleep_until(math.inf)
