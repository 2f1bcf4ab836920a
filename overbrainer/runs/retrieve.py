"""Bringing an ended training job's results home (docs/runs.md#retrieval): download output/,
metrics.jsonl, job.log and what the post-train steps left (`extra`), verify every file against the
target's SHA-256 manifest, then set the final state.

A succeeded or stopped run whose retrieval failed stays `running` (so `train attach` tries again);
a failed or cancelled one is saved with the error in run.json's `retrieval_error`, cleared once a
later retrieval brings the files home.

Whether a run's model may leave this machine (`shippable`: an export, a push, a compare, an eval):
it ended succeeded or stopped, and its results are home (`is_retrieved`).
"""

from __future__ import annotations

import logging
from pathlib import Path

from overbrainer.errors import OverbrainerError
from overbrainer.exec.base import Executor
from overbrainer.exec.transfer import Progress
from overbrainer.jobs.retrieve import JOB_FILES, fetch
from overbrainer.jobs.run_record import (
    CANCELLED,
    FAILED,
    RUNNING,
    STOPPED,
    SUCCEEDED,
    RunPlace,
    RunRecord,
)
from overbrainer.jobs.status import Status
from overbrainer.runs.states import PROOF_LIMIT, Outcome, apply_proof, outcome

log = logging.getLogger(__name__)

ENTRIES = ("output", *JOB_FILES)
EXCLUDE = ("checkpoint-*",)


def retrieve_hint(run_id: str) -> str:
    return f"retrieve them with `overbrainer train attach {run_id}`"


def read_proof(executor: Executor, record: RunRecord) -> bytes | None:
    try:
        return executor.read_from(f"{record.remote_dir.rstrip('/')}/snapshot.json", 0, PROOF_LIMIT + 1)
    except OverbrainerError as e:
        log.warning("cannot read the snapshot proof of run %s: %s", record.id, e)
        return None


def finish(executor: Executor, record: RunRecord, place: RunPlace, status: Status, plugin_lines: int,
           notes: list[str] | None = None, progress: Progress | None = None, extra: tuple[str, ...] = ()) -> RunRecord:
    """Outcome → snapshot proof → retrieval → saved record. Raises (record left `running`) when a
    succeeded/stopped run's files could not be brought home."""
    result = outcome(status, plugin_lines, record.id)
    if result.state in (SUCCEEDED, CANCELLED):
        result = apply_proof(result, read_proof(executor, record))
    if notes and result.state == CANCELLED and not result.message:
        result.message = notes[0]
    log.info("train: retrieving results")
    retrieve(executor, record, place, result, progress, extra)
    return record


def retrieve(executor: Executor, record: RunRecord, place: RunPlace, result: Outcome,
             progress: Progress | None = None, extra: tuple[str, ...] = ()) -> None:
    """Fetch the files the outcome calls for (their bytes to `progress`, one transfer per fetch; `extra`:
    what the post-train steps left) and save the final state (see module docstring)."""
    rid, run_dir = record.id, place.dir
    stopped = result.snapshot if result.state == STOPPED else None  # a stopped outcome has its snapshot
    try:
        manifest = fetch(executor, record.remote_dir, run_dir, (*ENTRIES, *extra), EXCLUDE, progress)
        if stopped is not None:
            fetch(executor, record.remote_dir, run_dir, [stopped.checkpoint, "snapshot.json"],
                  progress=progress)
    except OverbrainerError as e:
        if result.state in (SUCCEEDED, STOPPED):
            record.state = RUNNING
            place.save(record)
            raise OverbrainerError(f"cannot retrieve the results of run {rid}: {e}; {retrieve_hint(rid)}",
                                   cause=e) from e
        record.state, record.snapshot = result.state, None
        record.message, record.retrieval_error = result.message, str(e)
        place.save(record)
        return
    record.state, record.message, record.snapshot = result.state, result.message, result.snapshot
    record.retrieval_error = None
    if result.state == SUCCEEDED and not any(p.startswith("output/") for p, _ in manifest):
        record.state = FAILED
        record.message = f"the job succeeded but left no output (see runs/{rid}/job.log)"
    elif stopped is not None:
        ckpt = run_dir / stopped.checkpoint
        if not ckpt.is_dir() or not any(p.is_file() for p in ckpt.rglob("*")):
            record.state, record.snapshot = FAILED, None
            record.message = (f"the job stopped with a snapshot but left no file in "
                              f"{stopped.checkpoint} (see runs/{rid}/job.log)")
    place.save(record)


def is_retrieved(record: RunRecord, run_dir: Path) -> bool:
    """For an ended run: no failed retrieval (`retrieval_error`), a local job.log, the checkpoint of
    a stopped run and a file under output/ for a succeeded one (`train attach` fetches what is missing)."""
    if record.retrieval_error is not None or not (run_dir / "job.log").exists():
        return False
    if record.state == STOPPED and record.snapshot is not None:
        return (run_dir / record.snapshot.checkpoint).is_dir()
    if record.state == SUCCEEDED:
        output = run_dir / "output"
        return output.is_dir() and any(p.is_file() for p in output.rglob("*"))
    return True


def collect(executor: Executor, record: RunRecord, place: RunPlace, progress: Progress | None = None,
            extra: tuple[str, ...] = ()) -> None:
    """Retrieve an ended run's files again; on success clear `retrieval_error` (the state is unchanged)."""
    run_dir = place.dir
    try:
        fetch(executor, record.remote_dir, run_dir, (*ENTRIES, *extra), EXCLUDE, progress)
        if record.state == STOPPED and record.snapshot is not None:
            fetch(executor, record.remote_dir, run_dir, [record.snapshot.checkpoint, "snapshot.json"],
                  progress=progress)
    except OverbrainerError as e:
        if record.state in (FAILED, CANCELLED):
            record.retrieval_error = str(e)
            place.save(record)
        raise OverbrainerError(f"cannot retrieve the results of run {record.id}: {e}; "
                               f"{retrieve_hint(record.id)}", cause=e) from e
    if record.retrieval_error is not None:
        record.retrieval_error = None
        place.save(record)


def shippable(place: RunPlace, done: str) -> RunRecord:
    """The record of the run at `place` when its model may leave this machine: it ended succeeded
    or stopped (its model then partial: the caller warns) and its results are home (`is_retrieved`).
    OverbrainerError saying why not; `done` words it (`exported`, `pushed`, `compared`, `evaluated`)."""
    record = place.load()
    run_id = place.run_id
    if record.state not in (SUCCEEDED, STOPPED):
        raise OverbrainerError(f"run {run_id} is {record.state}: only a succeeded or stopped run can be {done}")
    if not is_retrieved(record, place.dir):
        raise OverbrainerError(f"the results of run {run_id} are not all here: {retrieve_hint(run_id)} first")
    return record
