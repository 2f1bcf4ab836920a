"""The early stop of `answers` and `gate` (`[gate] stop_after`, `stop_share`): when more than
`stop_share` of the first `stop_after` answers a stage execution judges are rejected, the
parent (or its prompt, or the gate's settings) is most likely misconfigured, and every further
answer would be paid for nothing. The stage then sends nothing more, keeps what is in flight,
and stops with exit 1 and one line. It decides as soon as the rejected ones are more than that
share of `stop_after`, so an execution that judges fewer answers never stops for a share."""

from __future__ import annotations

from overbrainer.config.model import Gate
from overbrainer.errors import OverbrainerError


class StoppedEarly(OverbrainerError):
    """Too many of the first answers were rejected; `reason` is the summary's short form."""

    def __init__(self, message: str, reason: str):
        super().__init__(message)
        self.reason = reason


class EarlyStop:
    """Note each judged answer's rejection reason (None: kept) in the order they come."""

    def __init__(self, stage: str, gate: Gate):
        self.stage = stage
        self.limit = int(gate.stop_after)
        self.share = float(gate.stop_share)
        self.seen = 0
        self.rejected: dict[str, int] = {}
        self.fired = False

    def note(self, reason: str | None) -> StoppedEarly | None:
        """The error that stops the stage, once (None until then, and after)."""
        if not self.limit or self.fired or self.seen >= self.limit:
            return None
        self.seen += 1
        if reason is not None:
            self.rejected[reason] = self.rejected.get(reason, 0) + 1
        n = sum(self.rejected.values())
        if n <= self.share * self.limit:
            return None
        self.fired = True
        reasons = ", ".join(f"{k} {v}" for k, v in sorted(self.rejected.items(), key=lambda kv: (-kv[1], kv[0])))
        short = f"{n} of the first {self.seen} answers rejected"
        return StoppedEarly(
            f"{self.stage}: stopped early: {n} of the first {self.seen} answers were rejected ({reasons}), more "
            f"than gate.stop_share {self.share:g} of gate.stop_after {self.limit}; check the parent, its prompt "
            f"and [gate] before paying for more (a rerun goes on; gate.stop_after = 0 turns this off)", short)
