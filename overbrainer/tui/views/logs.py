"""The Logs view: the tool's log records (what the command line writes on stderr, progress lines
included), newest at the bottom, a line longer than the view wrapped (never cut); `l` cycles the
lowest level shown (debug, info, warn, error)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from rich.text import Text
from textual.widgets import RichLog, Static

from overbrainer.tui.logbuf import LEVELS

MAX_LINES = 5000


class LogsView(Vertical):
    DEFAULT_CSS = """
    LogsView #level { height: 1; color: $text-muted; }
    LogsView RichLog { height: 1fr; }
    """
    BINDINGS = [Binding("l", "level", "Level")]

    stale = True

    def __init__(self) -> None:
        super().__init__()
        self.level = "INFO"
        self.seen = 0

    def compose(self) -> ComposeResult:
        yield Static("", id="level", markup=False)
        yield RichLog(id="log", max_lines=MAX_LINES, min_width=20, wrap=True, highlight=False, markup=False)

    def focus_main(self) -> None:
        self.query_one("#log", RichLog).focus()

    def refresh_view(self) -> None:
        logs = self.app.logs
        lines = logs.since(self.seen, self.level)
        self.seen = logs.last_seq if not lines else max(self.seen, lines[-1].seq)
        widget = self.query_one("#log", RichLog)
        width = widget.scrollable_content_region.width or None  # the view's, not the console's
        for line in lines:
            widget.write(Text(line.text()), width=width)  # Text: never read as markup
        level = self.query_one("#level", Static)
        text = f"showing {self.level} and above (l: change)"
        if str(level.render()) != text:
            level.update(text)

    def action_level(self) -> None:
        self.level = LEVELS[(LEVELS.index(self.level) + 1) % len(LEVELS)]
        self._refill()

    def on_resize(self) -> None:
        # A line wraps at the width it is written at (a hidden view's is not the shown one's):
        # written again once the new width is laid out.
        self.call_after_refresh(self._refill)

    def _refill(self) -> None:
        self.query_one("#log", RichLog).clear()
        self.seen = 0
        self.refresh_view()
