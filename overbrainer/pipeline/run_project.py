"""`run`'s whole flow, the same for every front end (the command line's `run`, the TUI's run):
the four stages (run_flow.run_all, the configuration re-read between them when it changed) and
the kept share of the paid output tokens (dataset/kept.py), then,
when `[training]` is set, training only when the data or the settings changed since the last run
on them (runs/changed.py; `retrain=True`: `run --retrain`), then the push `[hub] after_training`
asks for. The front ends only pick the front end (the session) and the options.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Sequence

from overbrainer.dataset.history import read_history
from overbrainer.dataset.kept import kept_share
from overbrainer.hub.after_training import push_after_training, require_hub, warn_missing_token
from overbrainer.pipeline.run_flow import ConfigWatch, raise_stalled, run_all
from overbrainer.pipeline.stage import StageResult
from overbrainer.runs.changed import train_if_changed
from overbrainer.runs.flow import TrainResult
from overbrainer.runs.post_train import PostTrain

if TYPE_CHECKING:
    from overbrainer.front.session import Session

log = logging.getLogger(__name__)


class RunOutcome:
    """What `run_project` did: each stage's result, and the training's (None when it did not
    train: no `[training]`, or nothing changed since the last run on this data)."""

    __slots__ = ("stages", "training")

    def __init__(self, stages: list[StageResult], training: TrainResult | None):
        self.stages = stages
        self.training = training


def report_kept(session: "Session") -> None:
    """`kept: K of P paid output tokens (x%) are in train/eval examples` (dataset/kept.py), once
    a split counted them."""
    share = kept_share(read_history(session.project_dir))
    if share is not None:
        session.report(f"kept: {share.text()}", {"stage": "kept", **share.data()})


def run_project(session: "Session", config: Any, *, watch: ConfigWatch | None = None,
                max_cost: float | None = None, retrain: bool = False,
                after: Sequence[PostTrain] = (), wait: bool = False) -> RunOutcome:
    """`overbrainer run`: the stages, then training only on change (or `retrain`), then the
    after-training push. `watch`: the reload rule between stages; `after`: what plugs into the
    training job (the front end's `post_train()`); `wait`: batch mode waits for its batches.
    A missing `hub` extra that the push needs stops it before the first stage (exit 2)."""
    if config.training is not None:
        require_hub(config)
    results = run_all(session, config, watch=watch, max_cost=max_cost, wait=wait)
    if results and results[-1].pending:
        log.info("batches are still out: the later stages and training wait for the next run")
        raise_stalled(results)  # a round that added nothing still says so
        return RunOutcome(results, None)
    report_kept(session)
    config = (watch.config if watch is not None else None) or config  # reloaded before training
    trained = None
    if config.training is None:
        log.info("no [training] section: run stops after split")
    else:
        warn_missing_token(config)
        trained = train_if_changed(session, config, retrain=retrain, after=after)
        if trained is not None:
            push_after_training(session, config, trained)
    raise_stalled(results)  # a round that added nothing: exit 1, once everything else ran
    return RunOutcome(results, trained)
