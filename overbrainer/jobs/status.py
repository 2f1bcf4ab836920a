"""A job's status as the flows see it: `running`, `exited` (with its code), `cancelled` or `lost`
(docs/runs.md#job-control-on-the-target), from the executor's `JobState`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Status:
    """A job's status: running | exited (with code) | cancelled | lost."""
    kind: str
    code: int | None = None

    @property
    def running(self) -> bool:
        return self.kind == "running"

    def describe(self) -> str:
        if self.kind == "exited":
            return f"exited with code {self.code}"
        if self.kind == "lost":
            return "lost (stopped without an exit code)"
        return self.kind


def to_status(state: Any) -> Status:
    """The Status of an executor's JobState."""
    return Status(state.kind, getattr(state, "code", None))
