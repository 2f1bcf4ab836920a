"""What a pod costs: its rate, the spend so far, the price line shown before a create, and the
`max_cost_usd` cap armed on the pod. Every dollar amount the tool shows about pods (`runs ls`,
`runs show`, `pod ls`, `pod rm`, events, warnings) is written by support/fmt.py's money formats
(`usd`, `usd_per_hour`, `about_usd`), so they all read the same.

The rate is the first non-zero `cost` Runpod reports for the pod (USD per hour, billed per second,
image pull included); the catalog's list price is only used before a pod exists. Spend is the
rate times the time since the create answer, on the local clock, rounded to 1e-4 USD.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from overbrainer.support.fmt import usd, usd_per_hour

SNAPSHOT_SHARE = 0.95          # the pod asks for a snapshot at 95 % of the cap …
SNAPSHOT_LEAD_SECS = 15 * 60   # … and at least this long before the cap deletes it
CAP_MINUTES_WARNED = 30        # a cap buying less pod time than this is warned about
SPEND_DIGITS = 4               # estimated spend rounded to 1e-4 USD


def usable_rate(rate: float | None) -> float | None:
    """The rate if it is a real one (a finite number > 0), else None (0 = no rate reported)."""
    if rate is None or isinstance(rate, bool) or not math.isfinite(rate) or rate <= 0:
        return None
    return float(rate)


def spend(rate: float | None, start_unix: float | None, end_unix: float | None) -> float | None:
    """`rate` × hours from `start_unix` to `end_unix`, rounded to 1e-4 USD; None when unknown.

    A clock that went backwards counts as no time spent.
    """
    rate = usable_rate(rate)
    if rate is None or start_unix is None or end_unix is None:
        return None
    hours = max(0.0, end_unix - start_unix) / 3600.0
    return round(rate * hours, SPEND_DIGITS)


def price_line(gpu_type: str, gpu_count: int, price_per_gpu: float | None, max_hours: float | None,
               max_cost_usd: float | None = None) -> str:
    """The line shown before a pod is created, from the catalog's list price of one GPU:
    `NVIDIA A40 × 2 at $0.88/h, max $21.12 over max_hours = 24`.

    `max_hours` None means a kept pod (no time limit); a `max_cost_usd` below the max lowers it.
    """
    head = f"{gpu_type} × {gpu_count}"
    price = usable_rate(price_per_gpu)
    if price is None:
        return f"{head}, list price unknown"
    rate = price * gpu_count
    line = f"{head} at {usd_per_hour(rate)}"
    if max_hours is None:
        if max_cost_usd is not None:
            return f"{line}, max {usd(max_cost_usd)} (max_cost_usd)"
        return f"{line}, no time limit (--keep-pod)"
    most = rate * max_hours
    if max_cost_usd is not None and max_cost_usd < most:
        return f"{line}, max {usd(max_cost_usd)} (max_cost_usd) within max_hours = {max_hours:g}"
    return f"{line}, max {usd(most)} over max_hours = {max_hours:g}"


@dataclass(frozen=True)
class CostCap:
    """`max_cost_usd` on the client's clock: the Unix times at which the pod should snapshot and
    be deleted. The pod gets them as durations (`files(now)`), since its clock need not agree."""

    snapshot_at: int
    delete_at: int

    def files(self, now: float) -> dict[str, str]:
        """The run-dir files that arm the watchdog (relative to the run dir on the pod): seconds
        left, at `now` (client clock), until the snapshot (`.pod/snapshot_in`) and the delete
        (`.pod/cost_cap_in`); the watchdog counts them on its own clock from when it sees them."""
        return {".pod/snapshot_in": f"{max(int(self.snapshot_at - now), 0)}\n",
                ".pod/cost_cap_in": f"{max(int(self.delete_at - now), 0)}\n"}


def arm_cost_cap(max_cost_usd: float | None, rate: float | None, created_unix: float,
                 keep: bool = False) -> CostCap | None:
    """The cap to arm, or None when there is none to arm (no `max_cost_usd`, or a kept pod).

    `delete_at` = created + max_cost_usd / rate hours; `snapshot_at` = the earlier of 95 % of
    that time and 15 min before `delete_at` (never before the creation). $1/h with a $2 cap:
    snapshot after 1.75 h, delete after 2 h. Raises ValueError when a cap is set but the pod has
    no rate: the cap cannot be applied, and the caller refuses the pod.
    """
    if max_cost_usd is None or keep:
        return None
    rate = usable_rate(rate)
    if rate is None:
        raise ValueError("Runpod reported no hourly rate for the pod")
    seconds = max_cost_usd / rate * 3600.0
    delete_at = created_unix + seconds
    snapshot_at = max(created_unix, min(created_unix + SNAPSHOT_SHARE * seconds, delete_at - SNAPSHOT_LEAD_SECS))
    return CostCap(snapshot_at=int(snapshot_at), delete_at=int(delete_at))


def least_cap(rate: float, minutes: int = CAP_MINUTES_WARNED) -> float:
    """The smallest `max_cost_usd` that buys `minutes` of pod at `rate`, rounded up to the cent."""
    return math.ceil(rate * minutes / 60.0 * 100 - 1e-9) / 100


def cap_warning(max_cost_usd: float | None, rate: float | None) -> str | None:
    """A warning when `max_cost_usd` buys less than 30 minutes of pod at `rate`, else None."""
    rate = usable_rate(rate)
    if max_cost_usd is None or rate is None or max_cost_usd / rate * 60.0 >= CAP_MINUTES_WARNED:
        return None
    minutes = max_cost_usd / rate * 60.0
    return (f"max_cost_usd = {max_cost_usd:g} buys only {minutes:.0f} min of pod at {usd_per_hour(rate)}: "
            f"the pod is deleted then; at least {usd(least_cap(rate))} buys {CAP_MINUTES_WARNED} min")

