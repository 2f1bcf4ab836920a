"""Following a started job of any kind (docs/runs.md#following-a-job): poll every 2 s, tail
metrics.jsonl from its last offset, publish Metric/Mark/JobStatus events, a failure budget of 5
retried polls, then drain.

`follow` returns None when Ctrl-C came (the job keeps running). It runs the loop under
`Interrupt.race`, so a blocking call to the target never holds the user up; the abandoned loop
makes no call and logs no warning once the race ended (a pod the client then deletes is never
polled again). A job kind may give `limits` (training gives the `train stop` limits,
runs/stop_limits.py): asked at each poll while the job runs, they may call for a cancel, which
leaves the loop and runs under `Interrupt.shield` (Ctrl-C cannot cut it half-way); then the loop
goes on to the job's end.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Callable, Protocol, TypeVar

from overbrainer.errors import Interrupted, OverbrainerError
from overbrainer.exec.base import Executor, JobId
from overbrainer.front.bus import EventBus
from overbrainer.front.events import JobStatus, RunWatched, metrics_event
from overbrainer.front.interrupt import Interrupt
from overbrainer.jobs import polling
from overbrainer.jobs.run_record import RunRecord
from overbrainer.jobs.status import Status, to_status
from overbrainer.train.metrics import READ_LIMIT, MetricsSummary, line_reader

log = logging.getLogger(__name__)

T = TypeVar("T")


class Limits(Protocol):
    """What may cancel a job while it is followed (training's `train stop` limits)."""

    def due(self, read: Callable[[str], bytes]) -> str | None:
        """Asked at each poll while the job runs, `read(name)` reading a small file of the job's
        directory: the reason to cancel the job now, or None."""

    def cancelled(self) -> None:
        """The cancel they called for was done."""


def attach_hint(run_id: str) -> str:
    return f"follow it again with `overbrainer train attach {run_id}`"


def job_id(record: RunRecord) -> JobId:
    """The run's job (an exec.base.JobId, as run.json holds it): a run followed or cancelled has
    one (its start was recorded, or settled first)."""
    if record.job is None:
        raise OverbrainerError(f"run {record.id} has no job")
    return record.job


@dataclass
class Followed:
    """What a follow saw: the job's final status and the fold of its metrics. `cancel_needed`: the
    loop stopped for a stop-limit cancel (`status` is then the last one seen, still running)."""
    status: Status
    summary: MetricsSummary
    offset: int = 0
    notes: list[str] = field(default_factory=list)
    cancel_needed: bool = False


class Follower:
    """One follow of one job; `limits` may call for its cancel (see the module docstring)."""

    def __init__(self, executor: Executor, record: RunRecord, bus: EventBus, interrupt: Interrupt, *,
                 limits: Limits | None = None, job: str | None = None):
        self.executor = executor
        self.record = record
        self.bus = bus
        self.interrupt = interrupt
        self.job = job_id(record)
        self.reader = line_reader()
        self.summary = MetricsSummary()
        self.metrics_path = f"{record.remote_dir.rstrip('/')}/metrics.jsonl"
        self.limits = limits
        self.cancelled_for: str | None = None
        self.last: Status | None = None
        self.watched = False
        self.job_kind = job  # a side job's kind (`export`): the prefix of its lines; None for training

    # --- one poll ---------------------------------------------------------------------------

    def read_metrics(self) -> int:
        """Read every new complete line; publish its events. Returns the bytes read."""
        total = 0
        while True:
            chunk = self.executor.read_from(self.metrics_path, self.reader.offset, READ_LIMIT)
            total += len(chunk)
            for line in self.reader.feed(chunk):
                rec = self.summary.feed(line)
                ev = metrics_event(self.record.id, rec) if rec is not None else None
                if ev is not None:
                    self.bus.publish(ev)
            if len(chunk) < READ_LIMIT:
                return total

    def _poll(self) -> Status:
        self.read_metrics()
        return to_status(self.executor.status(self.job))

    def _retrying(self, fn: Callable[[], T], failures: list[int]) -> T | None:
        """fn(), counting failures; after the budget an error with the attach hint. None once the
        race ended (Ctrl-C, a deadline): no call is made then, and a call in flight fails quietly."""
        while True:
            if self.interrupt.caught():
                return None
            try:
                result = fn()
                failures[0] = 0
                return result
            except OverbrainerError as e:
                if self.interrupt.caught():
                    return None
                failures[0] += 1
                if failures[0] > polling.FAILURE_BUDGET:
                    raise OverbrainerError(f"cannot follow run {self.record.id}: {e}; "
                                           f"{attach_hint(self.record.id)}", cause=e) from e
                log.warning("cannot reach the job (%d/%d): %s", failures[0], polling.FAILURE_BUDGET, e)
                if self.interrupt.wait(polling.poll_secs()):
                    return None

    # --- the loop ---------------------------------------------------------------------------

    def run(self) -> Followed | None:
        """Follow to the job's end (or to a stop-limit cancel: run again after it)."""
        if not self.watched:
            self.bus.publish(RunWatched(self.record.id, self.job_kind))
            self.watched = True
        failures = [0]
        while True:
            status = self._retrying(self._poll, failures)
            if status is None:
                return None
            if status != self.last:
                self.bus.publish(JobStatus(self.record.id, status.kind, status.code))
                self.last = status
            if not status.running:
                break
            if self.interrupt.caught():
                return None
            if self._limits_due():
                return Followed(status, self.summary, self.reader.offset, [self.cancelled_for or ""],
                                cancel_needed=True)
            if self.interrupt.wait(polling.poll_secs()):
                return None
        # Drain what the job wrote last, until a read makes no progress.
        while True:
            got = self._retrying(self.read_metrics, failures)
            if got is None:
                return None
            if got == 0:
                break
        for line in self.reader.finish():
            rec = self.summary.feed(line)
            if rec is not None:
                ev = metrics_event(self.record.id, rec)
                if ev is not None:
                    self.bus.publish(ev)
        notes = [self.cancelled_for] if self.cancelled_for else []
        return Followed(status, self.summary, self.reader.offset, notes)

    # --- the limits -------------------------------------------------------------------------

    def _read_small(self, name: str) -> bytes:
        return self.executor.read_from(f"{self.record.remote_dir.rstrip('/')}/{name}", 0, 64 * 1024)

    def _limits_due(self) -> bool:
        """True when the limits call for cancelling the job (`cancel_job`, shielded, does it)."""
        if self.limits is None:
            return False
        reason = self.limits.due(self._read_small)
        if reason is None:
            return False
        self.cancelled_for = reason
        return True

    def cancel_job(self) -> bool:
        """The limits' cancel (run it shielded); False when it failed (tried again next poll)."""
        try:
            self.executor.cancel(self.job)
        except OverbrainerError as e:
            log.warning("cannot cancel the job of run %s: %s", self.record.id, e)
            return False
        log.warning("%s", self.cancelled_for)
        if self.limits is not None:
            self.limits.cancelled()
        return True


def follow(executor: Executor, record: RunRecord, bus: EventBus, interrupt: Interrupt, *, limits: Limits | None = None,
           job: str | None = None) -> Followed | None:
    """Follow a job to its end, raced by Ctrl-C (None: the job keeps running); a cancel the limits
    call for runs shielded, and a Ctrl-C during it then raises `Interrupted`. `job`: a side job's
    kind."""
    follower = Follower(executor, record, bus, interrupt, limits=limits, job=job)
    while True:
        followed = interrupt.race(follower.run)
        if followed is None or not followed.cancel_needed:
            return followed
        cancelled = interrupt.shield(follower.cancel_job, note=f"cancelling the job of run {record.id}")
        if cancelled and interrupt.caught():
            raise Interrupted(f"interrupted: the job of run {record.id} was cancelled ({follower.cancelled_for}); "
                              f"collect it with `overbrainer train attach {record.id}`")
