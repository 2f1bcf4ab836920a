"""What a request cost: the provider's bill when it says one (OpenRouter's `usage.cost`), else the
estimate from the listed prices; the estimate is kept beside a bill, and a stage whose bills and
estimates differ by more than 10 % says so once.
"""

from __future__ import annotations

from dataclasses import dataclass

DIVERGENCE = 0.10


@dataclass(frozen=True)
class Spend:
    """`cost`: what counts (the bill, else the estimate; None when neither is known);
    `estimate`: from the listed prices (None when the model has no listed price);
    `billed`: the provider said what it billed."""

    cost: float | None
    estimate: float | None
    billed: bool = False


def divergence(stage: str, billed: float, estimate: float | None) -> str | None:
    """The warning for a stage whose billed requests cost `billed` while their listed prices
    give `estimate`, when the two differ by more than 10 % of the bill."""
    if estimate is None or billed <= 0:
        return None
    gap = estimate - billed
    if abs(gap) <= DIVERGENCE * billed:
        return None
    side = "more" if gap > 0 else "less"
    return (f"{stage}: the provider billed ${billed:.4f}; the listed prices give ${estimate:.4f} "
            f"({abs(gap) / billed:.0%} {side}); the summary counts what was billed")
