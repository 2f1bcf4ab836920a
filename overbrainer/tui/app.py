"""The full-screen app: six views in tabs, a status line, the keys that steer running work.

The app's one bus carries the events of every flow it starts (tui/tasks.py); a timer on the
app's own thread reads it without blocking, folds each event into `Live` and turns it into the
same log lines as the command line's (captured for the Logs view). Flows run on their own
threads: nothing here ever waits for one.

Keys everywhere: 1-6 switch views, r reads the files again, d detaches the followed run (its job
goes on), a abandons a Runpod provisioning (the pod made is deleted), Ctrl-C does what Ctrl-C
does on the command line to the running task, q quits (saying first what happens to running
work, which then stops as Ctrl-C would stop it).
"""

from __future__ import annotations

import logging
from typing import Any

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.screen import ModalScreen
from textual.widgets import Footer, Static, TabbedContent, TabPane

from overbrainer.front.events import PodStatus, RunWatched
from overbrainer.front.render_lines import LineRenderer
from overbrainer.tui import steering
from overbrainer.tui.live import Live
from overbrainer.tui.logbuf import LogBuffer
from overbrainer.tui.tasks import PIPELINE, Busy, Flow, Task, Tasks
from overbrainer.tui.views.confirm import Confirm
from overbrainer.tui.views.dataset import DatasetView
from overbrainer.tui.views.logs import LogsView
from overbrainer.tui.views.pipeline import PipelineView
from overbrainer.tui.views.project import ProjectView
from overbrainer.tui.views.results import ResultsView
from overbrainer.tui.views.training import TrainingView
from overbrainer.tui.work import Workspace

log = logging.getLogger(__name__)

TICK = 0.1  # seconds between two reads of the bus
EVENTS_PER_TICK = 2000
VIEWS = ("project", "dataset", "pipeline", "training", "logs", "results")
LIVE_VIEWS = {"pipeline": 2, "training": 10, "logs": 2}  # view -> refreshed every N ticks while shown


class OverbrainerApp(App[None]):
    TITLE = "overbrainer"
    ENABLE_COMMAND_PALETTE = False
    CSS = """
    TabbedContent { height: 1fr; }
    #status { height: 1; background: $boost; padding: 0 1; }
    TabPane { padding: 0 1; }
    """
    BINDINGS = [
        # The tabs name the view keys ("1 Project"): the footer keeps its room for the others (q at 100 columns).
        *(Binding(str(i + 1), f"show('{name}')", name.capitalize(), show=False) for i, name in enumerate(VIEWS)),
        Binding("r", "reload", "Reload"),
        Binding("d", "detach", "Detach"),
        Binding("a", "abandon", "Abandon"),
        Binding("ctrl+c", "interrupt", "Interrupt", show=False, priority=True),
        Binding("q", "request_quit", "Quit", priority=True),
        Binding("ctrl+q", "request_quit", "Quit", show=False, priority=True),
    ]

    def __init__(self, workspace: Workspace, tasks: Tasks, logs: LogBuffer, *, tick: float = TICK):
        super().__init__()
        self.workspace = workspace
        self.tasks = tasks
        self.logs = logs
        self.live = Live()
        self.tick = tick
        self.signalled: int | None = None  # set by a SIGTERM/SIGHUP handler: quit as if confirmed
        self.quitting = False
        self.stopped_task: Task | None = None  # the task quitting interrupted
        self.notice = ""
        self._sub = tasks.bus.subscribe()
        self._lines = LineRenderer(logging.getLogger("overbrainer.progress"))
        self._ticks = 0
        self._shown_status = ""
        self._seen_done: Task | None = None
        self._next: tuple[str, str, Flow, dict] | None = None

    def compose(self) -> ComposeResult:
        views = (ProjectView(), DatasetView(), PipelineView(), TrainingView(), LogsView(), ResultsView())
        with TabbedContent(initial="project"):
            for i, (name, view) in enumerate(zip(VIEWS, views)):
                with TabPane(f"{i + 1} {name.capitalize()}", id=name):
                    yield view
        yield Static("", id="status", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        # Found once: while a dialog is up, queries look in the dialog's screen, not the main one.
        self._views = {name: self.query_one(f"#{name}", TabPane).children[0] for name in VIEWS}
        self._tabbed = self.query_one(TabbedContent)
        self._status_line = self.query_one("#status", Static)
        self.sub_title = str(self.workspace.project_dir)
        self.set_interval(self.tick, self.pump)
        self._activated()

    # --- the tick -----------------------------------------------------------------------------

    def pump(self) -> None:
        """Read what the bus holds, notice a task that ended, refresh the live view shown."""
        if not self._status_line.is_attached:  # the app is closing
            return
        for _ in range(EVENTS_PER_TICK):
            ev = self._sub.get(timeout=0)
            if ev is None:
                break
            self.live.apply(ev)
            self._lines.handle(ev)
            self._adopt_run(ev)
        if self.signalled is not None and not self.quitting:
            self._quit_now()
        self._notice_task_end()
        self._ticks += 1
        shown = self.shown()
        every = LIVE_VIEWS.get(shown)
        if every and self._ticks % every == 0:
            self.view(shown).refresh_view()
        self._status()

    def _adopt_run(self, ev: Any) -> None:
        """A new run's ID is known to its task once created; its pod's and its watch's events
        name it earlier."""
        task = self.tasks.current
        run_id = getattr(ev, "run_id", None)
        if (task is not None and task.running and task.run_id is None and run_id
                and isinstance(ev, (PodStatus, RunWatched)) and (task.pod or isinstance(ev, RunWatched))):
            task.run_id = run_id

    def _notice_task_end(self) -> None:
        task = self.tasks.current
        if task is None or task.running or task is self._seen_done:
            return
        self._seen_done = task
        if task.run_id and task.run_id in self.live.runs:
            self.live.runs[task.run_id].watched = False  # a detached or ended watch
        self.notice = task.outcome()
        level = logging.INFO if task.error is None or task.interrupted else logging.ERROR
        log.log(level, "tui: %s", self.notice)
        if self.quitting:
            self.exit()
            return
        if self._next is not None:
            label, kind, flow, kw = self._next
            self._next = None
            self.start_task(label, kind, flow, **kw)
        for name in ("dataset", "project", "results"):
            self.view(name).stale = True
        self.view(self.shown()).refresh_view()

    def _status(self) -> None:
        task = self.tasks.current
        text = steering.status(task, self.live) if task is not None and task.running else "idle"
        if self.quitting:
            text = f"quitting: {text}"
        if self.notice and not (task is not None and task.running):
            text += f" | {self.notice}"
        if text != self._shown_status:  # redrawn only when it changed
            self._shown_status = text
            self._status_line.update(text)

    # --- views --------------------------------------------------------------------------------

    def shown(self) -> str:
        return self._tabbed.active or "project"

    def view(self, name: str) -> Any:
        return self._views[name]

    def action_show(self, name: str) -> None:
        if self._modal():
            return
        self._tabbed.active = name
        self._activated()

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        self._activated()

    def _activated(self) -> None:
        view = self.view(self.shown())
        view.refresh_view()
        view.focus_main()

    def action_reload(self) -> None:
        for name in VIEWS:
            self.view(name).stale = True
        self.view(self.shown()).refresh_view()

    # --- work ---------------------------------------------------------------------------------

    def start_task(self, label: str, kind: str, flow: Flow, **kw: Any) -> Task | None:
        """Start a flow on its own thread, or say why not (another one runs)."""
        try:
            task = self.tasks.start(label, kind, flow, **kw)
        except Busy as e:
            self.notify(str(e), severity="warning")
            return None
        if kind == "pipeline":
            self.live.reset_stages()
        self.notice = ""
        return task

    def after_current(self, label: str, kind: str, flow: Flow, **kw: Any) -> None:
        """Interrupt the running task, then start this one once it ended (at once when none runs)."""
        task = self.tasks.current
        if task is None or not task.running:
            self.start_task(label, kind, flow, **kw)
            return
        self._next = (label, kind, flow, kw)
        task.interrupt()

    def confirm(self, text: str, then: Any) -> None:
        """Ask `text`; call `then()` on yes."""
        if self._modal():
            return
        self.push_screen(Confirm(text), lambda yes: then() if yes else None)

    def _modal(self) -> bool:
        return isinstance(self.screen, ModalScreen)

    def _steered(self) -> Task | None:
        """The running task a steering key acts on."""
        task = self.tasks.current
        return task if task is not None and task.running else None

    def action_detach(self) -> None:
        if self._modal():
            return
        task = self._steered()
        why = steering.cannot_detach(task, self.live) if task is not None else "nothing runs"
        if why:
            self.notify(why, severity="warning")
            return
        task.interrupt()
        self.notify(f"detaching from run {task.run_id}: its job goes on")

    def action_abandon(self) -> None:
        if self._modal():
            return
        task = self._steered()
        why = steering.cannot_abandon(task, self.live) if task is not None else "nothing runs"
        if why:
            self.notify(why, severity="warning")
            return
        task.abandon.set()
        self.notify("abandoning the provisioning: the pod made for it is deleted")

    def action_interrupt(self) -> None:
        task = self._steered()
        if task is not None and not self._modal():
            self.notify(f"interrupting {task.label}: {steering.consequence(task, self.live)}")
            task.interrupt()

    def action_request_quit(self) -> None:
        if self._modal():
            return
        if self.quitting:  # q again while a stage waits for its requests in flight: abandon them
            task = self._steered()
            if task is not None and task.kind == PIPELINE and not task.abandon.is_set():
                self.notify(f"quitting now: {steering.consequence(task, self.live)}")
                task.interrupt()
            return
        task = self.tasks.current
        if task is None or not task.running:
            self.exit()
            return
        self.confirm(f"Quit while {task.label} runs?\n\n{steering.consequence(task, self.live)}",
                     self._quit_now)

    async def action_quit(self) -> None:
        self.action_request_quit()

    def _quit_now(self) -> None:
        """Stop the running task as Ctrl-C would, and exit once it ended."""
        self.quitting = True
        self._next = None
        task = self.tasks.current
        if task is None or not task.running:
            self.exit()
            return
        self.stopped_task = task
        task.interrupt()
