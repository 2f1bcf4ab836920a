"""Which runs can be exported, and which of their folders is the model (docs/export.md#what-can-be-exported).

A run can be exported when it may be shipped (runs/retrieve.shippable: it succeeded, or stopped
(its model is then partial: a warning), and its results are here: `train attach` brings them),
its `axolotl.yaml` exists, and it holds a model:
`output/` with `adapter_config.json` or `config.json`, or `output/merged/config.json` (a run with
merge = true), else a stopped run's snapshot checkpoint.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import yaml

from overbrainer.errors import OverbrainerError
from overbrainer.jobs.run_record import STOPPED, RunPlace, RunRecord
from overbrainer.runs.retrieve import shippable

log = logging.getLogger(__name__)

CONFIG_NAME = "axolotl.yaml"


@dataclass
class Source:
    """What an export reads: the run, its local directory, and its model folder (relative to it)."""
    record: RunRecord
    run_dir: Path
    model: str


def holds_model(path: Path) -> bool:
    return ((path / "adapter_config.json").is_file() or (path / "config.json").is_file()
            or (path / "merged" / "config.json").is_file())


def check_run(place: RunPlace) -> Source:
    """The run at `place` and its model, or the error saying why it cannot be exported."""
    record = shippable(place, "exported")
    run_id, run_dir = place.run_id, place.dir
    if not (run_dir / CONFIG_NAME).is_file():
        raise OverbrainerError(f"runs/{run_id}/{CONFIG_NAME} is missing: run {run_id} cannot be exported")
    model = "output"
    if not holds_model(run_dir / model):
        snapshot = record.snapshot
        if record.state == STOPPED and snapshot is not None and holds_model(run_dir / snapshot.checkpoint):
            model = snapshot.checkpoint
        else:
            raise OverbrainerError(f"runs/{run_id}/output holds no model: nothing to export")
    if record.state == STOPPED:
        step = f" at step {record.snapshot.step}" if record.snapshot is not None else ""
        log.warning("run %s stopped%s: the exported model is partial, not a finished one", run_id, step)
    return Source(record, run_dir, model)


def _config(run_dir: Path) -> dict:
    try:
        data = yaml.safe_load((run_dir / CONFIG_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError, yaml.YAMLError):
        return {}
    return data if isinstance(data, dict) else {}


def sequence_len(run_dir: Path) -> int | None:
    """`sequence_len` of the run's axolotl.yaml, when set and positive."""
    value = _config(run_dir).get("sequence_len")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def base_model(run_dir: Path) -> str | None:
    """`base_model` of the run's axolotl.yaml (what a merge loads), when set."""
    value = _config(run_dir).get("base_model")
    return value if isinstance(value, str) and value else None
