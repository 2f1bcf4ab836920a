"""Events → log lines (the renderer for pipes, files, cron and CI, and the base of the bars one).

Stage events give the progress lines (docs/exit-codes.md#stdout-and-stderr):
`answers: 40 to process (12 already done)` (`answers: nothing to do, 52 already done` on a rerun
with nothing left; in batch mode `answers: batch mode: collecting 20 answer(s) from ended
batches` or `… no ended batch to collect`, what is submitted being logged as it goes), progress
at each tenth (every item below 10) and at least once a minute while items get done
(STAGE_INTERVAL: a 10k-item stage at one item a second still says how far it is), retries as
WARN, final failures as ERROR, `answers: finished` (`answers: stopped: <reason>` for a stage a
fatal error stopped, with no progress line for the item that met it).
Training events give `train: job running`, throttled step lines (at most one per 10 s; every eval
line and the last step shown, once: a log with no metric, the trainer's closing summary, shows
nothing; an lr of 0, the warmup's first step, is left out), phase lines and evaluation progress
at each tenth.
Lines go through the `overbrainer` logger, so they share its format, level, colour and redactor.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from typing import Callable, TypeGuard

from overbrainer.front.events import (
    Event,
    ItemDone,
    ItemFailed,
    JobStatus,
    Lagged,
    Mark,
    Metric,
    PodStatus,
    RunWatched,
    StageFinished,
    StageModel,
    StageStarted,
    Transfer,
)
from overbrainer.support import fmt
from overbrainer.support.timescale import scaled

log = logging.getLogger("overbrainer.progress")

INTERVAL = 10.0
STAGE_INTERVAL = 60.0  # a stage's progress line: at each tenth, and at least this often (items getting done)

PHASES = {"train": "training", "merge": "merging adapter", "export": "exporting",
          "compare": "comparing", "convert": "converting to GGUF", "quantize": "quantizing"}


class Tenths:
    """Due at each new tenth of `total` (at every item when total < 10), and at the end."""

    def __init__(self, total: int | None):
        self.total = total or 0
        self.last = 0

    def due(self, done: int) -> bool:
        if self.total <= 0:
            return False
        mark = done if self.total < 10 else (min(done, self.total) * 10) // self.total
        if done >= self.total:
            mark = max(mark, 10 if self.total >= 10 else self.total)
        if mark > self.last:
            self.last = mark
            return True
        return False


class Every:
    """Due at most once per `interval` seconds (the first call is due)."""

    def __init__(self, interval: float = INTERVAL, clock: Callable[[], float] = time.monotonic):
        self.interval = interval
        self.clock = clock
        self.last: float | None = None

    def due(self, force: bool = False) -> bool:
        now = self.clock()
        if force or self.last is None or now - self.last >= self.interval:
            self.last = now
            return True
        return False


def sci(x: float) -> str:
    """2e-4 → "2.00e-4"."""
    mantissa, _, exp = f"{x:.2e}".partition("e")
    return f"{mantissa}e{int(exp)}"


def is_number(x: float | None) -> TypeGuard[float]:
    """A finite number (a metric the plugin could not compute is None)."""
    return x is not None and isinstance(x, (int, float)) and math.isfinite(x)


def describe_metric(m: Metric) -> str:
    """`step 12/40 (30%), epoch 0.90, loss 1.2345, lr 2.00e-4, grad_norm 0.812`."""
    if m.max_steps:
        parts = [f"step {m.step}/{m.max_steps} ({m.step * 100 // m.max_steps}%)"]
    else:
        parts = [f"step {m.step}"]
    if is_number(m.epoch):
        parts.append(f"epoch {m.epoch:.2f}")
    if is_number(m.loss):
        parts.append(f"loss {m.loss:.4f}")
    if is_number(m.eval_loss):
        parts.append(f"eval_loss {m.eval_loss:.4f}")
    if is_number(m.learning_rate) and m.learning_rate != 0:  # 0: the warmup's first step, not a setting
        parts.append(f"lr {sci(m.learning_rate)}")
    if is_number(m.grad_norm):
        parts.append(f"grad_norm {m.grad_norm:.3f}")
    return ", ".join(parts)


@dataclass
class StageProgress:
    """What a renderer has shown of one stage; `shown`: the clock at its last line (or start)."""
    total: int
    shown: float = 0.0
    done: int = 0
    tenths: Tenths = field(init=False)

    def __post_init__(self) -> None:
        self.tenths = Tenths(self.total)


@dataclass
class RunProgress:
    """What a renderer has shown of one run (or side job): its prefix, step and transfer gates."""
    prefix: str
    steps: Every
    eval: Tenths | None = None
    eval_step: int = 0
    transfers: dict[str, Every | Tenths] = field(default_factory=dict)


class LineRenderer:
    """Turns events into log lines. Subclasses draw bars instead of progress lines."""

    def __init__(self, logger: logging.Logger = log, *, interval: float = INTERVAL,
                 clock: Callable[[], float] = time.monotonic, labels: dict[str, str] | None = None):
        self.log = logger
        self.interval = interval
        self.stage_interval = scaled(STAGE_INTERVAL)  # the tests shrink it (support/timescale.py)
        self.clock = clock
        self.stages: dict[str, StageProgress] = {}
        self.runs: dict[str, RunProgress] = {}
        # What each run's lines start with (`train`, a side job's kind), from RunWatched; shared by
        # the renderers of a command's buses (frontend.Cli), each bus having a renderer of its own.
        self.labels: dict[str, str] = labels if labels is not None else {}

    # --- dispatch -----------------------------------------------------------------------------

    def handle(self, ev: Event) -> None:
        method = getattr(self, "on_" + type(ev).__name__, None)
        if method is not None:
            method(ev)

    def close(self) -> None:
        """The bus ended: nothing to flush for plain lines."""

    # --- pipeline stages ----------------------------------------------------------------------

    def on_StageStarted(self, ev: StageStarted) -> None:
        self.stages[ev.stage] = StageProgress(ev.total, self.clock())
        if ev.batch:
            collect = f"collecting {ev.total} answer(s) from ended batches" if ev.total else "no ended batch to collect"
            self.log.info("%s: batch mode: %s", ev.stage, collect)
        elif ev.total == 0:
            self.log.info("%s: nothing to do, %d already done", ev.stage, ev.skipped)
        elif ev.skipped:
            self.log.info("%s: %d to process (%d already done)", ev.stage, ev.total, ev.skipped)
        else:
            self.log.info("%s: %d to process", ev.stage, ev.total)
        self.stage_started(ev.stage, ev.total)

    def on_StageModel(self, ev: StageModel) -> None:
        self.log.debug("%s: model %s", ev.stage, ev.model)

    def _count(self, stage: str) -> None:
        st = self.stages.get(stage)
        if st is None:
            st = self.stages[stage] = StageProgress(0, self.clock())
        st.done += 1
        self.stage_progress(stage, st)

    def on_ItemDone(self, ev: ItemDone) -> None:
        what = "already done" if ev.usage is None else ("excluded" if ev.excluded else "done")
        self.log.debug("%s: %s %s", ev.stage, ev.id, what)
        self._count(ev.stage)

    def on_ItemFailed(self, ev: ItemFailed) -> None:
        if ev.retryable:
            self.log.warning("%s: %s: %s", ev.stage, ev.id, ev.error)
            return
        self.log.error("%s: %s failed: %s", ev.stage, ev.id, ev.error)
        if ev.stops:  # the stage stops: no progress line says it got on
            self.stages.setdefault(ev.stage, StageProgress(0)).done += 1
            return
        self._count(ev.stage)

    def on_StageFinished(self, ev: StageFinished) -> None:
        self.stage_finished(ev.stage)
        self.stages.pop(ev.stage, None)
        if ev.stopped is not None:
            self.log.warning("%s: stopped: %s", ev.stage, ev.stopped)
        else:
            self.log.info("%s: finished", ev.stage)

    def on_Lagged(self, ev: Lagged) -> None:
        self.log.debug("progress: %d event(s) dropped: the display fell behind", ev.dropped)

    # hooks (lines here, bars in render_bars)

    def stage_started(self, stage: str, total: int) -> None:
        pass

    def stage_progress(self, stage: str, st: StageProgress) -> None:
        tenth = st.tenths.due(st.done)
        now = self.clock()
        if tenth or now - st.shown >= self.stage_interval:
            st.shown = now
            if st.total:
                self.log.info("%s: %d/%d", stage, st.done, st.total)
            else:
                self.log.info("%s: %d done", stage, st.done)

    def stage_finished(self, stage: str) -> None:
        pass

    # --- training runs ------------------------------------------------------------------------

    def run(self, run_id: str) -> RunProgress:
        r = self.runs.get(run_id)
        if r is None:
            r = self.runs[run_id] = RunProgress(self.labels.get(run_id, "train"), Every(self.interval, self.clock))
        return r

    def on_RunWatched(self, ev: RunWatched) -> None:
        r = self.run(ev.run_id)
        r.prefix = self.labels[ev.run_id] = ev.job or "train"
        self.log.debug("%s: following run %s", r.prefix, ev.run_id)

    def on_Metric(self, ev: Metric) -> None:
        if not any(is_number(x) for x in (ev.loss, ev.eval_loss, ev.learning_rate, ev.grad_norm)):
            return  # the trainer's closing summary (runtime, mean loss) at a step already shown
        r = self.run(ev.run_id)
        self.metric(r, ev)

    def metric(self, r: RunProgress, m: Metric) -> None:
        last = bool(m.max_steps) and m.step >= (m.max_steps or 0)
        if r.steps.due(force=is_number(m.eval_loss) or last):
            self.log.info("%s: %s", r.prefix, describe_metric(m))

    def on_Mark(self, ev: Mark) -> None:
        r = self.run(ev.run_id)
        if ev.kind == "stage":
            self.log.info("%s: %s", r.prefix, PHASES.get(ev.name or "", ev.name or "working"))
        elif ev.kind == "eval":
            step = ev.step or 0
            if r.eval is None or step <= r.eval_step:
                r.eval = Tenths(ev.total)
                self.evaluating(r, step, ev.total, first=True)
            else:
                self.evaluating(r, step, ev.total, first=False)
            r.eval_step = step
        elif ev.kind == "end":
            self.log.info("%s: finalizing (saving model)", r.prefix)

    def evaluating(self, r: RunProgress, step: int, total: int | None, first: bool) -> None:
        """The first eval mark of an evaluation, then each tenth of it."""
        due = r.eval.due(step) if r.eval is not None else False
        if first or due:
            self.log.info("%s: evaluating %s", r.prefix, f"{step}/{total}" if total else step)

    def on_JobStatus(self, ev: JobStatus) -> None:
        p = self.run(ev.run_id).prefix
        if ev.status == "running":
            self.log.info("%s: job running", p)
        elif ev.status == "exited":
            level = logging.INFO if ev.code == 0 else logging.WARNING
            self.log.log(level, "%s: job exited with code %s", p, ev.code)
        elif ev.status == "lost":
            self.log.warning("%s: job lost (stopped without an exit code)", p)
        else:
            self.log.warning("%s: job %s", p, ev.status)

    def on_Transfer(self, ev: Transfer) -> None:
        r = self.run(ev.run_id)
        key = ev.direction
        gate = r.transfers.get(key)
        if gate is None or ev.done == 0:
            gate = r.transfers[key] = (Tenths(ev.total) if ev.total else Every(self.interval, self.clock))
        self.transfer(r, ev, gate)

    def transfer(self, r: RunProgress, ev: Transfer, gate: Tenths | Every) -> None:
        """A line at each tenth of a known total; else at most one per interval, and the end (the
        last event of a transfer has done == total). Nothing for the start (0 bytes)."""
        if isinstance(gate, Tenths):
            due = gate.due(ev.done)
        else:
            due = ev.done > 0 and gate.due(force=ev.total is not None and ev.done >= ev.total)
        if due:
            verb = "uploading" if ev.direction == "upload" else "downloading"
            amount = fmt.size(ev.done) + (f" of {fmt.size(ev.total)}" if ev.total else "")
            self.log.info("%s: %s %s", r.prefix, verb, amount)

    def on_PodStatus(self, ev: PodStatus) -> None:
        """`train: pod abc123 ready (NVIDIA A40, $0.44/h)`; a pod not deleted is a warning."""
        parts = [f"pod {ev.pod_id}" if ev.pod_id else "pod", ev.phase.replace("_", " ")]
        facts = [f for f in (ev.gpu, f"${ev.rate:.2f}/h" if is_number(ev.rate) and ev.rate else None,
                             f"about ${ev.spend:.2f}" if is_number(ev.spend) else None) if f]
        text = " ".join(parts) + (f" ({', '.join(facts)})" if facts else "")
        text += f": {ev.message}" if ev.message else ""
        level = logging.WARNING if ev.phase in ("not_deleted", "stray", "not_ready") else logging.INFO
        self.log.log(level, "%s: %s", self.run(ev.run_id).prefix, text)
