"""What plugs into a training job after its training: a step the job runs last (after the merge,
skipped by a snapshot stop like the merge), the files that step leaves for the run's retrieval,
and what the flow reports once the run succeeded and its results are home. `[export]
after_training`'s export is one (export/in_job.py); the command line gives the training flows the
list (`train_flow(..., after=…)`), so the run flow never names a step of another package."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Protocol

from overbrainer.config.model import Config, Target
from overbrainer.exec.runtime import Step


class PostTrain(Protocol):
    #: files of the run directory the step leaves, brought home (verified) with the run's results
    fetch: tuple[str, ...]

    def prepare(self, config: Config, run_dir: Path, run_id: str, target: Target,
                workdir: str) -> tuple[Step, dict[str, str]] | None:
        """Write what the step needs into the new run's directory; the job's step and its
        environment, or None when the configuration does not ask for it."""

    def deliver(self, run_dir: Path, run_id: str) -> list[str]:
        """After a succeeded run's retrieval: what the step made, made usable here, as lines to
        report (none when the run had no such step)."""


def fetched(after: Iterable[PostTrain]) -> tuple[str, ...]:
    """The files every step of `after` leaves for the retrieval, in order, once each."""
    return tuple(dict.fromkeys(name for step in after for name in step.fetch))
