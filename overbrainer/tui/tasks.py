"""The work the TUI starts: one flow at a time, each on a thread of its own, on an `Embedded`
front end that publishes on the app's one bus.

A `Task` is what one command of the command line would do (a stage, `run`, `train`, `train
attach|stop|cancel`, `dataset reject`), with the command line's front end swapped for the TUI's:

- its events go to the shared bus, which the app reads (and the metrics exporter, when set);
- its `detach` Event is its Ctrl-C: a stage stops at a safe point (resumable; its requests in
  flight get `[pipeline] stop_grace_secs` to come back), a followed run is detached (the job goes
  on), a provisioning stops and deletes its pod, a shielded step (a job's start, a retrieval)
  finishes first;
- its `abandon` Event is the Runpod provisioning flag: the lease deletes the pod it made; on a
  stage it is the second Ctrl-C (set by a second interrupt): the requests in flight are abandoned;
- its results (what the command prints on stdout) are kept as `Report`s.

Only one task runs at a time, as only one process writes a project at a time: the TUI holds the
project lock, and its tasks take turns under it.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any, Callable

from overbrainer.errors import Interrupted, OverbrainerError
from overbrainer.front.bus import EventBus
from overbrainer.front.frontend import Embedded, Report
from overbrainer.front.session import Session
from overbrainer.support.threads import Signal

log = logging.getLogger(__name__)

Flow = Callable[[Session], Any]

# What a task's kind does when it is interrupted (quitting, Ctrl-C): said before it is done.
PIPELINE = "pipeline"  # a stage or `run`
TRAINING = "training"  # train, attach, stop, cancel
DATASET = "dataset"  # reject


class Busy(OverbrainerError):
    """A task is already running: the app says so instead of starting another."""


class Task:
    """One flow on a thread: `start()`, then `done` (an Event), `error`, `result`, `reports`."""

    def __init__(self, label: str, kind: str, flow: Flow, session: Session, *, run_id: str | None = None,
                 pod: bool = False, detach: threading.Event, abandon: threading.Event):
        self.label = label
        self.kind = kind
        self.flow = flow
        self.session = session
        self.run_id = run_id  # the run it works on, once known (train: when the run is created)
        self.pod = pod  # a new run on a Runpod target: `abandon` means something
        self.detach = detach
        self.abandon = abandon
        self.done = threading.Event()
        self.error: BaseException | None = None
        self.result: Any = None
        self._reports: list[Report] = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._main, name=f"overbrainer-tui-{kind}", daemon=True)

    def start(self) -> "Task":
        self._thread.start()
        return self

    def _main(self) -> None:
        try:
            self.result = self.flow(self.session)
        except BaseException as e:  # noqa: BLE001 - shown by the app, never lost
            self.error = e
            if not isinstance(e, OverbrainerError):
                log.error("%s: internal error: %s: %s", self.label, type(e).__name__, e,
                          exc_info=log.isEnabledFor(logging.DEBUG))
        finally:
            self.done.set()

    def report(self, report: Report) -> None:
        """The front end's report callback (any thread)."""
        if report.kind == "run_created" and report.run_id:
            self.run_id = report.run_id
        with self._lock:
            self._reports.append(report)

    @property
    def reports(self) -> list[Report]:
        with self._lock:
            return list(self._reports)

    def lines(self) -> list[str]:
        """The result lines the command line would print on stdout."""
        return [line for r in self.reports if r.kind == "line" and r.text
                for line in r.text.splitlines()]

    @property
    def running(self) -> bool:
        return not self.done.is_set()

    @property
    def interrupted(self) -> bool:
        return isinstance(self.error, Interrupted)

    def outcome(self) -> str:
        """One line: how the task ended (or that it runs)."""
        if self.running:
            return f"{self.label}: running"
        if self.error is None:
            return f"{self.label}: done"
        if isinstance(self.error, OverbrainerError):
            if not self.interrupted:
                return f"{self.label} failed: {self.error}"
            hint = getattr(self.error, "hint", None)  # a stage's: how to resume it, with `-C DIR`
            project = str(self.session.project_dir)
            return hint(None if project == "." else project) if hint else str(self.error).splitlines()[0]
        return f"{self.label} failed: internal error: {type(self.error).__name__}: {self.error}"

    def interrupt(self) -> None:
        """Ctrl-C on the command line: see the module docstring. A second one on a stage is the
        command line's second Ctrl-C: the requests still in flight are not waited for."""
        if self.detach.is_set() and self.kind == PIPELINE:
            self.abandon.set()
        self.detach.set()

    def wait(self, timeout: float | None = None) -> bool:
        return self.done.wait(timeout)


class Tasks:
    """The app's one bus and the task running on it (at most one)."""

    def __init__(self, project_dir: str | Path, *, bus: EventBus | None = None):
        self.project_dir = Path(project_dir)
        self.bus = bus if bus is not None else EventBus()
        self.current: Task | None = None
        self.history: list[Task] = []

    @property
    def busy(self) -> bool:
        return self.current is not None and self.current.running

    def start(self, label: str, kind: str, flow: Flow, *, run_id: str | None = None, pod: bool = False) -> Task:
        """Start `flow(session)` on its own thread; Busy while another task runs."""
        if self.busy:
            assert self.current is not None
            raise Busy(f"{self.current.label} is running: stop or detach it first")
        detach, abandon = Signal(), Signal()  # wake the stage's waits when set
        holder: list[Task] = []
        # renderer=lambda: None: the flow opens the shared bus many times, and nothing renders
        # each opening; the app reads the bus once and turns its events into log lines itself.
        front = Embedded(self.bus, detach, abandon, lambda r: holder[0].report(r), renderer=lambda: None)
        task = Task(label, kind, flow, Session(self.project_dir, front), run_id=run_id, pod=pod,
                    detach=detach, abandon=abandon)
        holder.append(task)
        self.current = task
        self.history.append(task)
        log.info("tui: %s started", label)
        return task.start()

    def stop_all(self, timeout: float | None = None) -> Task | None:
        """Interrupt the running task and wait for it (bounded by `timeout`); returns it."""
        task = self.current
        if task is None or not task.running:
            return task
        task.interrupt()
        task.wait(timeout)
        return task
