"""What a training run trained on, and whether `run` needs to train again (docs/runs.md#fingerprint).

A run's fingerprint is the SHA-256 of its `train.jsonl`, of its `eval.jsonl` (of nothing when it
has none) and of the resolved `[training]` settings that shape the model: every key but those
that only say where it runs or how often it reports (`target`, `evals_per_epoch`,
`saves_per_epoch`, `hub_model_id`); `axolotl_extra` counts whole. run.json keeps it as
`"fingerprint": {"sha256", "train", "eval", "settings"}` (an optional field: records without it
match nothing).

`overbrainer run` trains only when no run with the data's fingerprint succeeded or is still
running (`verdict`); after one that failed, was cancelled or stopped on it, it does not retry on
its own. `train` always trains.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from overbrainer.errors import OverbrainerError
from overbrainer.jobs.run_record import CANCELLED, FAILED, RUNNING, STOPPED, SUCCEEDED, RunRecord, list_runs

# [training] keys that do not shape the model: where it runs, how often it evaluates or saves, where
# the job pushes.
NOT_SHAPING = ("target", "evals_per_epoch", "saves_per_epoch", "hub_model_id")
_CHUNK = 1 << 20


@dataclass(frozen=True)
class Fingerprint:
    sha256: str
    train: str
    eval: str
    settings: str

    def to_json(self) -> dict[str, str]:
        return {"sha256": self.sha256, "train": self.train, "eval": self.eval, "settings": self.settings}


def settings_of(training: Any) -> dict[str, Any]:
    """The resolved `[training]` settings that shape the model."""
    return {k: v for k, v in asdict(training).items() if k not in NOT_SHAPING}


def _file_sha(path: Path) -> str:
    """SHA-256 of a file's bytes; of nothing when it does not exist."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            while chunk := f.read(_CHUNK):
                digest.update(chunk)
    except FileNotFoundError:
        pass
    except OSError as e:
        raise OverbrainerError(f"cannot read {path}: {e.strerror or e}") from e
    return digest.hexdigest()


def fingerprint(data_dir: Path, training: Any) -> Fingerprint:
    """The fingerprint of a training on `data_dir`'s train.jsonl and eval.jsonl with `training`."""
    train = _file_sha(Path(data_dir) / "train.jsonl")
    evals = _file_sha(Path(data_dir) / "eval.jsonl")
    text = json.dumps(settings_of(training), sort_keys=True, separators=(",", ":"), default=str)
    settings = hashlib.sha256(text.encode()).hexdigest()
    whole = hashlib.sha256(f"train {train}\neval {evals}\nsettings {settings}\n".encode()).hexdigest()
    return Fingerprint(whole, train, evals, settings)


@dataclass(frozen=True)
class Verdict:
    """What `run` does about training: `train`, or not, because of `run`: `done` (it succeeded),
    `running` (its job may still run) or `failed` (it failed, was cancelled or stopped)."""
    kind: str  # train | done | running | failed
    run: RunRecord | None = None
    changed: tuple[str, ...] = ()  # train: what differs from `run`, the newest run that recorded a fingerprint

    @property
    def by(self) -> RunRecord:
        """The run a `done`, `running` or `failed` verdict is about (each of them names one)."""
        if self.run is None:
            raise ValueError(f"a `{self.kind}` verdict names no run")
        return self.run

    @property
    def trains(self) -> bool:
        return self.kind == "train"

    def line(self) -> str:
        """The result line of a run that does not train (`train: up to date with run <id>`)."""
        rid = self.run.id if self.run else "?"
        if self.kind == "done":
            return f"train: up to date with run {rid}"
        if self.kind == "running":
            return (f"train: up to date with run {rid}, still running: collect it with "
                    f"`overbrainer train attach {rid}`")
        return ""

    def reason(self) -> str:
        """Why `run` trains (logged)."""
        if self.run is None:
            return "no run has trained on this data and these [training] settings yet"
        return f"{_either(self.changed)} changed since run {self.run.id}"

    def refusal(self) -> str:
        """Why `run` does not retry a run that ended badly on the same data, and what does."""
        run = self.by
        rid = run.id
        if run.state == STOPPED and run.snapshot is not None:
            what = f"run {rid} was stopped at step {run.snapshot.step}"
            how = f"resume it with `overbrainer train --resume-from {rid}`, or train anew with `overbrainer train`"
        else:
            what = f"run {rid} {run.state}" + (f" ({run.message_shown})" if run.message_shown else "")
            how = "retry with `overbrainer train` (or `overbrainer run --retrain`)"
        return (f"{what} on this same data and [training] settings; `run` does not train them again on its "
                f"own: {how}")


def recorded(record: RunRecord) -> str | None:
    """The fingerprint a run recorded (its sha256), None for a run from before fingerprints."""
    value = (record.fingerprint or {}).get("sha256")
    return value if isinstance(value, str) else None


def verdict(runs_dir: Path, fp: Fingerprint) -> Verdict:
    """Whether `run` trains on data with fingerprint `fp`, judged by the runs that recorded it:
    one succeeded (the newest such) or still `running` → no; else one that failed, was cancelled
    or stopped → no, and `run` says so (exit 1); else → train. A `preparing` run is one whose
    `train` was killed (this command holds the project): it counts for nothing."""
    runs = list_runs(runs_dir)
    same = [r for r in runs if recorded(r) == fp.sha256]
    for record in reversed(same):
        if record.state == SUCCEEDED:
            return Verdict("done", record)
    for record in reversed(same):
        if record.state == RUNNING:
            return Verdict("running", record)
    ended = [r for r in same if r.state in (FAILED, CANCELLED, STOPPED)]
    if ended:
        return Verdict("failed", ended[-1])
    for record in reversed(runs):
        if recorded(record) is not None:
            parts = record.fingerprint or {}
            return Verdict("train", record, tuple(PARTS[k] for k in PARTS if parts.get(k) != getattr(fp, k)))
    return Verdict("train")


PARTS = {"train": "data/train.jsonl", "eval": "data/eval.jsonl", "settings": "the [training] settings"}


def _either(parts: tuple[str, ...]) -> str:
    if not parts:
        return "the data or settings"
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
