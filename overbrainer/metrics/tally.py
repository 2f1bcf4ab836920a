"""The numbers behind the metric families, kept without prometheus_client (plain data, one lock).

- Counters (items by result, tokens, cost) start from `.overbrainer/history.jsonl` (`seed`), so
  they count the project's whole history; the bus events of this command add to them.
- A stage's own events do not carry everything its history line will: attempts that were retried
  spent tokens, and skipped answers are counted without an event. So `StageFinished` adds what
  its stats hold beyond what the stage's events already added, and the counters then equal the
  history line. A stage stopped midway (Ctrl-C: no `StageFinished`) or a subscriber that lost
  events is made good from history when its bus ends (`reconcile`: never lower than now).
- Retries count this process only; `stage_running` is 1 between `StageStarted` and
  `StageFinished` (or the end of the bus); training gauges follow the runs this command watched.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from overbrainer.dataset.accounting.stages import STAGES
from overbrainer.front import events as ev
from overbrainer.support.redact import redact, strip_controls

RESULTS = ("done", "skipped", "failed", "excluded")
PHASES = ("training", "evaluating", "finalizing", "merging", "exporting", "retrieving")
UNKNOWN = "unknown"
_LABEL_MAX = 200


def model_label(model: str | None) -> str:
    """A model's label: its name, `unknown` when none; a file path (a local server may name its
    model by path) keeps only its last part, so no home directory or user name shows."""
    text = strip_controls(redact(model or "")).strip()
    if text.startswith(("/", "~", ".")) or "\\" in text:
        text = text.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
    return text[:_LABEL_MAX] or UNKNOWN


@dataclass
class Counts:
    """Counter values: items[(stage, result)], tokens[(stage, model, direction)], cost[(stage, model)]."""

    items: dict[tuple[str, str], int] = field(default_factory=dict)
    tokens: dict[tuple[str, str, str], int] = field(default_factory=dict)
    cost: dict[tuple[str, str], float] = field(default_factory=dict)

    def add(self, stage: str, model: str, *, result: dict[str, int] | None = None, tokens_in: int = 0,
            tokens_out: int = 0, cost: float | None = None) -> None:
        for name, n in (result or {}).items():
            if n > 0:
                self.items[(stage, name)] = self.items.get((stage, name), 0) + n
        for direction, n in (("in", tokens_in), ("out", tokens_out)):
            if n > 0:
                self.tokens[(stage, model, direction)] = self.tokens.get((stage, model, direction), 0) + n
        if cost is not None:  # a known price of 0 (a local model) still has its series
            self.cost[(stage, model)] = self.cost.get((stage, model), 0.0) + max(cost, 0.0)

    def raise_to(self, other: "Counts") -> None:
        """Each value becomes the larger of this one and `other`'s (a counter never goes down)."""
        pairs: tuple[tuple[dict[Any, Any], dict[Any, Any]], ...] = (
            (self.items, other.items), (self.tokens, other.tokens), (self.cost, other.cost))
        for mine, theirs in pairs:
            for key, value in theirs.items():
                if value > mine.get(key, 0):
                    mine[key] = value


def history_counts(entries: Iterable) -> Counts:
    """The counters that history.jsonl's entries (dataset.accounting.history.HistoryEntry) add up to."""
    counts = Counts()
    for e in entries:
        counts.add(e.stage, model_label(e.model), result={"done": e.done, "skipped": e.skipped, "failed": e.failed,
                                                          "excluded": e.excluded},
                   tokens_in=e.input_tokens, tokens_out=e.output_tokens, cost=e.cost)
    return counts


@dataclass
class RunGauges:
    """The training gauges of one watched run, and what its phase is made of."""

    step: int | None = None
    max_steps: int | None = None
    loss: float | None = None
    eval_loss: float | None = None
    learning_rate: float | None = None
    stage: str | None = None  # the job's stage mark: train | merge | export
    evaluating: bool = False
    ended: bool = False
    exited: bool = False
    followed: bool = True  # False once its bus ended: no phase then

    @property
    def phase(self) -> str | None:
        if not self.followed:
            return None
        if self.exited:
            return "retrieving"
        if self.stage in ("merge", "export"):
            return "merging" if self.stage == "merge" else "exporting"
        if self.ended or (self.max_steps and self.step is not None and self.step >= self.max_steps):
            return "finalizing"
        return "evaluating" if self.evaluating else "training"

    def metric(self, m: ev.Metric) -> None:
        self.step = m.step if self.step is None else max(self.step, m.step)
        self.evaluating = False
        for name in ("max_steps", "loss", "eval_loss", "learning_rate"):
            value = getattr(m, name)
            if value is not None:
                setattr(self, name, value)

    def mark(self, m: ev.Mark) -> None:
        if m.kind == "stage":
            self.stage, self.evaluating = m.name, False
        elif m.kind == "eval":
            self.evaluating = True
        elif m.kind == "end":
            self.ended = True
            if m.step is not None:
                self.step = m.step if self.step is None else max(self.step, m.step)


@dataclass
class _Execution:
    """What the events of a stage's current execution added (StageFinished adds the rest)."""

    items: dict[str, int] = field(default_factory=lambda: dict.fromkeys(RESULTS, 0))
    tokens_in: int = 0
    tokens_out: int = 0
    cost: float = 0.0


@dataclass
class Snapshot:
    counts: Counts
    running: dict[str, int]
    retries: dict[str, int]
    runs: dict[str, RunGauges]


class Tally:
    """Thread-safe: the bus subscribers `apply` events, scrapes and textfile writes `snapshot`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counts = Counts(items={(s, r): 0 for s in STAGES for r in RESULTS})
        self.running = dict.fromkeys(STAGES, 0)
        self.retries = dict.fromkeys(STAGES, 0)
        self.runs: dict[str, RunGauges] = {}
        self._models: dict[str, str] = {}
        self._current: dict[str, _Execution] = {}

    def seed(self, entries: Iterable) -> None:
        self.reconcile(entries)

    def reconcile(self, entries: Iterable) -> None:
        """Raise every counter to what history records (never lower one)."""
        counts = history_counts(entries)
        with self._lock:
            self.counts.raise_to(counts)

    # --- events -------------------------------------------------------------------------------

    def apply(self, event: ev.Event) -> None:
        handler = _HANDLERS.get(type(event))
        if handler is not None:
            with self._lock:
                handler(self, event)

    def _stage_model(self, e: ev.StageModel) -> None:
        self._models[e.stage] = model_label(e.model)

    def _stage_started(self, e: ev.StageStarted) -> None:
        self.running[e.stage] = 1
        self._current[e.stage] = _Execution()

    def _item_done(self, e: ev.ItemDone) -> None:
        run = self._current.setdefault(e.stage, _Execution())
        result = "skipped" if e.usage is None else "excluded" if e.excluded else "done"
        run.items[result] += 1
        tokens_in = e.usage.input_tokens if e.usage is not None else 0
        tokens_out = e.usage.output_tokens if e.usage is not None else 0
        run.tokens_in += tokens_in
        run.tokens_out += tokens_out
        run.cost += e.cost or 0.0
        self.counts.add(e.stage, self._models.get(e.stage, UNKNOWN), result={result: 1}, tokens_in=tokens_in,
                        tokens_out=tokens_out, cost=e.cost)

    def _item_failed(self, e: ev.ItemFailed) -> None:
        if e.retryable:
            self.retries[e.stage] = self.retries.get(e.stage, 0) + 1
            return
        self._current.setdefault(e.stage, _Execution()).items["failed"] += 1
        self.counts.add(e.stage, UNKNOWN, result={"failed": 1})

    def _stage_finished(self, e: ev.StageFinished) -> None:
        run = self._current.pop(e.stage, None) or _Execution()
        st = e.stats
        final = {"done": st.done, "skipped": st.skipped, "failed": st.failed, "excluded": st.excluded}
        cost = None if st.cost is None else st.cost - run.cost
        self.counts.add(e.stage, self._models.get(e.stage, UNKNOWN),
                        result={k: n - run.items[k] for k, n in final.items()},
                        tokens_in=st.usage.input_tokens - run.tokens_in,
                        tokens_out=st.usage.output_tokens - run.tokens_out, cost=cost)
        self.running[e.stage] = 0

    def _run_watched(self, e: ev.RunWatched) -> None:
        if e.job is None:  # a training run (export and compare jobs have no training gauges)
            gauges = self.runs.setdefault(e.run_id, RunGauges())
            gauges.followed = True

    def _metric(self, e: ev.Metric) -> None:
        if e.run_id in self.runs:
            self.runs[e.run_id].metric(e)

    def _mark(self, e: ev.Mark) -> None:
        if e.run_id in self.runs:
            self.runs[e.run_id].mark(e)

    def _job_status(self, e: ev.JobStatus) -> None:
        if e.run_id in self.runs:
            self.runs[e.run_id].exited = e.status != "running"

    def bus_ended(self, stages: Iterable[str], runs: Iterable[str]) -> bool:
        """A bus closed: the stages started on it stop running, its runs lose their phase.
        True when a stage was still running (it was stopped: its history line says the rest)."""
        stopped = False
        with self._lock:
            for stage in stages:
                stopped = stopped or self.running.get(stage) == 1
                self.running[stage] = 0
                self._current.pop(stage, None)
            for run_id in runs:
                if run_id in self.runs:
                    self.runs[run_id].followed = False
        return stopped

    def snapshot(self) -> Snapshot:
        with self._lock:
            c = self.counts
            return Snapshot(Counts(dict(c.items), dict(c.tokens), dict(c.cost)), dict(self.running),
                            dict(self.retries), {k: RunGauges(**vars(v)) for k, v in self.runs.items()})


_HANDLERS: dict[type, Callable[[Tally, Any], None]] = {
    ev.StageModel: Tally._stage_model,
    ev.StageStarted: Tally._stage_started,
    ev.ItemDone: Tally._item_done,
    ev.ItemFailed: Tally._item_failed,
    ev.StageFinished: Tally._stage_finished,
    ev.RunWatched: Tally._run_watched,
    ev.Metric: Tally._metric,
    ev.Mark: Tally._mark,
    ev.JobStatus: Tally._job_status,
}
