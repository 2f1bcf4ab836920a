"""Typed events that flows publish on the bus and the renderers turn into bars, lines or JSON.

Events are plain data: no behaviour, no I/O. `to_dict` gives the JSON-lines form
(`{"event": "item_done", ...}`).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any

from overbrainer.support.usage import Usage

STAGES = ("subtopics", "questions", "answers", "split")


@dataclass(frozen=True)
class StageStats:
    done: int = 0
    skipped: int = 0
    failed: int = 0
    excluded: int = 0
    usage: Usage = field(default_factory=Usage)
    cost: float | None = None


@dataclass(frozen=True)
class Event:
    def to_dict(self) -> dict[str, Any]:
        name = re.sub(r"(?<!^)(?=[A-Z])", "_", type(self).__name__).lower()
        return {"event": name, **dataclasses.asdict(self)}


# --- pipeline stages -------------------------------------------------------------------------

@dataclass(frozen=True)
class StageStarted(Event):
    stage: str
    total: int


@dataclass(frozen=True)
class StageModel(Event):
    stage: str
    model: str


@dataclass(frozen=True)
class ItemDone(Event):
    """usage None: the item was already done (skipped)."""
    stage: str
    id: str
    usage: Usage | None = None
    cost: float | None = None
    excluded: bool = False


@dataclass(frozen=True)
class ItemFailed(Event):
    """retryable: an attempt failed and will be retried; exactly one final one per failed item."""
    stage: str
    id: str
    error: str
    retryable: bool


@dataclass(frozen=True)
class StageFinished(Event):
    stage: str
    stats: StageStats


# --- training runs ---------------------------------------------------------------------------

@dataclass(frozen=True)
class RunWatched(Event):
    """Always the first event of a watch. job: None for a training run."""
    run_id: str
    job: str | None = None


@dataclass(frozen=True)
class Metric(Event):
    run_id: str
    time: float
    step: int
    epoch: float | None = None
    max_steps: int | None = None
    loss: float | None = None
    eval_loss: float | None = None
    learning_rate: float | None = None
    grad_norm: float | None = None


@dataclass(frozen=True)
class Mark(Event):
    """kind: "stage" (name = train|merge|export|compare), "eval" (step/total) or "end" (step)."""
    run_id: str
    kind: str
    name: str | None = None
    step: int | None = None
    total: int | None = None


@dataclass(frozen=True)
class JobStatus(Event):
    """status: running | exited | cancelled | lost; code set with exited."""
    run_id: str
    status: str
    code: int | None = None


@dataclass(frozen=True)
class Transfer(Event):
    """Bytes moved to (upload) or from (download) a target. A transfer starts with done = 0 and
    ends with done == total; total is None while unknown."""
    run_id: str
    direction: str
    done: int
    total: int | None = None


@dataclass(frozen=True)
class Lagged(Event):
    """Emitted to a subscriber that fell behind: how many oldest events it lost."""
    dropped: int


# --- Runpod pods -----------------------------------------------------------------------------

@dataclass(frozen=True)
class PodStatus(Event):
    """A step in the life of a run's pod. phase: creating | created | adopted | unavailable |
    reaching | ready | not_ready | deleting | deleted | not_deleted | stray. rate: USD/h billed
    (None unknown); spend: USD estimated once deleted; message: the reason, in words."""
    run_id: str
    phase: str
    pod_id: str | None = None
    gpu: str | None = None
    rate: float | None = None
    spend: float | None = None
    message: str | None = None
