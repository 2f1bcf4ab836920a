"""The Results view (read-only): every run's exports (GGUF), compares (win-or-tie rate and its
interval, the judge) and pushes (repo, state, commit)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from overbrainer.tui import runs_model

if TYPE_CHECKING:  # pragma: no cover
    from textual import getters

    from overbrainer.tui.app import OverbrainerApp


class ResultsView(VerticalScroll):
    if TYPE_CHECKING:  # a view lives in the OverbrainerApp (textual's typed `app`)
        app = getters.app(OverbrainerApp)

    stale = True

    def compose(self) -> ComposeResult:
        yield Static("", id="results-text", markup=False)

    def focus_main(self) -> None:
        self.focus()

    def refresh_view(self) -> None:
        if not self.stale:
            return
        self.stale = False
        lines = runs_model.results(self.app.workspace.paths.runs)
        self.query_one("#results-text", Static).update("\n".join(lines))
