"""What each kind of target recorded of a project's runs, read without acting: the read-only face
of the target interface (jobs.kinds.TargetRecords), one per `Target.kind` in `RECORDS`: what the
runs' targets cost (`runs ls|show`, `history`, the TUI, the metrics exporter), which kind
recorded something in a run's folder, and how `runs logs` reaches a run's files on its target.
Only a Runpod run's pod costs anything so far. No connection is opened and no API called to
answer: the records alone (the commands that only read never load a kind's lease).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterable

from overbrainer.jobs.homes import Home
from overbrainer.jobs.kinds import Costs, TargetRecords
from overbrainer.jobs.run_record import RunPlace, RunRecord, list_runs
from overbrainer.jobs.targets import open_executor
from overbrainer.runpod.records import RUNPOD_RECORDS


class MachineRecords:
    """`local` and `ssh`: nothing recorded besides the run's own files, nothing it cost; an SSH
    target (`remote`) is connected to for its files."""

    def __init__(self, remote: bool):
        self.remote = remote

    def recorded(self, owner: Home) -> bool:
        return False

    def reader(self, config: Any, name: str, target: Any, record: Any,
               owner: Home) -> Callable[[], Any] | None:
        if not self.remote:
            return None
        return lambda: open_executor(config, name, target, owner.records)

    def summary(self, run_dir: Path) -> Costs | None:
        return None

    def spend(self, run_dirs: Iterable[Path]) -> Costs | None:
        return None

    def spend_by_run(self, runs_dir: Path) -> dict[str, float]:
        return {}


RECORDS: dict[str, TargetRecords] = {"local": MachineRecords(remote=False), "ssh": MachineRecords(remote=True),
                                     "runpod": RUNPOD_RECORDS}


def _distinct() -> list[TargetRecords]:
    return list({id(r): r for r in RECORDS.values()}.values())


def recorded_by(owner: Home) -> str | None:
    """The kind that recorded something in the folder of `owner` (a run or side job), or None."""
    return next((name for name, r in RECORDS.items() if r.recorded(owner)), None)


def reader(config: Any, target: Any, record: RunRecord, place: RunPlace) -> Callable[[], Any] | None:
    """How `runs logs` reaches the files of the run `record` on its (configured) `target`: a
    function that connects, or None when they are here (a local target). The caller has checked
    the target's kind (jobs.lease.kind_of)."""
    return RECORDS[target.kind].reader(config, record.target, target, record, Home(place.run_id, place.runs_dir))


def run_costs(run_dir: Path) -> Costs | None:
    """What the run's target cost, for `runs ls` / `runs show` (its column, its fields); None when
    nothing was recorded (a local or SSH target)."""
    return next((c for r in _distinct() if (c := r.summary(Path(run_dir))) is not None), None)


def project_costs(runs_dir: Path) -> Costs | None:
    """What the project's targets cost, for `history` (one line, its fields), or None."""
    run_dirs = [Path(runs_dir) / r.id for r in list_runs(runs_dir)]
    return next((c for r in _distinct() if (c := r.spend(run_dirs)) is not None), None)


def spend_by_run(runs_dir: Path) -> dict[str, float]:
    """USD per run ID, what its target has cost so far (the metrics exporter)."""
    out: dict[str, float] = {}
    for records in _distinct():
        out.update(records.spend_by_run(runs_dir))
    return out
