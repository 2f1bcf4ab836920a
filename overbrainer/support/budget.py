"""The LLM spend cap of one command (`[pipeline] max_cost_usd`, `--max-cost USD`).

A request may be sent only when what this command recorded as spent, plus the upper bounds of
the requests still in flight, plus its own upper bound, stays within the cap. `reserve(bound)`
makes that check and holds the bound while the request is out; `settle(bound, cost)` gives the
bound back and records what the request cost (the provider's bill where it says one, else the
listed-price estimate). So the spend recorded never exceeds the cap as long as no request costs
more than its bound. Thread-safe: every worker of every stage of the command shares one Budget.
"""

from __future__ import annotations

import threading

from overbrainer.errors import OverbrainerError


class Budget:
    def __init__(self, cap: float):
        self.cap = float(cap)
        self.spent = 0.0  # recorded: what the settled requests cost
        self._held = 0.0  # the bounds of the requests in flight
        self._lock = threading.Lock()

    def reserve(self, bound: float) -> bool:
        """Hold `bound` for a request about to be sent; False (nothing held) when it does not fit."""
        with self._lock:
            if self.spent + self._held + bound > self.cap:
                return False
            self._held += bound
            return True

    def settle(self, bound: float, cost: float | None) -> None:
        """The request holding `bound` ended; it cost `cost` (None or a failed request: nothing)."""
        with self._lock:
            self._held = max(0.0, self._held - bound)
            if cost:
                self.spent += cost

    def reached(self) -> "SpendCapReached":
        return SpendCapReached(self)


def usd(amount: float) -> str:
    return f"${amount:.4f}"


class SpendCapReached(OverbrainerError):
    """The next request would not fit under the cap: the stage stopped (exit 1). Its message
    gives the spend recorded when it is printed, the requests in flight then included."""

    reason = "spend cap reached"

    def __init__(self, budget: Budget):
        super().__init__("spend cap reached")
        self.budget = budget

    def __str__(self) -> str:
        return f"spend cap reached: {usd(self.budget.spent)} of max_cost_usd {usd(self.budget.cap)}"
