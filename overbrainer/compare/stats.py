"""The numbers of a compare: verdict counts, the win-or-tie rate with its Wilson 95 % interval,
the child's speed, the cost per 1,000 requests, and the `--min-win-or-tie` gate.

- `win_or_tie` = (wins + ties) / (questions − unparsed); child errors stay in the denominator,
  so they count as losses. None when nothing is left to count.
- The Wilson score interval (z = 1.959964) on that rate: unlike the normal approximation it stays
  inside [0, 1] and is honest on small eval sets.
- Speed over the child's answers without an error and with finite values: latency p50/p95 of
  `seconds` by nearest rank (rank = ceil(p·n/100), at least 1), `first_token_p50`, the mean of the
  per-answer tokens per second, and the mean seconds.
- Costs: the parent's from its billed tokens averaged over the setup's questions and
  `[compare] parent_price_in/out` (USD per 1M tokens); the child's from
  `[compare] child_price_per_hour` × mean seconds: an upper bound, since requests were serial.
"""

from __future__ import annotations

import math
from typing import Any, Iterable

Z95 = 1.959963984540054  # the 97.5th percentile of the standard normal
WIN, TIE, LOSS, UNPARSED, ERROR = "win", "tie", "loss", "unparsed", "error"
VERDICTS = (WIN, TIE, LOSS, UNPARSED, ERROR)


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """The Wilson score interval (low, high) of successes/n, or None when n is 0."""
    if n <= 0:
        return None
    p = successes / n
    z2 = z * z
    denominator = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def nearest_rank(values: list[float], p: float) -> float | None:
    """The p-th percentile by nearest rank: the value of rank ceil(p·n/100) (at least 1)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(p * len(ordered) / 100))
    return ordered[min(rank, len(ordered)) - 1]


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def counts(verdicts: Iterable[str]) -> dict[str, int]:
    out = {"questions": 0, "wins": 0, "ties": 0, "losses": 0, "unparsed": 0, "errors": 0}
    plural = {WIN: "wins", TIE: "ties", LOSS: "losses", UNPARSED: "unparsed", ERROR: "errors"}
    for verdict in verdicts:
        out["questions"] += 1
        out[plural[verdict]] += 1
    return out


def speed(answers: Iterable[dict]) -> dict[str, Any]:
    """Speed of the child over its answers without an error."""
    seconds: list[float] = []
    first: list[float] = []
    rates: list[float] = []
    truncated = 0
    for a in answers:
        if a.get("error") is not None:
            continue
        if a.get("finish") == "length":
            truncated += 1
        for value, into in ((a.get("seconds"), seconds), (a.get("first_token_seconds"), first),
                            (a.get("tokens_per_second"), rates)):
            v = _finite(value)
            if v is not None:
                into.append(v)
    return {
        "truncated": truncated,
        "latency_p50": nearest_rank(seconds, 50),
        "latency_p95": nearest_rank(seconds, 95),
        "first_token_p50": nearest_rank(first, 50),
        "tokens_per_second": sum(rates) / len(rates) if rates else None,
        "mean_seconds": sum(seconds) / len(seconds) if seconds else None,
    }


def summarize(verdicts: list[str], answers: Iterable[dict], *, flips: int | None = None,
              pairs: int | None = None) -> dict[str, Any]:
    """The `summary` of compare.json. `flips`/`pairs` come with both orders: the questions whose
    two orders disagreed, out of those where both orders gave a verdict."""
    out: dict[str, Any] = counts(verdicts)
    n = out["questions"] - out["unparsed"]
    good = out["wins"] + out["ties"]
    out["win_or_tie"] = good / n if n > 0 else None
    interval = wilson(good, n)
    out["win_or_tie_interval"] = list(interval) if interval else None
    out.update(speed(answers))
    if pairs is not None:
        out["both_orders"] = True
        out["flips"] = flips or 0
        out["order_pairs"] = pairs
        out["flip_rate"] = (flips or 0) / pairs if pairs else None
    else:
        out["both_orders"] = False
    return out


def costs(parent_tokens: list[tuple[int | None, int | None]], mean_seconds: float | None, *,
          price_in: float | None, price_out: float | None,
          child_per_hour: float | None) -> dict[str, float | None]:
    """`{parent_per_1k, child_per_1k, ratio}` in USD, rounded to 6 decimals (None when unknown)."""
    parent = None
    ins = [v for t in parent_tokens if (v := _finite(t[0])) is not None]
    outs = [v for t in parent_tokens if (v := _finite(t[1])) is not None]
    if price_in is not None and price_out is not None and ins and outs:
        mean_in, mean_out = sum(ins) / len(ins), sum(outs) / len(outs)
        parent = round((mean_in * price_in + mean_out * price_out) / 1e6 * 1000, 6)
    child = None
    if child_per_hour is not None and mean_seconds is not None:
        child = round(child_per_hour * mean_seconds / 3600 * 1000, 6)
    ratio = child / parent if child is not None and parent else None
    return {"parent_per_1k": parent, "child_per_1k": child, "ratio": ratio}


def gate(summary: dict[str, Any], minimum: float) -> str | None:
    """Why `--min-win-or-tie minimum` fails (the interval's lower bound is under it), or None."""
    interval = summary.get("win_or_tie_interval")
    if not interval:
        return f"compare: no verdict counts toward win-or-tie, so it cannot reach --min-win-or-tie {minimum:g}"
    low = interval[0]
    if low < minimum:
        return (f"compare: win-or-tie {summary['win_or_tie']:.1%} (95 % interval {low:.1%} to "
                f"{interval[1]:.1%}): the lower bound is under --min-win-or-tie {minimum:g}")
    return None
