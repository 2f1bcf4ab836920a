"""`overbrainer runs rm RUN_ID…`: delete the folders of ended runs (docs/runs.md#deleting-runs).

A run is deleted only when nothing of it may still run or bill: it ended (succeeded, failed,
cancelled, stopped), none of its side jobs (export, compare) is recorded running, and its pod, if
it had one, is confirmed deleted (pod.json). Each run is judged on its own and gets one line;
the command exits 1 when any was refused. The folder is first renamed to a hidden name under
runs/ (no listing sees a half-deleted run), then removed. A run's folder on an SSH target is
left there (the line says where).
"""

from __future__ import annotations

import logging
import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from overbrainer.dataset.paths import ProjectPaths
from overbrainer.errors import OverbrainerError
from overbrainer.jobs.run_record import PREPARING, RECORD, RUN_JSON, RUNNING, RunPlace, RunRecord
from overbrainer.runpod.pod_record import PodRecord

if TYPE_CHECKING:
    from overbrainer.front.session import Session

log = logging.getLogger(__name__)


@dataclass
class Removal:
    run_id: str
    deleted: bool
    why: str = ""  # refused: why; deleted: what is left elsewhere, if anything

    def line(self) -> str:
        if self.deleted:
            return f"runs rm: runs/{self.run_id} deleted" + (f"; {self.why}" if self.why else "")
        return f"runs rm: {self.run_id} not deleted: {self.why}"

    def data(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "deleted": self.deleted, "reason": self.why or None}


class RunsKept(OverbrainerError):
    """Some runs were refused (exit 1); each said why on its own line."""


def rm_flow(session: Session, run_ids: list[str]) -> list[Removal]:
    """Delete each run that may be deleted; report one line per run; RunsKept when any was refused."""
    runs_dir = ProjectPaths(session.project_dir).runs
    done: list[Removal] = []
    for run_id in dict.fromkeys(run_ids):
        try:
            place = RunPlace(runs_dir, run_id)
            record = place.load()
        except OverbrainerError as e:
            removal = Removal(run_id, False, str(e))
        else:
            removal = _remove(place, record)
        session.report(removal.line(), removal.data())
        done.append(removal)
    kept = [r.run_id for r in done if not r.deleted]
    if kept:
        raise RunsKept(f"{len(kept)} of {len(done)} runs not deleted: {', '.join(kept)}")
    return done


def _remove(place: RunPlace, record: RunRecord) -> Removal:
    run_id, run_dir = place.run_id, place.dir
    why = refusal(record, run_dir)
    if why is not None:
        return Removal(run_id, False, why)
    left = _left_on_target(record, run_dir)
    hidden = place.runs_dir / f".rm-{run_id}-{secrets.token_hex(4)}"
    try:
        run_dir.rename(hidden)
    except OSError as e:
        return Removal(run_id, False, f"cannot delete runs/{run_id}: {e.strerror or e}")
    shutil.rmtree(hidden, onerror=lambda *a: log.warning("cannot delete %s: %s", a[1], a[2][1]))
    return Removal(run_id, True, left)


def refusal(record: RunRecord, run_dir: Path) -> str | None:
    """Why the run may not be deleted, or None."""
    rid = record.id
    if record.state == RUNNING:
        return (f"it is running on target `{record.target}`: `overbrainer train cancel {rid}` stops it "
                f"(or collect it with `overbrainer train attach {rid}`)")
    if record.state == PREPARING:
        return (f"it is still `preparing` (its `train` was killed): `overbrainer train cancel {rid}` deletes "
                "its pods, if any, and fails it")
    pod = _pod_left(run_dir)
    if pod is not None:
        return f"its pod {pod} is not deleted: `overbrainer pod rm {rid}` deletes it first"
    side = _side_job_running(run_dir)
    if side is not None:
        return f"its job {side} is recorded running: let it end (or cancel it) first"
    return None


def _pod_left(run_dir: Path) -> str | None:
    """The pod (or stray pod) of the run that may still exist, per its pod.json."""
    try:
        pod = PodRecord.load_if_any(PodRecord.path_in(run_dir))
    except OverbrainerError as e:
        return f"(unknown: {e})"
    if pod is None or pod.no_pod_left:
        return None
    return pod.pod_id if pod.pod_id is not None and pod.state.value != "deleted" else ", ".join(pod.stray_pods)


def _side_job_running(run_dir: Path) -> str | None:
    """A side job (export, compare) of the run whose record says running."""
    for path in sorted(run_dir.glob(f"*s/*/{RECORD}")):
        try:
            record = RunRecord.from_dict(RUN_JSON.read(path), str(path))
        except OverbrainerError:
            continue
        if record.state == RUNNING:
            return record.id
    return None


def _left_on_target(record: RunRecord, run_dir: Path) -> str:
    """What stays on an SSH target (its copy of the run), said on the run's line."""
    remote = record.remote_dir
    if not remote or PodRecord.path_in(run_dir).exists():
        return ""
    try:
        if Path(remote) == run_dir.resolve():
            return ""
    except OSError:
        return ""
    return f"its folder on target `{record.target}` ({remote}) is left there"
