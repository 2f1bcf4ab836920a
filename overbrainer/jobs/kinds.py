"""The target interface: what the job layer calls for every kind of target, in two faces.

A configured target's kind (`Target.kind`) is one `TargetKind` (jobs.lease.KINDS), what acts on
the target, and one `TargetRecords` (jobs.records.RECORDS), what reads what the kind recorded of a
run without acting (no connection to open, no API to call: the commands that only read load this
face only). `local` and `ssh` are machines that are there before the job, reached by connecting
(jobs.lease.MachineKind, jobs.records.MachineRecords); `runpod` is a pod made for each job,
deleted once its results are home (runpod.target, runpod.records). The job layer, and through it
the flows, ask the kind; none of them knows what a kind does inside.

`TargetKind`:
- `lease(session, ...)`: the target for one job's block, given a `LeaseOptions` (jobs.lease wraps
  what it yields into its `Lease`), the configuration and the flow's Interrupt taken from the
  session;
- for a side job on a target made for it (`made_for_job`): `check(config)` before anything is
  claimed, `side_place(target, run_id)` (where the run's directory and the cache are there),
  `left(home)` (what an interrupted one may have left);
- for what it recorded in a run's folder: `end_left` (an ended run with its results home: end
  what is left of it), `cancel_stopped` (`train cancel` of a run whose process died while
  preparing).

`TargetRecords`: `recorded(home)` (whether it recorded anything in the folder of a run or side
job), `reader(...)` (how `runs logs` reaches the run's files on the target; None: they are
here), and what it cost: `summary(run_dir)` (`runs ls`, `runs show`, the TUI), `spend(run_dirs)`
(`history`), `spend_by_run(runs_dir)` (the metrics exporter).

Another kind (a Runpod Instant Cluster, several pods for one job) is one more entry of both
registries: nothing else in the job layer or the flows changes.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Protocol

from overbrainer.front.session import Session
from overbrainer.jobs.homes import Home, Homes

if TYPE_CHECKING:
    from overbrainer.exec.base import Executor
    from overbrainer.front.interrupt import Interrupt
    from overbrainer.jobs.follow import Followed

Retrieved = Callable[[Any, Path], bool]  # (record, its folder) -> whether an ended job's results are home
Costs = tuple[str, dict[str, Any]]  # a line and the same facts as a dict


class Held(Protocol):
    """What a kind's lease holds for its block: the executor (None: the target made for the job
    no longer exists), the kind's side of following the job, and of its start."""

    @property
    def executor(self) -> Executor | None: ...

    def watch(self, watch: Callable[[Interrupt], Followed | None], run_id: str,
              interrupt: Interrupt) -> Followed | None:
        """`watch(interrupt)`, the job layer's follow, as this target needs it run."""
        ...

    def job_started(self) -> None: ...


@dataclass(frozen=True)
class LeaseOptions:
    """What a lease may be given besides its target; a kind ignores what it does not use.

    `retrieved`: the job kind's rule saying whether an ended run's results are home (a pod is
    deleted only then; a Runpod lease needs it); `keep`: a target made for the job is kept when
    the job ends (`--keep-pod`); `executor`: a local or SSH one the flow connected already, for
    its checks before the run was created (the lease takes it over, and closes it); `home`: the
    lease's owner (None: the run in runs/; a side job's jobs.homes.Home); `workdir`: the workdir
    of a target made for the job (the owner's directory there is `<workdir>/<id>`);
    `runs_retrieved`: the training's rule for ending the left pods of runs before a side job's
    new pod (None: only side jobs' left pods are ended)."""

    retrieved: Retrieved | None = None
    keep: bool = False
    executor: Any = None
    home: Home | None = None
    workdir: str | None = None
    runs_retrieved: Retrieved | None = None


class TargetKind(Protocol):
    """What acts on a target of one kind (see the module docstring)."""

    made_for_job: bool

    def lease(self, session: Session, name: str, target: Any, record: Any, *, owners: Homes,
              start: bool, options: LeaseOptions) -> AbstractContextManager[Held]: ...

    def check(self, config: Any) -> None: ...

    def side_place(self, target: Any, run_id: str) -> tuple[str, str]: ...

    def left(self, owner: Home) -> str: ...

    def end_left(self, session: Session, owners: Homes, run_id: str, retrieved: Retrieved) -> None: ...

    def cancel_stopped(self, session: Session, record: Any, owner: Home) -> str: ...


class TargetRecords(Protocol):
    """What reads what a kind of target recorded of a run, without acting (see the module
    docstring)."""

    def recorded(self, owner: Home) -> bool: ...

    def reader(self, config: Any, name: str, target: Any, record: Any,
               owner: Home) -> Callable[[], Any] | None: ...

    def summary(self, run_dir: Path) -> Costs | None: ...

    def spend(self, run_dirs: Iterable[Path]) -> Costs | None: ...

    def spend_by_run(self, runs_dir: Path) -> dict[str, float]: ...
