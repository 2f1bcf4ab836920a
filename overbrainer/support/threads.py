"""Two primitives for the threads overbrainer starts.

`in_daemon(name, fn, *args)` runs one call on a daemon thread of its own and gives its
`concurrent.futures.Future` (its value, or the exception it raised, BaseException included). Not a
ThreadPoolExecutor: its threads are joined when the interpreter exits, so a call stuck on a dead
connection would hold the process after Ctrl-C or SIGTERM; a daemon thread never does.

`Signal` is a `threading.Event` whose `set()` also calls the functions listening to it: a loop
that waits on a Condition for its work is woken by a stop too, instead of polling the Event
(support/workqueue.py). The stop events of a run (the front end's interrupt and abandon, the
processor's stopping) are Signals; a plain Event still works where one is taken, polled.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import Any, Callable, Iterable, TypeVar

T = TypeVar("T")


def in_daemon(name: str, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> "Future[T]":
    """`fn(*args, **kwargs)` started on a new daemon thread named `name`: its Future."""
    future: Future = Future()
    future.set_running_or_notify_cancel()

    def run() -> None:
        try:
            value = fn(*args, **kwargs)
        except BaseException as e:  # noqa: BLE001 - handed to whoever reads the future
            future.set_exception(e)
        else:
            future.set_result(value)

    threading.Thread(target=run, name=name, daemon=True).start()
    return future


class Signal(threading.Event):
    """An Event that calls its listeners (`listen(fn)`, `unlisten(fn)`) each time it is set."""

    def __init__(self) -> None:
        super().__init__()
        self._listeners: list[Callable[[], None]] = []
        self._guard = threading.Lock()

    def set(self) -> None:
        super().set()
        with self._guard:
            listeners = tuple(self._listeners)
        for fn in listeners:
            fn()

    def listen(self, fn: Callable[[], None]) -> None:
        with self._guard:
            self._listeners.append(fn)

    def unlisten(self, fn: Callable[[], None]) -> None:
        with self._guard:
            if fn in self._listeners:
                self._listeners.remove(fn)


def listen_all(events: Iterable[threading.Event | None], fn: Callable[[], None]) -> bool:
    """Make `fn` listen to every Signal of `events`; False when one of them is a plain Event (the
    caller must then look at it now and then: it cannot wake anyone)."""
    woken = True
    for event in events:
        if isinstance(event, Signal):
            event.listen(fn)
        elif event is not None:
            woken = False
    return woken


def unlisten_all(events: Iterable[threading.Event | None], fn: Callable[[], None]) -> None:
    for event in events:
        if isinstance(event, Signal):
            event.unlisten(fn)
