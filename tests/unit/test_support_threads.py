"""support/threads.py: a call on a daemon thread as a Future (it never holds the process at exit,
where a ThreadPoolExecutor's thread would), and the Signal that wakes its listeners."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest

from overbrainer.support.threads import Signal, in_daemon, listen_all, unlisten_all

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_the_future_holds_the_value_or_the_error():
    assert in_daemon("t", lambda a, b=0: a + b, 2, b=3).result(timeout=10) == 5
    failing = in_daemon("t", lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        failing.result(timeout=10)
    assert isinstance(in_daemon("t", sys.exit, 3).exception(timeout=10), SystemExit)


def test_a_hung_call_does_not_hold_the_process_at_exit():
    hung = ("import threading\nfrom overbrainer.support.threads import in_daemon\n"
            "in_daemon('hung', threading.Event().wait)\nprint('main done')\n")
    done = subprocess.run([sys.executable, "-c", hung], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": ROOT})
    assert (done.returncode, done.stdout) == (0, "main done\n")


def test_a_signal_calls_its_listeners_and_a_plain_event_is_said_to_be_polled():
    a, b, woken = Signal(), Signal(), []
    assert listen_all([a, None, b], lambda: woken.append(1)) is True
    a.set()
    b.set()
    assert woken == [1, 1] and a.is_set()
    unlisten_all([a, b], woken.clear)  # not a listener: nothing happens
    assert listen_all([a, threading.Event()], lambda: None) is False
