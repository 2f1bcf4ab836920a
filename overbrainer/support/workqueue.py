"""A work queue that keeps `concurrency` calls in flight at all times.

Worker threads (daemons, so an abandoned call never holds the process at exit) take the next item
as soon as they finish one — no slice waits for its slowest call. Every result comes back to the
one thread that iterates the queue, which is therefore the single writer of the stage's files.
The stages do not use it directly: support/processor.py runs their work on it.
"""

from __future__ import annotations

import collections
import logging
import queue
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Generic, Iterable, Iterator, TypeVar

from overbrainer.support import address_space

log = logging.getLogger(__name__)

T = TypeVar("T")

_POLL = 0.1  # how often the consumer looks at the stop/interrupt event while it waits


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
    """

    def __init__(self, fn: Callable[[T], Any], items: Iterable[T], concurrency: int, *,
                 interrupt: threading.Event | None = None, halt: threading.Event | None = None,
                 name: str = "work", count: int | None = None):
        self._fn = fn
        self._source = iter(items)
        if count is None and hasattr(items, "__len__"):
            count = len(items)  # type: ignore[arg-type]
        self._ahead = max(1, int(concurrency))
        lock = threading.Lock()
        self._cond = threading.Condition(lock)  # workers wait here for an item
        self._room = threading.Condition(lock)  # the feeder waits here for room
        self._pending: collections.deque = collections.deque()
        self._exhausted = False
        self._fed = 0
        self.source_error: BaseException | None = None
        self._results: queue.SimpleQueue = queue.SimpleQueue()
        self._stopped = threading.Event()
        self._halt = halt if halt is not None else self._stopped
        self._busy = 0
        self._interrupt = interrupt
        self._yielded = 0
        n = self._ahead if count is None else max(0, min(self._ahead, int(count)))
        self._threads = [threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True) for i in range(n)]
        if self._threads:
            self._threads.append(threading.Thread(target=self._feed, name=f"{name}-feed", daemon=True))
        self._started = False

    def _work(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._exhausted and not self._halted():
                    self._cond.wait(_POLL)  # `halt` is set without a notify
                if self._halted() or not self._pending:
                    return
                item = self._pending.popleft()
                self._busy += 1  # with the take, under one lock: `in_flight` never misses it
                self._room.notify()
            try:
                value = self._fn(item)
            except BaseException as e:  # noqa: BLE001 - handed to the consumer
                self._results.put(Outcome(item, error=e))
            else:
                self._results.put(Outcome(item, value=value))
            with self._cond:
                self._busy -= 1

    def _halted(self) -> bool:
        return self._stopped.is_set() or self._halt.is_set()

    def _feed(self) -> None:
        """The feeding thread: keep `concurrency` items queued ahead of the workers."""
        try:
            while True:
                with self._room:
                    while not self._halted() and (len(self._pending) >= self._ahead
                                                  or self._fed - self._yielded >= 2 * self._ahead):
                        self._room.wait(_POLL)
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

    def _done(self) -> bool:
        with self._cond:
            return self._exhausted and self._yielded >= self._fed

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
        interrupt event is set or `stop()` was called. `idle()` runs on the consuming thread at
        each poll that found no outcome (the processor's writes handed by workers)."""
        if not self._threads:
            return
        self._start()
        while not self._done():
            if self._stopped.is_set() or (self._interrupt is not None and self._interrupt.is_set()):
                return
            try:
                outcome = self._results.get(timeout=_POLL)
            except queue.Empty:
                if idle is not None:
                    idle()
                continue
            with self._room:
                self._yielded += 1
                self._room.notify()
            yield outcome

    def stop(self) -> None:
        self._stopped.set()
        with self._cond:
            self._cond.notify_all()
            self._room.notify_all()

    def drain(self, until: float | None = None,
              abandon: Callable[[], bool] | None = None) -> Iterator[Outcome[T]]:
        """Stop the queue and yield the outcomes not collected yet: those already completed, and,
        until the monotonic time `until` (None: no wait) or until `abandon()` says so, those of
        the calls still running as they complete. `in_flight` afterwards is the calls abandoned."""
        self.stop()
        while True:
            outcome = self._next(until, abandon)
            if outcome is None:
                return
            self._yielded += 1
            yield outcome

    def _next(self, until: float | None, abandon: Callable[[], bool] | None) -> Outcome[T] | None:
        while True:
            busy = self._busy  # read first: a worker queues its outcome before it leaves `busy`
            try:
                return self._results.get_nowait()
            except queue.Empty:
                pass
            if busy == 0 or until is None or (abandon is not None and abandon()):
                return None
            remaining = until - time.monotonic()
            if remaining <= 0:
                return None
            try:
                return self._results.get(timeout=min(remaining, _POLL / 2))
            except queue.Empty:
                continue
