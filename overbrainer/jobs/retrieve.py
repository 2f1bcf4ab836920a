"""What comes home from any job: `job.log` and `metrics.jsonl` (every job writes them), plus the
files its kind asks for, downloaded and verified against the target's SHA-256 manifest
(`Executor.fetch`). What a kind then makes of them (a training run's outcome, docs/runs.md#retrieval)
is the kind's own."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from overbrainer.exec.base import Executor
from overbrainer.exec.transfer import Progress

JOB_FILES = ("metrics.jsonl", "job.log")
REASON_MAX = 400


def fetch(executor: Executor, remote: str, local: Path, entries: Iterable[str], exclude: Iterable[str] = (),
          progress: Progress | None = None) -> list[tuple[str, str]]:
    """Download `entries` (their bytes to `progress(done, total)`) and verify them; returns the
    target's manifest."""
    return executor.fetch(remote, str(local), entries, exclude, progress=progress)


def last_line(path: Path) -> str | None:
    """The last non-empty line of a log (cut to 400 characters), or None."""
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - 16384))
            tail = f.read()
    except OSError:
        return None
    lines = [ln.strip() for ln in tail.decode("utf-8", "replace").splitlines() if ln.strip()]
    return lines[-1][:REASON_MAX] if lines else None
