"""One stage execution: its events, its tally of counts and spend, and its summary line.

The tally is thread-safe (workers add the spend of each attempt); the counts it holds are the
ones the history line reports when a stage is stopped before it returns its own stats.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

from overbrainer.front.events import (
    ItemDone,
    ItemFailed,
    StageFinished,
    StageModel,
    StageStarted,
    StageStats,
)
from overbrainer.support.usage import Usage

log = logging.getLogger(__name__)

EXCLUSION_REASONS = ("truncated", "empty", "refused", "no_raw_reasoning")


class StageRun:
    """Counts and events of one stage. `bus` may be None (nothing is published)."""

    def __init__(self, name: str, bus=None):
        self.name = name
        self._bus = bus
        self._lock = threading.Lock()
        self.done = 0
        self.skipped = 0
        self.failed = 0
        self.excluded = 0
        self.usage = Usage()
        self.cost: float | None = None
        self.provider: str | None = None
        self.model: str | None = None

    # --- events ----------------------------------------------------------------------------

    def publish(self, ev) -> None:
        if self._bus is not None:
            self._bus.publish(ev)

    def started(self, total: int) -> None:
        self.publish(StageStarted(self.name, total))

    def uses(self, provider: str | None, model: str | None) -> None:
        self.provider, self.model = provider, model
        if model:
            self.publish(StageModel(self.name, model))

    def spend(self, usage: Usage, cost: float | None) -> None:
        """Tokens (and cost) of one attempt: counted whatever becomes of the item."""
        with self._lock:
            self.usage = self.usage + usage
            if cost is not None:
                self.cost = (self.cost or 0.0) + cost

    def item_done(self, item_id: str, usage: Usage, cost: float | None, excluded: bool = False) -> None:
        with self._lock:
            if excluded:
                self.excluded += 1
            else:
                self.done += 1
        self.publish(ItemDone(self.name, item_id, usage, cost, excluded))

    def item_skipped(self, item_id: str) -> None:
        with self._lock:
            self.skipped += 1
        self.publish(ItemDone(self.name, item_id, None, None, False))

    def add_skipped(self, n: int) -> None:
        """Skipped items that are not published one by one (e.g. answers already on disk)."""
        with self._lock:
            self.skipped += n

    def retrying(self, item_id: str, message: str) -> None:
        self.publish(ItemFailed(self.name, item_id, message, True))

    def item_failed(self, item_id: str, message: str) -> None:
        with self._lock:
            self.failed += 1
        self.publish(ItemFailed(self.name, item_id, message, False))

    def stats(self) -> StageStats:
        with self._lock:
            return StageStats(self.done, self.skipped, self.failed, self.excluded, self.usage, self.cost)

    def finished(self) -> StageStats:
        stats = self.stats()
        self.publish(StageFinished(self.name, stats))
        return stats


@dataclass
class SplitCounts:
    train: int = 0
    eval: int = 0
    orphaned: int = 0
    excluded_by_reason: dict[str, int] = field(default_factory=dict)

    @property
    def excluded(self) -> int:
        return sum(self.excluded_by_reason.values())


@dataclass
class StageResult:
    """What a stage returns: its stats, and the fatal error that stopped it, if any."""

    stage: str
    stats: StageStats
    error: BaseException | None = None
    split: SplitCounts | None = None

    def text(self) -> str:
        if self.split is not None:
            return split_line(self.split)
        return summary_line(self.stage, self.stats)

    def data(self) -> dict:
        if self.split is not None:
            s = self.split
            return {"stage": "split", "train": s.train, "eval": s.eval, "orphaned": s.orphaned,
                    "excluded": s.excluded,
                    "excluded_by_reason": {r: s.excluded_by_reason.get(r, 0) for r in EXCLUSION_REASONS}}
        st = self.stats
        return {"stage": self.stage, "done": st.done, "skipped": st.skipped, "failed": st.failed,
                "excluded": st.excluded, "input_tokens": st.usage.input_tokens,
                "output_tokens": st.usage.output_tokens,
                # USD; rounded to a millionth of a cent so sums print without float noise
                "cost": None if st.cost is None else round(st.cost, 8)}


def cost_text(cost: float | None) -> str:
    return "cost unknown" if cost is None else f"cost ${cost:.4f}"


def summary_line(stage: str, st: StageStats) -> str:
    return (f"{stage}: {st.done} done, {st.skipped} skipped, {st.failed} failed, {st.excluded} excluded; "
            f"tokens {st.usage.input_tokens} in, {st.usage.output_tokens} out; {cost_text(st.cost)}")


def split_line(s: SplitCounts) -> str:
    reasons = ", ".join(f"{r} {s.excluded_by_reason[r]}" for r in EXCLUSION_REASONS
                        if s.excluded_by_reason.get(r, 0) > 0)
    excluded = f"{s.excluded} excluded" + (f" ({reasons})" if reasons else "")
    return f"split: {s.train} train, {s.eval} eval, {excluded}, {s.orphaned} orphaned"
