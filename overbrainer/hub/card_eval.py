"""The model card's `## Benchmarks` section, from the run's newest eval (`overbrainer eval`:
`runs/<run>/evals/*/eval.json`, the newest by `created`).

An allowlist like card_facts: only the eval's ID, lm-eval's version, the limit and seed, and per
task its name, metric, the child's and parent's scores, the ratio with its 95 % interval and the
number of samples are read (no URL, provider or path). An unreadable eval.json is skipped with a
warning; no eval, no section.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Callable

from overbrainer.jobs.run_record import EVAL_JSON, EVALS

log = logging.getLogger(__name__)


def _number(x) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def _row(task: str, row: dict) -> dict | None:
    if not isinstance(row, dict) or not isinstance(row.get("metric"), str):
        return None
    ratio = row.get("ratio") if isinstance(row.get("ratio"), dict) else {}
    return {"task": str(task), "metric": row["metric"], "child": _number(row.get("child")),
            "parent": _number(row.get("parent")), "ratio": _number(ratio.get("ratio")),
            "low": _number(ratio.get("low")), "high": _number(ratio.get("high")),
            "samples": _number(ratio.get("n", row.get("samples")))}


def eval_facts(run_dir: Path) -> dict | None:
    """The newest eval's card facts, or None."""
    best = None
    for path in sorted(Path(run_dir).glob(f"{EVALS}/*/{EVAL_JSON}")):
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            log.warning("push: card without %s: %s", path.parent.name, type(e).__name__)
            continue
        if isinstance(doc, dict) and isinstance(doc.get("summary"), dict) and \
                (best is None or str(doc.get("created")) > str(best.get("created"))):
            best = doc
    if best is None:
        return None
    rows = [r for r in (_row(t, v) for t, v in best["summary"].items()) if r is not None]
    return {"eval": str(best.get("eval")), "lm_eval": str(best.get("lm_eval")), "limit": best.get("limit"),
            "seed": best.get("seed"), "rows": rows}


def _score(x: float | None) -> str:
    return "–" if x is None else f"{x:.4g}"


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f} %"


def eval_section(facts: dict | None, cell: Callable[[object], str]) -> list[str]:
    """The section's lines (none without an eval)."""
    if not facts or not facts["rows"]:
        return []
    limit = f", at most {facts['limit']} documents per task" if isinstance(facts.get("limit"), int) else ""
    lines = ["## Benchmarks", "",
             cell(f"lm-evaluation-harness {facts['lm_eval']} (eval {facts['eval']}): the child's GGUF and its "
                  f"parent with the same settings{limit}, seed {facts['seed']}. The interval is a paired "
                  "bootstrap over the samples."), "",
             "| Task | Metric | Child | Parent | Child / parent (95 % interval) | Samples |",
             "|---|---|---|---|---|---|"]
    for r in facts["rows"]:
        ratio = _pct(r["ratio"])
        if r["low"] is not None:
            ratio += f" ({_pct(r['low'])} to {_pct(r['high'])})"
        samples = "–" if r["samples"] is None else str(int(r["samples"]))
        lines.append(f"| {cell(r['task'])} | {cell(r['metric'])} | {_score(r['child'])} | {_score(r['parent'])} "
                     f"| {ratio} | {samples} |")
    return lines + [""]
