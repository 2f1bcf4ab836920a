"""The kept share: of every output token the project paid for (history.jsonl's output tokens of
every stage: list stages, retries, excluded and superseded answers included), how many are in the
answers now in data/train.jsonl and data/eval.jsonl (the latest split's `kept_output_tokens`).
Shown by `run`'s summary, `run --plan` and `overbrainer history` (docs/data-files.md#historyjsonl).
"""

from __future__ import annotations

from typing import Any, Iterable


class KeptShare:
    """`kept` output tokens in train/eval of `paid` output tokens in all."""

    __slots__ = ("kept", "paid")

    def __init__(self, kept: int, paid: int):
        self.kept = kept
        self.paid = paid

    @property
    def share(self) -> float | None:
        return self.kept / self.paid if self.paid else None

    def text(self) -> str:
        """`9876 of 12345 paid output tokens (80.0%) are in train/eval examples`."""
        share = "" if self.share is None else f" ({self.share:.1%})"
        return f"{self.kept} of {self.paid} paid output tokens{share} are in train/eval examples"

    def data(self) -> dict:
        return {"kept_output_tokens": self.kept, "paid_output_tokens": self.paid,
                "kept_share": None if self.share is None else round(self.share, 6)}


def kept_share(entries: Iterable[Any]) -> KeptShare | None:
    """The share from the history's lines (dataset/accounting/history.HistoryEntry), or None before a split
    that counted its kept tokens."""
    paid = 0
    kept = None
    for e in entries:
        paid += e.output_tokens
        if e.split is not None and "kept_output_tokens" in e.split:
            kept = e.split["kept_output_tokens"]
    return None if kept is None else KeptShare(kept, paid)
