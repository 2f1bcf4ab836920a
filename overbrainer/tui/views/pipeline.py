"""The Pipeline view: start a stage or `run` (Enter on it), watch it live (items, retries,
tokens, cost per stage), stop it (`s`: the stage stops at a safe point, as Ctrl-C stops it; `s`
again abandons the requests still in flight, as a second Ctrl-C does)."""

from __future__ import annotations

import logging

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import DataTable, OptionList, ProgressBar, Static
from textual.widgets.option_list import Option

from overbrainer.dataset.accounting.stages import STAGES
from overbrainer.tui import steering, work
from overbrainer.tui.tasks import PIPELINE
from overbrainer.tui.views import plain

log = logging.getLogger(__name__)

CHOICES = (
    ("subtopics", "subtopics: the generator lists the subtopics each topic still misses"),
    ("questions", "questions: the generator fills every subtopic with questions"),
    ("answers", "answers: the parent answers every question not answered yet"),
    ("split", "split: write data/train.jsonl and data/eval.jsonl (no request)"),
    ("run", "run: every stage in order, then training when [training] is set"),
)


def cost_note(config, stage: str, total: dict | None = None) -> str:
    """What starting `stage` spends, in words, before anything is sent: with `total` (its plan's,
    tui/work.plan_total), the number of paid requests and their estimated cost."""
    if stage == "split":
        return ""
    if config is None:
        return "It sends paid requests."
    gen, par = config.roles.generator, config.roles.parent
    who = {"subtopics": f"the generator {gen.provider}/{gen.model}",
           "questions": f"the generator {gen.provider}/{gen.model}",
           "answers": f"the parent {par.provider}/{par.model}"}.get(stage)
    if who is None:
        who = f"the generator {gen.provider}/{gen.model} and the parent {par.provider}/{par.model}"
        if config.training is not None:
            who += f", then a training run on target `{config.training.target}` (not counted here)"
    kept = "`history` and the Project view keep what was spent."
    if total is None:
        return f"It sends paid requests to {who}; {kept}"
    about = "about " if total["estimated"] else ""
    n = total["requests"]
    unknown = "" if total["complete"] else " + what a model with no listed price costs"
    return (f"It sends {about}{n} paid request{'' if n == 1 else 's'} to {who}: expected "
            f"${total['cost_usd']:.4f}{unknown}, at most ${total['cost_max_usd']:.4f}{unknown} "
            f"(`overbrainer {stage} --plan`); {kept}")


class PipelineView(Vertical):
    DEFAULT_CSS = """
    PipelineView OptionList { height: 7; }
    PipelineView DataTable { height: 7; }
    PipelineView #task { margin-top: 1; }
    PipelineView #stage-results { height: auto; color: $text-muted; }
    """
    BINDINGS = [Binding("s", "stop", "Stop")]

    stale = True
    shown: tuple | None = None

    def compose(self) -> ComposeResult:
        yield OptionList(*(Option(plain(text), id=name) for name, text in CHOICES), id="choices")
        yield Static("", id="task", markup=False)
        yield ProgressBar(id="progress", show_eta=False)
        yield DataTable(id="stages", cursor_type="none")
        yield Static("", id="stage-results", markup=False)

    def on_mount(self) -> None:
        self.query_one("#stages", DataTable).add_columns(
            "stage", "model", "handled", "done", "skipped", "failed", "excluded", "retries", "tokens in",
            "tokens out", "cost")

    def focus_main(self) -> None:
        self.query_one("#choices", OptionList).focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.start(event.option.id or "")

    def start(self, name: str) -> None:
        app = self.app
        ws = app.workspace
        flow = work.run_all(ws) if name == "run" else work.stage(ws, name)
        pod = name == "run" and work.trains_on_pod(ws.config)

        def go() -> None:
            app.start_task(name, PIPELINE, flow, pod=pod)
        if name == "split":
            go()
            return

        def ask() -> None:  # on a worker thread: the plan reads the providers' price listings
            try:
                total = work.plan_total(ws, name) if ws.config is not None else None
            except Exception as e:  # noqa: BLE001 - the dialog then says less, never fails
                log.warning("tui: the plan of %s: %s", name, e)
                total = None
            app.call_from_thread(app.confirm, f"Start {name}?\n\n{cost_note(ws.config, name, total)}", go)
        self.run_worker(ask, thread=True, group="plan", exclusive=True)

    def action_stop(self) -> None:
        task = self.app.tasks.current
        if task is None or not task.running or task.kind != PIPELINE:
            self.app.notify("no stage is running", severity="warning")
            return
        self.app.notify(f"stopping {task.label}: {steering.consequence(task, self.app.live)}")
        task.interrupt()

    def refresh_view(self) -> None:
        app = self.app
        live = app.live
        task = next((t for t in reversed(app.tasks.history) if t.kind == PIPELINE), None)
        rows = [(name, st.model or "-", f"{st.handled}/{st.total}", str(st.done), str(st.skipped), str(st.failed),
                 str(st.excluded), str(st.retries), str(st.input_tokens), str(st.output_tokens), st.cost_text())
                for name in STAGES if (st := live.stages.get(name)) is not None]
        current = live.stages.get(live.current_stage or "")
        shown = (task.outcome() if task is not None else None, rows, task.lines() if task is not None else [],
                 (current.total, current.handled) if current is not None else None)
        if shown == self.shown:  # redrawn only when something changed
            return
        self.shown = shown
        self.query_one("#task", Static).update(
            "nothing started yet: Enter starts the highlighted stage" if task is None else task.outcome())
        table = self.query_one("#stages", DataTable)
        table.clear()
        for row in rows:
            table.add_row(*(plain(cell) for cell in row))
        if current is not None:
            self.query_one("#progress", ProgressBar).update(total=max(current.total, 1), progress=current.handled)
        self.query_one("#stage-results", Static).update("\n".join(shown[2]))
