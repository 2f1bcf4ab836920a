"""The target lease: the one place a flow that runs a job on a target gets its executor.

    with lease(session, config, name, target, record, interrupt=..., start=True,
               options=PodOptions(retrieved) or LocalOptions(executor)) as held:
        held.executor.spawn(...); held.job_started(); held.follow(record, bus, interrupt)

What each target kind needs besides the target comes as one value: `LocalOptions` (local and
SSH) or `runpod.lease.PodOptions` (Runpod).

It yields one `Lease`, whatever the target: the executor and the pod's side of the job (`follow`,
`job_started`: plain for a local or SSH target). Local and SSH leases connect (raced against
Ctrl-C: a connection is safe to abandon) and close the executor on release. A Runpod lease
(`runpod.lease`) creates the run's pod, or reconnects to it, gives an SSH executor pinned to the
pod's host key, and on release ends the pod: deleted once the results are verified home, else left
to its watchdog with a message saying so. `retrieved(record, run_dir)` says whether an ended run's
results are home (the job kind's rule): the Runpod lease deletes a pod only then.

`start=True` is a new run (saved `preparing`, its ID and local directory already claimed): the
lease claims its directory on the target, so `record.remote_dir` is set inside the block (and
`record.id` may take the next free suffix when another checkout shares an SSH workdir). A local
or SSH lease that fails before that claim removes the new run's directory: nothing is left, as if
the run never started. Otherwise the lease is for a run that has a job (attach, stop, cancel).
"""

from __future__ import annotations

import shutil
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator, TypeGuard

from overbrainer.config.model import RunpodTarget, Target
from overbrainer.dataset.paths import ProjectPaths
from overbrainer.errors import Interrupted
from overbrainer.jobs import ids
from overbrainer.jobs.follow import Followed, Limits, follow
from overbrainer.jobs.homes import Homes
from overbrainer.runpod.lease import PodOptions, pod_lease
from overbrainer.jobs.run_record import RunRecord
from overbrainer.jobs.start import claim_target
from overbrainer.jobs.targets import open_executor

@dataclass(frozen=True)
class LocalOptions:
    """What a local or SSH lease may be given: `executor`, one the flow connected already, for its
    checks before the run was created (the lease takes it over, and closes it)."""

    executor: Any = None


class Lease:
    """What a lease gives its block: `executor` (None only when a Runpod run's pod no longer
    exists: `gone`; pod.json then says deleted) and the pod's side of following the job
    (`held`, the Runpod lease's; None on a local or SSH target)."""

    def __init__(self, executor, held=None):
        self.executor = executor
        self.held = held

    @property
    def gone(self) -> bool:
        return self.executor is None

    def follow(self, record: RunRecord, bus, interrupt, *, limits: Limits | None = None,
               job: str | None = None) -> Followed | None:
        """`jobs.follow.follow` on this target (a pod's: under the client's deadline)."""
        def watch(stop) -> Followed | None:
            return follow(self.executor, record, bus, stop, limits=limits, job=job)

        return watch(interrupt) if self.held is None else self.held.watch(watch, record.id, interrupt)

    def job_started(self) -> None:
        """The job was spawned (or may have been): nothing to note on a local or SSH target."""
        if self.held is not None:
            self.held.job_started()


def is_pod(target: Target) -> TypeGuard[RunpodTarget]:
    return target.kind == "runpod"


def connect(config, target_name: str, target: Any, runs_dir, interrupt):
    """A local or SSH target's executor, connected (raced against Ctrl-C), before any run exists:
    what a flow checks the target with first; hand it to `lease(executor=)`, or close it."""
    executor = interrupt.race(open_executor, config, target_name, target, runs_dir)
    if executor is None:
        raise Interrupted("interrupted before the run started")
    return executor


@contextmanager
def lease(session, config, target_name: str, target: Any, record: RunRecord, *, interrupt,
          start: bool = False, options: LocalOptions | PodOptions | None = None) -> Iterator[Lease]:
    """The Lease of `target` for the run `record`, for the block (see the module docstring).
    A Runpod target needs its PodOptions; a local or SSH one takes LocalOptions (or nothing, and
    ignores a PodOptions given in case the target were a pod)."""
    if is_pod(target):
        if not isinstance(options, PodOptions):
            raise ValueError("a Runpod lease needs its PodOptions (the rule saying whether a run's results are home)")
        with pod_lease(session, config, target, record, owners=Homes.of(session.project_dir), interrupt=interrupt,
                       start=start, options=options) as held:
            yield Lease(held.executor, held)
        return
    executor = options.executor if isinstance(options, LocalOptions) else None
    runs_dir = ProjectPaths(session.project_dir).runs
    try:
        if executor is None:
            executor = interrupt.race(open_executor, config, target_name, target, runs_dir)
        if executor is None:
            raise Interrupted("interrupted before the run started" if start
                              else f"interrupted: run {record.id} was not touched")
        if start:
            claim_target(executor, runs_dir, record)
    except BaseException:
        if executor is not None:
            executor.close()
        if start:
            shutil.rmtree(ids.run_dir(runs_dir, record.id), ignore_errors=True)
        raise
    try:
        yield Lease(executor)
    finally:
        executor.close()
