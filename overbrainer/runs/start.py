"""Creating a run (claimed locally and on the target) and starting its job (spec §1.1, §1.4, §6.1).

Record-safety: a start that fails saves the run `failed` with the error; a job that spawned but
whose record could not be saved is cancelled (nothing could find it again).
"""

from __future__ import annotations

import datetime as _dt
import logging
import secrets as _secrets
from pathlib import Path
from typing import Any

from overbrainer.errors import OverbrainerError
from overbrainer.runs import ids
from overbrainer.runs.record import FAILED, PREPARING, RUNNING, Container, JobRef, RunRecord, save

log = logging.getLogger(__name__)


def remote_dir_of(executor, run_id: str) -> str:
    return f"{executor.workdir.rstrip('/')}/{ids.validate(run_id)}"


def create_run(executor, runs_dir: Path, project_name: str, target_name: str,
               resumed_from: str | None = None, now: _dt.datetime | None = None) -> tuple[RunRecord, Path]:
    """Claim `runs/<id>` (exclusive mkdir) and `<workdir>/<id>/.claim` on the target; save `preparing`."""
    now = now or _dt.datetime.now(_dt.timezone.utc)
    owner = _secrets.token_hex(8)
    run_id, run_dir = ids.claim_new(
        runs_dir, ids.base_id(project_name, now),
        lambda rid: executor.claim(remote_dir_of(executor, rid), owner))
    record = RunRecord(id=run_id, target=target_name, created=ids.rfc3339(now),
                       remote_dir=remote_dir_of(executor, run_id), state=PREPARING,
                       resumed_from=resumed_from, snapshots=True)
    save(runs_dir, record)
    return record, run_dir


def release_claim(executor, remote_dir: str, run_dir: Path) -> None:
    """Undo the claim of a run interrupted before anything was uploaded: remove `.claim` and the
    (then empty) directory on the target. Best effort, a few seconds at most."""
    import shlex

    if Path(remote_dir) == Path(run_dir).resolve():
        return  # a local target: the run directory is already gone
    d = shlex.quote(remote_dir)
    try:
        executor.probe(f"rm -f -- {d}/.claim; rmdir -- {d} 2>/dev/null; exit 0", timeout=10)
    except OverbrainerError as e:
        log.warning("cannot remove the claimed directory %s on the target: %s", remote_dir, e)


# --- the job command --------------------------------------------------------------------------

def job_spec(target: Any, record: RunRecord, training: Any, workdir: str, secrets: dict[str, str]):
    """The JobSpec of a training job: `axolotl train` (then `merge-lora` with merge = true), built
    for the target's runtime; secrets travel by name only."""
    from overbrainer.exec.base import JobSpec
    from overbrainer.exec.runtime import Runtime, Step
    from overbrainer.train.job import CONFIG_NAME, wants_merge

    runtime = Runtime.from_target(target)
    steps = [Step("train", ("axolotl", "train", CONFIG_NAME))]
    if wants_merge(training):
        steps.append(Step("merge", ("axolotl", "merge-lora", CONFIG_NAME)))
    cache = f"{workdir.rstrip('/')}/.hf-cache"
    script, container = runtime.job(record.id, record.remote_dir, cache, steps, secret_names=sorted(secrets))
    return JobSpec(dir=record.remote_dir, script=script, secrets=dict(secrets), container=container)


# --- start ------------------------------------------------------------------------------------

def start_job(executor, record: RunRecord, run_dir: Path, runs_dir: Path, spec) -> RunRecord:
    """Upload the run directory, spawn the job, save the record `running` with its job."""
    from overbrainer.exec.base import DEFAULT_SKIP

    try:
        executor.upload(str(run_dir), record.remote_dir, DEFAULT_SKIP)
        job = executor.spawn(spec)
    except OverbrainerError as e:
        fail(runs_dir, record, f"the job could not start: {e}")
        raise
    container = Container(job.container.engine, job.container.name) if job.container else None
    record.job = JobRef(job.dir, job.pid, container)
    record.state = RUNNING
    try:
        save(runs_dir, record)
    except OverbrainerError:
        log.warning("cannot record the job of run %s: cancelling it, since nothing could find it again",
                    record.id)
        try:
            executor.cancel(job)
        except OverbrainerError as e:
            log.warning("cannot cancel the job of run %s: %s", record.id, e)
        raise
    return record


def fail(runs_dir: Path, record: RunRecord, message: str) -> None:
    record.state = FAILED
    record.message = message
    try:
        save(runs_dir, record)
    except OverbrainerError as e:
        log.warning("cannot record run %s as failed: %s", record.id, e)
