"""The Training view: the runs (state, step, loss, time left, pod spend), the selected run's
detail and loss chart, and the keys of `overbrainer train`: `n` starts a run, Enter follows the
selected one (`train attach`), `s` asks it for a snapshot and stops it (`train stop`), `c` cancels
it (`train cancel`); `d` (anywhere) detaches the followed run, `a` abandons a provisioning."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Sparkline, Static

from overbrainer.jobs.run_record import RunPlace
from overbrainer.tui import runs_model, steering, work
from overbrainer.tui.tasks import TRAINING
from overbrainer.tui.views import plain


def start_note(config) -> str:
    """What a new run will use and may cost, said before it starts."""
    if config is None or config.training is None:
        return ""
    tr = config.training
    target = config.targets.get(tr.target)
    text = f"{tr.base_model} ({tr.adapter}) on target `{tr.target}`"
    if target is not None and target.kind == "runpod":
        gpus = target.gpu_types if isinstance(target.gpu_types, str) else ", ".join(target.gpu_types)
        text += (f": a Runpod pod ({gpus} x{target.gpu_count}) bills per second from its creation to its "
                 f"deletion; it deletes itself after max_hours = {target.max_hours:g}")
        if target.max_cost_usd is not None:
            text += f" or once it cost ${target.max_cost_usd:g}"
    return text


class TrainingView(Vertical):
    DEFAULT_CSS = """
    TrainingView DataTable { height: 1fr; }
    TrainingView #detail-row { height: 12; }
    TrainingView #run { width: 2fr; }
    TrainingView #chart { width: 1fr; border-left: solid $primary; padding: 0 1; }
    TrainingView Sparkline { height: 8; }
    TrainingView #train-results { height: auto; max-height: 6; color: $text-muted; }
    """
    BINDINGS = [
        Binding("n", "new", "New run"),
        Binding("s", "stop", "Stop"),
        Binding("c", "cancel", "Cancel"),
    ]

    stale = True

    def __init__(self) -> None:
        super().__init__()
        self.cache = runs_model.MetricsCache()
        self.rows: list | None = None
        self.shown: tuple | None = None

    def compose(self) -> ComposeResult:
        yield DataTable(id="runs", cursor_type="row", zebra_stripes=True)
        with Horizontal(id="detail-row"):
            yield Static("", id="run", markup=False)
            with Vertical(id="chart"):
                yield Static("loss", id="chart-title", markup=False)
                yield Sparkline([], id="loss")
        yield Static("", id="train-results", markup=False)

    def on_mount(self) -> None:
        table = self.query_one("#runs", DataTable)
        for name in ("run", "state", "target", "created", "step", "loss", "time left", "pod spend"):
            table.add_column(name, key=name)

    def focus_main(self) -> None:
        self.query_one("#runs", DataTable).focus()

    def selected(self) -> str | None:
        table = self.query_one("#runs", DataTable)
        if table.row_count == 0:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key
        return key.value

    def refresh_view(self) -> None:
        rows = runs_model.rows(self.app.workspace.paths.runs, self.cache, self.app.live)
        if rows != self.rows:  # redrawn only when something changed
            self._fill(rows)
        self._detail()

    def _fill(self, rows: list) -> None:
        table = self.query_one("#runs", DataTable)
        chosen = self.selected()
        self.rows = rows
        table.clear()
        for r in rows:
            table.add_row(*(plain(v) for v in (r.id, r.state, r.target, r.created, r.step, r.loss, r.eta, r.pod)),
                          key=r.id)
        ids = [r.id for r in rows]
        if chosen in ids:
            table.move_cursor(row=ids.index(chosen))

    def _detail(self) -> None:
        app = self.app
        run_id = self.selected()
        lines, losses = (runs_model.detail(RunPlace(app.workspace.paths.runs, run_id), self.cache, app.live)
                         if run_id else (["no run yet: n starts one"], []))
        task = next((t for t in reversed(app.tasks.history) if t.kind == TRAINING or t.run_id), None)
        results = [task.outcome(), *task.lines()] if task is not None else []
        shown = (lines, len(losses), losses[-1:], results)
        if shown == self.shown:
            return
        self.shown = shown
        self.query_one("#run", Static).update("\n".join(lines))
        self.query_one("#loss", Sparkline).data = losses
        self.query_one("#chart-title", Static).update(
            f"loss: {losses[0]:.4f} → {losses[-1]:.4f} ({len(losses)} logs)" if losses else "loss: none yet")
        self.query_one("#train-results", Static).update("\n".join(results))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._detail()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.follow(event.row_key.value)

    def follow(self, run_id: str | None) -> None:
        if not run_id:
            return
        task = self.app.tasks.current
        if task is not None and task.running and task.run_id == run_id:
            self.app.notify(f"run {run_id} is followed already")
            return
        self.app.start_task(f"train attach {run_id}", TRAINING, work.attach(self.app.workspace, run_id), run_id=run_id)

    def action_new(self) -> None:
        app = self.app
        ws = app.workspace
        note = start_note(ws.config)
        if not note:
            app.notify("no [training] section in overbrainer.toml", severity="warning")
            return
        app.confirm(f"Start a training run?\n\n{note}",
                    lambda: app.start_task("train", TRAINING, work.train(ws), pod=work.trains_on_pod(ws.config)))

    def _on_selected(self, verb: str, make, text: str) -> None:
        """Run `make(workspace, run_id)` on the selected run: at once, or once the task following
        that run detached (its job goes on)."""
        app = self.app
        run_id = self.selected()
        if run_id is None:
            app.notify("no run selected", severity="warning")
            return
        flow = make(app.workspace, run_id)

        def go() -> None:
            task = app.tasks.current
            if task is not None and task.running and task.run_id == run_id and steering.following(task, app.live):
                app.after_current(f"train {verb} {run_id}", TRAINING, flow, run_id=run_id)
            else:
                app.start_task(f"train {verb} {run_id}", TRAINING, flow, run_id=run_id)
        app.confirm(text.format(run_id=run_id), go)

    def action_stop(self) -> None:
        self._on_selected("stop", work.stop, "Stop run {run_id}?\n\nIts job saves a checkpoint at the end of its "
                          "current step and stops; the TUI follows it until then and brings the snapshot home "
                          "(resume it later with `overbrainer train --resume-from {run_id}`).")

    def action_cancel(self) -> None:
        self._on_selected("cancel", work.cancel, "Cancel run {run_id}?\n\nIts job is ended without a "
                          "snapshot; what it wrote so far is brought home, and the run reads `cancelled`.")
