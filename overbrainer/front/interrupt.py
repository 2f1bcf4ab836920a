"""Ctrl-C (SIGINT), SIGTERM and SIGHUP, caught from the moment an `Interrupt` is created.

SIGTERM (a timeout, systemd, `docker stop`, a CI cancellation) and SIGHUP (the terminal closed,
the SSH session dropped) are handled exactly like Ctrl-C; only the exit code differs (130, 143,
129), and support/stop_signals.py tells the command line which signal came first. A SIGHUP ignored when
the Interrupt is made (`nohup`) stays ignored.

The signal handler only notes the signal (a flag, the note of the shield running at that moment
and one byte on a pipe): it takes no lock, so it cannot deadlock the main thread it interrupts.
A watcher thread reads the pipe, says what a shield is finishing, and only then sets the
`threading.Event` that flows and `race` wait on. Two ways to run a flow:

- `shield(fn)` runs `fn` to its end and only notes a Ctrl-C meanwhile;
- `race(fn)` returns None at the first Ctrl-C (fn runs in a daemon thread and is abandoned);
  once Ctrl-C came, `fn` is not even started.

Outside every Interrupt, the command line makes SIGTERM and SIGHUP raise KeyboardInterrupt, as
Ctrl-C does.

A second, separate signal sets `abandon` too (a stage waiting for the requests it has in flight
stops waiting: support/processor.py). The same signal again within a second is not one: GNU
`timeout` and CI runners deliver one stop twice, to the process and to its group
(support/stop_signals.note).

When the handler cannot be installed (not the main thread) the Interrupt is "off": Ctrl-C
behaves as usual and `race` runs `fn` inline. `Interrupt.on(event)` listens to a caller's Event
instead (the embedded front end's detach event; `abandon=` its own second event).
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import weakref
from typing import Any, Callable, TypeVar

from overbrainer.errors import Interrupted
from overbrainer.support import stop_signals
from overbrainer.support.sleep import pause
from overbrainer.support.threads import Signal, in_daemon, listen_all, unlisten_all

log = logging.getLogger(__name__)

T = TypeVar("T")

_OFF, _SIGNAL, _EVENT = "off", "signal", "event"
_TRIP, _QUIT = b"i", b"q"
# How often a race on a caller's Event (which nobody can hook) looks at it.
_EVENT_POLL = 0.02
# The most a shield that saw a signal waits, as it ends, for the watcher to say what it finished.
_WATCH_GRACE = 2.0
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class _Handler:
    """The installed handler of one signal. Handlers of nested Interrupts chain: every live owner in
    the chain is told; when none is live any more, the original handler runs (Ctrl-C as usual)."""

    def __init__(self, owner: "Interrupt", previous: Any):
        self.owner: Interrupt | None = owner
        self.previous = previous

    def __call__(self, signum: int, frame: Any) -> None:
        h: Any = self
        fresh: bool | None = None  # noted once per delivery, by the first live owner
        while isinstance(h, _Handler):
            owner = h.owner
            if owner is not None:
                if fresh is None:
                    fresh = stop_signals.note(signum)
                owner._noted(signum, fresh)
            h = h.previous
        if fresh is None:
            _original(h, signum, frame)


def _original(handler: Any, signum: int, frame: Any) -> None:
    if callable(handler):
        handler(signum, frame)
    elif handler == signal.SIG_DFL:
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
    # SIG_IGN or None: ignore


def _unwrap(handler: Any) -> Any:
    """The first live handler of a chain, or the original one."""
    while isinstance(handler, _Handler) and handler.owner is None:
        handler = handler.previous
    return handler


class Interrupt:
    """Ctrl-C caught from creation on. See the module docstring."""

    _handlers: dict[int, _Handler]  # declared here: __init__ sets them after _setup
    _watcher: threading.Thread | None

    def __init__(self) -> None:
        self._setup(Signal(), _OFF)
        if threading.current_thread() is not threading.main_thread():
            log.debug("cannot catch Ctrl-C outside the main thread: it stops the process as usual")
            return
        try:
            previous: dict[int, Any] = {signum: signal.getsignal(signum) for signum in SIGNALS}
            if previous[signal.SIGHUP] == signal.SIG_IGN:  # nohup: a hangup stays ignored
                del previous[signal.SIGHUP]
            rfd, wfd = os.pipe()
        except (OSError, ValueError) as e:
            log.warning("cannot catch Ctrl-C: %s", e)
            return
        os.set_blocking(wfd, False)
        self._rfd, self._wfd = rfd, wfd
        handlers: dict[int, _Handler] = {signum: _Handler(self, handler) for signum, handler in previous.items()}
        try:
            for signum, handler in handlers.items():
                signal.signal(signum, handler)
        except (OSError, ValueError) as e:
            for signum, handler in handlers.items():
                if signal.getsignal(signum) is handler:
                    signal.signal(signum, previous[signum])
            os.close(rfd)
            os.close(wfd)
            log.warning("cannot catch Ctrl-C: %s", e)
            return
        self._handlers = handlers
        self._mode = _SIGNAL
        self._watcher = threading.Thread(target=self._watch, name="overbrainer-ctrl-c", daemon=True)
        self._watcher.start()

    def _setup(self, event: threading.Event, mode: str) -> None:
        self.event = event
        self.abandon: threading.Event = Signal()  # a second, separate signal
        self._count = 0
        self._mode = mode
        self._noted_flag = False
        self._first_note: str | None = None
        self.signum: int | None = None
        self._handlers = {}
        self._watcher = None
        self._rfd = self._wfd = -1
        self._lock = threading.Lock()
        self._waiters: set[threading.Event] = set()
        self._notes: list[str] = []

    @classmethod
    def on(cls, event: threading.Event, abandon: threading.Event | None = None) -> "Interrupt":
        """Interrupted when `event` is set (by the caller, e.g. a TUI detaching a task); `abandon`
        plays the second signal."""
        self = cls.__new__(cls)
        self._setup(event, _EVENT)
        if abandon is not None:
            self.abandon = abandon
        return self

    @classmethod
    def off(cls) -> "Interrupt":
        """Never caught: Ctrl-C behaves as usual, `race` runs inline."""
        self = cls.__new__(cls)
        self._setup(Signal(), _OFF)
        return self

    # --- the signal side ----------------------------------------------------------------------

    def _noted(self, signum: int, fresh: bool = True) -> None:
        # Runs in the main thread between two bytecodes: no locks, no logging here. The note of
        # the shield running now is read here, before that shield can end and drop it.
        if self._noted_flag and not fresh:
            return  # the same stop delivered again (`timeout`: to the process, then its group)
        self._count += 1
        if not self._noted_flag:
            self._first_note = self._notes[-1] if self._notes else None
            self.signum = signum
            self._noted_flag = True
        try:
            os.write(self._wfd, _TRIP)
        except OSError:
            pass

    def _watch(self) -> None:
        rfd, wfd = self._rfd, self._wfd
        try:
            while True:
                try:
                    data = os.read(rfd, 64)
                except InterruptedError:
                    continue
                if not data or _QUIT in data:
                    return
                if not self.event.is_set() and self._first_note:
                    # Said before the event is set: whoever waits on it sees the warning logged.
                    log.warning("interrupted: finishing %s first", self._first_note)
                self._trip()
                if self._count > 1:
                    self.abandon.set()
        finally:
            os.close(rfd)
            os.close(wfd)

    def _trip(self) -> None:
        self.event.set()
        with self._lock:
            waiters = tuple(self._waiters)
        for w in waiters:
            w.set()

    # --- public API ---------------------------------------------------------------------------

    @property
    def state(self) -> str:
        """"off" (Ctrl-C as usual), "caught" or "listening"."""
        if self.caught():
            return "caught"
        return "off" if self._mode == _OFF else "listening"

    def caught(self) -> bool:
        return self._noted_flag or self.event.is_set()

    is_set = caught  # an Interrupt is a stop of support/sleep.py's waits


    def check(self, message: str = "interrupted") -> None:
        """Raise `Interrupted(message)` if Ctrl-C came (for flows at their safe points)."""
        if self.caught():
            raise Interrupted(message)

    def wait(self, seconds: float) -> bool:
        """Sleep up to `seconds`; True (at once) if interrupted."""
        return self.caught() or pause(seconds, self.event) or self.caught()

    def shield(self, fn: Callable[..., T], *args: Any, note: str | None = None, **kwargs: Any) -> T:
        """Run fn to its end; a Ctrl-C meanwhile is only noted (and `note` says what finishes)."""
        if note:
            self._notes.append(note)
        try:
            return fn(*args, **kwargs)
        finally:
            if note:
                self._notes.pop()
            if self._noted_flag and self._mode == _SIGNAL:
                # Let the watcher say what this shield finished before the flow goes on to stop.
                self.event.wait(_WATCH_GRACE)

    def race(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T | None:
        """fn's result, or None as soon as Ctrl-C comes (or at once if it already came)."""
        if self.caught():
            return None
        if self._mode == _OFF:
            return fn(*args, **kwargs)
        done = threading.Event()  # set by the call's end, a signal (`_trip`) or a Signal event
        with self._lock:
            self._waiters.add(done)
        woken = self._mode == _SIGNAL or listen_all([self.event], done.set)
        try:
            if self.caught():
                return None
            call = in_daemon("overbrainer-race", fn, *args, **kwargs)
            call.add_done_callback(lambda _: done.set())
            if woken:
                done.wait()
            else:  # a caller's plain Event
                while not done.wait(_EVENT_POLL) and not self.event.is_set():
                    pass
        finally:
            unlisten_all([self.event], done.set)
            with self._lock:
                self._waiters.discard(done)
        return call.result() if call.done() else None

    def restore(self) -> None:
        """Stop catching: put the previous handlers back (a signal noted so far stays noted)."""
        handlers, self._handlers = self._handlers, {}
        if not handlers:
            return
        for signum, handler in handlers.items():
            handler.owner = None
            previous = handler.previous  # (read before `is` narrows `handler` to getsignal's type)
            if threading.current_thread() is threading.main_thread():
                try:
                    if signal.getsignal(signum) is handler:
                        signal.signal(signum, _unwrap(previous))
                except (OSError, ValueError):
                    pass
        # Otherwise a handler stays installed but inert: with no live owner left in its chain
        # it passes the signal to the original handler.
        try:
            os.write(self._wfd, _QUIT)
        except OSError:
            pass
        self._mode = _OFF

    def __enter__(self) -> "Interrupt":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.restore()


class Flag:
    """What Runpod provisioning checks between its steps: set on Ctrl-C (the command line) or
    by the caller's abandon Event (embedded). `close()` stops watching; so does dropping it."""

    def __init__(self, event: threading.Event, interrupt: Interrupt | None = None):
        self.event = event
        self._interrupt = interrupt
        self._finalizer = weakref.finalize(self, interrupt.restore) if interrupt is not None else None

    @classmethod
    def catching(cls) -> "Flag":
        """A flag set by Ctrl-C from now on."""
        interrupt = Interrupt()
        return cls(interrupt.event, interrupt)

    def is_set(self) -> bool:
        if self._interrupt is not None:
            return self._interrupt.caught()
        return self.event.is_set()

    @property
    def interrupted(self) -> bool:
        return self.is_set()

    def close(self) -> None:
        if self._finalizer is not None:
            self._finalizer()

    def __enter__(self) -> "Flag":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
