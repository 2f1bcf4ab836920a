"""Where this project keeps its runs and side jobs: a training run in `runs/<run>/`, a side job (an
export or a compare, `export_…`, `compare_…`) in `runs/<run>/<kind>s/<id>/`, each with its
`run.json`. A `Home` is one of them, `Homes` all of a project's: they are what runpod/ knows of the
owners of pods (the protocols of runpod/owners.py), whose folders hold their pod's `pod.json` and
`ssh/`.

A pod carries its owner's ID as its marker (`env.OVERBRAINER_RUN_ID`): the run's ID, or the side
job's. A side job that gets a pod takes an ID no other run or side job of the project has
(`key_taken`), so a marker names one home. `home_of(runs_dir, key)` finds it, `homes(runs_dir)`
lists every folder that may be one.

Whether a side job's results are home (`side_results_home`): it ended, and unless it succeeded
with files that could not be brought back (`NOT_HOME`), there is nothing left on its target worth
keeping a pod for: a failed or cancelled side job's pod is deleted, a succeeded one's once its
files were verified here.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from overbrainer.dataset.paths import ProjectPaths
from overbrainer.errors import OverbrainerError
from overbrainer.exec.base import Executor
from overbrainer.jobs import ids
from overbrainer.jobs.run_record import RECORD, RunPlace, RunRecord
from overbrainer.jobs.start import claim_target, fail

log = logging.getLogger(__name__)

NOT_HOME = "its files could not be retrieved"  # a side job's message when its results stayed on the target


@dataclass(frozen=True)
class Home:
    """One run or side job: `key` (its ID, its pods' marker), `records` (the folder whose
    `<key>/run.json` is its record: `runs/`, or `runs/<run>/<kind>s/`), `run` (the run a side
    job belongs to; None for a run)."""

    key: str
    records: Path
    run: str | None = None

    @property
    def place(self) -> RunPlace:
        return RunPlace(self.records, self.key)

    @property
    def dir(self) -> Path:
        return self.records / self.key

    @property
    def side(self) -> bool:
        return self.run is not None

    @property
    def kind(self) -> str:
        """`run`, or the side job's kind (`export`, `compare`)."""
        return self.records.name[:-1] if self.side else "run"

    def shown(self, project_dir: Path) -> str:
        """The home's folder relative to the project (`runs/<run>/exports/<id>`)."""
        try:
            return str(self.dir.relative_to(Path(project_dir)))
        except ValueError:
            return str(self.dir)

    def load(self) -> RunRecord:
        return self.place.load()

    def fail(self, record: RunRecord, message: str) -> None:
        fail(record, self.place, message)

    def fail_run(self, message: str) -> None:
        """Save its record `failed` with `message` (best effort: a warning when it cannot be saved)."""
        try:
            record = self.load()
        except OverbrainerError as e:
            log.warning("cannot record run %s as failed: %s", self.key, e)
            return
        fail(record, self.place, message)

    def claim(self, executor: Executor, record: RunRecord, token: str) -> None:
        claim_target(executor, record, self.place, token)

    def results_home(self, record: RunRecord, rule: Callable[[Any, Path], bool] | None) -> bool:
        if self.side:
            return side_results_home(record, self.dir)
        return rule is not None and rule(record, self.dir)


@dataclass(frozen=True)
class Homes:
    """The runs and side jobs of the project whose runs are in `runs_dir` (`project_dir`: the
    folder the messages name them from)."""

    runs_dir: Path
    project_dir: Path

    @classmethod
    def of(cls, project_dir: Path) -> "Homes":
        return cls(ProjectPaths(project_dir).runs, Path(project_dir))

    def all(self) -> list[Home]:
        return homes(self.runs_dir)

    def find(self, key: str) -> Home | None:
        return home_of(self.runs_dir, key)

    def run(self, key: str) -> Home:
        return Home(ids.validate(key), Path(self.runs_dir))


def _side_folders(run_dir: Path) -> list[Path]:
    """The `<kind>s/` folders of a run directory (exports/, compares/, …)."""
    try:
        entries = sorted(run_dir.iterdir())
    except OSError:
        return []
    return [d for d in entries if d.is_dir() and d.name.endswith("s") and ids.is_valid(d.name)]


def _run_dirs(runs_dir: Path) -> list[Path]:
    runs_dir = Path(runs_dir)
    if not runs_dir.is_dir():
        return []
    return [d for d in sorted(runs_dir.iterdir())
            if d.is_dir() and not d.name.startswith(".") and ids.is_valid(d.name)]


def home_of(runs_dir: Path, key: str) -> Home | None:
    """The run or side job `key` of this project (a run wins), or None."""
    try:
        ids.validate(key)
    except OverbrainerError:
        return None
    runs_dir = Path(runs_dir)
    if (runs_dir / key / RECORD).is_file():
        return Home(key, runs_dir)
    for run_dir in _run_dirs(runs_dir):
        for folder in _side_folders(run_dir):
            if (folder / key / RECORD).is_file():
                return Home(key, folder, run_dir.name)
    return None


def key_taken(runs_dir: Path, key: str) -> bool:
    """Whether a run or side job of the project has the ID `key` (or its run directory exists)."""
    return (Path(runs_dir) / key).exists() or home_of(runs_dir, key) is not None


def homes(runs_dir: Path) -> list[Home]:
    """Every folder of the project that may be a run or a side job (named by a valid ID)."""
    out = []
    for run_dir in _run_dirs(runs_dir):
        out.append(Home(run_dir.name, Path(runs_dir)))
        for folder in _side_folders(run_dir):
            for job_dir in sorted(folder.iterdir()):
                if job_dir.is_dir() and ids.is_valid(job_dir.name):
                    out.append(Home(job_dir.name, folder, run_dir.name))
    return out


def side_results_home(record: RunRecord, job_dir: Path | None = None) -> bool:
    """A side job's rule for its pod: ended, and not a success whose files stayed on the target."""
    return record.ended and not (record.message or "").startswith(NOT_HOME)
