"""The work queue's waits (support/workqueue.py): every thread of it waits on a Condition that what
it waits for notifies (an item, room, an outcome, a stop set as a support.threads.Signal), never
on a timeout that polls; a plain Event given as the interrupt is still seen. The waits are
counted, not timed."""

from __future__ import annotations

import threading
import time
import types

from overbrainer.support import workqueue
from overbrainer.support.threads import Signal
from overbrainer.support.workqueue import WorkQueue

JOIN = 10.0  # seconds a finished thread is given to end: only reached when the test fails


class Recording(threading.Condition):
    """A Condition that records the timeout of every wait and counts the wake-ups."""

    waits: list[float | None] = []
    wakeups = 0

    def wait(self, timeout=None):
        Recording.waits.append(timeout)
        try:
            return super().wait(timeout)
        finally:
            Recording.wakeups += 1


def recorded(monkeypatch) -> list[float | None]:
    """The queue's module sees Recording as threading.Condition (nothing else does)."""
    Recording.waits, Recording.wakeups = [], 0
    fake = types.SimpleNamespace(**{name: getattr(threading, name) for name in ("RLock", "Lock", "Thread", "Event")},
                                 Condition=Recording)
    monkeypatch.setattr(workqueue, "threading", fake)
    return Recording.waits


class Blocked:
    """`fn` of a queue: each call says it started, then waits for `release`."""

    def __init__(self):
        self.started = threading.Semaphore(0)
        self.release = threading.Event()

    def __call__(self, item):
        self.started.release()
        self.release.wait()
        return item * 2


def consume(q: WorkQueue, out: list) -> threading.Thread:
    t = threading.Thread(target=lambda: out.extend(o.value for o in q.results()), daemon=True)
    t.start()
    return t


def test_no_wait_polls_and_nothing_wakes_while_the_calls_run(monkeypatch):
    waits = recorded(monkeypatch)
    fn, out = Blocked(), []
    q = WorkQueue(fn, range(2), 2, interrupt=Signal(), name="wq")
    consumer = consume(q, out)
    assert fn.started.acquire(timeout=JOIN) and fn.started.acquire(timeout=JOIN)  # both workers busy
    for feeder in [t for t in threading.enumerate() if t.name == "wq-feed"]:
        feeder.join(JOIN)  # all fed: from now on only the consumer waits, for an outcome
    time.sleep(0.2)  # the consumer back in its wait after the feeder's last notify
    before = Recording.wakeups
    time.sleep(0.5)  # five polls of the old 0.1 s loop; a notified wait has nothing to wake it
    assert Recording.wakeups == before
    fn.release.set()
    consumer.join(JOIN)
    q.stop()
    assert not consumer.is_alive() and sorted(out) == [0, 2]
    assert waits and set(waits) == {None}  # every wait was woken by a notify, none timed out


def test_a_signal_set_wakes_the_waiting_consumer_at_once(monkeypatch):
    waits = recorded(monkeypatch)
    fn, out, interrupt = Blocked(), [], Signal()
    q = WorkQueue(fn, range(3), 1, interrupt=interrupt)
    consumer = consume(q, out)
    assert fn.started.acquire(timeout=JOIN)
    interrupt.set()
    consumer.join(JOIN)
    assert not consumer.is_alive() and out == []
    assert set(waits) == {None}
    q.stop()  # nothing new is taken
    fn.release.set()
    assert [o.value for o in q.drain(time.monotonic() + JOIN)] == [0]  # the call in flight comes back
    assert q.in_flight == 0


def test_a_plain_event_as_the_interrupt_is_still_seen():
    fn, out, interrupt = Blocked(), [], threading.Event()
    q = WorkQueue(fn, range(3), 1, interrupt=interrupt)
    consumer = consume(q, out)
    assert fn.started.acquire(timeout=JOIN)
    interrupt.set()  # wakes no one: the queue looks at it now and then
    consumer.join(JOIN)
    assert not consumer.is_alive() and out == []
    fn.release.set()


def test_abandoning_the_drain_wakes_it_without_waiting_for_the_calls(monkeypatch):
    waits = recorded(monkeypatch)
    fn, abandon = Blocked(), Signal()
    q = WorkQueue(fn, range(2), 2)
    consumer = consume(q, [])
    assert fn.started.acquire(timeout=JOIN) and fn.started.acquire(timeout=JOIN)
    drained: list = []
    t = threading.Thread(target=lambda: drained.extend(q.drain(time.monotonic() + 3600, abandon.is_set, (abandon,))),
                         daemon=True)
    t.start()
    abandon.set()
    t.join(JOIN)
    assert not t.is_alive() and drained == [] and q.in_flight == 2
    assert all(w is None or w > 60 for w in waits)  # the drain waits for its deadline, not a poll
    fn.release.set()
    consumer.join(JOIN)
