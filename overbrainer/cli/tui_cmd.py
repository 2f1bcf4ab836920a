"""`overbrainer tui`: the full-screen terminal app (overbrainer/tui/, on Textual, imported only
here). It needs a terminal of at least 80x24 and holds the project lock while it is open."""

from __future__ import annotations

import os
import sys
import threading

import click

from overbrainer.cli.context import AppContext, pass_app
from overbrainer.errors import UsageError
from overbrainer.front.bus import EventBus
from overbrainer.front.frontend import Embedded
from overbrainer.support import extras

MIN_COLUMNS, MIN_LINES = 80, 24


def terminal_size() -> tuple[int, int] | None:
    """(columns, lines) of the terminal on stdin and stdout, or None when either is not one."""
    try:
        if not (sys.stdin.isatty() and sys.stdout.isatty()):
            return None
        size = os.get_terminal_size(sys.stdout.fileno())
    except (AttributeError, ValueError, OSError):
        return None
    return size.columns, size.lines


def require_terminal() -> None:
    """UsageError (exit 2, one line) without a terminal of at least 80x24."""
    size = terminal_size()
    if size is None:
        raise UsageError("`overbrainer tui` needs a terminal: stdin and stdout are not one "
                         "(the other commands work without)")
    columns, lines = size
    if columns < MIN_COLUMNS or lines < MIN_LINES:
        raise UsageError(f"`overbrainer tui` needs a terminal of at least {MIN_COLUMNS}x{MIN_LINES}; "
                         f"this one is {columns}x{lines}")


@click.command("tui", short_help="Full-screen terminal UI: watch and steer the pipeline and training.")
@pass_app
def tui(app: AppContext) -> None:
    """Full-screen terminal UI: the configuration and its origins, the dataset (reject an item), the
    pipeline and training runs, live, with the logs. Holds the project lock while it is open.

    Keys: 1-6 views, r reload, d detach the followed run, a abandon a Runpod provisioning,
    Ctrl-C interrupt the running work as on the command line, q quit.
    """
    extras.require("tui", "overbrainer tui")
    if app.json_mode:
        raise UsageError("`overbrainer tui` has no --json output")
    require_terminal()
    # Textual and the TUI load only when the app runs: `tui --help` and every other command stay light.
    # lazy: Textual, the `tui` extra
    from overbrainer.tui.logbuf import LogBuffer, capture
    from overbrainer.tui.tasks import Tasks
    from overbrainer.tui.work import Workspace

    bus = EventBus()
    # The TUI's own front end: the bus every task shares. Opened once below, so that what watches
    # the front end (the metrics exporter, with [metrics]) subscribes to it.
    app.use_front(Embedded(bus, threading.Event(), threading.Event(), lambda report: None, renderer=lambda: None))
    with capture(LogBuffer()) as logs, app.open_project(write=True) as config:
        app.front.open_bus()
        workspace = Workspace(app.project_dir, dotenv=app.load_env())
        workspace.config = config
        from overbrainer.tui.main import run  # lazy: Textual, see above

        lines, code = run(workspace, Tasks(app.project_dir, bus=bus), logs)
    for line in lines:
        click.echo(line, err=True)
    if code:
        raise click.exceptions.Exit(code)
