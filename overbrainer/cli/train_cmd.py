"""`overbrainer train [--target NAME] [--resume-from RUN_ID] [--detach]` and its sub-commands
`attach`, `stop`, `cancel`. They take the project lock (except `stop`'s request-only mode)."""

from __future__ import annotations

import contextlib

import click

from overbrainer.cli import complete
from overbrainer.cli.context import app as app_of
from overbrainer.cli.context import pass_app
from overbrainer.cli.help import HelpGroup
from overbrainer.errors import UsageError
from overbrainer.export.in_job import InJobExport
from overbrainer.hub.after_training import push_after_training, require_hub, warn_missing_token
from overbrainer.jobs import ids
from overbrainer.runs.flow import attach_flow, cancel_flow, stop_flow, train_flow
from overbrainer.support.lock import ProjectLock, ProjectLocked


@click.group("train", cls=HelpGroup, invoke_without_command=True)
@click.option("--target", metavar="NAME", default=None, shell_complete=complete.targets,
              help="Train on this target instead of [training] target.")
@click.option("--resume-from", "resume_from", metavar="RUN_ID", default=None, shell_complete=complete.run_ids,
              help="Resume a stopped run from its snapshot, in a new run.")
@click.option("--detach", is_flag=True,
              help="Start the job, print the run ID and exit (collect it with `train attach`).")
@click.option("--keep-pod", "keep_pod", is_flag=True,
              help="Runpod: keep the pod once the job ended (no time limit; only `overbrainer pod rm` "
                   "deletes it).")
@click.pass_context
def train(ctx: click.Context, target: str | None, resume_from: str | None, detach: bool,
          keep_pod: bool) -> None:
    """Fine-tune the child model with Axolotl.

    The job runs detached on its target: Ctrl-C only stops following it.
    """
    if ctx.invoked_subcommand is not None:
        if target or resume_from or detach or keep_pod:  # options of the bare `train` only
            raise UsageError("--target, --resume-from, --detach and --keep-pod only apply to "
                             "`overbrainer train` itself")
        return

    app = app_of(ctx)
    if resume_from is not None:
        ids.validate(resume_from)

    with app.open_project(write=True) as config:
        require_hub(config)
        warn_missing_token(config)
        session = app.session(config)
        result = train_flow(session, target=target, resume_from=resume_from, detach=detach,
                            keep_pod=keep_pod, after=(InJobExport(),))
        push_after_training(session, result)


@train.command("attach")
@click.argument("run_id", shell_complete=complete.run_ids)
@pass_app
def attach(app, run_id: str) -> None:
    """Follow a run again and bring its results home."""
    ids.validate(run_id)
    with app.open_project(write=True) as config:
        session = app.session(config)
        push_after_training(session, attach_flow(session, run_id, after=(InJobExport(),)))


@train.command("stop", short_help="Ask a run's job to save a snapshot and stop.")
@click.argument("run_id", shell_complete=complete.run_ids)
@pass_app
def stop(app, run_id: str) -> None:
    """Ask a run's job to save a snapshot and stop; resume it later with --resume-from."""

    ids.validate(run_id)
    app.require_project()
    lock = ProjectLock(app.project_dir, command=app.command_name())
    holder = None
    try:
        lock.acquire()
    except ProjectLocked as e:
        holder = e.pid or 0  # the holder follows the run: only write the request
    try:
        config = app.load_config()
        # Holding the lock, this command may follow the run until it stopped: metrics served then.
        with app.metrics(config) if holder is None else contextlib.nullcontext():
            stop_flow(app.session(config), run_id, holder_pid=holder, after=(InJobExport(),))
    finally:
        lock.release()


@train.command("cancel")
@click.argument("run_id", shell_complete=complete.run_ids)
@pass_app
def cancel(app, run_id: str) -> None:
    """Cancel a run's job; its record then reads `cancelled`."""
    ids.validate(run_id)
    with app.open_project(write=True) as config:
        cancel_flow(app.session(config), run_id, after=(InJobExport(),))
