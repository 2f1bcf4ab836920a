"""The Project view: the resolved configuration with each value's origin (secrets as set or
unset), the dataset's counts, and the spend per stage and model from `history`, with the pods'."""

from __future__ import annotations

from typing import TYPE_CHECKING

import os

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Static

from overbrainer.tui.views import in_background, plain

if TYPE_CHECKING:  # pragma: no cover
    from textual import getters

    from overbrainer.tui.app import OverbrainerApp


class ProjectView(VerticalScroll):
    if TYPE_CHECKING:  # a view lives in the OverbrainerApp (textual's typed `app`)
        app = getters.app(OverbrainerApp)

    DEFAULT_CSS = """
    ProjectView DataTable { height: auto; max-height: 40; margin-bottom: 1; }
    ProjectView .title { text-style: bold; margin-top: 1; }
    """

    stale = True

    def compose(self) -> ComposeResult:
        yield Static("Configuration (r reads overbrainer.toml and .env again)", classes="title", markup=False)
        yield Static("", id="config-error", markup=False)
        yield DataTable(id="config", cursor_type="row", zebra_stripes=True)
        yield Static("Dataset", classes="title", markup=False)
        yield Static("", id="dataset-counts", markup=False)
        yield Static("Spend (history)", classes="title", markup=False)
        yield DataTable(id="spend", cursor_type="row", zebra_stripes=True)
        yield Static("", id="pods", markup=False)

    def on_mount(self) -> None:
        self.query_one("#config", DataTable).add_columns("key", "value", "origin")
        self.query_one("#spend", DataTable).add_columns("stage", "model", "runs", "tokens in", "tokens out", "cost")

    def focus_main(self) -> None:
        self.query_one("#config", DataTable).focus()

    def refresh_view(self) -> None:
        if not self.stale:
            return
        self.stale = False
        from overbrainer.tui.project_model import gather

        ws = self.app.workspace
        reload_env = not self.app.tasks.busy  # the environment is the running flow's too

        def compute():
            config = ws.load_config(reload_env=reload_env)
            environ = os.environ if ws.environ is None else ws.environ
            return gather(ws.project_dir, config, environ, ws.dotenv.keys if ws.dotenv is not None else ())
        in_background(self, compute, self.show)

    def show(self, facts) -> None:
        error = self.query_one("#config-error", Static)
        if isinstance(facts, Exception):
            error.update(f"cannot read the project: {facts}")
            return
        error.update("")
        table = self.query_one("#config", DataTable)
        table.clear()
        for row in facts.rows:
            table.add_row(plain(row.key), plain(row.value), plain(row.origin))
        self.query_one("#dataset-counts", Static).update("\n".join(facts.dataset))
        spend = self.query_one("#spend", DataTable)
        spend.clear()
        for s in facts.spend:
            spend.add_row(plain(s.stage), plain(s.model), str(s.runs), str(s.input_tokens), str(s.output_tokens),
                          plain(s.cost))
        if not facts.spend:
            spend.add_row("no stage has run yet", "", "", "", "", "")
        self.query_one("#pods", Static).update(facts.pods or "pods: none rented for this project")
