"""The request processor: the one loop of every stage that sends requests (the pipeline's
`subtopics`, `questions` and `answers`, the compare judge).

A stage supplies its work — the items, `send(item)` (the request or requests of one item, run on
a worker thread) and `keep(item, value)` (write and count one result, run on the thread that
called `run`, the single writer of the stage's files) — and the processor does the rest once:

- `concurrency` items in flight at all times (support/workqueue.py);
- **one writer**: a worker whose item sends several requests (the list stages) hands each answer's
  records to the processing thread (`hand(write)`), which writes them as they come (the queue
  wakes it: `WorkQueue.nudge`), before the item's own result, and those handed before a stop too; once it stops
  keeping, `hand` raises Interrupted (what it held is dropped, as an abandoned request's is);
- every error classified by the stage's `classify(error)`: `ITEM` counts the item as failed
  (`tally.item_failed`) and the stage goes on; `FATAL` stops it (`tally.item_stopped` counts the
  item that met it); `RAISE` stops it and is raised once the results are kept;
- a stop (fatal error, the user's interrupt, the spend cap, an unexpected error) sends nothing
  new: workers ask `admit()` before each send, which raises `Interrupted` once the processor is
  stopping, and a worker that meets a fatal or unexpected error stops the sending itself, before
  the processing thread has taken that error;
- **a stop keeps what was paid for**: every result that came back before the stop goes through
  `keep` like any other, and the requests still in flight get `grace` seconds to come back and
  be kept too (`_drain`); a set `abandon` Event (a second Ctrl-C) ends that wait at once. What is
  still out then is `Ending.abandoned`;
- **the spend cap**: with a `Budget`, `admit(bound)` holds the request's upper bound (USD) (a
  request that does not fit beside those in flight waits for them) and refuses the request that
  would not fit with none in flight; the work then stops with `SpendCapReached` as its error.
  The worker gives the bound back with what the request cost (`settle`).

A stop when the provider is unreachable is a `FATAL` like any other.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Generic, Iterable, Protocol, TypeVar

from overbrainer.errors import Interrupted
from overbrainer.support.budget import Budget
from overbrainer.support.threads import Signal
from overbrainer.support.workqueue import Outcome, WorkQueue

log = logging.getLogger(__name__)

T = TypeVar("T")

FATAL = "fatal"  # stop the work; the item is not counted as failed
ITEM = "item"  # count the item as failed and go on
RAISE = "raise"  # not a request's failure (a bug, a disk error): stop, keep, then raise it

STOPPING = "stopping: no new request is sent"


class Tally(Protocol):
    """What the processor reports about items it could not keep (a stage's StageRun)."""

    def item_failed(self, item_id: str, message: str) -> None: ...

    def item_stopped(self, item_id: str, error: BaseException) -> None: ...


@dataclass
class Work(Generic[T]):
    """What a stage asks for: see the module docstring. `ident(item)` is the item's ID in events
    and errors."""

    items: Iterable[T]
    send: Callable[[T], Any]
    keep: Callable[[T, Any], None]
    ident: Callable[[T], str] = str
    count: int | None = None  # how many `items` holds, when it is a generator (sizes the threads)


@dataclass
class Ending:
    """How `run` ended: `error` is the fatal error that stopped it (None when it was not one),
    `interrupted` when the user's interrupt did; `abandoned`: the requests still in flight when
    the stop's grace ended (or a second Ctrl-C came), whose results were not waited for."""

    error: BaseException | None = None
    interrupted: bool = False
    abandoned: int = 0

    @property
    def stopped(self) -> bool:
        return self.error is not None or self.interrupted


def error_text(e: BaseException) -> str:
    return str(e) or type(e).__name__


class Processor:
    """`Processor(run, concurrency=4, interrupt=event, classify=fn).run(Work(items, send, keep, ident))`.

    One processor runs one stage's work once. `interrupt` is the user's interrupt (an Event);
    `grace` the seconds a stop waits for the requests in flight, `abandon` the Event that ends
    that wait; `budget` the command's spend cap (None: no cap).
    """

    def __init__(self, tally: Tally, *, concurrency: int, interrupt: threading.Event | None,
                 classify: Callable[[BaseException], str], name: str = "work", grace: float = 0.0,
                 abandon: threading.Event | None = None, budget: Budget | None = None):
        self._tally = tally
        self._concurrency = max(1, int(concurrency or 1))
        self._interrupt = interrupt if interrupt is not None else Signal()
        self._classify = classify
        self._name = name
        self._grace = max(0.0, float(grace or 0))
        self._abandon = abandon
        self.budget = budget
        self._lock = threading.Lock()
        self._stopping = Signal()  # wakes the queue's waits when set
        self._ending = Ending()
        self._handed: queue.SimpleQueue = queue.SimpleQueue()  # writes handed by workers (`hand`)
        self._closed = False  # under `_lock`: the processing thread keeps nothing more
        self._raised: BaseException | None = None
        self._queue: WorkQueue | None = None

    # --- worker side -----------------------------------------------------------------------

    def admit(self, bound: Callable[[], float] | None = None) -> float:
        """Called by a worker before each request it sends: raises Interrupted once the work is
        stopping (a fatal error, the user's interrupt), so nothing new is sent. With a budget,
        `bound()` is the request's upper bound in USD: it is held until `settle`, and a request
        that does not fit stops the work (its error: the budget's SpendCapReached). Returns the
        amount held (0 without a budget), for `settle`."""
        if self._is_stopping():
            raise Interrupted(STOPPING)
        if self.budget is None or bound is None:
            return 0.0
        amount = bound()
        if self.budget.reserve(amount, self._is_stopping):
            return amount
        if self._is_stopping():
            raise Interrupted(STOPPING)
        with self._lock:
            if self._ending.error is None:
                self._ending.error = self.budget.reached(amount)
        self._stopping.set()
        raise Interrupted(STOPPING)

    def _is_stopping(self) -> bool:
        return self._stopping.is_set() or self._interrupt.is_set()

    def settle(self, held: float, cost: float | None) -> None:
        """The request admitted with `held` came back (or failed): `cost` is what it cost."""
        if self.budget is not None and held:
            self.budget.settle(held, cost)

    def hand(self, write: Callable[[], None]) -> None:
        """Called by a worker: `write()` runs on the processing thread (the stage's one writer),
        before the worker's next result is kept. Raises Interrupted once nothing more is kept."""
        with self._lock:
            if self._closed:
                raise Interrupted(STOPPING)
            self._handed.put(write)
            queue = self._queue
        if queue is not None:
            queue.nudge()  # the processing thread writes it now, not at the next result

    def _keep_handed(self) -> None:
        while True:
            try:
                write = self._handed.get_nowait()
            except queue.Empty:
                return
            try:
                write()
            except BaseException:
                self._stop()
                raise

    def halt(self, error: BaseException) -> None:
        """Called by `keep` to stop the work as a fatal error would (a stage's early stop):
        nothing new is sent, the results in flight are kept, and `error` is the Ending's."""
        with self._lock:
            if self._ending.error is None and self._raised is None:
                self._ending.error = error
        self._stop()

    @property
    def in_flight(self) -> int:
        """Items being sent whose result has not come back yet (after a stop: those abandoned)."""
        return self._queue.in_flight if self._queue is not None else 0

    # --- the processing thread -------------------------------------------------------------

    def run(self, work: Work) -> Ending:
        """Send every item of `work`, keep every result; returns how it ended. Raises what
        `keep` raises, and an error classified `RAISE`, after keeping what arrived."""
        queue = WorkQueue(lambda item: self._send(work, item), work.items, self._concurrency,
                          interrupt=self._interrupt, halt=self._stopping, name=self._name, count=work.count)
        self._queue = queue
        try:
            for outcome in queue.results(idle=self._keep_handed):
                self._keep_handed()
                self._take(work, outcome)
                if self._ending.stopped or self._raised is not None:
                    break
            if self._interrupt.is_set():
                self._ending.interrupted = True
            if self._ending.stopped or self._raised is not None:
                self._drain(queue, work)
        finally:
            with self._lock:
                self._closed = True
            queue.stop()
        self._keep_handed()  # what was handed before the close
        if self._raised is not None:
            raise self._raised
        if queue.source_error is not None:
            raise queue.source_error  # the items could not all be read: what was fed is kept
        return self._ending

    def _send(self, work: Work, item):
        """A worker's call: a fatal or unexpected error stops the sending at once (no worker
        takes or sends anything more), before the processing thread takes it."""
        try:
            return work.send(item)
        except Interrupted:
            raise
        except BaseException as e:
            if self._classify(e) != ITEM:
                self._stopping.set()
            raise

    def _stop(self) -> None:
        self._stopping.set()
        if self._queue is not None:
            self._queue.stop()

    def _drain(self, queue: WorkQueue, work: Work) -> None:
        """A stop: nothing new is sent; the results that already arrived are kept, and those of
        the requests in flight as they come back, for up to `grace` seconds."""
        self._stop()
        waiting = queue.in_flight
        if waiting and self._grace:
            log.warning("%s: %s; waiting up to %s for %d request(s) in flight%s", self._name,
                        "interrupted" if self._ending.interrupted else "stopping", _seconds(self._grace),
                        waiting, " (interrupt again to abandon them)" if self._ending.interrupted else "")
        try:
            for outcome in queue.drain(time.monotonic() + self._grace, self._abandoned,
                                       (self._abandon, self._interrupt)):
                self._keep_handed()
                self._take(work, outcome)
        except BaseException:
            # What `keep` raised (a disk error) is what the caller reports: the reason of the
            # stop must not be lost.
            why = self._raised or self._ending.error
            if why is not None:
                log.error("%s: stopped: %s", self._name, error_text(why))
            raise
        self._ending.abandoned = queue.in_flight
        if self._ending.abandoned:
            log.warning("%s: %d request(s) in flight abandoned; the provider may bill them", self._name,
                        self._ending.abandoned)

    def _abandoned(self) -> bool:
        """The wait for the requests in flight ends: a second interrupt (`abandon`), or a first
        one when the stop was not the user's."""
        if self._abandon is not None and self._abandon.is_set():
            return True
        return not self._ending.interrupted and self._interrupt.is_set()

    def _take(self, work: Work, outcome: Outcome) -> None:
        if outcome.error is None:
            try:
                work.keep(outcome.item, outcome.value)
            except BaseException:
                self._stop()
                raise
            return
        self._failed(work.ident(outcome.item), outcome.error)

    def _failed(self, item_id: str, e: BaseException) -> None:
        if isinstance(e, Interrupted):
            if not self._stopping.is_set():  # abandoned by the user's interrupt
                self._ending.interrupted = True
                self._stop()
            return
        kind = self._classify(e)
        if kind == ITEM:
            self._tally.item_failed(item_id, error_text(e))
            return
        with self._lock:
            first = self._ending.error is None and self._raised is None
            if first and kind == FATAL:
                self._ending.error = e
            elif first:
                self._raised = e
        if kind == FATAL:
            self._tally.item_stopped(item_id, e)  # the first reports the stop; later ones are counted
        elif not first:
            log.debug("%s: %s: %s (after the stop)", self._name, item_id, error_text(e))
        if not first:
            return
        self._stop()


def _seconds(value: float) -> str:
    return f"{value:g} s"
