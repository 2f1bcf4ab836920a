"""The numbers of an eval: per task, the primary metric of each side and the ratio child / parent
with a 95 % interval.

- Primary metric: the first `metric,filter` key of lm-eval's results for the task (its YAML's
  first metric, first filter), `*_stderr` keys aside.
- Per-sample scores: lm-eval's logged samples (`log_samples`) of that filter, the metric's value
  per `doc_id`.
- Ratio: mean(child) / mean(parent) over the documents both sides scored (paired).
- Interval: a paired percentile bootstrap: `REPEATS` resamples of the documents with replacement
  (Python's `random.Random(seed)`, the eval's seed), the ratio of sums in each; resamples where the
  parent's sum is 0 are left out; the 2.5th and 97.5th percentiles (nearest rank) of the rest.
"""

from __future__ import annotations

import math
import random
from typing import Any

REPEATS = 2000
SKIP = frozenset({"alias", "name", "sample_len", " ", "samples"})


def primary_metric(task_results: dict[str, Any]) -> tuple[str, str] | None:
    """(metric, filter) of a task's results, or None when it has no numeric metric."""
    for key, value in task_results.items():
        metric, sep, filt = key.partition(",")
        if not sep or metric in SKIP or metric.endswith("_stderr"):
            continue
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return metric, filt
    return None


def sample_scores(samples: list[dict[str, Any]], metric: str, filt: str) -> dict[int, float]:
    """The metric's value per document, from lm-eval's logged samples of one task."""
    out: dict[int, float] = {}
    for s in samples or []:
        if s.get("filter", "none") != filt or metric not in s:
            continue
        value = s[metric]
        if isinstance(value, (list, tuple)):  # a metric whose aggregation gets the raw pairs
            continue
        try:
            out[int(s["doc_id"])] = float(value)
        except (TypeError, ValueError, KeyError):
            continue
    return out


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    rank = max(1, math.ceil(q * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def ratio_interval(child: dict[int, float], parent: dict[int, float], seed: int,
                   repeats: int = REPEATS) -> dict[str, Any]:
    """`{n, child, parent, ratio, low, high}` over the paired documents (None where undefined)."""
    docs = sorted(set(child) & set(parent))
    n = len(docs)
    c = [child[d] for d in docs]
    p = [parent[d] for d in docs]
    out = {"n": n, "child": sum(c) / n if n else None, "parent": sum(p) / n if n else None,
           "ratio": None, "low": None, "high": None, "method": f"paired bootstrap, {repeats} resamples, seed {seed}"}
    if not n or sum(p) == 0:
        return out
    out["ratio"] = sum(c) / sum(p)
    rng = random.Random(seed)
    ratios = []
    for _ in range(repeats):
        picks = [rng.randrange(n) for _ in range(n)]
        below = sum(p[i] for i in picks)
        if below:
            ratios.append(sum(c[i] for i in picks) / below)
    if ratios:
        out["low"], out["high"] = _percentile(ratios, 0.025), _percentile(ratios, 0.975)
    return out


def task_numbers(child: dict[str, Any], parent: dict[str, Any] | None, seed: int) -> dict[str, dict[str, Any]]:
    """Per task of the child's results: its metric, filter, and the ratio (parent None: the
    child's score only)."""
    out: dict[str, dict[str, Any]] = {}
    for task, results in (child.get("results") or {}).items():
        picked = primary_metric(results)
        if picked is None:
            continue
        metric, filt = picked
        mine = sample_scores((child.get("samples") or {}).get(task, []), metric, filt)
        row = {"metric": metric, "filter": filt, "child": results[f"{metric},{filt}"], "samples": len(mine)}
        if parent is not None and task in (parent.get("results") or {}):
            theirs = sample_scores((parent.get("samples") or {}).get(task, []), metric, filt)
            row["parent"] = parent["results"][task].get(f"{metric},{filt}")
            row["ratio"] = ratio_interval(mine, theirs, seed)
        out[task] = row
    return out


def pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}"


def task_line(task: str, row: dict[str, Any]) -> str:
    """`<task> <metric>: child = X % of parent (95 % interval a–b %)`, or the child's score alone."""
    head = f"{task} {row['metric']}"
    ratio = row.get("ratio")
    if ratio is None:
        return f"{head}: child {row['child']:.4g} (no parent)"
    if ratio["ratio"] is None:
        return f"{head}: child {row['child']:.4g}, parent {row.get('parent') or 0:.4g}: no ratio (the parent scored 0)"
    interval = "n/a" if ratio["low"] is None else f"{pct(ratio['low'])}–{pct(ratio['high'])} %"
    return (f"{head}: child = {pct(ratio['ratio'])} % of parent (95 % interval {interval}); "
            f"{row['child']:.4g} vs {row['parent']:.4g} over {ratio['n']} samples")
