"""The request processor: the one loop of every stage that sends requests (the pipeline's
`subtopics`, `questions` and `answers`, the compare judge).

A stage supplies its work — the items, `send(item)` (the request or requests of one item, run on
a worker thread) and `keep(item, value)` (write and count one result, run on the thread that
called `run`, the single writer of the stage's files) — and the processor does the rest once:

- `concurrency` items in flight at all times (support/workqueue.py);
- every error classified by the stage's `classify(error)`: `ITEM` counts the item as failed
  (`tally.item_failed`) and the stage goes on; `FATAL` stops it (`tally.item_stopped` names the
  item that met it); `RAISE` stops it and is raised once the results are kept;
- a stop (fatal error, the user's interrupt, an unexpected error) sends nothing new: workers ask
  `admit()` before each send, which raises `Interrupted` once the processor is stopping, and a
  worker that meets a fatal or unexpected error stops the sending itself, before the processing
  thread has taken that error;
- **a stop keeps what already arrived**: every result that came back before the stop was paid
  for, so it goes through `keep` like any other, then `run` returns how the work ended.

This is where the stop rules live, and where they will grow: a grace for the requests in flight
on a stop (`_drain`), a spend check before each send (`admit`), a stop when the provider is
unreachable (a `FATAL` like any other), and how the item that met a fatal error is counted
(`tally.item_stopped`).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any, Callable, Generic, Protocol, Sequence, TypeVar

from overbrainer.errors import Interrupted
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

    items: Sequence[T]
    send: Callable[[T], Any]
    keep: Callable[[T, Any], None]
    ident: Callable[[T], str] = str


@dataclass
class Ending:
    """How `run` ended: `error` is the fatal error that stopped it (None when it was not one),
    `interrupted` when the user's interrupt did."""

    error: BaseException | None = None
    interrupted: bool = False

    @property
    def stopped(self) -> bool:
        return self.error is not None or self.interrupted


def error_text(e: BaseException) -> str:
    return str(e) or type(e).__name__


class Processor:
    """`Processor(run, concurrency=4, interrupt=event, classify=fn).run(Work(items, send, keep, ident))`.

    One processor runs one stage's work once. `interrupt` is the user's interrupt (an Event).
    """

    def __init__(self, tally: Tally, *, concurrency: int, interrupt: threading.Event | None,
                 classify: Callable[[BaseException], str], name: str = "work"):
        self._tally = tally
        self._concurrency = max(1, int(concurrency or 1))
        self._interrupt = interrupt if interrupt is not None else threading.Event()
        self._classify = classify
        self._name = name
        self._stopping = threading.Event()
        self._closed = threading.Event()
        self._ending = Ending()
        self._raised: BaseException | None = None
        self._queue: WorkQueue | None = None

    # --- worker side -----------------------------------------------------------------------

    def admit(self) -> None:
        """Called by a worker before each request it sends: raises Interrupted once the work is
        stopping (a fatal error, the user's interrupt), so nothing new is sent."""
        if self._stopping.is_set() or self._interrupt.is_set():
            raise Interrupted(STOPPING)

    def check_keeping(self) -> None:
        """Called by a worker that writes its results itself (questions) before it writes: raises
        Interrupted once the processing thread stopped keeping results (the files may be closing)."""
        if self._closed.is_set():
            raise Interrupted(STOPPING)

    @property
    def in_flight(self) -> int:
        """Items being sent whose result has not come back yet (after a stop: those abandoned)."""
        return self._queue.in_flight if self._queue is not None else 0

    # --- the processing thread -------------------------------------------------------------

    def run(self, work: Work) -> Ending:
        """Send every item of `work`, keep every result; returns how it ended. Raises what
        `keep` raises, and an error classified `RAISE`, after keeping what arrived."""
        queue = WorkQueue(lambda item: self._send(work, item), work.items, self._concurrency,
                          interrupt=self._interrupt, halt=self._stopping, name=self._name)
        self._queue = queue
        try:
            for outcome in queue.results():
                self._take(work, outcome)
                if self._ending.stopped or self._raised is not None:
                    break
            if self._interrupt.is_set():
                self._ending.interrupted = True
            if self._ending.stopped or self._raised is not None:
                self._drain(queue, work)
        finally:
            self._closed.set()
            queue.stop()
        if self._raised is not None:
            raise self._raised
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
        """A stop: nothing new is sent; the results that already arrived are kept."""
        self._stop()
        try:
            for outcome in queue.drain():
                self._take(work, outcome)
        except BaseException:
            # What `keep` raised (a disk error) is what the caller reports: the reason of the
            # stop must not be lost.
            why = self._raised or self._ending.error
            if why is not None:
                log.error("%s: stopped: %s", self._name, error_text(why))
            raise

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
        if self._ending.error is not None or self._raised is not None:
            log.debug("%s: %s: %s (after the stop)", self._name, item_id, error_text(e))
            return
        if kind == FATAL:
            self._ending.error = e
            self._tally.item_stopped(item_id, e)
        else:
            self._raised = e
        self._stop()
