"""What the targets of a project's runs cost, for the read-only views: each kind says what it
recorded (jobs.kinds.TargetKind's `summary`, `spend`, `spend_by_run`); only a Runpod run's pod
costs anything so far. No API call: the records alone."""

from __future__ import annotations

from pathlib import Path

from overbrainer.jobs.kinds import Costs, TargetKind
from overbrainer.jobs.lease import KINDS
from overbrainer.jobs.run_record import list_runs


def _kinds() -> list[TargetKind]:
    return list({id(k): k for k in KINDS.values()}.values())


def run_costs(run_dir: Path) -> Costs | None:
    """What the run's target cost, for `runs ls` / `runs show` (its column, its fields); None when
    nothing was recorded (a local or SSH target)."""
    return next((c for k in _kinds() if (c := k.summary(Path(run_dir))) is not None), None)


def project_costs(runs_dir: Path) -> Costs | None:
    """What the project's targets cost, for `history` (one line, its fields), or None."""
    run_dirs = [Path(runs_dir) / r.id for r in list_runs(runs_dir)]
    return next((c for k in _kinds() if (c := k.spend(run_dirs)) is not None), None)


def spend_by_run(runs_dir: Path) -> dict[str, float]:
    """USD per run ID, what its target has cost so far (the metrics exporter)."""
    out: dict[str, float] = {}
    for kind in _kinds():
        out.update(kind.spend_by_run(runs_dir))
    return out
