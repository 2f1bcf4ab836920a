"""Creating a run (claimed locally and on the target) and starting its job, whatever its kind
(docs/runs.md#run-ids-and-claims): the run directory is uploaded, the JobSpec spawned, the record
saved `running` with its job.

Record-safety: a start that fails saves the run `failed` with the error; a job that spawned but
whose record could not be saved is cancelled (nothing could find it again). A spawn cut off after
the launcher may have reached the target looks for the `job.pid` its wrapper writes: found, the
start goes on as usual; the target out of reach, the run is saved `running` without a job, with a
message saying so, and `train attach` / `train cancel` settle it (`settle`). Never `failed` with a
job that may be running.
"""

from __future__ import annotations

import datetime as _dt
import logging
import re
import secrets as _secrets
import shlex
import shutil
import time
from pathlib import Path

from overbrainer.errors import OverbrainerError
from overbrainer.exec.base import DEFAULT_SKIP, Container, Executor, JobId, JobSpec, TargetUnreachable
from overbrainer.exec.transfer import Progress
from overbrainer.jobs import ids
from overbrainer.jobs.run_record import FAILED, PREPARING, RUNNING, RunPlace, RunRecord
from overbrainer.support import fmt

log = logging.getLogger(__name__)

PID_WAIT_SECS = 15.0  # how long a cut spawn's job.pid is looked for


def remote_dir_of(executor: Executor, run_id: str) -> str:
    return f"{executor.workdir.rstrip('/')}/{ids.validate(run_id)}"


def create_run(runs_dir: Path, project_name: str, target_name: str, resumed_from: str | None = None,
               now: _dt.datetime | None = None,
               fingerprint: dict[str, str] | None = None) -> tuple[RunRecord, RunPlace]:
    """Claim `runs/<id>` (exclusive mkdir) and save the run `preparing` (with the `fingerprint` of
    what it will run on, when given), before any target is reached: a pod is only ever created for
    a run that exists. Its directory on the target is claimed once an executor exists
    (`claim_target`)."""
    now = now or _dt.datetime.now(_dt.timezone.utc)
    run_id, _ = ids.claim_new(runs_dir, ids.base_id(project_name, now))
    record = RunRecord(id=run_id, target=target_name, created=fmt.stamp(now), remote_dir="",
                       state=PREPARING, resumed_from=resumed_from, fingerprint=fingerprint)
    place = RunPlace(runs_dir, run_id)
    place.save(record)
    return record, place


def claim_target(executor: Executor, record: RunRecord, place: RunPlace, owner: str | None = None) -> RunPlace:
    """Claim `<workdir>/<id>/.claim` on the target (`owner`: a token of this checkout, at most 64
    letters and digits) and save the run's `remote_dir`; returns the run's place. When another
    checkout sharing the workdir holds that ID, the run takes the next free suffix (`_2`…) there
    and here, while its local directory holds nothing but run.json."""
    owner = owner or _secrets.token_hex(8)
    remote = remote_dir_of(executor, record.id)
    if not executor.claim(remote, owner):
        base = re.sub(r"(_\d{8}-\d{6})_\d{1,2}$", r"\1", record.id)
        new_id, _ = ids.claim_new(
            place.runs_dir, base, lambda rid: executor.claim(remote_dir_of(executor, rid), owner))
        shutil.rmtree(place.dir, ignore_errors=True)
        record.id = new_id
        place = RunPlace(place.runs_dir, new_id)
        remote = remote_dir_of(executor, new_id)
    record.remote_dir = remote
    place.save(record)
    return place


def release_claim(executor: Executor, remote_dir: str, run_dir: Path) -> None:
    """Undo the claim of a run interrupted before anything was uploaded: remove `.claim` and the
    (then empty) directory on the target. Best effort, a few seconds at most."""
    if Path(remote_dir) == Path(run_dir).resolve():
        return  # a local target: the run directory is already gone
    d = shlex.quote(remote_dir)
    try:
        executor.probe(f"rm -f -- {d}/.claim; rmdir -- {d} 2>/dev/null; exit 0", timeout=10)
    except OverbrainerError as e:
        log.warning("cannot remove the claimed directory %s on the target: %s", remote_dir, e)


# --- start ------------------------------------------------------------------------------------

def start_job(executor: Executor, record: RunRecord, place: RunPlace, spec: JobSpec,
              progress: Progress | None = None) -> RunRecord:
    """Upload the run directory (its bytes to `progress(done, total)`), spawn the job, save the
    record `running` with its job."""
    try:
        executor.upload(str(place.dir), record.remote_dir, DEFAULT_SKIP, progress=progress)
        try:
            job = executor.spawn(spec)
        except TargetUnreachable as e:
            if not getattr(e, "sent", True):  # the launcher never reached the target
                raise
            job = _after_cut_spawn(executor, record, place, spec, e)
    except _Settled:
        raise
    except OverbrainerError as e:
        fail(record, place, f"the job could not start: {e}")
        raise
    _record_job(executor, record, place, job)
    return record


def _after_cut_spawn(executor: Executor, record: RunRecord, place: RunPlace, spec: JobSpec,
                     error: TargetUnreachable) -> JobId:
    """The job the cut spawn may have started, from its job.pid; else the run is saved `failed` (the
    target has none) or `running` unconfirmed (the target is out of reach), and an error raised."""
    rid = record.id
    log.warning("starting the job of run %s: %s; looking for the job on the target", rid, error)
    try:
        job = find_job(executor, spec.dir, spec.container)
    except TargetUnreachable as e:
        record.state = RUNNING
        record.message = (f"the start of the job of run {rid} could not be confirmed ({e}): it may be running "
                          f"on target `{record.target}`; `overbrainer train attach {rid}` follows it once the "
                          f"target is reachable, `overbrainer train cancel {rid}` stops it")
        place.save(record)
        raise _Settled(record.message, cause=e) from e
    if job is None:
        raise error
    log.info("train: found the job of run %s on the target, pid %d", rid, job.pid)
    return job


class _Settled(OverbrainerError):
    """A start whose record already says how it ended (not to be saved `failed`)."""


def find_job(executor: Executor, job_dir: str, container: Container | None, wait: float | None = None) -> JobId | None:
    """The JobId from `<job_dir>/job.pid` (written by the job's wrapper), looked for up to `wait`
    seconds; None when the target answers without one. Raises TargetUnreachable when the last
    look could not reach the target."""
    deadline = time.monotonic() + (PID_WAIT_SECS if wait is None else wait)
    while True:
        unreachable = None
        try:
            text = executor.read_from(f"{job_dir.rstrip('/')}/job.pid", 0, 64).decode("ascii", "replace").strip()
            if text.isdigit() and int(text) > 1:
                return JobId(job_dir, int(text), container)
        except TargetUnreachable as e:
            unreachable = e
        if time.monotonic() >= deadline:
            if unreachable is not None:
                raise unreachable
            return None
        time.sleep(min(1.0, max(deadline - time.monotonic(), 0.05)))


def settle(executor: Executor, record: RunRecord, place: RunPlace, container: Container | None) -> None:
    """A run saved `running` without a job (its start could not be confirmed): record the job its
    job.pid names, or save the run `failed` and raise when the target has none."""
    job = find_job(executor, record.remote_dir, container)
    if job is None:
        fail(record, place, "the job never started: the target has no job.pid for it")
        raise OverbrainerError(f"run {record.id} failed: {record.message}")
    log.info("train: found the job of run %s on the target, pid %d", record.id, job.pid)
    record.message = None
    _record_job(executor, record, place, job)


def unconfirmed(record: RunRecord) -> bool:
    """Saved `running` without a job: its start could not be confirmed (see `settle`)."""
    return record.job is None and record.state == RUNNING


def _record_job(executor: Executor, record: RunRecord, place: RunPlace, job: JobId) -> None:
    """Save the record `running` with its job; cancel the job when the record cannot be saved."""
    record.job = job
    record.state = RUNNING
    try:
        place.save(record)
    except OverbrainerError:
        log.warning("cannot record the job of run %s: cancelling it, since nothing could find it again",
                    record.id)
        try:
            executor.cancel(job)
        except OverbrainerError as e:
            log.warning("cannot cancel the job of run %s: %s", record.id, e)
        raise


def fail(record: RunRecord, place: RunPlace, message: str) -> None:
    """Save the run `failed` with `message` (a warning when it cannot be saved)."""
    record.state = FAILED
    record.message = message
    try:
        place.save(record)
    except OverbrainerError as e:
        log.warning("cannot record run %s as failed: %s", record.id, e)
