"""`overbrainer run`'s training: only when what it would train on changed (runs/fingerprint.py).

Unchanged data and settings, with a run on them that succeeded or still runs: `train: up to date
with run <id>` and nothing is rented (exit 0). A run on them that failed, was cancelled or stopped:
`run` says which and how to retry (`overbrainer train`), exit 1, rather than pay again on its own.
`retrain` (`run --retrain`) trains whatever the runs say.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Sequence

from overbrainer.dataset.paths import ProjectPaths
from overbrainer.errors import OverbrainerError
from overbrainer.runs.fingerprint import fingerprint, verdict
from overbrainer.runs.flow import TrainResult, train_flow
from overbrainer.runs.post_train import PostTrain

if TYPE_CHECKING:
    from overbrainer.front.session import Session

log = logging.getLogger(__name__)


def train_if_changed(session: Session, config, *, retrain: bool = False,
                     after: Sequence[PostTrain] = ()) -> TrainResult | None:
    """`train_flow` unless a run already trained (or is training) on this data with these
    settings; None when nothing was trained (the line saying so is reported)."""
    if retrain:
        log.info("train: --retrain: training whatever earlier runs did")
        return train_flow(session, config, after=after)
    paths = ProjectPaths(session.project_dir)
    fp = fingerprint(paths.data, config.training)
    found = verdict(paths.runs, fp)
    if found.kind in ("done", "running"):
        run = found.run
        session.report(found.line(), {"stage": "train", "up_to_date": True, "run_id": run.id, "state": run.state})
        return None
    if found.kind == "failed":
        raise OverbrainerError(found.refusal())
    log.info("train: %s; training", found.reason())
    return train_flow(session, config, after=after)
