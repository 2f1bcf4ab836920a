"""Front ends: where a flow's events go, what interrupts it, and where its results go.

- `Cli()`: a new bus rendered on stderr by one thread (bars on a terminal, throttled lines on a
  pipe or file), Ctrl-C (SIGINT), results on stdout.
- `Cli(json=True)`: events as JSON lines on stderr, each result one JSON object on
  stdout; no bars, no colour.
- `Embedded(bus, detach, abandon, report)`: library use and `overbrainer tui` (tui/tasks.py): the
  caller's bus (its events rendered as log lines, unless `renderer` says otherwise), its detach
  Event interrupts, its abandon Event is the provisioning flag and a stage's second interrupt (the
  requests in flight are not waited for), and results go to its `report` callback as `Report`s.
"""

from __future__ import annotations

import logging
import sys
import threading
import weakref
from abc import ABC, abstractmethod
from typing import IO, TYPE_CHECKING, Any, Callable

from overbrainer.front import terminal
from overbrainer.front.bus import EventBus
from overbrainer.front.interrupt import Flag, Interrupt
from overbrainer.front.render_bars import BarRenderer
from overbrainer.front.render_json import JsonRenderer
from overbrainer.front.render_lines import LineRenderer
from overbrainer.front.results import write_result
from overbrainer.support import fmt

if TYPE_CHECKING:
    from overbrainer.front.bus import Subscription
    from overbrainer.front.events import Event

log = logging.getLogger(__name__)

RENDER_GRACE = 2.0


class Report:
    """What a flow tells an embedding front end: kind "line" (text + data), "run_created"
    (run_id) or "run_stopped" (step). (A plain class: a dataclass costs import time.)"""

    __slots__ = ("kind", "text", "data", "run_id", "step")

    def __init__(self, kind: str, text: str | None = None, data: dict[str, Any] | None = None,
                 run_id: str | None = None, step: int | None = None):
        self.kind, self.text, self.data, self.run_id, self.step = kind, text, data, run_id, step

    def _key(self) -> tuple[object, ...]:
        return (self.kind, self.text, self.data, self.run_id, self.step)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Report) and self._key() == other._key()

    __hash__ = None  # type: ignore[assignment]  # data is a dict

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in zip(self.__slots__, self._key()) if v is not None)
        return f"Report({fields})"


def _render(sub: "Subscription", renderer: Any) -> None:
    try:
        for ev in sub:
            try:
                renderer.handle(ev)
            except Exception:  # noqa: BLE001 - a display bug must not stop the display
                log.debug("cannot render %s", type(ev).__name__, exc_info=True)
    finally:
        try:
            renderer.close()
        except Exception:  # noqa: BLE001
            log.debug("cannot close the renderer", exc_info=True)


def _stop(sub: "Subscription", bus: "EventBus | None") -> None:
    """Stop a renderer at once: its queue is discarded; an owned bus is closed."""
    sub.close(drain=False)
    if bus is not None:
        bus.close()


class BusGuard:
    """The bus a flow publishes on (`guard.bus`) and the thread rendering it.

    `close()` lets the renderer show what is queued, for at most RENDER_GRACE seconds. A guard
    left without `close()` (garbage collected, or a `with` block left by an exception) stops its
    renderer without draining, so no renderer outlives its flow.
    """

    def __init__(self, bus: "EventBus", renderer: Any | None, *, owns_bus: bool):
        self.bus = bus
        self._owns = owns_bus
        self._thread: threading.Thread | None = None
        self._sub: "Subscription | None" = None
        if renderer is None:
            self._finalizer: weakref.finalize[..., Any] | None = weakref.finalize(self, bus.close) if owns_bus else None
            return
        sub = self._sub = bus.subscribe()
        self._thread = threading.Thread(target=_render, args=(sub, renderer),
                                        name="overbrainer-render", daemon=True)
        self._thread.start()
        self._finalizer = weakref.finalize(self, _stop, sub, bus if owns_bus else None)

    def close(self, grace: float = RENDER_GRACE) -> None:
        """No more events from this flow: drain the renderer (bounded by `grace`) and stop it."""
        if self._finalizer is None or not self._finalizer.alive:
            return
        self._finalizer.detach()
        sub = self._sub
        if self._owns:
            self.bus.close()
        if sub is None:
            return
        sub.close(drain=True)
        assert self._thread is not None
        self._thread.join(grace)
        if self._thread.is_alive():
            log.debug("the renderer did not drain within %s: stopping it", fmt.duration(grace, words=True))
            sub.close(drain=False)

    def abort(self) -> None:
        """Stop the renderer at once, dropping what it has not shown."""
        if self._finalizer is not None and self._finalizer.alive:
            self._finalizer()

    def __enter__(self) -> "BusGuard":
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


class Frontend(ABC):
    # What `watch_buses` registered: called with each bus the front end opens (a tuple: no
    # __init__ to call, and each front end gets its own once one is added).
    _watchers: tuple[Callable[["EventBus"], None], ...] = ()

    @abstractmethod
    def open_bus(self) -> BusGuard: ...

    def watch_buses(self, watcher: Callable[["EventBus"], None]) -> None:
        """`watcher(bus)` is called with every bus this front end opens from now on, before the
        flow publishes on it (the metrics exporter subscribes to each). An embedding front end
        opens its one shared bus many times: the watcher sees it each time."""
        self._watchers = self._watchers + (watcher,)

    def _opened(self, bus: "EventBus") -> None:
        for watcher in self._watchers:
            try:
                watcher(bus)
            except Exception:  # noqa: BLE001 - a watcher must never stop a flow
                log.warning("cannot watch the events of this command", exc_info=log.isEnabledFor(logging.DEBUG))

    @abstractmethod
    def interrupt(self) -> "Interrupt": ...

    @abstractmethod
    def provisioning_flag(self) -> "Flag": ...

    @abstractmethod
    def report(self, text: str, data: dict[str, Any] | None = None) -> None: ...

    def run_created(self, run_id: str) -> None:
        """A training run was created (the command line says nothing)."""

    def run_stopped(self, step: int) -> None:
        """The training run ended stopped, its snapshot at `step` (the command line says it in a
        report line of its own)."""


class Cli(Frontend):
    def __init__(self, json: bool = False, *, observer: "Callable[[Event], None] | None" = None,
                 stdout: IO[str] | None = None, stderr: IO[str] | None = None, capacity: int = 1024):
        self.json = json
        self.observer = observer
        self._stdout = stdout
        self._stderr = stderr
        self.capacity = capacity
        self._labels: dict[str, str] = {}  # each run's label, known to every bus's renderer

    def make_renderer(self) -> Any:
        stream = self._stderr if self._stderr is not None else sys.stderr
        if self.json:
            return JsonRenderer(self._stderr)
        if terminal.use_bars(stream):
            return BarRenderer(self._stderr, labels=self._labels)
        return LineRenderer(labels=self._labels)

    def open_bus(self) -> BusGuard:
        bus = EventBus(self.capacity, observer=self.observer)
        self._opened(bus)
        return BusGuard(bus, self.make_renderer(), owns_bus=True)

    def interrupt(self) -> "Interrupt":
        return Interrupt()

    def provisioning_flag(self) -> "Flag":
        return Flag.catching()

    def report(self, text: str, data: dict[str, Any] | None = None) -> None:
        write_result(text, data, as_json=self.json, out=self._stdout)


class Embedded(Frontend):
    def __init__(self, bus: "EventBus", detach: threading.Event, abandon: threading.Event,
                 report: Callable[[Report], None], *,
                 renderer: Callable[[], Any] | None = None):
        self.bus = bus
        self.detach = detach
        self.abandon = abandon
        self._report = report
        self._renderer = renderer
        self._labels: dict[str, str] = {}  # each run's label, known to every bus's renderer

    def open_bus(self) -> BusGuard:
        # The caller's bus is shared: the guard never closes it, only its own renderer.
        self._opened(self.bus)
        if self._renderer is not None:
            renderer = self._renderer()
        else:
            renderer = LineRenderer(labels=self._labels)
        return BusGuard(self.bus, renderer, owns_bus=False)

    def interrupt(self) -> "Interrupt":
        return Interrupt.on(self.detach, abandon=self.abandon)

    def provisioning_flag(self) -> "Flag":
        return Flag(self.abandon)

    def report(self, text: str, data: dict[str, Any] | None = None) -> None:
        self._report(Report("line", text=text, data=data if data is not None else {"message": text}))

    def run_created(self, run_id: str) -> None:
        self._report(Report("run_created", run_id=run_id))

    def run_stopped(self, step: int) -> None:
        self._report(Report("run_stopped", step=step))
