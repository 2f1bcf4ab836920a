"""A job that belongs to a run, of any kind (export and compare are two): started on the run's own
target, followed, its files brought home verified, like a training job, but in a directory of its
own.

    job = SideJob("export", files={"export.sh": text}, steps=[Step("export", ("sh", "export.sh"),
                  from_path=True)], env={...}, fetch=["export.json"], label=f"export of run {rid}")
    result = run_side_job(session, config, run_record, job)   # SideJobResult, or raises

Layout: `runs/<run>/<kind>s/<job_id>/` here (`<kind>_YYYYMMDD-HHMMSS`, `_2`… on a collision, claimed
by an exclusive mkdir here and a `.claim` there) and `<run.remote_dir>/<kind>s/<job_id>` on the
target (for a local target, the same directory). Its record is a `RunRecord` saved as `run.json`
in its directory (`record.save(runs/<run>/<kind>s, record)`); the job writes `job.log` and
`metrics.jsonl` there, so `jobs.follow` shows its stage lines and `Executor.fetch` verifies what
comes back against the target's SHA-256 manifest.

- `files` are written into the local job directory and uploaded with it (the job's scripts);
  `steps` run with the target's runtime (natively the venv's bin/ first on PATH; in a container
  the run directory is mounted and the job works in its subdirectory), with `env` and
  `OVERBRAINER_CACHE` (`<workdir>/.cache` on the target: `runs/.cache` for a local target).
- `prepare(executor, remote_job_dir)` runs before the start (e.g. to upload missing inputs).
- When the job ends (succeeded, failed or cancelled), `job.log`, `metrics.jsonl` and the `fetch`
  entries are brought back into the local job directory. Then, for a job that succeeded,
  `after(executor, remote_job_dir, job_dir)` (e.g. fetch what the job wrote outside its directory);
  its OverbrainerError makes the job `failed` with that reason.
- Target: the run's own (`target \\`T\\` of run R is no longer in overbrainer.toml` when gone, a
  ConfigError); local and SSH only (a runpod target is a ConfigError for now).
- Ctrl-C or SIGTERM CANCELS the job (unlike training): the cancel and the retrieval are shielded,
  the record is saved `cancelled`, and `Interrupted("interrupted: <label> cancelled")` is raised.
- A failed job: the record is saved `failed` and `SideJobFailed("<label> failed: <reason>")`
  (the last line of its job.log, or why it could not run) is raised; its `.result` says where.
"""

from __future__ import annotations

import datetime as _dt
import logging
import secrets as _secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from overbrainer.dataset.paths import ProjectPaths
from overbrainer.errors import NOT_SUPPORTED, ConfigError, Interrupted, OverbrainerError
from overbrainer.exec.base import JobSpec
from overbrainer.exec.runtime import CONTAINER_CACHE, Runtime
from overbrainer.front.events import RunWatched
from overbrainer.jobs import ids
from overbrainer.jobs.lease import lease
from overbrainer.jobs.publishing import events, transfer_progress
from overbrainer.jobs.retrieve import JOB_FILES, last_line
from overbrainer.jobs.run_record import CANCELLED, FAILED, PREPARING, SUCCEEDED, RunRecord, save
from overbrainer.jobs.start import fail, start_job
from overbrainer.support import fmt

log = logging.getLogger(__name__)


@dataclass
class SideJob:
    """What to run: see the module docstring. `kind` names its directories (`<kind>s/`), its ID
    (`<kind>_…`) and its progress lines."""
    kind: str
    files: dict[str, str | bytes]
    steps: list[Any]  # exec.runtime.Step
    env: dict[str, str] = field(default_factory=dict)
    fetch: list[str] = field(default_factory=list)
    prepare: Callable[[Any, str], None] | None = None
    label: str = ""
    after: Callable[[Any, str, Path], None] | None = None


@dataclass
class SideJobResult:
    """How a side job ended: its ID, its local directory, its state and message, its record."""
    job_id: str
    job_dir: Path
    state: str
    message: str | None = None
    record: RunRecord | None = None


class SideJobFailed(OverbrainerError):
    """A side job that failed; `result` is where its files are (the caller may add to the message)."""

    def __init__(self, message: str, result: SideJobResult):
        super().__init__(message)
        self.result = result


def jobs_dir(runs_dir: Path, run_id: str, kind: str) -> Path:
    """`runs/<run>/<kind>s`: where the records of a run's side jobs of one kind are saved."""
    return ids.run_dir(runs_dir, run_id) / f"{kind}s"


def side_target(config, run: RunRecord, kind: str) -> Any:
    """The run's own target, which must still be configured, and not a runpod one (yet)."""
    target = (getattr(config, "targets", None) or {}).get(run.target)
    if target is None:
        raise ConfigError(f"target `{run.target}` of run {run.id} is no longer in overbrainer.toml")
    if getattr(target, "kind", "local") == "runpod":
        raise ConfigError(f"{kind} on a runpod target {NOT_SUPPORTED}")
    return target


def run_side_job(session, config, run: RunRecord, job: SideJob, now: _dt.datetime | None = None) -> SideJobResult:
    """Run `job` for the run `run` to its end (see the module docstring)."""
    ids.validate(job.kind)
    if not run.remote_dir:
        raise OverbrainerError(f"run {run.id} never reached its target: it has no directory there")
    target = side_target(config, run, job.kind)
    label = job.label or f"{job.kind} of run {run.id}"
    runs_dir = ProjectPaths(session.project_dir).runs
    parent = jobs_dir(runs_dir, run.id, job.kind)
    now = now or _dt.datetime.now(_dt.timezone.utc)
    record = RunRecord(id=ids.side_id(job.kind, now), target=run.target, created=fmt.stamp(now),
                       remote_dir="", state=PREPARING)
    interrupt = session.front.interrupt()
    try:
        try:
            with lease(session, config, run.target, target, record, interrupt=interrupt) as held:
                return _run(session, held, interrupt, run, record, parent, target, job, label)
        except Interrupted as e:
            if record.remote_dir:  # claimed: _run raised it
                raise
            raise Interrupted(f"interrupted: {label} cancelled") from e
    finally:
        interrupt.restore()


def remote_job_dir(run: RunRecord, kind: str, job_id: str) -> str:
    return f"{run.remote_dir.rstrip('/')}/{kind}s/{ids.validate(job_id)}"


def _claim(executor, run: RunRecord, record: RunRecord, parent: Path, kind: str) -> Path:
    owner = _secrets.token_hex(8)
    job_id, job_dir = ids.claim_new(parent, record.id,
                                    lambda jid: executor.claim(remote_job_dir(run, kind, jid), owner))
    record.id = job_id
    record.remote_dir = remote_job_dir(run, kind, job_id)
    save(parent, record)
    return job_dir


def _run(session, held, interrupt, run: RunRecord, record: RunRecord, parent: Path, target, job: SideJob,
         label: str) -> SideJobResult:
    executor = held.executor
    job_dir = interrupt.shield(_claim, executor, run, record, parent, job.kind)
    result = SideJobResult(record.id, job_dir, record.state, record=record)
    front = session.front
    try:
        spec = _prepare(executor, interrupt, run, record, job_dir, target, job, label)
    except Interrupted:
        _end(parent, record, CANCELLED, "interrupted before the job started")
        raise Interrupted(f"interrupted: {label} cancelled") from None
    except OverbrainerError as e:
        fail(parent, record, str(e))
        raise SideJobFailed(f"{label} failed: {e}", _result(result)) from e
    with events(front) as bus:
        bus.publish(RunWatched(record.id, job.kind))  # the upload's lines carry the job's kind too
        try:
            interrupt.shield(start_job, executor, record, job_dir, parent, spec,
                             transfer_progress(bus, record.id, "upload"), note=f"starting the {label}")
        except OverbrainerError as e:
            raise SideJobFailed(f"{label} failed: {e}", _result(result)) from e
    if not interrupt.caught():
        with events(front) as bus:
            followed = held.follow(record, bus, interrupt, job=job.kind)
    else:
        followed = None
    if followed is None:  # Ctrl-C: the job is cancelled, not left running
        interrupt.shield(_cancel_and_fetch, executor, record, job_dir, parent, job, note=f"cancelling the {label}")
        raise Interrupted(f"interrupted: {label} cancelled")
    state, reason = _outcome(followed.status)
    interrupt.shield(_fetch_and_save, executor, record, job_dir, parent, job, state, reason,
                     note=f"retrieving the files of the {label}")
    result = _result(result)
    if record.state == SUCCEEDED:
        return result
    if record.state == CANCELLED:
        raise SideJobFailed(f"{label} was cancelled" + (f" ({record.message})" if record.message else ""), result)
    raise SideJobFailed(f"{label} failed: {record.message}", result)


def _prepare(executor, interrupt, run: RunRecord, record: RunRecord, job_dir: Path, target, job: SideJob,
             label: str):
    """The job's files written into its directory, `prepare` run (shielded): its JobSpec."""
    for name, content in job.files.items():
        path = job_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    runtime = Runtime.from_target(target)
    cache = f"{executor.workdir.rstrip('/')}/.cache"
    env = {"OVERBRAINER_CACHE": CONTAINER_CACHE if runtime.in_container else cache, **job.env}
    script, container = runtime.job(f"{run.id}-{record.id}", run.remote_dir, cache, job.steps, env=env,
                                    stop_marker=False, subdir=f"{job.kind}s/{record.id}")
    if job.prepare is not None:
        interrupt.shield(job.prepare, executor, record.remote_dir, note=f"preparing the {label}")
    interrupt.check()
    return JobSpec(dir=record.remote_dir, script=script, container=container)


def _result(result: SideJobResult) -> SideJobResult:
    rec = result.record
    result.job_id, result.state, result.message = rec.id, rec.state, rec.message
    return result


def _outcome(status) -> tuple[str, str | None]:
    if status.kind == "exited" and status.code == 0:
        return SUCCEEDED, None
    if status.kind == "cancelled":
        return CANCELLED, "cancelled on the target"
    if status.kind == "exited":
        return FAILED, f"the job exited with code {status.code}"
    return FAILED, "the job was lost (its process is gone without an exit code)"


def _end(parent: Path, record: RunRecord, state: str, message: str | None) -> None:
    record.state, record.message = state, message
    try:
        save(parent, record)
    except OverbrainerError as e:
        log.warning("cannot record %s as %s: %s", record.id, state, e)


def _fetch(executor, record: RunRecord, job_dir: Path, job: SideJob) -> str | None:
    """Bring the job's files home, verified; the error text when that failed."""
    entries = list(dict.fromkeys([*JOB_FILES, *job.fetch]))
    try:
        executor.fetch(record.remote_dir, str(job_dir), entries)
    except OverbrainerError as e:
        log.warning("cannot retrieve the files of %s: %s", record.id, e)
        return str(e)
    return None


def _fetch_and_save(executor, record: RunRecord, job_dir: Path, parent: Path, job: SideJob, state: str,
                    reason: str | None) -> None:
    error = _fetch(executor, record, job_dir, job)
    if state == FAILED:
        reason = last_line(job_dir / "job.log") or reason
    if error is not None:
        if state == SUCCEEDED:
            state, reason = FAILED, f"its files could not be retrieved: {error}"
        else:
            reason = f"{reason} (files not retrieved: {error})"
    elif state == SUCCEEDED and job.after is not None:
        try:
            job.after(executor, record.remote_dir, job_dir)
        except OverbrainerError as e:
            state, reason = FAILED, str(e)
    _end(parent, record, state, reason)


def _cancel_and_fetch(executor, record: RunRecord, job_dir: Path, parent: Path, job: SideJob) -> None:
    try:
        executor.cancel(record.job)
    except OverbrainerError as e:
        log.warning("cannot cancel %s: %s", record.id, e)
        _end(parent, record, FAILED, f"cancelling the job failed: {e}")
        return
    error = _fetch(executor, record, job_dir, job)
    _end(parent, record, CANCELLED, "interrupted" + (f" (files not retrieved: {error})" if error else ""))
