"""The LLM spend cap of one command (`[pipeline] max_cost_usd`, `--max-cost USD`).

A request may be sent only when what this command recorded as spent, plus the upper bounds of
the requests still in flight, plus its own upper bound, stays within the cap. `reserve(bound)`
makes that check and holds the bound while the request is out; `settle(bound, cost)` gives the
bound back and records what the request cost (the provider's bill where it says one, else the
listed-price estimate). So the spend recorded never exceeds the cap as long as no request costs
more than its bound; when one does (a provider ignoring `max_tokens`), `overspent()` is the error
the stage raises after its summary (SpendPastCap, exit 1). A request that does not fit while
others are in flight waits for them (they usually cost far less than their bounds); it is
refused only when it does not fit with nothing in flight. Thread-safe: every worker of every
stage of the command shares one Budget.
"""

from __future__ import annotations

import threading
from typing import Callable

from overbrainer.errors import OverbrainerError

_WAIT = 0.05  # how often a waiting request looks at `stopping`


class Budget:
    def __init__(self, cap: float):
        self.cap = float(cap)
        self.spent = 0.0  # recorded: what the settled requests cost, and the charges
        self.charged = 0.0  # of which charges (`charge`: a served provider's pod time)
        self._held = 0.0  # the bounds of the requests in flight
        self._out = 0  # how many (a float sum never quite returns to 0)
        self._changed = threading.Condition()

    def reserve(self, bound: float, stopping: Callable[[], bool] = lambda: False) -> bool:
        """Hold `bound` for a request about to be sent, waiting while requests in flight keep it
        from fitting; False (nothing held) when it does not fit with none in flight, or once
        `stopping()` says so."""
        with self._changed:
            while self.spent + self._held + bound > self.cap:
                if not self._out or stopping():
                    return False
                self._changed.wait(_WAIT)
            if bound > 0:  # a free request holds nothing (and is never settled: Processor.settle)
                self._held += bound
                self._out += 1
            return True

    def room(self) -> float:
        """What may still be held: the cap less the spend recorded and the bounds held."""
        with self._changed:
            return self.cap - self.spent - self._held

    def settle(self, bound: float, cost: float | None) -> None:
        """The request holding `bound` ended; it cost `cost` (None or a failed request: nothing)."""
        with self._changed:
            self._out -= 1
            self._held = self._held - bound if self._out else 0.0
            if cost:
                self.spent += cost
            self._changed.notify_all()

    def charge(self, cost: float) -> None:
        """Record a spend no request held a bound for (a served provider's pod time)."""
        with self._changed:
            self.spent += cost
            self.charged += cost
            self._changed.notify_all()

    def overspent(self) -> "SpendPastCap | None":
        """The error of a recorded spend past the cap (a response that cost more than the upper
        bound held for it: a provider ignoring `max_tokens`), or None."""
        with self._changed:
            spent = self.spent
        return SpendPastCap(spent, self.cap, self.charged > 0) if spent > self.cap * (1 + 1e-9) else None

    def reached(self, bound: float) -> "SpendCapReached":
        """The error of a stop before a request whose upper bound is `bound`."""
        return SpendCapReached(self, bound)


def usd(amount: float) -> str:
    return f"${amount:.4f}"


class SpendCapReached(OverbrainerError):
    """The next request would not fit under the cap: the stage stopped (exit 1). Its message
    gives the spend recorded when it is printed, the requests in flight then included."""

    reason = "spend cap reached"

    def __init__(self, budget: Budget, bound: float):
        super().__init__("spend cap reached")
        self.budget = budget
        self.bound = bound

    def __str__(self) -> str:
        return (f"spend cap reached: {usd(self.budget.spent)} of max_cost_usd {usd(self.budget.cap)}; "
                f"the next request could cost up to {usd(self.bound)}")


class SpendPastCap(OverbrainerError):
    """The spend recorded went past the cap (exit 1), said after the stage's summary; what was
    paid for is kept, and no later stage of the command runs."""

    def __init__(self, spent: float, cap: float, charged: bool = False):
        why = ("a served provider's pods cost their time, counted as it passes (every 30 s): the last count "
               "went past it" if charged else
               "responses cost more than their requests' upper bounds (does the provider ignore max_tokens?)")
        super().__init__(f"spend past the cap: {usd(spent)} recorded, over max_cost_usd {usd(cap)}; {why}; "
                         "what was paid for is kept")
        self.spent = spent
        self.cap = cap
