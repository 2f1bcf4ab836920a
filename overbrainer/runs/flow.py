"""The training flows: `train`, `train attach`, `train stop`, `train cancel`
(what each does to a run: docs/runs.md#what-each-command-does).

Ctrl-C: preparing (token, connection) is raced and leaves nothing behind; starting the job is
shielded; following is raced and only detaches (the job keeps running); cancelling (the `train
stop` limits' cancel too, see runs.stop_limits) and retrieval are shielded.

`overbrainer run` trains after `split` through `train_if_changed`: only when what it would train
on changed (runs/fingerprint.py). Unchanged data and settings, with a run on them that succeeded
or still runs: `train: up to date with run <id>` and nothing is rented (exit 0). A run on them
that failed, was cancelled or stopped: `run` says which and how to retry (`overbrainer train`),
exit 1, rather than pay again on its own. `retrain` (`run --retrain`) trains whatever the runs
say.

`after` (every flow): the steps that plug into the training job (runs/post_train.py: the
command line gives `[export] after_training`'s export); the job runs them last, the retrieval
brings home the files they leave, and a succeeded run reports what they made.
"""

from __future__ import annotations

import logging
import shutil
import time
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from overbrainer.config.model import Config, Target, Training
from overbrainer.dataset.paths import ProjectPaths
from overbrainer.errors import ConfigError, Interrupted, OverbrainerError
from overbrainer.exec.base import Executor
from overbrainer.exec.transfer import Progress
from overbrainer.jobs.follow import attach_hint, job_id
from overbrainer.jobs.kinds import LeaseOptions
from overbrainer.jobs.lease import Lease, cancel_stopped, end_left, is_pod, lease
from overbrainer.jobs.publishing import events, transfer_progress
from overbrainer.jobs.run_record import CANCELLED, FAILED, PREPARING, RUNNING, STOPPED, SUCCEEDED, RunPlace, RunRecord
from overbrainer.jobs.start import create_run, fail, release_claim, settle, start_job, unconfirmed
from overbrainer.jobs.status import to_status
from overbrainer.jobs.targets import pick_target, record_target
from overbrainer.runs.fingerprint import fingerprint, verdict
from overbrainer.runs.job_spec import job_spec
from overbrainer.runs.post_train import PostTrain, fetched
from overbrainer.runs.preflight import checked_executor, raced_check
from overbrainer.runs.prepare import ResumeSource, fill_run_dir, job_root, resume_source
from overbrainer.runs.progress import local_summary
from overbrainer.runs.retrieve import collect, finish, is_retrieved, retrieve
from overbrainer.runs.states import Outcome
from overbrainer.runs.stop_limits import StopLimits
from overbrainer.train.axolotl_config import recorded_adapter, require_examples, template_warning

if TYPE_CHECKING:
    from overbrainer.front.frontend import Frontend
    from overbrainer.front.session import Session

log = logging.getLogger(__name__)


@dataclass
class TrainResult:
    """How a training flow ended. `output` is where the adapter or model is (relative to the project),
    `merged` the merged model's folder when there is one; `lines` what was reported."""
    run_id: str
    state: str
    target: str
    output: str | None = None
    merged: str | None = None
    message: str | None = None
    detached: bool = False
    lines: list[str] = field(default_factory=list)


def _place(session: Session, run_id: str) -> RunPlace:
    """Where the run `run_id` of the session's project is kept."""
    return RunPlace(ProjectPaths(session.project_dir).runs, run_id)


def _keeps_running(record: RunRecord) -> str:
    return (f"interrupted: run {record.id} keeps running on target `{record.target}`; "
            f"{attach_hint(record.id)}")


def _require_training(config: Config) -> Training:
    training = config.training
    if training is None:
        raise ConfigError("no [training] section in overbrainer.toml")
    return training


# --- train ------------------------------------------------------------------------------------

def train_flow(session: Session, *, target: str | None = None, resume_from: str | None = None,
               detach: bool = False, keep_pod: bool = False, after: Sequence[PostTrain] = ()) -> TrainResult:
    """Create a run, start its job, follow it and bring its results home (or detach). `keep_pod`:
    a Runpod target's pod is kept once the job ended (only `overbrainer pod rm` deletes it)."""
    config = session.config
    training = _require_training(config)
    name, tgt = pick_target(config, target)
    if keep_pod and not is_pod(tgt):
        raise ConfigError(f"--keep-pod applies to a runpod target only; target `{name}` is not one")
    paths = ProjectPaths(session.project_dir)
    runs_dir = paths.runs
    resume = None
    if resume_from:
        resume = resume_source(RunPlace(runs_dir, resume_from), training)
    else:
        require_examples(paths.train, "data/train.jsonl")
    warning = template_warning(training)
    if warning:
        log.warning("%s", warning)
    fp = fingerprint(resume.run_dir / "data" if resume else paths.data, training)
    with session.interruptible() as interrupt:
        secrets = interrupt.race(_job_secrets, config)
        if secrets is None:
            raise Interrupted("interrupted before the run started")
        checked = None if is_pod(tgt) else checked_executor(config, name, tgt, runs_dir, interrupt)
        try:
            record, _ = create_run(runs_dir, config.project.name, name, resume_from, fingerprint=fp.to_json())
        except BaseException:
            if checked is not None:
                checked.close()
            raise
        options = LeaseOptions(is_retrieved, keep=keep_pod, executor=checked)
        with lease(session, name, tgt, record, start=True, options=options) as held:
            return _start_and_follow(session, held, record, tgt, secrets, resume, detach, after)


def _job_secrets(config: Config) -> dict[str, str]:
    """The job's secrets: the HF token when set (raced: safe to abandon)."""
    secrets: dict[str, str] = {}
    token = config.hf_token
    if token is not None:
        secrets["HF_TOKEN"] = token.resolve()
    elif config.training is not None and config.training.hub_model_id:
        log.warning("training.hub_model_id is set but OVERBRAINER_HF_TOKEN is not: the job cannot push")
    return secrets


def _start_and_follow(session: Session, held: Lease, record: RunRecord, tgt: Target, secrets: dict[str, str],
                      resume: ResumeSource | None, detach: bool, after: Sequence[PostTrain]) -> TrainResult:
    """Inside the lease: fill the run directory, start the job (shielded), then follow or detach."""
    executor, config, interrupt = held.executor, session.config, session.interrupt
    front, place, name = session.front, _place(session, record.id), record.target
    run_dir = place.dir
    if resume is not None:  # (record.resumed_from names it)
        log.info("train: run %s resumes run %s from its %s", record.id, record.resumed_from,
                 resume.checkpoint)
    try:
        if is_pod(tgt):  # the pod is up: check that it runs axolotl before anything is uploaded
            raced_check(executor, name, tgt, interrupt)
        fill_run_dir(run_dir, session.project_dir, config.training, job_root(tgt, record.remote_dir), resume,
                     check=lambda: interrupt.check("interrupted before the run started"))
        interrupt.check("interrupted before the run started")
        steps = [step for plug in after
                 if (step := plug.prepare(config, run_dir, record.id, tgt, executor.workdir)) is not None]
        spec = job_spec(tgt, record, config.training, executor.workdir, secrets, steps)
    except Interrupted:
        if not is_pod(tgt):  # nothing of the run is left; a pod's run stays, failed, with its pod.json
            shutil.rmtree(run_dir, ignore_errors=True)
            release_claim(executor, record.remote_dir, run_dir)
        raise
    except OverbrainerError as e:
        fail(record, place, str(e))
        raise
    front.run_created(record.id)
    log.info("train: run %s on target `%s`, in %s", record.id, name, record.remote_dir)
    try:
        with events(front) as bus:
            interrupt.shield(start_job, executor, record, place, spec,
                             transfer_progress(bus, record.id, "upload"),
                             note=f"starting the job of run {record.id}")
    finally:
        if record.state == RUNNING:  # a job that runs, or may (unconfirmed)
            held.job_started()
    if interrupt.caught():
        raise Interrupted(_keeps_running(record))
    if detach:
        text = record.id
        front.report(text, {"run_id": record.id, "state": record.state, "target": name,
                            "remote_dir": record.remote_dir, "detached": True})
        log.info("train: run %s detached; collect it with `overbrainer train attach %s`",
                 record.id, record.id)
        return TrainResult(record.id, record.state, name, detached=True, lines=[text])
    return _follow_and_finish(session, held, record, after)


def _follow_and_finish(session: Session, held: Lease, record: RunRecord, after: Sequence[PostTrain],
                       stop_since: float | None = None) -> TrainResult:
    front = session.front
    with events(front) as bus:  # a pod's: under the client's deadline, settled (shielded) on its side
        followed = held.follow(record, bus, limits=StopLimits(record.id, stop_since))
    if followed is None:
        raise Interrupted(_keeps_running(record))
    place = _place(session, record.id)
    with events(front) as bus:  # a bus of its own: the follow's lines are all shown before retrieval's
        session.interrupt.shield(finish, held.executor, record, place, followed.status,
                                 followed.summary.lines, followed.notes, transfer_progress(bus, record.id, "download"),
                                 fetched(after), note=f"retrieving the results of run {record.id}")
    return report_outcome(front, record, place.dir, after)


# --- reporting ------------------------------------------------------------------------------

def report_outcome(front: Frontend, record: RunRecord, run_dir: Path,
                   after: Sequence[PostTrain] = ()) -> TrainResult:
    """Report an ended run's summary (a succeeded run's with what its post-train steps made); raise
    for failed and cancelled runs (after the report)."""
    rid = record.id
    summary = local_summary(run_dir)
    described = summary.describe()
    result = TrainResult(rid, record.state, record.target, message=record.message_shown)
    data: dict[str, Any] = {"run_id": rid, "state": record.state, "target": record.target,
                            "step": summary.step, "max_steps": summary.max_steps, "epoch": summary.epoch,
                            "loss": summary.last_train["loss"] if summary.last_train else None,
                            "eval_loss": summary.eval_loss, "message": record.message_shown}
    lines: list[str] = []
    if record.state == SUCCEEDED:
        result.output = f"runs/{rid}/output"
        lines.append(f"train: run {rid} succeeded; {described}; output in runs/{rid}/output")
        kind = "adapter" if recorded_adapter(run_dir) in ("lora", "qlora") else "model"
        lines.append(f"train: {kind} in runs/{rid}/output")
        if (run_dir / "output" / "merged").is_dir():
            result.merged = f"runs/{rid}/output/merged"
            lines.append(f"train: merged model in runs/{rid}/output/merged")
        for plug in after:
            lines += plug.deliver(run_dir, rid)
    elif record.state == STOPPED and record.snapshot is not None:
        step, reason = record.snapshot.step, record.snapshot.reason
        result.output = f"runs/{rid}/{record.snapshot.checkpoint}"
        lines += [f"train: run {rid} stopped; {described}",
                  f"train: run {rid} stopped at step {step} ({reason}): snapshot in runs/{rid}/"
                  f"{record.snapshot.checkpoint}; resume with `overbrainer train --resume-from {rid}`",
                  f"train: runs/{rid}/output also holds the partial model at step {step}, not a finished one"]
        data["snapshot"] = {"checkpoint": record.snapshot.checkpoint, "step": step, "reason": reason}
        front.run_stopped(step)
    else:
        lines.append(f"train: run {rid} {record.state}; {described}")
    data.update(output=result.output, merged=result.merged)
    result.lines = lines
    front.report("\n".join(lines), data)
    if record.state == CANCELLED:
        told = record.message_shown
        raise OverbrainerError(f"run {rid} was cancelled" + (f" ({told})" if told else ""))
    if record.state == FAILED:
        raise OverbrainerError(record.message_shown or f"run {rid} failed")
    return result


# --- attach / stop / cancel -------------------------------------------------------------------

def _lease(session: Session, record: RunRecord) -> AbstractContextManager[Lease]:
    """The lease of a run that has a job (its target must still be configured)."""
    return lease(session, record.target, record_target(session.config, record), record,
                 options=LeaseOptions(is_retrieved))


def attach_flow(session: Session, run_id: str, *, after: Sequence[PostTrain] = ()) -> TrainResult:
    """Follow a running run again, or collect an ended one whose files are not all here."""
    _require_training(session.config)
    place = _place(session, run_id)
    record = place.load()
    if record.job is None and not unconfirmed(record):
        raise OverbrainerError(f"run {run_id} has no job: it stopped before the job started")
    run_dir = place.dir
    front = session.front
    if record.ended and is_retrieved(record, run_dir):
        end_left(session, run_id, is_retrieved)  # a pod a killed client never deleted
        return report_outcome(front, record, run_dir, after)
    with session.interruptible() as interrupt, _lease(session, record) as held:
        if held.gone:  # its pod no longer exists: what the local files say
            return report_outcome(front, place.load(), run_dir, after)
        _settle(session, held.executor, record)
        if record.ended:
            with events(front) as bus:
                interrupt.shield(collect, held.executor, record, place,
                                 transfer_progress(bus, run_id, "download"), fetched(after),
                                 note=f"retrieving the results of run {run_id}")
            return report_outcome(front, record, run_dir, after)
        return _follow_and_finish(session, held, record, after)


def _no_pod(record: RunRecord) -> OverbrainerError:
    return OverbrainerError(f"run {record.id} has no pod left: its job no longer runs anywhere")


def _settle(session: Session, executor: Executor, record: RunRecord) -> None:
    """A run whose start could not be confirmed: find its job on the target (shielded: it saves)."""
    if not unconfirmed(record):
        return
    config = session.config
    tgt = record_target(config, record)
    container = job_spec(tgt, record, config.training, executor.workdir, {}).container
    session.interrupt.shield(settle, executor, record, _place(session, record.id), container,
                             note=f"looking for the job of run {record.id}")


def _check_stoppable(record: RunRecord) -> None:
    rid = record.id
    if record.job is None:
        raise OverbrainerError(f"run {rid} has not started: there is no job to snapshot yet")
    if record.ended:
        raise OverbrainerError(f"run {rid} already ended: {record.state}")


def stop_flow(session: Session, run_id: str, *, holder_pid: int | None = None,
              after: Sequence[PostTrain] = ()) -> TrainResult | None:
    """Ask the job for a snapshot, then follow it to its end. With `holder_pid` (another process
    holds the project lock) only the request is written."""
    place = _place(session, run_id)
    record = place.load()
    _check_stoppable(record)
    front = session.front
    with session.interruptible() as interrupt, _lease(session, record) as held:
        if held.gone:
            raise _no_pod(record)
        request = f"{record.remote_dir.rstrip('/')}/snapshot.request"
        interrupt.shield(held.executor.put_file, request, "requested")
        asked = time.monotonic()
        text = (f"train: snapshot of run {run_id} requested: its job saves a checkpoint at the end of "
                "its current step, then stops")
        if holder_pid is not None or session.config.training is None:
            who = f"overbrainer (pid {holder_pid})" if holder_pid else "another overbrainer"
            text += (f"\ntrain: {who} is using this project: if it follows run {run_id}, it collects the "
                     f"snapshot; if not, collect it with `overbrainer train attach {run_id}`")
            front.report(text, {"run_id": run_id, "requested": True, "following": False})
            return None
        front.report(text, {"run_id": run_id, "requested": True, "following": True})
        return _follow_and_finish(session, held, record, after, stop_since=asked)


def cancel_flow(session: Session, run_id: str, *, after: Sequence[PostTrain] = ()) -> str:
    """Cancel a run's job (shielded); a run still `preparing` (its `train` was killed) has its pods
    deleted and is failed. Returns the line reported."""
    place = _place(session, run_id)
    record = place.load()
    if record.state == CANCELLED:
        raise OverbrainerError(f"run {run_id} already ended: cancelled")
    if record.state == PREPARING:  # we hold the project: the process that was preparing it is gone
        return cancel_stopped(session, record)
    if record.job is None and not unconfirmed(record):
        raise OverbrainerError(f"run {run_id} has not started")
    if session.config.training is None:
        raise ConfigError("cancel needs [training] to retrieve the run's artifacts: add a [training] "
                          "section to overbrainer.toml")
    if record.ended:
        log.info("train: run %s already ended: %s; stopping any job left on the target", run_id, record.state)
    front = session.front
    with session.interruptible() as interrupt, _lease(session, record) as held:
        if held.gone:
            raise _no_pod(place.load())
        _settle(session, held.executor, record)
        with events(front) as bus:
            text, data = interrupt.shield(_cancel, held.executor, record, place,
                                          transfer_progress(bus, run_id, "download"), fetched(after),
                                          note=f"cancelling the job of run {run_id}")
        front.report(text, data)
        return text


def _cancel(executor: Executor, record: RunRecord, place: RunPlace, progress: Progress | None = None,
            extra: tuple[str, ...] = ()) -> tuple[str, dict[str, Any]]:
    rid = record.id
    job = job_id(record)
    before = to_status(executor.status(job))
    if before.running:
        executor.cancel(job)
        after = to_status(executor.status(job))
    else:
        after = before
    # A job reading cancelled before we asked was cancelled by an earlier `train cancel` that
    # died before saving: record it, unless a follow already settled the run (e.g. stopped).
    if after.kind != "cancelled" or (record.ended and not before.running):
        text = (f"train: the job of run {rid} had already ended ({after.describe()}): collect it with "
                f"`overbrainer train attach {rid}`")
        return text, {"run_id": rid, "cancelled": False, "job": after.describe()}
    retrieve(executor, record, place, Outcome(CANCELLED), progress, extra)
    text = f"train: run {rid} cancelled" + (f" ({record.message_shown})" if record.message_shown else "")
    return text, {"run_id": rid, "cancelled": True, "state": record.state, "message": record.message_shown}


def train_if_changed(session: Session, *, retrain: bool = False,
                     after: Sequence[PostTrain] = ()) -> TrainResult | None:
    """`train_flow` unless a run already trained (or is training) on this data with these
    settings; None when nothing was trained (the line saying so is reported)."""
    if retrain:
        log.info("train: --retrain: training whatever earlier runs did")
        return train_flow(session, after=after)
    paths = ProjectPaths(session.project_dir)
    fp = fingerprint(paths.data, _require_training(session.config))
    found = verdict(paths.runs, fp)
    if found.kind in ("done", "running"):
        run = found.by
        session.report(found.line(), {"stage": "train", "up_to_date": True, "run_id": run.id, "state": run.state})
        return None
    if found.kind == "failed":
        raise OverbrainerError(found.refusal())
    log.info("train: %s; training", found.reason())
    return train_flow(session, after=after)
