"""The Logs view: the tool's log records (what the command line writes on stderr, progress lines
included), newest at the bottom; `l` cycles the lowest level shown (debug, info, warn, error)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import Log, Static

from overbrainer.tui.logbuf import LEVELS

if TYPE_CHECKING:  # pragma: no cover
    from textual import getters

    from overbrainer.tui.app import OverbrainerApp

MAX_LINES = 5000


class LogsView(Vertical):
    if TYPE_CHECKING:  # a view lives in the OverbrainerApp (textual's typed `app`)
        app = getters.app(OverbrainerApp)

    DEFAULT_CSS = """
    LogsView #level { height: 1; color: $text-muted; }
    LogsView Log { height: 1fr; }
    """
    BINDINGS = [Binding("l", "level", "Level")]

    stale = True

    def __init__(self) -> None:
        super().__init__()
        self.level = "INFO"
        self.seen = 0

    def compose(self) -> ComposeResult:
        yield Static("", id="level", markup=False)
        yield Log(id="log", max_lines=MAX_LINES, highlight=False)

    def focus_main(self) -> None:
        self.query_one("#log", Log).focus()

    def refresh_view(self) -> None:
        logs = self.app.logs
        lines = logs.since(self.seen, self.level)
        self.seen = logs.last_seq if not lines else max(self.seen, lines[-1].seq)
        if lines:
            self.query_one("#log", Log).write_lines([line.text() for line in lines])
        level = self.query_one("#level", Static)
        text = f"showing {self.level} and above (l: change)"
        if str(level.render()) != text:
            level.update(text)

    def action_level(self) -> None:
        self.level = LEVELS[(LEVELS.index(self.level) + 1) % len(LEVELS)]
        self.query_one("#log", Log).clear()
        self.seen = 0
        self.refresh_view()
