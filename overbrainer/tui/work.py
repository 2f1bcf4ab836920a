"""The flows the TUI starts, called as the command line's commands call them (cli/stages.py,
cli/train_cmd.py, cli/dataset_cmd.py), each reading the configuration afresh as a new command
would. Each function returns a `tasks.Flow`: `flow(session) -> result`, run on a task's thread.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping

from overbrainer.config.load import load_config
from overbrainer.config.model import Config
from overbrainer.dataset.paths import ProjectPaths
from overbrainer.export.in_job import InJobExport
from overbrainer.front.session import Session
from overbrainer.hub.after_training import push_after_training, warn_missing_token
from overbrainer.pipeline.context import StageContext
from overbrainer.pipeline.dataset_ops import reject_flow
from overbrainer.pipeline.plan import command_plans, totals
from overbrainer.pipeline.run_flow import ConfigWatch, run_project, run_stage
from overbrainer.runs.flow import attach_flow, cancel_flow, stop_flow, train_flow
from overbrainer.tui.tasks import Flow


class Workspace:
    """The project the TUI holds: its folder, its configuration read afresh (`.env` reloaded
    first when it or overbrainer.toml changed, as `run` does between stages), and what plugs
    into the training flows. `environ` (default: os.environ) is where the configuration's
    variables are read."""

    def __init__(self, project_dir: str | Path, *, environ: Mapping[str, str] | None = None, dotenv: Any = None):
        self.project_dir = Path(project_dir)
        self.paths = ProjectPaths(self.project_dir)
        self.environ = environ
        self.dotenv = dotenv
        self.config: Any = None  # the configuration last read

    def load_config(self, *, reload_env: bool = True) -> Any:
        """The configuration now. `reload_env=False` leaves the process environment alone (a
        view reading it while a task runs)."""
        if reload_env and self.dotenv is not None and self.dotenv.changed():
            self.dotenv.reload()
        self.config = load_config(self.project_dir, environ=self._environ())
        return self.config

    def configured(self, session: Session) -> Session:
        """A task's session on the configuration now (`load_config`), as a new command reads it."""
        return session.with_config(self.load_config())

    def _environ(self) -> Mapping[str, str]:
        return os.environ if self.environ is None else self.environ

    def post_train(self) -> tuple:
        """`[export] after_training`'s export, which runs inside the training job (as the
        command line gives it)."""
        return (InJobExport(),)


def trains_on_pod(config: Config, target: str | None = None) -> bool:
    """Whether a new run of this configuration rents a Runpod pod (`abandon` then applies)."""
    training = config.training
    if training is None:
        return False
    found = config.targets.get(target or training.target)
    return found is not None and found.kind == "runpod"


def plan_total(ws: Workspace, command: str) -> dict:
    """What `overbrainer <command> --plan` totals for its LLM stages (requests, expected and
    highest cost): the start dialog says it. Asks the providers' price listings, nothing else."""
    with StageContext(ws.project_dir, ws.config) as ctx:  # its end closes the listings' connections
        return totals(command_plans(ctx, command, ctx.select_topics(None)))


def stage(ws: Workspace, name: str) -> Flow:
    """`overbrainer subtopics|questions|answers|split`."""
    def flow(session: Session) -> Any:
        return run_stage(ws.configured(session), name)
    return flow


def run_all(ws: Workspace) -> Flow:
    """`overbrainer run`: the command's own flow (pipeline/run_flow.run_project): every stage, the
    configuration re-read between them when it changed, then with `[training]` training only when
    the data or settings changed, then the after-training push."""
    def flow(session: Session) -> Any:
        watch = ConfigWatch(ws.project_dir, lambda: load_config(ws.project_dir, environ=ws._environ()),
                            dotenv=ws.dotenv)
        return run_project(ws.configured(session), watch=watch, after=ws.post_train())
    return flow


def _train(ws: Workspace, session: Session) -> Any:
    warn_missing_token(session.config)
    result = train_flow(session, after=ws.post_train())
    push_after_training(session, result)
    return result


def train(ws: Workspace) -> Flow:
    """`overbrainer train` on the configured target."""
    return lambda session: _train(ws, ws.configured(session))


def attach(ws: Workspace, run_id: str) -> Flow:
    """`overbrainer train attach RUN_ID`."""
    def flow(session: Session) -> Any:
        session = ws.configured(session)
        result = attach_flow(session, run_id, after=ws.post_train())
        push_after_training(session, result)
        return result
    return flow


def stop(ws: Workspace, run_id: str) -> Flow:
    """`overbrainer train stop RUN_ID` holding the lock: the snapshot asked for, then followed."""
    def flow(session: Session) -> Any:
        return stop_flow(ws.configured(session), run_id, after=ws.post_train())
    return flow


def cancel(ws: Workspace, run_id: str) -> Flow:
    """`overbrainer train cancel RUN_ID`."""
    def flow(session: Session) -> Any:
        return cancel_flow(ws.configured(session), run_id, after=ws.post_train())
    return flow


def reject(ws: Workspace, item_id: str) -> Flow:
    """`overbrainer dataset reject ID`: the same code as the command."""
    def flow(session: Session) -> Any:
        return reject_flow(ws.configured(session), item_id=item_id)
    return flow
