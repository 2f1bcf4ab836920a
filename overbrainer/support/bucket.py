"""A token bucket on an injectable clock: the pacing of requests at a provider's rate limits
(llm/pacing.py) keeps one per limit.

The bucket holds `level` units; it refills continuously at `rate` units a second, up to
`capacity`. A cost of `c` units may be taken once the level reaches `min(c, capacity)`: a cost
larger than the whole bucket waits for a full bucket and leaves the level below zero, so that
what follows waits for it to be paid back, and the long-run rate stays `rate` whatever the costs.
What was taken on an estimate is corrected afterwards (`give`, with a negative amount when the
estimate was short); the level never passes `capacity`.

Not thread-safe: its owner holds a lock around every call. Every call takes the time (`now`,
seconds on the owner's clock) so that a test drives it on a fake clock.
"""

from __future__ import annotations

import math


class Bucket:
    def __init__(self, rate: float, capacity: float, now: float, level: float | None = None):
        self.rate = float(rate)
        self.capacity = float(capacity)
        self.level = self.capacity if level is None else min(float(level), self.capacity)
        self._at = now

    def _refill(self, now: float) -> None:
        if now > self._at:
            self.level = min(self.capacity, self.level + (now - self._at) * self.rate)
            self._at = now

    def wait(self, cost: float, now: float) -> float:
        """Seconds from `now` until `cost` may be taken (0: at once; inf: never, no rate)."""
        self._refill(now)
        need = min(cost, self.capacity)
        if self.level >= need:
            return 0.0
        return (need - self.level) / self.rate if self.rate > 0 else math.inf

    def take(self, cost: float, now: float) -> None:
        """Take `cost` (the caller waited for `wait(cost)` to be 0): the level may go below zero."""
        self._refill(now)
        self.level -= cost

    def give(self, amount: float, now: float) -> None:
        """Put back `amount` (an estimate that was too high; negative: too low), up to `capacity`."""
        self._refill(now)
        self.level = min(self.capacity, self.level + amount)

    def lower(self, to: float, now: float, slack: float = 0.0) -> bool:
        """The level is at most `to` (what the server says is left) when it is above it by more
        than `slack`; True when it was lowered."""
        self._refill(now)
        if to + slack < self.level:
            self.level = float(to)
            return True
        return False

    def rescale(self, rate: float, capacity: float, now: float) -> None:
        """A new rate and capacity (a limit that changed): the level is kept, up to the capacity."""
        self._refill(now)
        self.rate, self.capacity = float(rate), float(capacity)
        self.level = min(self.level, self.capacity)

    def room(self, cost: float, now: float) -> bool:
        """Whether `cost` could be taken now."""
        return self.wait(cost, now) == 0.0
