"""`[hub] after_training = true`: push a run once its training came back.

Called by `train`, `train attach` and `run` after the training flow returned. Only a run that
`succeeded` and whose results were retrieved is pushed; `stopped` runs, detached runs and runs that
already hold `hub/push.json` are left alone. A failed push only warns (the training did what it was
asked): `push failed: <why>; run it again with: overbrainer push RUN_ID`. A missing token is said
when the training starts (`warn_missing_token`), not after hours of training; a missing `hub`
extra stops `run` and `train` before they start (`require_hub`, exit 2), and a push it would have
stopped (`train attach`) is skipped with a warning.
"""

from __future__ import annotations

import logging
from typing import Any

from overbrainer.config.model import Config
from overbrainer.dataset.paths import ProjectPaths
from overbrainer.errors import Interrupted, OverbrainerError
from overbrainer.front.session import Session
from overbrainer.hub.flow import push_flow
from overbrainer.hub.push import RECORD
from overbrainer.support import extras

log = logging.getLogger(__name__)

SUCCEEDED = "succeeded"


def wants_push(config: Config) -> bool:
    return config.hub.after_training


def require_hub(config: Config) -> None:
    """ConfigError (exit 2) when `[hub] after_training` is set and the `hub` extra is not installed."""
    if wants_push(config):
        extras.require("hub", "[hub] after_training")


def warn_missing_token(config: Config) -> None:
    if wants_push(config) and config.hf_token is None:
        log.warning("[hub] after_training is set but OVERBRAINER_HF_TOKEN is not: the run will not be "
                    "pushed after training")


def push_after_training(session: Session, result: Any) -> bool:
    """Push the run of a training flow's `result` (runs.flow.TrainResult) when `[hub]
    after_training` asks for it; True when it was pushed. Ctrl-C still stops the command."""
    config = session.config
    if not wants_push(config) or result is None or result.detached or result.state != SUCCEEDED:
        return False
    run_dir = ProjectPaths(session.project_dir).runs / result.run_id
    if (run_dir / "hub" / RECORD).is_file():
        log.info("push: run %s was already pushed (hub/%s)", result.run_id, RECORD)
        return False
    if config.hf_token is None:
        log.warning("push skipped: OVERBRAINER_HF_TOKEN is not set; push run %s later with: "
                    "overbrainer push %s", result.run_id, result.run_id)
        return False
    if not extras.installed("hub"):
        log.warning("push skipped: %s; push run %s later with: overbrainer push %s",
                    extras.needs("[hub] after_training", "hub"), result.run_id, result.run_id)
        return False
    try:
        push_flow(session, result.run_id)
    except Interrupted:
        raise
    except OverbrainerError as e:
        log.warning("push failed: %s; run it again with: overbrainer push %s", e, result.run_id)
        return False
    return True
