"""The stage commands' flows: one stage (with `questions`' subtopics pre-step), and `run`
(the stages in order, `gate` only when it has a check to make, the configuration reloaded
between them when it changed; the command trains afterwards when `[training]` is set).

`run_project` is `run`'s whole flow, the same for every front end (the command line's `run`, the
TUI's run): the stages (`run_all`) and the kept share of the paid output tokens
(dataset/accounting/history.kept_share), then, when `[training]` is set, training only when the
data or the settings changed since the last run on them (runs/flow.train_if_changed;
`retrain=True`: `run --retrain`), then the push `[hub] after_training` asks for. The front ends
only pick the front end (the session) and the options.

Like every flow they take `(session, *, options)` (front/session.py) and build their
StageContext on the session's parts: its configuration, its front end. Each stage's summary goes
through `session.report` as soon as the stage ends; a stage that failed stops here with its
error (fatal provider error, or ItemsFailed after its summary).
"""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from overbrainer.config import templates
from overbrainer.config.dotenv import DotenvState, stamp
from overbrainer.config.model import Config, Topic
from overbrainer.config.ready import refuse_unrunnable
from overbrainer.dataset.accounting.history import kept_share, read_history
from overbrainer.dataset.accounting.stages import STAGES
from overbrainer.dataset.batch_journal import Journal
from overbrainer.dataset.quality import benchmarks as benchmark_files
from overbrainer.errors import ConfigError, ItemsFailed, ItemsRefused, UsageError
from overbrainer.front.session import Session
from overbrainer.hub.after_training import push_after_training, require_hub, warn_missing_token
from overbrainer.pipeline.answers import run_answers
from overbrainer.pipeline.answers_batch import run_answers_batch
from overbrainer.pipeline.context import StageContext, StageInterrupted
from overbrainer.pipeline.gate import gate_configured, run_gate
from overbrainer.pipeline.plan import COMMAND_STAGES, refuse_unpriced
from overbrainer.pipeline.questions import run_questions, topics_without_subtopics
from overbrainer.pipeline.split_stage import run_split_stage
from overbrainer.pipeline.stage import StageResult, some
from overbrainer.pipeline.subtopics import run_subtopics
from overbrainer.runs.flow import TrainResult, train_if_changed
from overbrainer.runs.post_train import PostTrain
from overbrainer.support.budget import Budget, SpendCapReached

log = logging.getLogger(__name__)

Report = Callable[[str, dict[str, Any]], None]


@contextlib.contextmanager
def stage_context(session: Session, *, max_cost: float | None = None) -> Iterator[StageContext]:
    """A StageContext on the session's configuration and front end: its bus rendering and its
    Interrupt catching Ctrl-C (and SIGTERM) while the flow runs; `max_cost` (`--max-cost`) over
    `[pipeline] max_cost_usd`. The context (its providers' connections) is closed when the flow
    ends."""
    guard = session.front.open_bus()
    try:
        with (session.interruptible() as interrupt,
              StageContext(session.project_dir, session.config, bus=guard.bus, interrupt=interrupt,
                           max_cost=max_cost) as ctx):
            yield ctx
    finally:
        guard.close()


def conclude(result: StageResult, report: Report, command: str | None = None,
             budget: Budget | None = None) -> StageResult:
    """Print the stage's summary, then raise what stopped it or what failed in it (an interrupt
    as StageInterrupted, naming the stage and the `command` that resumes it; a spend recorded
    past `budget`'s cap as SpendPastCap, before any other failure of the stage)."""
    report(result.text(), result.data())
    past = budget.overspent() if budget is not None else None
    if result.interrupted:
        if past is not None:
            log.error("%s", past)
        raise StageInterrupted(result.stage, command) from result.error
    if past is not None:
        if result.error is not None and not isinstance(result.error, SpendCapReached):
            log.error("%s", result.error)
        raise past
    if result.error is not None:
        raise result.error
    if result.stats.failed and result.refused >= result.stats.failed:
        prompt = f"prompts/{result.stage}.txt" if result.stage in ("subtopics", "questions") else "the prompt"
        raise ItemsRefused(f"{result.stats.failed} {result.stage} item(s) failed: the provider's moderation "
                           f"flagged their prompt, as it will on every run; change the topic's description or "
                           f"{prompt}, or the generator's model")
    if result.stats.failed:
        raise ItemsFailed(f"{result.stats.failed} {result.stage} item(s) failed; "
                          "run the command again to retry them")
    return result


def stalled_error(results: list[StageResult]) -> ItemsFailed | None:
    """The stages' items whose round added nothing this time (pipeline/held.py), as one error
    line naming them and what asks them again; None when there are none."""
    parts = [f"{r.stage} of {some(r.stalled)}" for r in results if r.stalled]
    if not parts:
        return None
    kinds = [r.stage for r in results if r.stalled]
    return ItemsFailed(f"no new items at the last try: {'; '.join(parts)}; not asked again until the topic's "
                       f"description or counts, the prompt ({', '.join(f'prompts/{k}.txt' for k in kinds)}) "
                       "or the generator's model change, or with --force")


def raise_stalled(results: list[StageResult]) -> None:
    """`run` and the stage commands end with exit 1 when a paid round added nothing."""
    error = stalled_error(results)
    if error is not None:
        raise error


def answers_flow(ctx: StageContext, topics: list[Topic], *, force: bool = False, retry_excluded: bool = False,
                 wait: bool = False) -> StageResult:
    """The answers stage, online or in batch mode (`[pipeline] mode`, `answers_mode`: docs/batch.md)."""
    if ctx.pipeline.stage_mode("answers") != "batch":
        refuse_open_batches(ctx)
        return run_answers(ctx, topics, force=force, retry_excluded=retry_excluded)
    if force or retry_excluded:
        raise UsageError("--force and --retry-excluded are online only: set [pipeline] answers_mode = \"online\" "
                         "(OVERBRAINER_PIPELINE__ANSWERS_MODE=online) for this command")
    return run_answers_batch(ctx, topics, wait=wait)


def refuse_open_batches(ctx: StageContext) -> None:
    """Online answers while answers batches are still out would pay for their questions twice:
    UsageError (exit 2) saying how to collect them first."""
    subs = [s for s in Journal(ctx.paths.batches).all("answers") if s.open]
    if subs:
        raise UsageError(f"answers: {sum(len(s.items) for s in subs)} question(s) are in {len(subs)} batch(es) still "
                         "out; collect them first in batch mode ([pipeline] mode = \"batch\"; `overbrainer batches "
                         "cancel --all` ends them sooner), then answer online")


def run_stage(session: Session, stage: str, *, topic: str | None = None, force: bool = False,
              retry_excluded: bool = False, max_cost: float | None = None, wait: bool = False) -> list[StageResult]:
    """One stage command (`subtopics`, `questions`, `answers`, `gate`, `split`); `retry_excluded`:
    `answers --retry-excluded`; `max_cost`: `--max-cost`; `wait`: batch mode waits for its batches.
    Ends with ItemsFailed when a round added nothing (`stalled_error`)."""
    with stage_context(session, max_cost=max_cost) as ctx:
        results = _stage(ctx, stage, session.report, topic, force, retry_excluded, wait)
    raise_stalled(results)
    return results


def _stage(ctx: StageContext, stage: str, report: Report, topic: str | None,
           force: bool, retry_excluded: bool = False, wait: bool = False) -> list[StageResult]:
    if stage == "split":
        return [conclude(run_split_stage(ctx, topic), report, stage, ctx.budget)]
    if stage == "gate":
        return [conclude(run_gate(ctx, ctx.select_topics(topic)), report, stage, ctx.budget)]
    topics = ctx.select_topics(topic)
    refuse_unpriced(ctx, COMMAND_STAGES[stage], topics, force=force, retry_excluded=retry_excluded)
    results: list[StageResult] = []
    if stage == "subtopics":
        results.append(conclude(run_subtopics(ctx, topics, force=force), report, stage, ctx.budget))
    elif stage == "questions":
        empty = topics_without_subtopics(ctx, topics)
        pending_error: ItemsFailed | None = None
        if empty:
            # Topics with no subtopic at all get theirs first (never with --force).
            try:
                results.append(conclude(run_subtopics(ctx, empty, force=False), report, stage, ctx.budget))
            except ItemsFailed as e:
                pending_error = e  # fill what can be filled, then fail
        results.append(conclude(run_questions(ctx, topics, force=force), report, stage, ctx.budget))
        if pending_error is not None:
            raise pending_error
    elif stage == "answers":
        result = answers_flow(ctx, topics, force=force, retry_excluded=retry_excluded, wait=wait)
        results.append(conclude(result, report, "answers --retry-excluded" if retry_excluded else stage, ctx.budget))
    else:  # pragma: no cover - the CLI only passes known names
        raise ValueError(stage)
    return results


class ConfigWatch:
    """`run`'s reload rule (docs/stages.md#run): before each stage after the first, and once more
    after split (training reads the configuration too), re-read overbrainer.toml and .env when
    their mtime or size changed. `config` is the last configuration reloaded (None while none
    was)."""

    def __init__(self, project_dir: str | Path, load: Callable[[], Config], dotenv: DotenvState | None = None):
        self.project_dir = project_dir
        self._load = load
        self._dotenv = dotenv
        self._stamp = stamp(project_dir)
        self.config: Config | None = None

    def changed(self) -> bool:
        return stamp(self.project_dir) != self._stamp

    def reload(self) -> Config:
        """The new configuration; ConfigError (the run stops) when it cannot be used."""
        self._stamp = stamp(self.project_dir)
        try:
            if self._dotenv is not None:
                self._dotenv.reload()
            config = self._load()
        except ConfigError as e:
            raise ConfigError("the configuration changed and cannot be used; the run stops",
                              e.problems or [e.message]) from e
        log.info("config reloaded")
        self.config = config
        return config


def run_all(session: Session, *, watch: ConfigWatch | None = None,
            max_cost: float | None = None, wait: bool = False) -> list[StageResult]:
    """`run`: subtopics → questions → answers → gate (when configured) → split on every topic, stopping at the first
    stage that fails. Training (the command's next flow) should use `watch.config` when the
    configuration was reloaded, else `config`. `max_cost`: `--max-cost`, for the whole run.
    A round that added nothing does not stop the run: the command ends with
    `raise_stalled(results)` once everything else is done. A stage whose batches are still out
    (batch mode, `StageResult.pending`) ends the stages there: the later ones wait for it."""
    config = session.config
    refuse_unrunnable(config)  # no topics, hidden reasoning: before the first stage spends anything
    templates.refuse_broken(session.project_dir)  # a typo in a prompt: before anything is paid
    benchmark_files.check(session.project_dir, config.pipeline.decontaminate)
    with stage_context(session, max_cost=max_cost) as ctx:
        return _all(ctx, session.report, watch, wait)


def _all(ctx: StageContext, report: Report, watch: ConfigWatch | None, wait: bool = False) -> list[StageResult]:
    refuse_unpriced(ctx, COMMAND_STAGES["run"], list(ctx.config.topics))
    flows = {
        "subtopics": lambda: run_subtopics(ctx, list(ctx.config.topics)),
        "questions": lambda: run_questions(ctx, list(ctx.config.topics)),
        "answers": lambda: answers_flow(ctx, list(ctx.config.topics), wait=wait),
        "gate": lambda: run_gate(ctx, list(ctx.config.topics)),
        "split": lambda: run_split_stage(ctx),
    }
    results = []
    for i, stage in enumerate(STAGES):
        if i > 0:
            _maybe_reload(ctx, watch)
        if ctx.interrupted():
            raise StageInterrupted(stage)
        if stage == "gate" and not gate_configured(ctx.config):
            continue  # no check configured: nothing to say, every usable answer goes to split
        results.append(conclude(flows[stage](), report, budget=ctx.budget))
        if results[-1].pending:
            return results  # its batches are still out: the later stages wait for them
    # Training reads the configuration too: reload it first when it changed.
    _maybe_reload(ctx, watch)
    return results


def _maybe_reload(ctx: StageContext, watch: ConfigWatch | None) -> None:
    if watch is not None and watch.changed():
        ctx.replace_config(watch.reload())


# --- `run`'s whole flow: the stages, then training and the after-training push.


class RunOutcome:
    """What `run_project` did: each stage's result, and the training's (None when it did not
    train: no `[training]`, or nothing changed since the last run on this data)."""

    __slots__ = ("stages", "training")

    def __init__(self, stages: list[StageResult], training: TrainResult | None):
        self.stages = stages
        self.training = training


def report_kept(session: Session) -> None:
    """`kept: K of P paid output tokens (x%) are in train/eval examples` (history.kept_share), once
    a split counted them."""
    share = kept_share(read_history(session.project_dir))
    if share is not None:
        session.report(f"kept: {share.text()}", {"stage": "kept", **share.data()})


def run_project(session: Session, *, watch: ConfigWatch | None = None,
                max_cost: float | None = None, retrain: bool = False,
                after: Sequence[PostTrain] = (), wait: bool = False) -> RunOutcome:
    """`overbrainer run`: the stages, then training only on change (or `retrain`), then the
    after-training push. `watch`: the reload rule between stages; `after`: what plugs into the
    training job (the command line's `InJobExport`); `wait`: batch mode waits for its batches.
    A missing `hub` extra that the push needs stops it before the first stage (exit 2)."""
    if session.config.training is not None:
        require_hub(session.config)
    results = run_all(session, watch=watch, max_cost=max_cost, wait=wait)
    if results and results[-1].pending:
        log.info("batches are still out: the later stages and training wait for the next run")
        raise_stalled(results)  # a round that added nothing still says so
        return RunOutcome(results, None)
    report_kept(session)
    if watch is not None and watch.config is not None:  # reloaded before training
        session = session.with_config(watch.config)
    trained = None
    if session.config.training is None:
        log.info("no [training] section: run stops after split")
    else:
        warn_missing_token(session.config)
        trained = train_if_changed(session, retrain=retrain, after=after)
        if trained is not None:
            push_after_training(session, trained)
    raise_stalled(results)  # a round that added nothing: exit 1, once everything else ran
    return RunOutcome(results, trained)
