"""What a run's local files say about its progress (for `runs show` and an ended run's summary)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from overbrainer.jobs.run_record import RUNNING, RunRecord
from overbrainer.train.metrics import MetricsSummary, summarize_file


def local_summary(run_dir: Path) -> MetricsSummary:
    return summarize_file(Path(run_dir) / "metrics.jsonl")


def local_progress(run_dir: Path, record: RunRecord) -> dict[str, Any]:
    """phase, step, max_steps, epoch, loss, eval_loss from runs/<id>/metrics.jsonl (None if unknown).

    A job on a remote target writes its metrics there; they reach runs/<id>/ only once retrieved.
    """
    summary = local_summary(run_dir)
    if not summary.lines and not summary.phases.stage:
        return {"phase": None if record.state != RUNNING else "unknown (metrics not retrieved yet)",
                "step": None, "max_steps": None, "epoch": None, "loss": None, "eval_loss": None,
                "pace": None, "time_left": None}
    phase = summary.phase() if record.state == RUNNING else "ended"
    return {
        "phase": phase,
        "step": summary.step,
        "max_steps": summary.max_steps,
        "epoch": summary.epoch,
        "loss": summary.last_train["loss"] if summary.last_train else None,
        "eval_loss": summary.eval_loss,
        # steps per second and seconds left, from the plugin's clock (while it runs)
        "pace": summary.pace() if record.state == RUNNING else None,
        "time_left": summary.time_left() if record.state == RUNNING else None,
    }
