"""A work queue that keeps `concurrency` calls in flight at all times.

Worker threads (daemons, so an abandoned call never holds the process at exit) take the next item
as soon as they finish one — no slice waits for its slowest call. Every result comes back to the
one thread that iterates the queue, which is therefore the single writer of the stage's files.
The stages do not use it directly: support/processor.py runs their work on it.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Generic, Iterable, Iterator, TypeVar

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
    in completion order. `stop()` makes the workers take no new item; calls already running
    finish on their own (their outcomes can still be collected with `drain()`). Setting `halt`
    (an Event a worker may set) also makes them take no new item, while `results()` goes on
    yielding what comes back.
    """

    def __init__(self, fn: Callable[[T], Any], items: Iterable[T], concurrency: int, *,
                 interrupt: threading.Event | None = None, halt: threading.Event | None = None,
                 name: str = "work"):
        self._fn = fn
        self._items: queue.SimpleQueue = queue.SimpleQueue()
        self._count = 0
        for item in items:
            self._items.put(item)
            self._count += 1
        self._results: queue.SimpleQueue = queue.SimpleQueue()
        self._stopped = threading.Event()
        self._halt = halt if halt is not None else self._stopped
        self._lock = threading.Lock()
        self._busy = 0
        self._interrupt = interrupt
        self._outstanding = self._count
        n = max(1, min(int(concurrency), self._count))
        self._threads = [
            threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True) for i in range(n)
        ] if self._count else []
        self._started = False

    def __len__(self) -> int:
        return self._count

    def _work(self) -> None:
        while not self._stopped.is_set() and not self._halt.is_set():
            with self._lock:
                self._busy += 1
            try:
                item = self._items.get_nowait()
            except queue.Empty:
                with self._lock:
                    self._busy -= 1
                return
            try:
                value = self._fn(item)
            except BaseException as e:  # noqa: BLE001 - handed to the consumer
                self._results.put(Outcome(item, error=e))
            else:
                self._results.put(Outcome(item, value=value))
            with self._lock:
                self._busy -= 1

    @property
    def in_flight(self) -> int:
        """Items taken by a worker whose outcome is not queued yet (calls still running)."""
        return self._busy

    def _start(self) -> None:
        if not self._started:
            self._started = True
            for t in self._threads:
                t.start()

    def results(self) -> Iterator[Outcome[T]]:
        """Yield every outcome as it completes. Returns early (without error) when the
        interrupt event is set or `stop()` was called."""
        self._start()
        while self._outstanding > 0:
            if self._stopped.is_set() or (self._interrupt is not None and self._interrupt.is_set()):
                return
            try:
                outcome = self._results.get(timeout=_POLL)
            except queue.Empty:
                continue
            self._outstanding -= 1
            yield outcome

    def stop(self) -> None:
        self._stopped.set()

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
            self._outstanding -= 1
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
