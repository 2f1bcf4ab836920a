"""The target lease: the one place a flow that runs a job on a target gets its executor.

    with session.interruptible(), lease(session, name, target, record, start=True,
                                        options=LeaseOptions(retrieved, keep=..., executor=...)) as held:
        held.executor.spawn(...); held.job_started(); held.follow(record, bus)

The lease of every kind of target comes from its kind (`KINDS`: `local` and `ssh` here,
`runpod` from runpod.target; the interface is jobs.kinds.TargetKind), given what it may need as
one value, `LeaseOptions`; a kind ignores what it does not use. It
yields one `Lease`, whatever the target: the executor and the kind's side of the job (`follow`,
`job_started`: plain for a local or SSH target). The configuration and the flow's Interrupt are
the session's (`session.config`, `session.interrupt`: the lease is taken inside the flow's
`session.interruptible()` block). Local and SSH leases connect (raced against Ctrl-C: a
connection is safe to abandon) and close the executor on release. A Runpod lease
(runpod.lease) creates the run's pod, or reconnects to it, gives an SSH executor pinned to the
pod's host key, and on release ends the pod: deleted once the results are verified home, else left
to its watchdog with a message saying so. `retrieved(record, run_dir)` says whether an ended run's
results are home (the job kind's rule): the Runpod lease deletes a pod only then.

`start=True` is a new run (saved `preparing`, its ID and local directory already claimed): the
lease claims its directory on the target, so `record.remote_dir` is set inside the block (and
`record.id` may take the next free suffix when another checkout shares an SSH workdir). A local
or SSH lease that fails before that claim removes the new run's directory: nothing is left, as if
the run never started. Otherwise the lease is for a run that has a job (attach, stop, cancel).

The other calls a run's command makes of its target's kind are here too: `end_left` (`train
attach` of an ended run), `cancel_stopped` (`train cancel` of a run whose process died while
preparing). What only reads a kind's records (costs, `runs logs`) is jobs.records.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from overbrainer.config.model import Config, Target
from overbrainer.errors import ConfigError, Interrupted, OverbrainerError
from overbrainer.exec.base import Executor
from overbrainer.front.bus import EventBus
from overbrainer.front.interrupt import Interrupt
from overbrainer.front.session import Session
from overbrainer.jobs.follow import Followed, Limits, follow
from overbrainer.jobs.homes import Home, Homes
from overbrainer.jobs.kinds import Held, LeaseOptions, Retrieved, TargetKind
from overbrainer.jobs.records import recorded_by
from overbrainer.jobs.run_record import RunPlace, RunRecord
from overbrainer.jobs.start import claim_target
from overbrainer.jobs.targets import open_executor
from overbrainer.runpod.target import RUNPOD


class Lease:
    """What a lease gives its block: `executor` (none only when the target made for the job no
    longer exists: `gone`; a Runpod run's pod.json then says deleted) and the kind's side of
    following the job, until the flow's `interrupt`."""

    def __init__(self, held: Held, interrupt: Interrupt):
        self.held = held
        self._executor = held.executor
        self.interrupt = interrupt

    @property
    def gone(self) -> bool:
        return self._executor is None

    @property
    def executor(self) -> Executor:
        """The target's executor (a block asks `gone` first where the target may no longer exist)."""
        if self._executor is None:
            raise OverbrainerError("the target of this job no longer exists")
        return self._executor

    def follow(self, record: RunRecord, bus: EventBus, *, limits: Limits | None = None,
               job: str | None = None) -> Followed | None:
        """`jobs.follow.follow` on this target (a pod's: under the client's deadline)."""
        def watch(stop: Interrupt) -> Followed | None:
            return follow(self.executor, record, bus, stop, limits=limits, job=job)

        return self.held.watch(watch, record.id, self.interrupt)

    def job_started(self) -> None:
        """The job was spawned (or may have been): the kind notes it (a pod is `running`)."""
        self.held.job_started()


# --- the kinds ------------------------------------------------------------------------------------

class _Connected:
    """What a local or SSH lease holds: its executor; the job is followed as it is."""

    def __init__(self, executor: Executor):
        self.executor = executor

    def watch(self, watch: Callable[[Interrupt], Followed | None], run_id: str,
              interrupt: Interrupt) -> Followed | None:
        return watch(interrupt)

    def job_started(self) -> None:
        """Nothing to note on a local or SSH target."""


class MachineKind:
    """`local` and `ssh`: a machine that is there before any job (reached by connecting)."""

    made_for_job = False

    @contextmanager
    def lease(self, session: Session, name: str, target: Any, record: Any, *, owners: Homes,
              start: bool, options: LeaseOptions) -> Iterator[Held]:
        """Connect (raced against Ctrl-C: a connection is safe to abandon), or take over the
        executor the flow connected already; close it on release. A new run (`start`) claims its
        directory on the target; one that fails before that claim leaves nothing behind."""
        executor = options.executor
        runs_dir = owners.runs_dir
        try:
            if executor is None:
                executor = session.interrupt.race(open_executor, session.config, name, target, runs_dir)
            if executor is None:
                raise Interrupted("interrupted before the run started" if start
                                  else f"interrupted: run {record.id} was not touched")
            if start:
                claim_target(executor, record, RunPlace(runs_dir, record.id))
        except BaseException:
            if executor is not None:
                executor.close()
            if start:
                shutil.rmtree(RunPlace(runs_dir, record.id).dir, ignore_errors=True)
            raise
        try:
            yield _Connected(executor)
        finally:
            executor.close()

    def check(self, config: Any) -> None:
        """Nothing to check before a side job: its target is connected to first."""

    def side_place(self, target: Any, run_id: str) -> tuple[str, str]:
        raise TypeError("a local or SSH target is not made for a job: a side job works in the run's directory")

    def left(self, owner: Home) -> str:
        return ""

    def end_left(self, session: Session, owners: Homes, run_id: str, retrieved: Retrieved) -> None:
        """Nothing is left of an ended job on a machine of one's own."""

    def cancel_stopped(self, session: Session, record: Any, owner: Home) -> str:
        """A run whose process died while preparing, with nothing of it on a target: failed."""
        message = "cancelled before its job started (its process was killed)"
        owner.fail_run(message)
        text = f"train: run {record.id} failed: {message}"
        session.report(text, {"run_id": record.id, "cancelled": False, "state": "failed", "message": message,
                              "pods": []})
        return text


MACHINE = MachineKind()
KINDS: dict[str, TargetKind] = {"local": MACHINE, "ssh": MACHINE, "runpod": RUNPOD}


def kind_of(target: Target) -> TargetKind:
    """The kind of a configured target (ConfigError for a kind this version does not know)."""
    kind = KINDS.get(target.kind)
    if kind is None:
        raise ConfigError(f"target `{target.name}` has an unknown kind")
    return kind


def recorder(owner: Home) -> TargetKind:
    """The kind that recorded something in the folder of `owner` (a machine's if none did)."""
    name = recorded_by(owner)
    return MACHINE if name is None else KINDS[name]


# --- what a run's command asks of its target's kind -----------------------------------------------

def is_pod(target: Target) -> bool:
    """Whether the target is made for each job (a Runpod pod): no executor before its lease, a
    side job gets one of its own, `--keep-pod` applies."""
    return kind_of(target).made_for_job


def connect(config: Config, target_name: str, target: Target, runs_dir: Path, interrupt: Interrupt) -> Executor:
    """A local or SSH target's executor, connected (raced against Ctrl-C), before any run exists:
    what a flow checks the target with first; hand it to `lease(options=LeaseOptions(executor=))`,
    or close it."""
    executor = interrupt.race(open_executor, config, target_name, target, runs_dir)
    if executor is None:
        raise Interrupted("interrupted before the run started")
    return executor


@contextmanager
def lease(session: Session, target_name: str, target: Any, record: RunRecord, *,
          start: bool = False, options: LeaseOptions | None = None) -> Iterator[Lease]:
    """The Lease of `target` for the run (or side job) `record`, for the block (see the module
    docstring)."""
    kind = kind_of(target)
    with kind.lease(session, target_name, target, record, owners=Homes.of(session.project_dir),
                    start=start, options=options or LeaseOptions()) as held:
        yield Lease(held, session.interrupt)


def end_left(session: Session, run_id: str, retrieved: Retrieved) -> None:
    """`train attach` of a run that ended with its results home (`retrieved(record, run_dir)`): end
    what its target may have left (a pod a killed client never deleted; nothing else is done,
    and no API key needed, when there is none)."""
    homes = Homes.of(session.project_dir)
    recorder(homes.run(run_id)).end_left(session, homes, run_id, retrieved)


def cancel_stopped(session: Session, record: RunRecord) -> str:
    """`train cancel` of a run still `preparing` (the caller holds the project, so its process is
    gone): what its target's kind recorded is ended (its pods deleted and confirmed), the run
    failed; returns the line reported."""
    owner = Homes.of(session.project_dir).run(record.id)
    return recorder(owner).cancel_stopped(session, record, owner)

