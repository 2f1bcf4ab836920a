"""Where this project records its pods: a training run's pod in `runs/<run>/pod.json`, the pod of
a side job (an export or a compare run on a pod of its own) in `runs/<run>/<kind>s/<id>/pod.json`.

A pod carries its owner's ID as its marker (`env.OVERBRAINER_RUN_ID`): the run's ID, or the side
job's (`export_…`, `compare_…`). A side job that gets a pod takes an ID no other run or side job
of the project has (`key_taken`), so a marker names one home. `home_of(runs_dir, key)` finds it,
`pod_homes(runs_dir)` lists every home holding a pod.json.

Whether a side job's results are home (`side_results_home`): it ended, and unless it succeeded
with files that could not be brought back (`NOT_HOME`), there is nothing left on its pod worth
keeping it for: a failed or cancelled side job's pod is deleted, a succeeded one's once its files
were verified here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from overbrainer.errors import OverbrainerError
from overbrainer.jobs import ids
from overbrainer.jobs.run_record import RECORD

POD_JSON = "pod.json"
NOT_HOME = "its files could not be retrieved"  # a side job's message when its results stayed on the target


@dataclass(frozen=True)
class PodHome:
    """One owner of pods: `key` (its ID, the pods' marker), `records` (the folder whose
    `<key>/run.json` is its record: `runs/`, or `runs/<run>/<kind>s/`), `run` (the run a side
    job belongs to; None for a run)."""

    key: str
    records: Path
    run: str | None = None

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


def _side_folders(run_dir: Path):
    """The `<kind>s/` folders of a run directory (exports/, compares/, …)."""
    try:
        entries = sorted(run_dir.iterdir())
    except OSError:
        return []
    return [d for d in entries if d.is_dir() and d.name.endswith("s") and ids.is_valid(d.name)]


def _run_dirs(runs_dir: Path):
    runs_dir = Path(runs_dir)
    if not runs_dir.is_dir():
        return []
    return [d for d in sorted(runs_dir.iterdir())
            if d.is_dir() and not d.name.startswith(".") and ids.is_valid(d.name)]


def home_of(runs_dir: Path, key: str) -> PodHome | None:
    """The run or side job `key` of this project (a run wins), or None."""
    try:
        ids.validate(key)
    except OverbrainerError:
        return None
    runs_dir = Path(runs_dir)
    if (runs_dir / key / RECORD).is_file():
        return PodHome(key, runs_dir)
    for run_dir in _run_dirs(runs_dir):
        for folder in _side_folders(run_dir):
            if (folder / key / RECORD).is_file():
                return PodHome(key, folder, run_dir.name)
    return None


def key_taken(runs_dir: Path, key: str) -> bool:
    """Whether a run or side job of the project has the ID `key` (or its run directory exists)."""
    return (Path(runs_dir) / key).exists() or home_of(runs_dir, key) is not None


def pod_homes(runs_dir: Path) -> list[PodHome]:
    """Every run and side job of the project whose directory holds a pod.json."""
    out = []
    for run_dir in _run_dirs(runs_dir):
        if (run_dir / POD_JSON).is_file():
            out.append(PodHome(run_dir.name, Path(runs_dir)))
        for folder in _side_folders(run_dir):
            for job_dir in sorted(folder.iterdir()):
                if job_dir.is_dir() and ids.is_valid(job_dir.name) and (job_dir / POD_JSON).is_file():
                    out.append(PodHome(job_dir.name, folder, run_dir.name))
    return out


def side_results_home(record, job_dir: Path | None = None) -> bool:
    """A side job's rule for its pod: ended, and not a success whose files stayed on the target."""
    return record.ended and not (record.message or "").startswith(NOT_HOME)
