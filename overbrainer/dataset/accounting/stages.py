"""The pipeline's stages and what one execution of a stage counted: plain data, shared by the
stages that produce it, history.jsonl that records it and the events that report it."""

from __future__ import annotations

from dataclasses import dataclass, field

from overbrainer.support.usage import Usage

STAGES = ("subtopics", "questions", "answers", "gate", "split")


@dataclass(frozen=True)
class StageStats:
    done: int = 0
    skipped: int = 0
    failed: int = 0
    excluded: int = 0
    usage: Usage = field(default_factory=Usage)
    cost: float | None = None
    # The listed-price estimate, kept beside `cost` when the provider billed some requests itself
    # (`cost` then counts the bills); None when `cost` is the estimate.
    cost_estimate: float | None = None
