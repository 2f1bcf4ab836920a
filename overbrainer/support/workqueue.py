"""A work queue that keeps `concurrency` calls in flight at all times.

Worker threads (daemons, so an abandoned call never holds the process at exit) take the next item
as soon as they finish one — no slice waits for its slowest call. Every result comes back to the
one thread that iterates the queue, which is therefore the single writer of the stage's files.
The stages do not use it directly: support/processor.py runs their work on it.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Generic, Iterable, Iterator, TypeVar

from overbrainer.support import address_space
from overbrainer.support.threads import Signal, listen_all, unlisten_all

log = logging.getLogger(__name__)

T = TypeVar("T")

# How often a wait looks at a plain threading.Event it was given (interrupt, halt): a
# support.threads.Signal wakes the waits when it is set, and nothing is polled.
_POLL = 0.1


@dataclass
class Outcome(Generic[T]):
    item: T
    value: Any = None
    error: BaseException | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


class WorkQueue(Generic[T]):
    """`for outcome in WorkQueue(fn, items, concurrency, stop_event).results(): ...`

    `fn(item)` runs on a worker thread; its return value or exception is yielded as an Outcome
    in completion order. `items` may be any iterable, a generator reading a file included: a
    feeding thread (the only one that touches it) keeps `concurrency` items queued ahead of the
    workers, and at most twice `concurrency` items between the feeding and the consuming (queued,
    in flight, or done and not yet yielded): memory holds what is in flight, never the whole
    work, whichever side is slower (`count`: how many items there are, when `items` has no
    len; it only sizes the thread pool). An error raised by `items` ends the feeding: what was fed still
    runs, and `source_error` holds it for the caller. `stop()` makes the workers take no new
    item; calls already running finish on their own (their outcomes can still be collected with
    `drain()`). Setting `halt` (an Event a worker may set) also makes them take no new item,
    while `results()` goes on yielding what comes back.

    Every thread waits on a Condition of the queue's one lock: an item queued, room made, an
    outcome back, or a stop (`stop()`, or a `Signal` given as `interrupt` or `halt` being set)
    wakes exactly the waits it concerns; no wait has a timeout unless a plain Event was given.
    """

    def __init__(self, fn: Callable[[T], Any], items: Iterable[T], concurrency: int, *,
                 interrupt: threading.Event | None = None, halt: threading.Event | None = None,
                 name: str = "work", count: int | None = None):
        self._fn = fn
        self._source = iter(items)
        if count is None and hasattr(items, "__len__"):
            count = len(items)  # type: ignore[arg-type]
        self._ahead = max(1, int(concurrency))
        lock = threading.RLock()  # a Signal set under it wakes the waits through `_wake`
        self._cond = threading.Condition(lock)  # workers wait here for an item
        self._room = threading.Condition(lock)  # the feeder waits here for room
        self._ready = threading.Condition(lock)  # the consumer waits here for an outcome
        self._pending: collections.deque = collections.deque()
        self._out: collections.deque = collections.deque()  # outcomes not yielded yet
        self._exhausted = False
        self._fed = 0
        self.source_error: BaseException | None = None
        self._stopped = Signal()
        self._halt = halt if halt is not None else self._stopped
        self._busy = 0
        self._interrupt = interrupt
        self._yielded = 0
        self._nudged = False  # `nudge()` called: the consumer runs `idle()`
        self._events = (self._stopped, self._halt, interrupt)
        self._timeout = None if listen_all(self._events, self._wake) else _POLL
        n = self._ahead if count is None else max(0, min(self._ahead, int(count)))
        self._threads = [threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True) for i in range(n)]
        if self._threads:
            self._threads.append(threading.Thread(target=self._feed, name=f"{name}-feed", daemon=True))
        self._started = False

    def _wake(self) -> None:
        """A stop event was set: every wait looks again."""
        with self._cond:
            self._cond.notify_all()
            self._room.notify_all()
            self._ready.notify_all()

    def _work(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._exhausted and not self._halted():
                    self._cond.wait(self._timeout)
                if self._halted() or not self._pending:
                    return
                item = self._pending.popleft()
                self._busy += 1  # with the take, under one lock: `in_flight` never misses it
                self._room.notify()
            try:
                outcome = Outcome(item, value=self._fn(item))
            except BaseException as e:  # noqa: BLE001 - handed to the consumer
                outcome = Outcome(item, error=e)
            with self._cond:  # queued and no longer busy at once: `drain` sees one or the other
                self._out.append(outcome)
                self._busy -= 1
                self._ready.notify()

    def _halted(self) -> bool:
        return self._stopped.is_set() or self._halt.is_set()

    def _feed(self) -> None:
        """The feeding thread: keep `concurrency` items queued ahead of the workers."""
        try:
            while True:
                with self._room:
                    while not self._halted() and (len(self._pending) >= self._ahead
                                                  or self._fed - self._yielded >= 2 * self._ahead):
                        self._room.wait(self._timeout)
                    if self._halted():
                        return
                try:
                    item = next(self._source)
                except StopIteration:
                    return
                with self._cond:
                    self._pending.append(item)
                    self._fed += 1
                    self._cond.notify()
        except Exception as e:  # noqa: BLE001 - the caller raises it once the fed work is kept
            self.source_error = e
        finally:
            with self._cond:
                self._exhausted = True
                self._cond.notify_all()  # the workers end once the queue is empty
                self._ready.notify_all()

    def _done(self) -> bool:
        return self._exhausted and self._yielded >= self._fed and not self._out

    def _interrupted(self) -> bool:
        return self._stopped.is_set() or (self._interrupt is not None and self._interrupt.is_set())

    @property
    def in_flight(self) -> int:
        """Items taken by a worker whose outcome is not queued yet (calls still running)."""
        return self._busy

    def _start(self) -> None:
        if not self._started:
            self._started = True
            address_space.fit()
            for t in self._threads:
                t.start()

    def results(self, idle: Callable[[], None] | None = None) -> Iterator[Outcome[T]]:
        """Yield every outcome as it completes. Returns early (without error) when the
        interrupt event is set or `stop()` was called. `idle()` runs on the consuming thread
        whenever `nudge()` woke it with no outcome waiting (the processor's writes handed by
        workers)."""
        if not self._threads:
            return
        self._start()
        while True:
            with self._ready:
                while not self._out and not self._done() and not self._interrupted() and not self._nudged:
                    self._ready.wait(self._timeout)
                nudged, self._nudged = self._nudged, False
                if self._interrupted() or (not self._out and (not nudged or self._done())):
                    return
                outcome = self._out.popleft() if self._out else None
                if outcome is not None:
                    self._yielded += 1
                    self._room.notify()
            if outcome is None:
                if idle is not None:
                    idle()
                continue
            yield outcome

    def nudge(self) -> None:
        """Wake the consuming thread's wait: `results()` runs its `idle()` once (a worker handed it
        something to do)."""
        with self._ready:
            self._nudged = True
            self._ready.notify()

    def stop(self) -> None:
        self._stopped.set()  # a Signal: wakes every wait
        unlisten_all(self._events, self._wake)
        self._wake()

    def drain(self, until: float | None = None, abandon: Callable[[], bool] | None = None,
              events: Iterable[threading.Event | None] = ()) -> Iterator[Outcome[T]]:
        """Stop the queue and yield the outcomes not collected yet: those already completed, and,
        until the monotonic time `until` (None: no wait) or until `abandon()` says so, those of
        the calls still running as they complete. `events`: those `abandon()` reads (a Signal
        among them wakes the wait when set). `in_flight` afterwards is the calls abandoned."""
        self.stop()
        events = tuple(events)
        polled = not listen_all(events, self._wake)
        try:
            while (outcome := self._next(until, abandon, _POLL if polled else self._timeout)) is not None:
                yield outcome
        finally:
            unlisten_all(events, self._wake)

    def _next(self, until: float | None, abandon: Callable[[], bool] | None,
              poll: float | None) -> Outcome[T] | None:
        with self._ready:
            while True:
                if self._out:
                    self._yielded += 1
                    return self._out.popleft()
                if self._busy == 0 or until is None or (abandon is not None and abandon()):
                    return None
                remaining = until - time.monotonic()
                if remaining <= 0:
                    return None
                self._ready.wait(remaining if poll is None else min(remaining, poll))
