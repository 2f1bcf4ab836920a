"""Typed events that flows publish on the bus and the renderers turn into bars, lines or JSON.

Events are plain data: no behaviour, no I/O. `to_dict` gives the JSON-lines form
(`{"event": "item_done", ...}`).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from overbrainer.support.usage import Usage

if TYPE_CHECKING:  # data of dataset/, named here only as a field's type
    from overbrainer.dataset.accounting.stages import StageStats


@dataclass(frozen=True)
class Event:
    def to_dict(self) -> dict[str, Any]:
        name = re.sub(r"(?<!^)(?=[A-Z])", "_", type(self).__name__).lower()
        return {"event": name, **dataclasses.asdict(self)}


# --- pipeline stages -------------------------------------------------------------------------

@dataclass(frozen=True)
class StageStarted(Event):
    """`total`: the items the stage will work on; `skipped`: those already complete on disk.
    `batch`: a look of a batch-mode stage, `total` the answers of the batches that ended (to
    collect now); what it submits is logged as it goes (one event per look that collects)."""

    stage: str
    total: int
    skipped: int = 0
    batch: bool = False


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
    """retryable: an attempt failed and will be retried; exactly one final one per failed item.
    stops: the item met the error that stops the stage."""
    stage: str
    id: str
    error: str
    retryable: bool
    stops: bool = False


@dataclass(frozen=True)
class StageFinished(Event):
    """stopped: why the stage stopped before its end (a fatal error's reason), None when it ran out."""
    stage: str
    stats: StageStats
    stopped: str | None = None


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


def metrics_event(run_id: str, rec: dict[str, Any]) -> "Metric | Mark | None":
    """The bus event of a parsed metrics.jsonl record (train.metrics.parse_record): `Metric` for a
    log, `Mark` for stage/eval/end, None for begin."""
    kind = rec["event"]
    if kind == "log":
        return Metric(run_id=run_id, time=float(rec.get("time") or 0.0), step=rec["step"],
                      epoch=rec.get("epoch"), max_steps=rec.get("max_steps"), loss=rec.get("loss"),
                      eval_loss=rec.get("eval_loss"), learning_rate=rec.get("learning_rate"),
                      grad_norm=rec.get("grad_norm"))
    if kind == "stage":
        return Mark(run_id=run_id, kind="stage", name=rec["name"])
    if kind == "eval":
        return Mark(run_id=run_id, kind="eval", step=rec["step"], total=rec.get("total"))
    if kind == "end":
        return Mark(run_id=run_id, kind="end", step=rec["step"])
    return None


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
