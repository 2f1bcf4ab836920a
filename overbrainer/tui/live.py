"""The bus's events folded into what the Pipeline and Training views show while work runs.

`Live.apply(event)` is called by the app for every event of its bus, in order, on the app's own
thread: stage progress (items done, skipped, failed, excluded; retries; tokens and cost as the
answers arrive, the stage's own statistics once it finished) and, per run, what its watch said
(step, loss series, phase, job status, transfers, its pod).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from overbrainer.front.events import (
    Event,
    ItemDone,
    ItemFailed,
    JobStatus,
    Mark,
    Metric,
    PodStatus,
    RunWatched,
    StageFinished,
    StageModel,
    StageStarted,
    Transfer,
)
from overbrainer.train.metrics import MetricsSummary

LOSSES = 2000  # loss points kept per run for the chart


@dataclass
class StageLive:
    stage: str
    total: int = 0
    done: int = 0
    skipped: int = 0
    failed: int = 0
    excluded: int = 0
    retries: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    cost_unknown: int = 0  # answers whose cost is not known
    model: str | None = None
    finished: bool = False
    handled: int = 0  # the items of `total` done, excluded or failed (those complete before are not)

    def cost_text(self) -> str:
        if self.cost_unknown and not self.cost:
            return "cost unknown"
        if not self.cost:
            return "$0"  # spent nothing (as `history` says it)
        return f"${self.cost:.4f}" + ("+" if self.cost_unknown else "")


@dataclass
class RunLive:
    run_id: str
    job: str | None = None  # None: a training run; else a side job's kind (export, compare)
    watched: bool = False  # its job is being followed
    status: str | None = None  # running | exited | cancelled | lost
    code: int | None = None
    summary: MetricsSummary = field(default_factory=MetricsSummary)
    losses: list[float] = field(default_factory=list)
    transfer: tuple[str, int, int | None] | None = None  # direction, done, total
    pod: PodStatus | None = None

    def phase(self) -> str | None:
        """What the job does now (training, evaluating 3/10, merging adapter…), once known."""
        if not self.summary.lines and self.summary.phases.stage is None:
            return None
        return self.summary.phase(exited=self.status == "exited")

    @property
    def provisioning(self) -> bool:
        """A pod is being made for it and its job is not followed yet."""
        return self.pod is not None and not self.watched and self.pod.phase in (
            "creating", "created", "adopted", "reaching", "unavailable")


class Live:
    """Everything the events said so far (see the module docstring)."""

    def __init__(self) -> None:
        self.stages: dict[str, StageLive] = {}
        self.current_stage: str | None = None
        self.runs: dict[str, RunLive] = {}
        self.events = 0

    def run(self, run_id: str) -> RunLive:
        found = self.runs.get(run_id)
        if found is None:
            found = self.runs[run_id] = RunLive(run_id)
        return found

    def apply(self, ev: Event) -> None:
        self.events += 1
        method = getattr(self, "_on_" + type(ev).__name__, None)
        if method is not None:
            method(ev)

    def reset_stages(self) -> None:
        """A new pipeline task: the previous one's stages are forgotten."""
        self.stages.clear()
        self.current_stage = None

    # --- stages -------------------------------------------------------------------------------

    def _stage(self, name: str) -> StageLive:
        found = self.stages.get(name)
        if found is None:
            found = self.stages[name] = StageLive(name)
        return found

    def _on_StageStarted(self, ev: StageStarted) -> None:
        model = self.stages[ev.stage].model if ev.stage in self.stages else None  # said just before
        self.stages[ev.stage] = StageLive(ev.stage, total=ev.total, model=model)
        self.current_stage = ev.stage

    def _on_StageModel(self, ev: StageModel) -> None:
        self._stage(ev.stage).model = ev.model

    def _on_ItemDone(self, ev: ItemDone) -> None:
        st = self._stage(ev.stage)
        st.handled += 1
        if ev.usage is None:
            st.skipped += 1
            return
        st.done += 1
        st.excluded += bool(ev.excluded)
        st.input_tokens += ev.usage.input_tokens
        st.output_tokens += ev.usage.output_tokens
        if ev.cost is None:
            st.cost_unknown += 1
        else:
            st.cost += ev.cost

    def _on_ItemFailed(self, ev: ItemFailed) -> None:
        st = self._stage(ev.stage)
        if ev.retryable:
            st.retries += 1
        else:
            st.failed += 1
            st.handled += 1

    def _on_StageFinished(self, ev: StageFinished) -> None:
        st = self._stage(ev.stage)
        s = ev.stats
        st.done, st.skipped, st.failed, st.excluded = s.done, s.skipped, s.failed, s.excluded
        st.handled = max(st.handled, s.done + s.excluded + s.failed)  # the skipped are not in `total`
        st.input_tokens, st.output_tokens = s.usage.input_tokens, s.usage.output_tokens
        if s.cost is not None:
            st.cost, st.cost_unknown = s.cost, 0
        st.finished = True

    # --- runs ---------------------------------------------------------------------------------

    def _on_RunWatched(self, ev: RunWatched) -> None:
        r = self.run(ev.run_id)
        r.job, r.watched, r.status, r.code = ev.job, True, None, None

    def _on_Metric(self, ev: Metric) -> None:
        r = self.run(ev.run_id)
        rec: dict[str, Any] = {"event": "log", "step": ev.step, "time": ev.time, "epoch": ev.epoch,
                               "max_steps": ev.max_steps, "loss": ev.loss, "eval_loss": ev.eval_loss}
        r.summary.add(rec)
        if ev.loss is not None:
            r.losses.append(ev.loss)
            del r.losses[:-LOSSES]

    def _on_Mark(self, ev: Mark) -> None:
        rec: dict[str, Any] = {"event": ev.kind}
        if ev.kind == "stage":
            rec["name"] = ev.name
        else:
            rec.update(step=ev.step or 0, total=ev.total)
        self.run(ev.run_id).summary.add(rec)

    def _on_JobStatus(self, ev: JobStatus) -> None:
        r = self.run(ev.run_id)
        r.status, r.code = ev.status, ev.code
        if ev.status != "running":
            r.watched = False

    def _on_Transfer(self, ev: Transfer) -> None:
        self.run(ev.run_id).transfer = (ev.direction, ev.done, ev.total)

    def _on_PodStatus(self, ev: PodStatus) -> None:
        self.run(ev.run_id).pod = ev
