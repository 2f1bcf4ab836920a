"""Running the app: the signals that end it, and what is said once the screen is given back.

SIGTERM, SIGHUP and an outside SIGINT end the TUI like a confirmed `q`: the running task stops as
Ctrl-C would stop it on the command line, then the app exits with 143, 129 or 130. Once the screen
is restored, stderr says how the work that was running when the TUI quit ended (a stage stopped
and how to resume it, a run that keeps running and how to follow it again, a pod deleted).
"""

from __future__ import annotations

import signal
from typing import Any

from overbrainer.errors import EXIT_HANGUP, EXIT_INTERRUPTED, EXIT_TERMINATED
from overbrainer.tui.app import OverbrainerApp
from overbrainer.tui.logbuf import LogBuffer
from overbrainer.tui.tasks import Tasks
from overbrainer.tui.work import Workspace

CODES: dict[int, int] = {signal.SIGINT: EXIT_INTERRUPTED, signal.SIGTERM: EXIT_TERMINATED, signal.SIGHUP: EXIT_HANGUP}


def _catch(app: OverbrainerApp) -> dict[int, Any]:
    """Make the stopping signals end the app (a SIGHUP ignored under `nohup` stays ignored)."""
    def noted(signum: int, frame: Any) -> None:
        if app.signalled is None:
            app.signalled = signum  # read by the app's tick: no work in the handler
    previous: dict[int, Any] = {}
    for signum in CODES:
        handler = signal.getsignal(signum)
        if signum == signal.SIGHUP and handler == signal.SIG_IGN:
            continue
        previous[signum] = handler
        signal.signal(signum, noted)
    return previous


def run(workspace: Workspace, tasks: Tasks, logs: LogBuffer) -> tuple[list[str], int]:
    """Run the app until it quits: (the lines to say on stderr, the exit code)."""
    app = OverbrainerApp(workspace, tasks, logs)
    previous = _catch(app)
    try:
        app.run()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    lines: list[str] = []
    stopped = app.stopped_task
    task = tasks.current
    if task is not None and task.running:  # the app ended without waiting for it (an error)
        lines.append(f"tui: waiting for {task.label} to stop")
        tasks.stop_all()
        stopped = task
    if stopped is not None:
        lines.append(f"tui: {stopped.outcome()}")
    return lines, CODES.get(app.signalled, 0) if app.signalled is not None else 0
