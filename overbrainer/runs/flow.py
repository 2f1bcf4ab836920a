"""The training flows: `train`, `train attach`, `train stop`, `train cancel`
(what each does to a run: docs/runs.md#what-each-command-does).

Ctrl-C: preparing (token, connection) is raced and leaves nothing behind; starting the job is
shielded; following is raced and only detaches (the job keeps running); cancelling (the `train
stop` limits' cancel too, see runs.follow) and retrieval are shielded. `train_flow` is also what
`overbrainer run` calls after `split`.
"""

from __future__ import annotations

import logging
import shutil
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from overbrainer.dataset.paths import ProjectPaths
from overbrainer.errors import ConfigError, Interrupted, OverbrainerError
from overbrainer.runs import ids
from overbrainer.runs.follow import attach_hint, follow, job_id, to_status
from overbrainer.runs.record import CANCELLED, FAILED, PREPARING, RUNNING, STOPPED, SUCCEEDED, RunRecord, load
from overbrainer.runs.lease import is_pod, lease, pod_of
from overbrainer.runs.start import unconfirmed
from overbrainer.runs.states import Outcome
from overbrainer.runs.targets import pick_target, record_target

if TYPE_CHECKING:
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


def _runs_dir(session: Session) -> Path:
    return ProjectPaths(session.project_dir).runs


def _keeps_running(record: RunRecord) -> str:
    return (f"interrupted: run {record.id} keeps running on target `{record.target}`; "
            f"{attach_hint(record.id)}")


@contextmanager
def _events(front):
    """The flow's bus for a block; what was published is still shown (for at most 2 s) when the
    block raises, so the last lines before an error are not lost."""
    guard = front.open_bus()
    try:
        yield guard.bus
    finally:
        guard.close()


def _transfers(bus, run_id: str, direction: str):
    """The progress callback of a run's uploads or downloads: `Transfer` events on the bus."""
    from overbrainer.front.events import Transfer

    return lambda done, total: bus.publish(Transfer(run_id, direction, done, total))


def _require_training(config) -> Any:
    training = getattr(config, "training", None)
    if training is None:
        raise ConfigError("no [training] section in overbrainer.toml")
    return training


# --- train ------------------------------------------------------------------------------------

def train_flow(session: Session, config, *, target: str | None = None, resume_from: str | None = None,
               detach: bool = False, keep_pod: bool = False) -> TrainResult:
    """Create a run, start its job, follow it and bring its results home (or detach). `keep_pod`:
    a Runpod target's pod is kept once the job ended (only `overbrainer pod rm` deletes it)."""
    from overbrainer.runs.start import create_run
    from overbrainer.train.axolotl_config import require_examples, template_warning

    training = _require_training(config)
    name, tgt = pick_target(config, target)
    if keep_pod and not is_pod(tgt):
        raise ConfigError(f"--keep-pod applies to a runpod target only; target `{name}` is not one")
    runs_dir = _runs_dir(session)
    resume = None
    if resume_from:
        from overbrainer.runs.prepare import resume_source

        resume = resume_source(runs_dir, resume_from, training)
    else:
        require_examples(session.project_dir / "data" / "train.jsonl", "data/train.jsonl")
    warning = template_warning(training)
    if warning:
        log.warning("%s", warning)
    front = session.front
    interrupt = front.interrupt()
    try:
        secrets = interrupt.race(_job_secrets, config)
        if secrets is None:
            raise Interrupted("interrupted before the run started")
        record, _ = create_run(runs_dir, config.project.name, name, resume_from)
        with lease(session, config, name, tgt, record, interrupt=interrupt, start=True,
                   keep=keep_pod) as executor:
            return _start_and_follow(session, config, interrupt, executor, record, tgt, secrets, resume,
                                     detach)
    finally:
        interrupt.restore()


def _job_secrets(config) -> dict[str, str]:
    """The job's secrets: the HF token when set (raced: safe to abandon)."""
    secrets: dict[str, str] = {}
    token = getattr(config, "hf_token", None)
    if token is not None:
        secrets["HF_TOKEN"] = token.resolve()
    elif getattr(config.training, "hub_model_id", None):
        log.warning("training.hub_model_id is set but OVERBRAINER_HF_TOKEN is not: the job cannot push")
    return secrets


def _start_and_follow(session: Session, config, interrupt, executor, record: RunRecord, tgt, secrets, resume,
                      detach: bool) -> TrainResult:
    """Inside the lease: fill the run directory, start the job (shielded), then follow or detach."""
    from overbrainer.runs.prepare import fill_run_dir, job_root
    from overbrainer.runs.start import fail, job_spec, release_claim, start_job

    front, runs_dir, name = session.front, _runs_dir(session), record.target
    run_dir = ids.run_dir(runs_dir, record.id)
    if record.resumed_from:
        log.info("train: run %s resumes run %s from its %s", record.id, record.resumed_from,
                 resume.checkpoint)
    try:
        fill_run_dir(run_dir, session.project_dir, config.training, job_root(tgt, record.remote_dir), resume,
                     check=lambda: interrupt.check("interrupted before the run started"))
        interrupt.check("interrupted before the run started")
        spec = job_spec(tgt, record, config.training, executor.workdir, secrets,
                        _in_job_export(config, run_dir, record, tgt, executor.workdir))
    except Interrupted:
        if not is_pod(tgt):  # nothing of the run is left; a pod's run stays, failed, with its pod.json
            shutil.rmtree(run_dir, ignore_errors=True)
            release_claim(executor, record.remote_dir, run_dir)
        raise
    except OverbrainerError as e:
        fail(runs_dir, record, str(e))
        raise
    front.run_created(record.id)
    log.info("train: run %s on target `%s`, in %s", record.id, name, record.remote_dir)
    pod = pod_of(executor)
    try:
        with _events(front) as bus:
            interrupt.shield(start_job, executor, record, run_dir, runs_dir, spec,
                             _transfers(bus, record.id, "upload"),
                             note=f"starting the job of run {record.id}")
    finally:
        if pod is not None and record.state == RUNNING:  # a job that runs, or may (unconfirmed)
            pod.job_started()
    if interrupt.caught():
        raise Interrupted(_keeps_running(record))
    if detach:
        text = record.id
        front.report(text, {"run_id": record.id, "state": record.state, "target": name,
                            "remote_dir": record.remote_dir, "detached": True})
        log.info("train: run %s detached; collect it with `overbrainer train attach %s`",
                 record.id, record.id)
        return TrainResult(record.id, record.state, name, detached=True, lines=[text])
    return _follow_and_finish(front, interrupt, executor, record, runs_dir)


def _in_job_export(config, run_dir: Path, record: RunRecord, tgt, workdir: str):
    """`[export] after_training`: the export step and its environment (export.in_job), else None."""
    settings = getattr(config, "export", None)
    if settings is None or not settings.after_training:
        return None
    from overbrainer.export import in_job

    return in_job.step(run_dir, record.id, tgt, settings.quantize, workdir)


def _follow_and_finish(front, interrupt, executor, record: RunRecord, runs_dir: Path,
                       stop_since: float | None = None) -> TrainResult:
    from overbrainer.runs.retrieve import finish

    pod = pod_of(executor)
    with _events(front) as bus:
        if pod is not None:  # under the client's deadline; settled (shielded) on the pod's side
            followed = pod.follow(executor, record, bus, interrupt, stop_since=stop_since)
        else:
            followed = follow(executor, record, bus, interrupt, stop_since=stop_since)
    if followed is None:
        raise Interrupted(_keeps_running(record))
    run_dir = ids.run_dir(runs_dir, record.id)
    with _events(front) as bus:  # a bus of its own: the follow's lines are all shown before retrieval's
        interrupt.shield(finish, executor, record, run_dir, runs_dir, followed.status,
                         followed.summary.lines, followed.notes, _transfers(bus, record.id, "download"),
                         note=f"retrieving the results of run {record.id}")
    return report_outcome(front, record, run_dir)


# --- reporting ------------------------------------------------------------------------------

def report_outcome(front, record: RunRecord, run_dir: Path) -> TrainResult:
    """Report an ended run's summary; raise for failed and cancelled runs (after the report)."""
    from overbrainer.runs.progress import local_summary
    from overbrainer.train.axolotl_config import recorded_adapter

    rid = record.id
    summary = local_summary(run_dir)
    described = summary.describe()
    result = TrainResult(rid, record.state, record.target, message=record.message)
    data: dict[str, Any] = {"run_id": rid, "state": record.state, "target": record.target,
                            "step": summary.step, "max_steps": summary.max_steps, "epoch": summary.epoch,
                            "loss": summary.last_train["loss"] if summary.last_train else None,
                            "eval_loss": summary.eval_loss, "message": record.message}
    lines: list[str] = []
    if record.state == SUCCEEDED:
        result.output = f"runs/{rid}/output"
        lines.append(f"train: run {rid} succeeded; {described}; output in runs/{rid}/output")
        kind = "adapter" if recorded_adapter(run_dir) in ("lora", "qlora") else "model"
        lines.append(f"train: {kind} in runs/{rid}/output")
        if (run_dir / "output" / "merged").is_dir():
            result.merged = f"runs/{rid}/output/merged"
            lines.append(f"train: merged model in runs/{rid}/output/merged")
        from overbrainer.export.in_job import deliver

        lines += deliver(run_dir, rid)
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
        raise OverbrainerError(f"run {rid} was cancelled" + (f" ({record.message})" if record.message else ""))
    if record.state == FAILED:
        raise OverbrainerError(record.message or f"run {rid} failed")
    return result


# --- attach / stop / cancel -------------------------------------------------------------------

def _lease(session: Session, config, record: RunRecord, interrupt):
    """The lease of a run that has a job (its target must still be configured)."""
    return lease(session, config, record.target, record_target(config, record), record, interrupt=interrupt)


def attach_flow(session: Session, config, run_id: str) -> TrainResult:
    """Follow a running run again, or collect an ended one whose files are not all here."""
    from overbrainer.runs.retrieve import collect, is_retrieved

    _require_training(config)
    runs_dir = _runs_dir(session)
    record = load(runs_dir, run_id)
    if record.job is None and not unconfirmed(record):
        raise OverbrainerError(f"run {run_id} has no job: it stopped before the job started")
    run_dir = ids.run_dir(runs_dir, run_id)
    front = session.front
    if record.ended and is_retrieved(record, run_dir):
        from overbrainer.runs.pod_lease import end_left_pod

        end_left_pod(session, config, run_id)  # its pod, when a client was killed before deleting it
        return report_outcome(front, record, run_dir)
    interrupt = front.interrupt()
    try:
        with _lease(session, config, record, interrupt) as executor:
            if executor is None:  # its pod no longer exists: what the local files say
                return report_outcome(front, load(runs_dir, run_id), run_dir)
            _settle(interrupt, config, executor, record, runs_dir)
            if record.ended:
                with _events(front) as bus:
                    interrupt.shield(collect, executor, record, run_dir, runs_dir,
                                     _transfers(bus, run_id, "download"),
                                     note=f"retrieving the results of run {run_id}")
                return report_outcome(front, record, run_dir)
            return _follow_and_finish(front, interrupt, executor, record, runs_dir)
    finally:
        interrupt.restore()


def _no_pod(record: RunRecord) -> OverbrainerError:
    return OverbrainerError(f"run {record.id} has no pod left: its job no longer runs anywhere")


def _settle(interrupt, config, executor, record: RunRecord, runs_dir: Path) -> None:
    """A run whose start could not be confirmed: find its job on the target (shielded: it saves)."""
    from overbrainer.runs.start import job_spec, settle

    if not unconfirmed(record):
        return
    tgt = record_target(config, record)
    container = job_spec(tgt, record, config.training, executor.workdir, {}).container
    interrupt.shield(settle, executor, record, runs_dir, container, note=f"looking for the job of run {record.id}")


def _check_stoppable(record: RunRecord) -> None:
    rid = record.id
    if record.job is None:
        raise OverbrainerError(f"run {rid} has not started: there is no job to snapshot yet")
    if record.ended:
        raise OverbrainerError(f"run {rid} already ended: {record.state}")


def stop_flow(session: Session, config, run_id: str, *, holder_pid: int | None = None) -> TrainResult | None:
    """Ask the job for a snapshot, then follow it to its end. With `holder_pid` (another process
    holds the project lock) only the request is written."""
    runs_dir = _runs_dir(session)
    record = load(runs_dir, run_id)
    _check_stoppable(record)
    front = session.front
    interrupt = front.interrupt()
    try:
        with _lease(session, config, record, interrupt) as executor:
            if executor is None:
                raise _no_pod(record)
            request = f"{record.remote_dir.rstrip('/')}/snapshot.request"
            interrupt.shield(executor.put_file, request, "requested")
            asked = time.monotonic()
            text = (f"train: snapshot of run {run_id} requested: its job saves a checkpoint at the end of "
                    "its current step, then stops")
            if holder_pid is not None or getattr(config, "training", None) is None:
                who = f"overbrainer (pid {holder_pid})" if holder_pid else "another overbrainer"
                text += (f"\ntrain: {who} is using this project: if it follows run {run_id}, it collects the "
                         f"snapshot; if not, collect it with `overbrainer train attach {run_id}`")
                front.report(text, {"run_id": run_id, "requested": True, "following": False})
                return None
            front.report(text, {"run_id": run_id, "requested": True, "following": True})
            return _follow_and_finish(front, interrupt, executor, record, runs_dir, stop_since=asked)
    finally:
        interrupt.restore()


def cancel_flow(session: Session, config, run_id: str) -> str:
    """Cancel a run's job (shielded); a run still `preparing` (its `train` was killed) has its pods
    deleted and is failed. Returns the line reported."""
    runs_dir = _runs_dir(session)
    record = load(runs_dir, run_id)
    if record.state == CANCELLED:
        raise OverbrainerError(f"run {run_id} already ended: cancelled")
    if record.state == PREPARING:  # we hold the project: the process that was preparing it is gone
        from overbrainer.runs.pod_rm_flow import cancel_stopped

        return cancel_stopped(session, config, record)
    if record.job is None and not unconfirmed(record):
        raise OverbrainerError(f"run {run_id} has not started")
    if getattr(config, "training", None) is None:
        raise ConfigError("cancel needs [training] to retrieve the run's artifacts: add a [training] "
                          "section to overbrainer.toml")
    if record.ended:
        log.info("train: run %s already ended: %s; stopping any job left on the target", run_id, record.state)
    front = session.front
    interrupt = front.interrupt()
    try:
        with _lease(session, config, record, interrupt) as executor:
            if executor is None:
                raise _no_pod(load(runs_dir, run_id))
            _settle(interrupt, config, executor, record, runs_dir)
            with _events(front) as bus:
                text, data = interrupt.shield(_cancel, executor, record, runs_dir,
                                              _transfers(bus, run_id, "download"),
                                              note=f"cancelling the job of run {run_id}")
            front.report(text, data)
            return text
    finally:
        interrupt.restore()


def _cancel(executor, record: RunRecord, runs_dir: Path, progress=None) -> tuple[str, dict]:
    from overbrainer.runs.retrieve import retrieve

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
    retrieve(executor, record, ids.run_dir(runs_dir, rid), runs_dir, Outcome(CANCELLED), progress)
    text = f"train: run {rid} cancelled" + (f" ({record.message})" if record.message else "")
    return text, {"run_id": rid, "cancelled": True, "state": record.state, "message": record.message}
