"""One stage execution: its events, its tally of counts and spend, and its summary line.

The tally is thread-safe (workers add the spend of each attempt); the counts it holds are the
ones the history line reports when a stage is stopped before it returns its own stats.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from overbrainer.dataset.accounting.stages import StageStats
from overbrainer.dataset.quality.verdicts import GATE_REASONS
from overbrainer.dataset.split import split_summary
from overbrainer.front.events import (
    Event,
    ItemDone,
    ItemFailed,
    StageFinished,
    StageModel,
    StageStarted,
)
from overbrainer.llm.spend import divergence
from overbrainer.support.usage import Usage

if TYPE_CHECKING:
    from overbrainer.front.bus import EventBus

log = logging.getLogger(__name__)

EXCLUSION_REASONS = ("truncated", "empty", "refused", "no_raw_reasoning")


class StageRun:
    """Counts and events of one stage. `bus` may be None (nothing is published)."""

    def __init__(self, name: str, bus: EventBus | None = None):
        self.name = name
        self._bus = bus
        self._lock = threading.Lock()
        self.total = 0  # the items the stage set out to handle (StageStarted)
        self.handled = 0  # of those, the ones done, excluded, skipped or failed so far
        self.written = 0  # records appended to the stage's output file
        self.done = 0
        self.skipped = 0
        self.failed = 0
        self.refused = 0  # of the failed items, those the provider's moderation refused (a person must act)
        self.excluded = 0
        self.usage = Usage()
        self.cost: float | None = None
        self.estimate: float | None = None  # listed-price estimate of every request (None: unknown)
        self.billed = 0.0  # what the provider billed, over the requests it billed
        self.billed_estimate: float | None = None  # the estimate of those same requests
        self.any_billed = False
        self.provider: str | None = None
        self.model: str | None = None
        self.abandoned = 0  # requests in flight when the stop's grace ended, not waited for
        self.stalled: list[str] = []  # items whose round added nothing (pipeline/held.py)
        self.held = 0  # items not asked: their last round added nothing, and its prompt is unchanged
        self.held_at: str | None = None  # the latest date of those rounds

    # --- events ----------------------------------------------------------------------------

    def publish(self, ev: Event) -> None:
        if self._bus is not None:
            self._bus.publish(ev)

    def started(self, total: int, skipped: int = 0) -> None:
        """The stage works on `total` items; `skipped` more were complete already (counted)."""
        self.total = total
        self.add_skipped(skipped)
        self.publish(StageStarted(self.name, total, skipped))

    def collecting(self, n: int) -> None:
        """Batch mode: `n` more answers to collect, from batches that ended (one call per look)."""
        self.total += n
        self.publish(StageStarted(self.name, n, batch=True))

    def uses(self, provider: str | None, model: str | None) -> None:
        self.provider, self.model = provider, model
        if model:
            self.publish(StageModel(self.name, model))

    def spend(self, usage: Usage, cost: float | None, estimate: float | None = None,
              billed: bool = False) -> None:
        """Tokens (and cost) of one attempt: counted whatever becomes of the item. `billed`: the
        provider said what `cost` is; `estimate` (the listed prices' figure) is kept beside it."""
        with self._lock:
            self.usage = self.usage + usage
            if cost is not None:
                self.cost = (self.cost or 0.0) + cost
            guess = estimate if billed else cost
            if guess is not None:
                self.estimate = (self.estimate or 0.0) + guess
            if billed and cost is not None:
                self.any_billed = True
                self.billed += cost
                if estimate is not None:
                    self.billed_estimate = (self.billed_estimate or 0.0) + estimate

    def wrote(self, n: int = 1) -> None:
        """`n` records appended to the stage's output."""
        with self._lock:
            self.written += n

    def item_done(self, item_id: str, usage: Usage, cost: float | None, excluded: bool = False) -> None:
        with self._lock:
            self.handled += 1
            if excluded:
                self.excluded += 1
            else:
                self.done += 1
        self.publish(ItemDone(self.name, item_id, usage, cost, excluded))

    def add_skipped(self, n: int) -> None:
        """Items complete on disk already (not published one by one)."""
        with self._lock:
            self.skipped += n

    def retrying(self, item_id: str, message: str) -> None:
        self.publish(ItemFailed(self.name, item_id, message, True))

    def stall(self, label: str) -> None:
        """An item whose round added nothing: it stops for this run, and is held back next time."""
        with self._lock:
            self.stalled.append(label)

    def held_back(self, n: int, at: str | None) -> None:
        """`n` items not asked: their last round (at `at`) added nothing."""
        self.held, self.held_at = n, at

    def item_failed(self, item_id: str, message: str, stops: bool = False) -> None:
        with self._lock:
            self.handled += 1
            self.failed += 1
        self.publish(ItemFailed(self.name, item_id, message, False, stops))

    def item_refused(self) -> None:
        """The item about to fail met a refusal that asking again will not change (a prompt the
        provider's moderation flags): counted, so that a stage whose failures are all of this kind
        ends with exit 77 (errors.ItemsRefused), not 1."""
        with self._lock:
            self.refused += 1

    def item_stopped(self, item_id: str, error: BaseException) -> None:
        """An item that met the fatal error stopping the stage: failed like any other (the
        command then reports the error that stopped the stage)."""
        self.item_failed(item_id, str(error) or type(error).__name__, stops=True)

    def stats(self) -> StageStats:
        with self._lock:
            return StageStats(self.done, self.skipped, self.failed, self.excluded, self.usage, self.cost,
                              self.estimate if self.any_billed else None)

    def finished(self, error: BaseException | None = None) -> StageStats:
        """The stage's stats, published as it ends; `error`: the fatal error that stopped it."""
        stats = self.stats()
        note = divergence(self.name, self.billed, self.billed_estimate) if self.any_billed else None
        if note is not None:
            log.warning("%s", note)
        self.publish(StageFinished(self.name, stats, reason_of(error) if error is not None else None))
        return stats


@dataclass
class SplitCounts:
    train: int = 0
    eval: int = 0
    orphaned: int = 0
    excluded_by_reason: dict[str, int] = field(default_factory=dict)
    contaminated_by_source: dict[str, int] = field(default_factory=dict)  # "eval" or a benchmark -> n > 0
    gated_by_reason: dict[str, int] = field(default_factory=dict)  # the gate's drops (dataset/quality/verdicts.py)
    kept_output_tokens: int = 0  # output tokens of the answers now in train and eval (every topic)

    @property
    def excluded(self) -> int:
        return sum(self.excluded_by_reason.values())

    @property
    def contaminated(self) -> int:
        return sum(self.contaminated_by_source.values())

    @property
    def gated(self) -> int:
        return sum(self.gated_by_reason.values())


# What each stage's items are, and what it writes: (item, items, record, records).
UNITS = {
    "subtopics": ("topic", "topics", "subtopic", "subtopics"),
    "questions": ("subtopic", "subtopics", "question", "questions"),
    "answers": ("question", "questions", "answer", "answers"),
    "gate": ("answer", "answers", "verdict", "verdicts"),
}


def counted(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def reason_of(error: BaseException | None) -> str:
    """The short reason a stage stopped (an LlmError's `reason`, else its message)."""
    return getattr(error, "reason", None) or str(error) or type(error).__name__


@dataclass
class StageResult:
    """What a stage returns: its stats, and the error that stopped it, if any (`interrupted`
    when that error is the user's interrupt)."""

    stage: str
    stats: StageStats
    error: BaseException | None = None
    split: SplitCounts | None = None
    total: int = 0
    written: int = 0
    handled: int = 0
    interrupted: bool = False
    abandoned: int = 0  # requests in flight that the stop did not wait for (they may be billed)
    refused: int = 0  # failed items the provider's moderation refused (StageRun.item_refused)
    stalled: list[str] = field(default_factory=list)  # items whose round added nothing
    held: int = 0  # items held back: their last round added nothing (at `held_at`)
    held_at: str | None = None
    batch: dict[str, Any] | None = None  # batch mode (pipeline/answers_batch.py): what is pending, and since when

    @property
    def pending(self) -> bool:
        """Batches of this stage are still out: later stages must wait for them."""
        return bool(self.batch and self.batch.get("pending"))

    @property
    def stopped(self) -> bool:
        return self.error is not None

    def text(self) -> str:
        if self.split is not None:
            return split_line(self.split)
        return summary_line(self) + (self.batch.get("note", "") if self.batch else "")

    def data(self) -> dict[str, Any]:
        if self.split is not None:
            s = self.split
            return {"stage": "split", "train": s.train, "eval": s.eval, "orphaned": s.orphaned,
                    "excluded": s.excluded,
                    "excluded_by_reason": {r: s.excluded_by_reason.get(r, 0) for r in EXCLUSION_REASONS},
                    "contaminated": s.contaminated, "contaminated_by_source": dict(s.contaminated_by_source),
                    "gated": s.gated, "gated_by_reason": {r: s.gated_by_reason.get(r, 0) for r in GATE_REASONS},
                    "kept_output_tokens": s.kept_output_tokens}
        st = self.stats
        _, items, _, records = UNITS.get(self.stage, ("item", "items", "record", "records"))
        out = {"stage": self.stage, "unit": items, "records": records, "total": self.total,
               "done": st.done, "skipped": st.skipped, "failed": st.failed, "excluded": st.excluded,
               "written": self.written, "stopped": self.stopped, "interrupted": self.interrupted,
               "input_tokens": st.usage.input_tokens, "output_tokens": st.usage.output_tokens,
               "cost": cost_value(st.cost, st.usage)}
        if st.cost_estimate is not None:
            out["cost_estimate"] = round(st.cost_estimate, 8)
        if self.abandoned:
            out["abandoned"] = self.abandoned
        if self.stalled:
            out["stalled"] = list(self.stalled)
        if self.held:
            out["held"], out["held_at"] = self.held, self.held_at
        if self.stopped:
            out["reason"] = "interrupted" if self.interrupted else reason_of(self.error)
        if self.batch:
            out.update({"mode": "batch", **{k: v for k, v in self.batch.items() if k != "note"}})
        return out


def spent_nothing(usage: Usage) -> bool:
    return usage.input_tokens == 0 and usage.output_tokens == 0


def cost_value(cost: float | None, usage: Usage) -> float | None:
    """USD, rounded to a millionth of a cent so sums print without float noise; 0 when no token
    was spent (whether or not a price is known), None when tokens were spent at an unknown price."""
    if cost is None:
        return 0 if spent_nothing(usage) else None
    return round(cost, 8)


def cost_text(cost: float | None, usage: Usage | None = None) -> str:
    if cost is None:
        return "cost $0" if usage is not None and spent_nothing(usage) else "cost unknown"
    if cost == 0:
        return "cost $0"
    return f"cost ${cost:.4f}"


def summary_line(r: StageResult) -> str:
    """`subtopics: 2 topics, 6 subtopics written; 0 skipped, 0 failed; tokens 40 in, 80 out; cost $0`,
    or `subtopics: stopped after 0 of 2 topics: authentication failed; …` for a stage that stopped."""
    st = r.stats
    one, items, one_record, records = UNITS.get(r.stage, ("item", "items", "record", "records"))
    written = counted(r.written, one_record, records) + " written"
    if st.excluded:
        written += f" ({st.excluded} excluded from training)"
    if r.stopped:
        why = "interrupted" if r.interrupted else reason_of(r.error)
        head = f"stopped after {r.handled} of {r.total} {items}: {why}; {written}"
    else:
        head = f"{counted(st.done + st.excluded, one, items)}, {written}"
    line = (f"{r.stage}: {head}; {st.skipped} skipped, {st.failed} failed; "
            f"tokens {st.usage.input_tokens} in, {st.usage.output_tokens} out; "
            f"{cost_text(st.cost, st.usage)}")
    if r.abandoned:
        line += (f"; {counted(r.abandoned, 'request', 'requests')} in flight "
                 f"{'was' if r.abandoned == 1 else 'were'} abandoned; the provider may bill them")
    return line + rounds_note(r)


def rounds_note(r: StageResult) -> str:
    """`; 1 topic added nothing: topic0` and `; 2 topic(s) held back: …` (pipeline/held.py)."""
    one, items, _, records = UNITS.get(r.stage, ("item", "items", "record", "records"))
    note = ""
    if r.stalled:
        note += f"; {counted(len(r.stalled), one, items)} added no new {records}: {some(r.stalled)}"
    if r.held:
        note += (f"; {r.held} {one}(s) held back: no new items at the last try ({r.held_at}); "
                 "change the prompt or the config to ask again")
    return note


def some(labels: list[str], shown: int = 5) -> str:
    """`a, b, c` or, past `shown` labels, `a, b, c, d, e and 7 more`: a line stays short."""
    if len(labels) <= shown:
        return ", ".join(labels)
    return f"{', '.join(labels[:shown])} and {len(labels) - shown} more"


def split_line(s: SplitCounts) -> str:
    excluded = {r: s.excluded_by_reason.get(r, 0) for r in EXCLUSION_REASONS}
    gated = {r: s.gated_by_reason.get(r, 0) for r in GATE_REASONS}
    return split_summary(s.train, s.eval, excluded, gated, s.contaminated_by_source, s.orphaned)
