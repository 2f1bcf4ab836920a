"""A job that belongs to a run, of any kind (export and compare are two): started on a target,
followed, its files brought home verified, like a training job, but in a directory of its own.

    job = SideJob("export", files={"export.sh": text}, steps=[Step("export", ("sh", "export.sh"),
                  from_path=True)], env={...}, fetch=["export.json"], label=f"export of run {rid}")
    result = run_side_job(session, run_record, job, target=None, keep=False)

Where (`side_target`): `target=` (the command's `--target`), else `[<kind>] target`, else the
run's own target; it must be configured (`Config.target`: `target `T` of run R is no longer in
overbrainer.toml (targets: …)` / `unknown target `T`: …`, ConfigError).

Layout: `runs/<run>/<kind>s/<job_id>/` here (`<kind>_YYYYMMDD-HHMMSS`, `_2`… on a collision) and
`<root>/<kind>s/<job_id>` on the target, where `<root>` is the run's directory there: its
`remote_dir` on its own target, `<workdir>/<run>` on another local or SSH target (for a local
target, the run's own directory), and `/workspace/overbrainer/<run>` on a pod. Its record is a
`RunRecord` saved as `run.json` in its directory (`RunPlace(runs/<run>/<kind>s, <job_id>)`); the job
writes `job.log` and `metrics.jsonl` there, so `jobs.follow` shows its stage lines and
`Executor.fetch` verifies what comes back against the target's SHA-256 manifest.

A target made for each job (a runpod target: jobs.kinds) gets a NEW one for the job, under the
same lease as training (for a pod, runpod.lease: provisioning flag, pinned host key, watchdog,
the client's deadline, `max_cost_usd`), with the target's settings changed by `SideJob.pod`
(image, max_hours, min_vram_gb). The job's ID is then unique in the project: it is the pod's
marker, and `pod ls` / `pod rm <id>` know it. Its `pod.json` and `ssh/` are in the job's
directory; the pod's run directory (the watchdog's) is the job's directory there. The pod is
deleted once the job ended and its files are verified home (jobs.homes.side_results_home), or
kept with `keep` (`--keep-pod`).

- `files` are written into the local job directory and uploaded with it (the job's scripts);
  `steps` run with the target's runtime (natively the venv's bin/ first on PATH; in a container
  the run directory is mounted and the job works in its subdirectory), with `env` and
  `OVERBRAINER_CACHE` (`<workdir>/.cache` on the target: `runs/.cache` for a local target; on a
  pod `/workspace/overbrainer/.cache`, or on its network volume); `secrets` reach the job's
  environment only (never a command line, a file or a pod's env).
- `prepare(executor, remote_job_dir)` runs before the start (e.g. to upload missing inputs).
- When the job ends (succeeded, failed or cancelled), `job.log`, `metrics.jsonl` and the `fetch`
  entries are brought back into the local job directory. Then, for a job that succeeded,
  `after(executor, remote_job_dir, job_dir)` (e.g. fetch what the job wrote outside its directory);
  its OverbrainerError makes the job `failed` with that reason.
- Ctrl-C or SIGTERM CANCELS the job (unlike training): the cancel and the retrieval are shielded,
  the record is saved `cancelled`, its pod (if any) deleted, and
  `Interrupted("interrupted: <label> cancelled")` is raised.
- A failed job: the record is saved `failed` and `SideJobFailed("<label> failed: <reason>")`
  (the last line of its job.log, or why it could not run) is raised; its `.result` says where.
"""

from __future__ import annotations

import datetime as _dt
import logging
import secrets as _secrets
import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping

from overbrainer.config.model import Config, Target
from overbrainer.dataset.paths import ProjectPaths
from overbrainer.errors import Interrupted, OverbrainerError, UsageError
from overbrainer.exec.base import Executor, JobSpec
from overbrainer.exec.runtime import CONTAINER_CACHE, Runtime
from overbrainer.front.events import RunWatched
from overbrainer.front.interrupt import Interrupt
from overbrainer.front.session import Session
from overbrainer.jobs import ids
from overbrainer.jobs.follow import job_id
from overbrainer.jobs.homes import NOT_HOME, Home, key_taken, side_results_home
from overbrainer.jobs.kinds import LeaseOptions, TargetKind
from overbrainer.jobs.lease import Lease, kind_of, lease
from overbrainer.jobs.publishing import events, transfer_progress
from overbrainer.jobs.retrieve import JOB_FILES, last_line
from overbrainer.jobs.run_record import CANCELLED, FAILED, PREPARING, RUNNING, SUCCEEDED, RunPlace, RunRecord
from overbrainer.jobs.start import fail, remote_dir_of, start_job
from overbrainer.jobs.status import Status
from overbrainer.support import fmt

log = logging.getLogger(__name__)


@dataclass
class SideJob:
    """What to run: see the module docstring. `kind` names its directories (`<kind>s/`), its ID
    (`<kind>_…`) and its progress lines."""
    kind: str
    files: Mapping[str, str | bytes | Path]  # name in the job's folder -> its text, bytes, or a file here to copy
    steps: list[Any]  # exec.runtime.Step
    env: dict[str, str] = field(default_factory=dict)
    fetch: list[str] = field(default_factory=list)
    prepare: Callable[[Executor, str], None] | None = None
    label: str = ""
    after: Callable[[Executor, str, Path], None] | None = None
    secrets: dict[str, str] = field(default_factory=dict)
    pod: dict[str, Any] = field(default_factory=dict)  # a runpod target's settings for the job's own pod


@dataclass
class SideJobResult:
    """How a side job ended: its ID, its local directory, its state and message, its record."""
    job_id: str
    job_dir: Path
    state: str
    message: str | None = None
    record: RunRecord | None = None


@dataclass(frozen=True)
class _Side:
    """One side job being run: for the run `run`, its own `record` (saved in `parent`), the job."""
    run: RunRecord
    record: RunRecord
    parent: Path
    job: SideJob
    label: str


@dataclass(frozen=True)
class _Place:
    """Where it runs: its place here (`here`), the run's directory on the target (`root`), the
    target, and the cache folder there."""
    here: RunPlace
    root: str
    target: Any
    cache: str


class SideJobFailed(OverbrainerError):
    """A side job that failed; `result` is where its files are (the caller may add to the message)."""

    def __init__(self, message: str, result: SideJobResult):
        super().__init__(message)
        self.result = result


def jobs_dir(run: RunPlace, kind: str) -> Path:
    """`runs/<run>/<kind>s`: where the records of a run's side jobs of one kind are saved."""
    return run.dir / f"{kind}s"


def side_target(config: Config, run: RunRecord, kind: str, name: str | None = None) -> tuple[str, Target]:
    """(name, Target) where a side job of `kind` runs: `name`, else `[<kind>] target`, else the
    run's own target; it must be configured (Config.target)."""
    own = {"export": config.export.target, "compare": config.compare.target}.get(kind)
    name = name or own or run.target
    return name, config.target(name, run_id=run.id if name == run.target else None)


def run_side_job(session: Session, run: RunRecord, job: SideJob, *, target: str | None = None, keep: bool = False,
                 now: _dt.datetime | None = None) -> SideJobResult:
    """Run `job` for the run `run` to its end (see the module docstring)."""
    ids.validate(job.kind)
    name, where = side_target(session.config, run, job.kind, target)
    kind = kind_of(where)
    pod = kind.made_for_job
    if keep and not pod:
        raise UsageError("--keep-pod only applies to a runpod target")
    own = name == run.target
    if own and not pod and not run.remote_dir:
        raise OverbrainerError(f"run {run.id} never reached its target: it has no directory there")
    label = job.label or f"{job.kind} of run {run.id}"
    runs_dir = ProjectPaths(session.project_dir).runs
    parent = jobs_dir(RunPlace(runs_dir, run.id), job.kind)
    now = now or _dt.datetime.now(_dt.timezone.utc)
    record = RunRecord(id=ids.side_id(job.kind, now), target=name, created=fmt.stamp(now),
                       remote_dir="", state=PREPARING)
    side = _Side(run, record, parent, job, label)
    with session.interruptible() as interrupt:
        if pod:
            return _on_pod(session, side, (name, where, kind), keep)
        try:
            with lease(session, name, where, record) as held:
                root = run.remote_dir if own else remote_dir_of(held.executor, run.id)
                here = interrupt.shield(_claim, held.executor, root, record, parent, job.kind)
                cache = f"{held.executor.workdir.rstrip('/')}/.cache"
                return _run(session, held, side, _Place(here, root, where, cache))
        except Interrupted as e:
            if record.remote_dir:  # claimed: _run raised it
                raise
            raise Interrupted(f"interrupted: {label} cancelled") from e


def _on_pod(session: Session, side: _Side, where: tuple[str, Target, TargetKind], keep: bool) -> SideJobResult:
    """The job on a new target of its own, a pod (see the module docstring); `where`: the
    target's name, itself, its kind."""
    run, record, parent, job, label = side.run, side.record, side.parent, side.job, side.label
    name, target, kind = where
    kind.check(session.config)  # the API key first: nothing is claimed without it
    runs_dir = ProjectPaths(session.project_dir).runs
    job_id, _ = ids.claim_new(parent, record.id, lambda jid: not key_taken(runs_dir, jid))
    record.id = job_id
    here = RunPlace(parent, job_id)
    here.save(record)
    with events(session.front) as bus:
        bus.publish(RunWatched(job_id, job.kind))  # the pod's lines carry the job's kind
    root, cache = kind.side_place(target, ids.validate(run.id))
    pod_target = replace(target, **job.pod) if job.pod else target
    home = Home(job_id, parent, run.id)
    try:
        options = LeaseOptions(side_results_home, keep=keep, home=home, workdir=f"{root}/{job.kind}s")
        with lease(session, name, pod_target, record, start=True, options=options) as held:
            return _run(session, held, side, _Place(here, root, pod_target, cache))
    except Interrupted as e:
        if record.job is not None:  # the job started: _run said it
            raise
        err = Interrupted(f"interrupted: {label} cancelled{kind.left(home)}")
        err.exit_code = e.exit_code
        raise err from e


def remote_job_dir(root: str, kind: str, job_id: str) -> str:
    """`<root>/<kind>s/<job_id>`: a side job's directory on its target (`root`: the run's there)."""
    return f"{root.rstrip('/')}/{kind}s/{ids.validate(job_id)}"


def _claim(executor: Executor, root: str, record: RunRecord, parent: Path, kind: str) -> RunPlace:
    owner = _secrets.token_hex(8)
    job_id, _ = ids.claim_new(parent, record.id,
                              lambda jid: executor.claim(remote_job_dir(root, kind, jid), owner))
    record.id = job_id
    record.remote_dir = remote_job_dir(root, kind, job_id)
    here = RunPlace(parent, job_id)
    here.save(record)
    return here


def _run(session: Session, held: Lease, side: _Side, place: _Place) -> SideJobResult:
    executor, interrupt = held.executor, session.interrupt
    record, job, label, here = side.record, side.job, side.label, place.here
    result = SideJobResult(record.id, here.dir, record.state, record=record)
    front = session.front
    try:
        spec = _prepare(executor, interrupt, side, place)
    except Interrupted:
        _end(record, here, CANCELLED, "interrupted before the job started")
        raise Interrupted(f"interrupted: {label} cancelled") from None
    except OverbrainerError as e:
        fail(record, here, str(e))
        raise SideJobFailed(f"{label} failed: {e}", _result(result, record)) from e
    with events(front) as bus:
        bus.publish(RunWatched(record.id, job.kind))  # the upload's lines carry the job's kind too
        try:
            interrupt.shield(start_job, executor, record, here, spec,
                             transfer_progress(bus, record.id, "upload"), note=f"starting the {label}")
        except OverbrainerError as e:
            raise SideJobFailed(f"{label} failed: {e}", _result(result, record)) from e
        finally:
            if record.job is not None or record.state == RUNNING:
                held.job_started()
    if not interrupt.caught():
        with events(front) as bus:
            followed = held.follow(record, bus, job=job.kind)
    else:
        followed = None
    if followed is None:  # Ctrl-C: the job is cancelled, not left running
        interrupt.shield(_cancel_and_fetch, executor, record, here, job, note=f"cancelling the {label}")
        raise Interrupted(f"interrupted: {label} cancelled")
    state, reason = _outcome(followed.status)
    interrupt.shield(_fetch_and_save, executor, record, here, job, state, reason,
                     note=f"retrieving the files of the {label}")
    result = _result(result, record)
    if record.state == SUCCEEDED:
        return result
    if record.state == CANCELLED:
        raise SideJobFailed(f"{label} was cancelled" + (f" ({record.message})" if record.message else ""), result)
    raise SideJobFailed(f"{label} failed: {record.message}", result)


def _prepare(executor: Executor, interrupt: Interrupt, side: _Side, place: _Place) -> JobSpec:
    """The job's files written into its directory, `prepare` run (shielded): its JobSpec."""
    record, job, cache = side.record, side.job, place.cache
    for name, content in job.files.items():
        path = place.here.dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, Path):
            shutil.copyfile(content, path)  # a file of this machine's, copied as it is
        elif isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    runtime = Runtime.from_target(place.target)
    env = {"OVERBRAINER_CACHE": CONTAINER_CACHE if runtime.in_container else cache, **job.env}
    script, container = runtime.job(f"{side.run.id}-{record.id}", place.root, cache, job.steps, env=env,
                                    secret_names=sorted(job.secrets), stop_marker=False,
                                    subdir=f"{job.kind}s/{record.id}")
    if job.prepare is not None:
        interrupt.shield(job.prepare, executor, record.remote_dir, note=f"preparing the {side.label}")
    interrupt.check()
    return JobSpec(dir=record.remote_dir, script=script, secrets=dict(job.secrets), container=container)


def _result(result: SideJobResult, rec: RunRecord) -> SideJobResult:
    result.record = rec
    result.job_id, result.state, result.message = rec.id, rec.state, rec.message
    return result


def _outcome(status: Status) -> tuple[str, str | None]:
    if status.kind == "exited" and status.code == 0:
        return SUCCEEDED, None
    if status.kind == "cancelled":
        return CANCELLED, "cancelled on the target"
    if status.kind == "exited":
        return FAILED, f"the job exited with code {status.code}"
    return FAILED, "the job was lost (its process is gone without an exit code)"


def _end(record: RunRecord, here: RunPlace, state: str, message: str | None) -> None:
    record.state, record.message = state, message
    try:
        here.save(record)
    except OverbrainerError as e:
        log.warning("cannot record %s as %s: %s", record.id, state, e)


def _fetch(executor: Executor, record: RunRecord, job_dir: Path, job: SideJob) -> str | None:
    """Bring the job's files home, verified; the error text when that failed."""
    entries = list(dict.fromkeys([*JOB_FILES, *job.fetch]))
    try:
        executor.fetch(record.remote_dir, str(job_dir), entries)
    except OverbrainerError as e:
        log.warning("cannot retrieve the files of %s: %s", record.id, e)
        return str(e)
    return None


def _fetch_and_save(executor: Executor, record: RunRecord, here: RunPlace, job: SideJob, state: str,
                    reason: str | None) -> None:
    error = _fetch(executor, record, here.dir, job)
    if state == FAILED:
        reason = last_line(here.dir / "job.log") or reason
    if error is not None:
        if state == SUCCEEDED:
            state, reason = FAILED, f"{NOT_HOME}: {error}"
        else:
            reason = f"{reason} (files not retrieved: {error})"
    elif state == SUCCEEDED and job.after is not None:
        try:
            job.after(executor, record.remote_dir, here.dir)
        except OverbrainerError as e:
            state, reason = FAILED, str(e)
    _end(record, here, state, reason)


def _cancel_and_fetch(executor: Executor, record: RunRecord, here: RunPlace, job: SideJob) -> None:
    try:
        executor.cancel(job_id(record))
    except OverbrainerError as e:
        log.warning("cannot cancel %s: %s", record.id, e)
        _end(record, here, FAILED, f"cancelling the job failed: {e}")
        return
    error = _fetch(executor, record, here.dir, job)
    _end(record, here, CANCELLED, "interrupted" + (f" (files not retrieved: {error})" if error else ""))
