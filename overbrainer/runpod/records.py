"""What the `runpod` kind recorded of a run, read without acting: the read-only side of the target
interface (jobs.kinds.TargetRecords), the other module of runpod/ that jobs/ imports.

A Runpod run's (or side job's) folder holds its `pod.json` and `ssh/`: from them alone, with no
Runpod API call, the kind says whether it recorded anything there, what the pod cost (runpod.ledger)
and how to reach the pod to read the run's files (its last endpoint, the run's own keys). The
commands that only read (`runs ls|show|logs`, `history`, the TUI, the metrics exporter) load this
side only, never the API client nor the lease (runpod/target.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterable

from overbrainer.runpod import ledger
from overbrainer.runpod.owners import Owner
from overbrainer.runpod.pod_record import PodRecord
from overbrainer.runpod.provision import pod_executor


class RunpodRecords:
    """The `runpod` kind's records (jobs.kinds.TargetRecords)."""

    def recorded(self, owner: Owner) -> bool:
        """Whether the kind recorded something in the owner's folder (its pod.json)."""
        return PodRecord.path_in(owner.dir).exists()

    def reader(self, config: Any, name: str, target: Any, record: Any, owner: Owner) -> Callable[[], Any]:
        """How to reach the run's pod to read its files (`runs logs`): no Runpod API call."""
        return lambda: pod_executor(owner.dir, record)

    def summary(self, run_dir: Path) -> tuple[str, dict[str, Any]] | None:
        """The run's pod for `runs ls` / `runs show` (runpod.ledger.pod_summary)."""
        return ledger.pod_summary(run_dir)

    def spend(self, run_dirs: Iterable[Path]) -> tuple[str, dict[str, Any]] | None:
        """What the pods of these runs cost, for `history` (runpod.ledger.pod_spend)."""
        return ledger.pod_spend(run_dirs)

    def spend_by_run(self, runs_dir: Path) -> dict[str, float]:
        """USD per run ID, for the metrics exporter (runpod.ledger.runpod_spend)."""
        return ledger.runpod_spend(runs_dir)


RUNPOD_RECORDS = RunpodRecords()
