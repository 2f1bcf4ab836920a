"""`runs/<id>/run.json`: the record of a run (docs/runs.md#runjson), and of each side job in its own
directory, read and written through support/record_file.py (atomic rewrites; read errors name the
file and a position, `line L, column C`, or a field, never the content).

Whether an ended run's files came home is the field `retrieval_error` (the error of its last
retrieval that failed, else null), always written. A record without the field was written before
it: its `message` may end with the note ` (artifacts not retrieved: <error>)` (or be
`artifacts not retrieved: <error>`), which is read into the field and cut from the message.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from overbrainer.errors import OverbrainerError
from overbrainer.exec.base import InvalidJob, JobId
from overbrainer.jobs import ids
from overbrainer.support.record_file import RecordFile

log = logging.getLogger(__name__)

RECORD = "run.json"
EVALS, EVAL_JSON = "evals", "eval.json"  # runs/<id>/evals/<eval id>/eval.json (`overbrainer eval`)
PREPARING, RUNNING, SUCCEEDED, FAILED, CANCELLED, STOPPED = (
    "preparing", "running", "succeeded", "failed", "cancelled", "stopped")
STATES = (PREPARING, RUNNING, SUCCEEDED, FAILED, CANCELLED, STOPPED)
ENDED = (SUCCEEDED, FAILED, CANCELLED, STOPPED)
REASONS = ("requested", "deadline", "cost", "disk")
NOT_RETRIEVED = "artifacts not retrieved: "  # what the message says after it (message_shown)
RETRIEVAL_ERROR = "retrieval_error"
_KNOWN = ("id", "target", "created", "remote_dir", "job", "state", "message", RETRIEVAL_ERROR, "snapshot",
          "resumed_from", "snapshots", "fingerprint")


class InvalidRecord(OverbrainerError):
    pass


RUN_JSON = RecordFile("run record", InvalidRecord)


@dataclass
class Snapshot:
    checkpoint: str
    step: int
    reason: str = "requested"

    @staticmethod
    def path_for(step: int) -> str:
        """The only checkpoint a snapshot may name: it is joined to local paths."""
        return f"output/checkpoint-{step}"


@dataclass
class RunRecord:
    id: str
    target: str
    created: str
    remote_dir: str
    state: str = PREPARING
    job: JobId | None = None
    message: str | None = None
    retrieval_error: str | None = None  # why the ended job's files are not home (None: they are, or not yet asked)
    snapshot: Snapshot | None = None
    resumed_from: str | None = None
    fingerprint: dict[str, str] | None = None  # what the job ran on (a training run: runs/fingerprint.py)
    extra: dict[str, Any] = field(default_factory=dict)  # unknown fields, kept on rewrite

    @property
    def ended(self) -> bool:
        return self.state in ENDED

    @property
    def message_shown(self) -> str | None:
        """The message as people read it: `message`, then `(artifacts not retrieved: <error>)`
        when the last retrieval failed."""
        if self.retrieval_error is None:
            return self.message
        if self.message:
            return f"{self.message} ({NOT_RETRIEVED}{self.retrieval_error})"
        return f"{NOT_RETRIEVED}{self.retrieval_error}"

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": self.id, "target": self.target, "created": self.created,
            "remote_dir": self.remote_dir, "job": self.job.to_json() if self.job else None,
            "state": self.state, "message": self.message, RETRIEVAL_ERROR: self.retrieval_error,
        }
        if self.snapshot is not None:
            data["snapshot"] = {"checkpoint": self.snapshot.checkpoint, "step": self.snapshot.step,
                                "reason": self.snapshot.reason}
        if self.resumed_from is not None:
            data["resumed_from"] = self.resumed_from
        if self.fingerprint is not None:
            data["fingerprint"] = dict(self.fingerprint)
        data["snapshots"] = True
        for k, v in self.extra.items():
            data.setdefault(k, v)
        return data

    @classmethod
    def from_dict(cls, data: Any, where: str) -> "RunRecord":
        if not isinstance(data, dict):
            raise RUN_JSON.invalid(where, "not a JSON object")
        f = RUN_JSON.fields(data, where)
        bad = f.bad

        def text(name: str) -> str:
            return f.text(name, optional=False)

        run_id = text("id")
        if not ids.is_valid(run_id):
            raise bad("id")
        state = text("state")
        if state not in STATES:
            raise bad("state")
        job = None
        if data.get("job") is not None:
            try:
                job = JobId.from_json(data["job"])
            except InvalidJob as e:
                raise bad(e.field) from None
        snapshot = None
        raw = data.get("snapshot")
        if raw is not None:
            if (not isinstance(raw, dict) or not isinstance(raw.get("checkpoint"), str)
                    or not isinstance(raw.get("step"), int) or isinstance(raw.get("step"), bool)
                    or raw.get("reason", "requested") not in REASONS
                    or raw["checkpoint"] != Snapshot.path_for(raw["step"])):
                raise bad("snapshot")
            snapshot = Snapshot(raw["checkpoint"], raw["step"], raw.get("reason", "requested"))
        resumed = f.text("resumed_from")
        if resumed is not None and not ids.is_valid(resumed):
            raise bad("resumed_from")
        fingerprint = data.get("fingerprint")
        if fingerprint is not None and (not isinstance(fingerprint, dict)
                                        or not all(isinstance(v, str) for v in fingerprint.values())):
            raise bad("fingerprint")
        message = f.text("message")
        if RETRIEVAL_ERROR in data:
            retrieval_error = f.text(RETRIEVAL_ERROR)
        else:  # written before the field: the note in the message
            message, retrieval_error = split_note(message)
        return cls(
            id=run_id, target=text("target"), created=text("created"),
            remote_dir=text("remote_dir"), state=state, job=job,
            message=message, retrieval_error=retrieval_error, snapshot=snapshot, resumed_from=resumed,
            fingerprint=fingerprint,
            extra={k: v for k, v in data.items() if k not in _KNOWN},
        )


@dataclass(frozen=True)
class RunPlace:
    """Where a run is kept here: `runs_dir/<run_id>/` (`dir`), its record `run.json` in it (a side
    job's the same, its `runs_dir` being `runs/<run>/<kind>s/`). The ID is validated when the place
    is made, so `..`, `/` and absolute paths never reach a join."""

    runs_dir: Path
    run_id: str

    def __post_init__(self) -> None:
        ids.validate(self.run_id)
        object.__setattr__(self, "runs_dir", Path(self.runs_dir))

    @property
    def dir(self) -> Path:
        return self.runs_dir / self.run_id

    @property
    def record_path(self) -> Path:
        return self.dir / RECORD

    def load(self) -> RunRecord:
        """The run's record; `no run `<id>` in runs/` when it does not exist."""
        path = self.record_path
        record = RunRecord.from_dict(RUN_JSON.read(path, missing=f"no run `{self.run_id}` in runs/"), str(path))
        if record.id != self.run_id:
            raise RUN_JSON.invalid(path, "field id")
        return record

    def save(self, record: RunRecord) -> None:
        """`record` (this run's) as pretty-printed JSON + newline, atomically (temp file in the run
        dir, then rename)."""
        if record.id != self.run_id:
            raise ValueError(f"the record of run {record.id} is not saved as run {self.run_id}")
        RUN_JSON.write(self.record_path, record.to_dict())


def parse(raw: bytes, where: str) -> RunRecord:
    return RunRecord.from_dict(RUN_JSON.parse(raw, where), where)


def list_runs(runs_dir: Path) -> list[RunRecord]:
    """Every readable record under runs/, oldest first by (created, id); others are warned about."""
    runs_dir = Path(runs_dir)
    if not runs_dir.is_dir():
        return []
    out: list[RunRecord] = []
    for entry in sorted(runs_dir.iterdir()):
        name = entry.name
        if name.startswith(".") or not entry.is_dir() or not ids.is_valid(name):
            continue
        if not (entry / RECORD).exists():
            log.warning("skipping runs/%s: it has no run.json", name)
            continue
        try:
            out.append(RunPlace(runs_dir, name).load())
        except OverbrainerError as e:
            log.warning("skipping runs/%s: %s", name, e)
    out.sort(key=lambda r: (r.created, r.id))
    return out


def split_note(message: str | None) -> tuple[str | None, str | None]:
    """(message, retrieval error) of a message written before `retrieval_error`, whose note
    `(artifacts not retrieved: <error>)` said that the files were not home."""
    if not message or NOT_RETRIEVED not in message:
        return message, None
    at = message.find(f" ({NOT_RETRIEVED}")
    if at >= 0:
        error = message[at + len(NOT_RETRIEVED) + 2:]
        return message[:at] or None, error[:-1] if error.endswith(")") else error
    at = message.find(NOT_RETRIEVED)
    return message[:at].strip() or None, message[at + len(NOT_RETRIEVED):]
