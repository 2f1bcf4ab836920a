"""`overbrainer runs ls|show|logs`: read-only views of runs/<id>/, which never take the lock; and
`runs rm`, which deletes ended runs' folders (holding the lock)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from overbrainer.cli import complete
from overbrainer.cli.context import pass_app
from overbrainer.cli.help import HelpGroup
from overbrainer.cli.main import quiet_stdout
from overbrainer.dataset.paths import ProjectPaths
from overbrainer.errors import OverbrainerError, UsageError
from overbrainer.jobs.records import run_costs
from overbrainer.jobs.run_record import RunPlace, list_runs
from overbrainer.runs.logs import LogReader, Stopped, follow, open_log, run_ended
from overbrainer.runs.progress import local_progress
from overbrainer.runs.rm import rm_flow
from overbrainer.support.fmt import about_usd, duration, table, usd_per_hour
from overbrainer.support.lock import ProjectLock
from overbrainer.support.redact import redact, strip_controls


@click.group("runs", cls=HelpGroup)
def runs() -> None:
    """List training runs, show one, read its log."""


def _runs_dir(app) -> Path:
    app.require_project()
    return ProjectPaths(app.project_dir).runs


@runs.command("ls")
@pass_app
def ls_cmd(app) -> None:
    """One line per run, oldest first: ID, state, target, created."""
    runs_dir = _runs_dir(app)
    records = list_runs(runs_dir)
    rows, cells = [], []
    for r in records:
        row = [r.id, r.state, r.target, r.created]
        summary = _summary(r)
        pod = run_costs(runs_dir / r.id)  # a Runpod run's pod
        if pod is not None:
            row.append(pod[0])
            summary["pod"] = pod[1]
        if r.state == "stopped" and r.snapshot is not None:
            row.append(f"step {r.snapshot.step} ({r.snapshot.reason}): partial model in output/")
        cells.append(row)
        rows.append(summary)
    lines = table(cells)
    if app.json_mode:
        app.report("", {"runs": rows})
    elif lines:
        app.report("\n".join(lines), {"runs": rows})
    else:  # stdout stays empty for scripts; a person is told why
        click.echo("no training run yet (`overbrainer train` starts one)", err=True)


def _summary(r) -> dict:
    data = {"id": r.id, "state": r.state, "target": r.target, "created": r.created}
    if r.snapshot is not None:
        data["snapshot"] = {"checkpoint": r.snapshot.checkpoint, "step": r.snapshot.step,
                            "reason": r.snapshot.reason}
    if r.resumed_from:
        data["resumed_from"] = r.resumed_from
    return data


@runs.command("show")
@click.argument("run_id", shell_complete=complete.run_ids)
@pass_app
def show_cmd(app, run_id: str) -> None:
    """State, phase, step, loss, eval loss and message of one run."""
    place = RunPlace(_runs_dir(app), run_id)
    record = place.load()
    progress = local_progress(place.dir, record)
    data = dict(_summary(record), **progress, message=record.message_shown)
    lines = [f"run:       {record.id}", f"state:     {record.state}", f"target:    {record.target}",
             f"created:   {record.created}"]
    pod = run_costs(place.dir)
    if pod is not None:
        data["pod"] = pod[1]
        lines.append(f"pod:       {pod[0]}")
        if pod[1].get("pod_id") is not None:
            lines.append(f"rate:      {usd_per_hour(pod[1]['rate_per_hour'])}")
            lines.append(f"spend:     {about_usd(pod[1]['spend'])}")
    if progress.get("phase"):
        lines.append(f"phase:     {progress['phase']}")
    if progress.get("step") is not None:
        step = f"{progress['step']}"
        if progress.get("max_steps"):
            step += f"/{progress['max_steps']}"
        lines.append(f"step:      {step}")
    if progress.get("loss") is not None:
        lines.append(f"loss:      {progress['loss']:.4f}")
    if progress.get("eval_loss") is not None:
        lines.append(f"eval loss: {progress['eval_loss']:.4f}")
    if progress.get("time_left") is not None:
        lines.append(f"time left: {duration(progress['time_left'])} ({progress['pace']:.2f} steps/s)")
    if record.resumed_from:
        lines.append(f"resumed:   from {record.resumed_from}")
    if record.snapshot is not None:
        lines.append(f"snapshot:  step {record.snapshot.step} ({record.snapshot.reason}) in "
                     f"runs/{record.id}/{record.snapshot.checkpoint}")
    if record.message_shown:
        lines.append(f"message:   {record.message_shown}")
    app.report("\n".join(lines), data)


@runs.command("rm", short_help="Delete the folders of ended runs.")
@click.argument("run_ids", nargs=-1, required=True, metavar="RUN_ID...", shell_complete=complete.run_ids)
@pass_app
def rm_cmd(app, run_ids: tuple[str, ...]) -> None:
    """Delete the folders of ended runs (never a running run, nor one whose pod is not deleted).

    One line per run; exit 1 when any was refused. It takes the project lock, but needs no valid
    configuration."""
    app.require_project()
    with ProjectLock(app.project_dir, command=app.command_name()):
        rm_flow(app.session(), list(run_ids))


def clean_line(raw: bytes) -> str:
    """A log line made safe to print: decoded, control characters stripped, secrets redacted."""
    text = raw.decode("utf-8", "replace").rstrip("\r\n")
    text = text.replace("\r", " ").replace("\t", "    ")
    return redact(strip_controls(text))


@runs.command("logs", short_help="A run's job log, redacted; --follow as it grows.")
@click.argument("run_id", shell_complete=complete.run_ids)
@click.option("--tail", "tail", type=int, default=None, metavar="N", help="Only the last N lines.")
@click.option("--follow", is_flag=True, help="Keep printing new lines until the run ends or Ctrl-C.")
@pass_app
def logs_cmd(app, run_id: str, tail: int | None, follow: bool) -> None:
    """The job's log (runs/<id>/job.log, or on the SSH target while the run goes on), redacted,
    one clean line per line."""
    if tail is not None and tail < 0:
        raise UsageError("--tail must be 0 or more")
    runs_dir = _runs_dir(app)
    config = _config_with_literal_secrets(app)
    place = RunPlace(runs_dir, run_id)
    run_dir = place.dir
    if not run_dir.is_dir():
        raise OverbrainerError(f"no run `{run_id}` in runs/")  # worded as `runs show` words it
    if (run_dir / "job.log").is_symlink():
        raise OverbrainerError(f"refusing to read runs/{run_id}/job.log: it is a symbolic link")
    interrupt = app.front.interrupt() if follow else None
    opened = None
    try:
        opened = open_log(config, place, race=interrupt.race if interrupt else None)
        reader = LogReader(opened.source)
        lines = reader.lines(tail, partial=not follow)
        if lines is None and not follow:
            app.report(f"runs: no job.log for run {run_id} yet", {"run_id": run_id, "lines": []})
            return
        out = (clean_line(line) for line in lines or ())
        if app.json_mode and not follow:
            app.report("", {"run_id": run_id, "lines": list(out)})
            return
        for line in out:
            _emit(app, run_id, line)
        if follow:
            _follow(app, reader, place, interrupt)
    except Stopped:
        return
    except BrokenPipeError:
        quiet_stdout()
        raise click.exceptions.Exit(0) from None
    finally:
        if opened is not None and opened.executor is not None and not (interrupt and interrupt.caught()):
            opened.executor.close()
        if interrupt is not None:
            interrupt.restore()


def _follow(app, reader, place: RunPlace, interrupt) -> None:
    for line in follow(reader, lambda: run_ended(place), interrupt, place.run_id):
        _emit(app, place.run_id, clean_line(line))


def _config_with_literal_secrets(app):
    """The configuration (None when it does not load: `runs logs` works without a valid one).
    Its literal secrets (never Vault ones: no network here) are registered with the redactor,
    so a log that quotes one prints `***`."""
    try:
        config = app.load_config()
    except Exception:  # noqa: BLE001 - `runs logs` works without a valid configuration
        return None
    for _, secret in config.secrets():
        if not secret.is_vault:
            try:
                secret.resolve()
            except Exception:  # noqa: BLE001
                pass
    return config


def _emit(app, run_id: str, line: str) -> None:
    if app.json_mode:
        app.report(line, {"run_id": run_id, "line": line})
    else:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
