"""`.overbrainer/history.jsonl`: one line per stage execution.

`HistoryRecorder` notes `begin(stage, provider, model)` and writes one line at the end with the
stage's counts; a write failure only logs a warning. `read_history` skips malformed lines.
`format_history_lines` gives the text of `overbrainer history [--all]`, `totals` what the lines add
up to.

The kept share (`kept_share`): of every output token the project paid for (history.jsonl's output
tokens of every stage: list stages, retries, excluded and superseded answers included), how many
are in the answers now in data/train.jsonl and data/eval.jsonl (the latest split's
`kept_output_tokens`). Shown by `run`'s summary, `run --plan` and `overbrainer history`
(docs/data-files.md#historyjsonl).
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable

from overbrainer.dataset.accounting.stages import STAGES, StageStats
from overbrainer.dataset.paths import ProjectPaths
from overbrainer.support.fmt import realign, stamp

from ..jsonl import Appender, json_lines

log = logging.getLogger(__name__)

STATUSES = ("ok", "failed", "interrupted")
SPLIT_KEYS = ("train", "eval", "orphaned", "kept_output_tokens")  # the last one optional (older lines)


def history_path(project_dir: str | os.PathLike) -> Path:
    return ProjectPaths(Path(project_dir)).history


@dataclass
class HistoryEntry:
    stage: str
    started_at: str
    ended_at: str
    status: str
    provider: str | None = None
    model: str | None = None
    done: int = 0
    skipped: int = 0
    failed: int = 0
    excluded: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float | None = None
    # split lines only: {"train": n, "eval": n, "orphaned": n[, "kept_output_tokens": n]} (the
    # last since issue 27: the output tokens of the answers that split left in train and eval)
    split: dict | None = None
    backfilled: bool = False
    cost_estimate: float | None = None  # listed-price estimate beside a billed `cost`

    def to_dict(self) -> dict:
        d: dict[str, Any] = {"stage": self.stage, "started_at": self.started_at, "ended_at": self.ended_at,
             "status": self.status, "provider": self.provider, "model": self.model, "done": self.done,
             "skipped": self.skipped, "failed": self.failed, "excluded": self.excluded,
             "input_tokens": self.input_tokens, "output_tokens": self.output_tokens, "cost": self.cost}
        if self.cost_estimate is not None:
            d["cost_estimate"] = self.cost_estimate
        if self.split is not None:
            d["split"] = {k: self.split[k] for k in SPLIT_KEYS if k in self.split}
            if self.split.get("contaminated"):  # only when some were (older readers ignore it)
                d["split"]["contaminated"] = self.split["contaminated"]
        if self.backfilled:
            d["backfilled"] = True
        return d

    @classmethod
    def from_dict(cls, d: Any) -> "HistoryEntry":
        """Raises ValueError naming the bad field."""
        if not isinstance(d, dict):
            raise ValueError("not a JSON object")

        def count(key: str) -> int:
            v = d.get(key)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ValueError(f"`{key}` must be a non-negative integer")
            return v

        def opt_str(key: str) -> str | None:
            v = d.get(key)
            if v is not None and not isinstance(v, str):
                raise ValueError(f"`{key}` must be a string or null")
            return v

        if d.get("stage") not in STAGES:
            raise ValueError("unknown `stage`")
        if d.get("status") not in STATUSES:
            raise ValueError("unknown `status`")
        for key in ("started_at", "ended_at"):
            if not isinstance(d.get(key), str):
                raise ValueError(f"`{key}` must be a string")
        cost = d.get("cost")
        if cost is not None and (isinstance(cost, bool) or not isinstance(cost, (int, float))):
            raise ValueError("`cost` must be a number or null")
        split = _split_counts(d.get("split"))
        backfilled = d.get("backfilled", False)
        if not isinstance(backfilled, bool):
            raise ValueError("`backfilled` must be a boolean")
        estimate = d.get("cost_estimate")
        if estimate is not None and (isinstance(estimate, bool) or not isinstance(estimate, (int, float))):
            raise ValueError("`cost_estimate` must be a number or null")
        return cls(d["stage"], d["started_at"], d["ended_at"], d["status"], opt_str("provider"),
                   opt_str("model"), count("done"), count("skipped"), count("failed"), count("excluded"),
                   count("input_tokens"), count("output_tokens"),
                   None if cost is None else float(cost), split, backfilled,
                   None if estimate is None else float(estimate))


def append_entries(project_dir: str | os.PathLike, entries: list[HistoryEntry]) -> None:
    """Append lines (one write each, flushed). Raises OverbrainerError; used by migrate's backfill."""
    with Appender(history_path(project_dir)) as appender:
        appender.append_all(e.to_dict() for e in entries)



def _split_counts(split: Any) -> dict | None:
    """A history line's `split` counts (None on other lines); raises ValueError naming the field."""
    if split is None:
        return None
    if not isinstance(split, dict) or any(
            not isinstance(split.get(k), int) or isinstance(split.get(k), bool)
            for k in ("train", "eval", "orphaned")):
        raise ValueError("`split` must hold train, eval and orphaned counts")
    kept = split.get("kept_output_tokens")
    if kept is not None and (not isinstance(kept, int) or isinstance(kept, bool) or kept < 0):
        raise ValueError("`split.kept_output_tokens` must be a non-negative integer")
    contaminated = split.get("contaminated")
    out = {k: split[k] for k in SPLIT_KEYS if k in split}
    if isinstance(contaminated, int) and not isinstance(contaminated, bool) and contaminated > 0:
        out["contaminated"] = contaminated
    return out

def read_history(project_dir: str | os.PathLike) -> list[HistoryEntry]:
    """Every entry, oldest first. Missing file: empty. Malformed lines are skipped with a warning."""
    path = history_path(project_dir)
    entries = []
    for lineno, obj in json_lines(path, lenient=True):
        try:
            entries.append(HistoryEntry.from_dict(obj))
        except ValueError as e:
            log.warning("skipping line %d of %s: %s", lineno, path, e)
    return entries


class HistoryRecorder:
    """One per stage execution: `begin(stage, provider, model)`, then `finish(...)` writes the line:

    - `finish(stats=stats)`: `ok`, or `failed` when `stats.failed > 0`;
    - `finish("failed", stats)` after a fatal error, `finish("interrupted", stats)` on Ctrl-C, with
      the counts the stage reached;
    - `finish(split=result)` for split (a SplitResult or {"train", "eval", "orphaned"}; `excluded`
      taken from the result when `stats` is not given).
    """

    def __init__(self, project_dir: str | os.PathLike, *, clock: Callable[[], datetime] | None = None):
        self.project_dir = Path(project_dir)
        self._clock = clock or (lambda: datetime.now(timezone.utc))
        self._lock = threading.Lock()
        self._stage: str | None = None
        self.last: HistoryEntry | None = None

    def begin(self, stage: str, provider: str | None = None, model: str | None = None) -> None:
        """provider and model: the role the stage uses (None for split)."""
        with self._lock:
            self._stage = stage
            self._started = stamp(self._clock())
            self._provider, self._model = provider, model

    def finish(self, status: str | None = None, stats: StageStats | None = None, *,
               split: Any = None) -> HistoryEntry | None:
        """Write the line of the current stage; never raises for I/O (logs a warning)."""
        with self._lock:
            if self._stage is None:
                return None
            split_counts = None
            excluded_from_split = None
            if split is not None:
                if isinstance(split, dict):
                    split_counts = {k: int(split[k]) for k in SPLIT_KEYS + ("contaminated",) if k in split}
                else:
                    split_counts = {"train": split.train_count, "eval": split.eval_count,
                                    "orphaned": split.orphaned, "kept_output_tokens": split.kept_output_tokens}
                    if split.contaminated_total:
                        split_counts["contaminated"] = split.contaminated_total
                    excluded_from_split = split.excluded_total
            if stats is None:
                if split_counts is None:
                    raise ValueError("finish() needs the stage's stats or its split")
                stats = StageStats(done=split_counts["train"] + split_counts["eval"],
                                   skipped=split_counts["orphaned"], excluded=excluded_from_split or 0)
            if status is None:
                status = "failed" if stats.failed > 0 else "ok"
            entry = HistoryEntry(
                stage=self._stage, started_at=self._started, ended_at=stamp(self._clock()), status=status,
                provider=self._provider, model=self._model, done=stats.done, skipped=stats.skipped,
                failed=stats.failed, excluded=stats.excluded, input_tokens=stats.usage.input_tokens,
                output_tokens=stats.usage.output_tokens, cost=stats.cost, split=split_counts,
                cost_estimate=stats.cost_estimate)
            self._stage = None
            self.last = entry
        try:
            append_entries(self.project_dir, [entry])
        except Exception as e:  # noqa: BLE001 - a history failure never fails a command
            log.warning("cannot record the %s stage in %s: %s", entry.stage, history_path(self.project_dir), e)
        return entry


# --- `history` output ---------------------------------------------------------------------------

def spent_nothing(e: HistoryEntry) -> bool:
    return e.input_tokens == 0 and e.output_tokens == 0


@dataclass
class Cost:
    """A sum of costs some of which may be unknown: kind is unknown, partial or known; `none`
    is the cost of runs that spent nothing (no token), which leaves any sum as it is."""

    kind: str = "unknown"
    value: float = 0.0

    @staticmethod
    def first(cost: float | None) -> "Cost":
        return Cost("unknown") if cost is None else Cost("known", cost)

    @property
    def complete(self) -> bool:
        return self.kind in ("known", "none")

    def merge(self, other: "Cost") -> "Cost":
        if self.kind == "none" or other.kind == "none":
            return other if self.kind == "none" else self
        if self.kind == "unknown" or other.kind == "unknown":
            known = other if self.kind == "unknown" else self
            return Cost("unknown") if known.kind == "unknown" else Cost("partial", known.value)
        if self.kind == "known" and other.kind == "known":
            return Cost("known", self.value + other.value)
        return Cost("partial", self.value + other.value)

    def __str__(self) -> str:
        if self.kind == "unknown":
            return "cost unknown"
        if self.kind in ("none", "known") and self.value == 0:
            return "$0"  # spent nothing
        return f"${self.value:.4f}" + ("+" if self.kind == "partial" else "")

    def to_json(self) -> float | None:
        return None if self.kind == "unknown" else round(self.value, 10)


@dataclass
class Total:
    runs: int = 0
    done: int = 0
    failed: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: Cost = field(default_factory=lambda: Cost("none"))  # `none` leaves any sum as it is

    def add(self, e: HistoryEntry) -> None:
        # split calls no model, and a run that used no token (everything on disk already, as in
        # a nightly cron rerun) spent nothing: both cost nothing, rather than an unknown amount.
        nothing = e.stage == "split" or spent_nothing(e)
        cost = Cost("none") if nothing and e.cost is None else Cost.first(e.cost)
        self.cost = self.cost.merge(cost)
        self.runs += 1
        # Every split rewrites the dataset: its examples are those of the latest, not a sum.
        self.done = e.done if e.stage == "split" else self.done + e.done
        self.failed += e.failed
        self.input_tokens += e.input_tokens
        self.output_tokens += e.output_tokens

    def to_dict(self, *, counts: bool = True) -> dict:
        out: dict[str, Any] = {"runs": self.runs}
        if counts:
            out.update(done=self.done, failed=self.failed)
        out.update(input_tokens=self.input_tokens, output_tokens=self.output_tokens,
                   cost=self.cost.to_json(), cost_complete=self.cost.complete)
        return out


# What a stage's `done` counts: its items are not alike, so the grand total never adds them up.
UNITS = {"subtopics": "topics", "questions": "subtopics", "answers": "questions", "split": "examples"}


def totals(entries: list[HistoryEntry]) -> tuple[dict[str, Total], Total]:
    """Totals per stage (in stage order) and over everything (cost unknown when nothing ran).
    The grand total's done/failed stay 0: topics, subtopics and questions do not add up."""
    if not entries:
        return {}, Total(cost=Cost())
    per: dict[str, Total] = {}
    for e in entries:
        per.setdefault(e.stage, Total()).add(e)
    per = {s: per[s] for s in STAGES if s in per}
    all_ = Total()
    for t in per.values():
        all_.cost = all_.cost.merge(t.cost)
        all_.runs += t.runs
        all_.input_tokens += t.input_tokens
        all_.output_tokens += t.output_tokens
    return per, all_


def _total_line(name: str, t: Total) -> str:
    """`answers    2 run(s), 12 questions done, 0 failed; tokens …; $0.0120` (`split`: the
    examples of the latest split); the grand total (`name` total) counts runs, tokens and cost
    only."""
    if name == "total":
        counts = ""
    elif name == "split":
        counts = f", {t.done} examples in the latest, {t.failed} failed"
    else:
        counts = f", {t.done} {UNITS.get(name, 'items')} done, {t.failed} failed"
    return f"{name:<9}  {t.runs} run(s){counts}; tokens {t.input_tokens} in, {t.output_tokens} out; {t.cost}"


def entry_line(e: HistoryEntry) -> str:
    """One line of `history --all`, its cost last: `$0` when it used no token (split never does),
    `cost unknown` only when tokens were spent at a price nobody knew."""
    cost = Cost("none") if e.cost is None and (e.split is not None or spent_nothing(e)) else Cost.first(e.cost)
    if e.split is not None:
        kept = e.split.get("kept_output_tokens")
        return (f"{e.started_at}  {e.stage:<9}  {e.status:<11}  train {e.split['train']}, eval {e.split['eval']}, "
                f"excluded {e.excluded}, orphaned {e.split['orphaned']}"
                + ("" if kept is None else f"; {kept} output tokens kept") + f"; {cost}")
    note = " (backfilled)" if e.backfilled else ""
    return (f"{e.started_at}  {e.stage:<9}  {e.status:<11}  {e.model or '-'}  {e.done} done, {e.skipped} skipped, "
            f"{e.failed} failed, {e.excluded} excluded; tokens {e.input_tokens} in, {e.output_tokens} out; "
            f"{cost}{note}")


def format_history_lines(entries: list[HistoryEntry], all: bool = False) -> list[str]:  # noqa: A002
    """The lines of `overbrainer history` (totals) or `history --all` (one per execution)."""
    if not entries:
        return ["no stage has run yet"]
    if all:
        return realign([entry_line(e) for e in entries], cells=5)  # time, stage, status, model, counts
    per, total = totals(entries)
    share = kept_share(entries)
    kept = [] if share is None else [f"{'kept':<9}  {share.text()}"]
    return [_total_line(s, t) for s, t in per.items()] + [_total_line("total", total)] + kept


def history_report(entries: list[HistoryEntry], all: bool = False) -> dict:  # noqa: A002
    """The same facts as a dict, for `--json`."""
    if all:
        return {"entries": [e.to_dict() for e in entries]}
    per, total = totals(entries)
    share = kept_share(entries)
    return {"stages": {s: t.to_dict() for s, t in per.items()}, "total": total.to_dict(counts=False),
            "kept": None if share is None else share.data()}


# --- The kept share (the module docstring's last paragraph).


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
    """The share from the history's lines (`HistoryEntry`), or None before a split that counted its
    kept tokens."""
    paid = 0
    kept = None
    for e in entries:
        paid += e.output_tokens
        if e.split is not None and "kept_output_tokens" in e.split:
            kept = e.split["kept_output_tokens"]
    return None if kept is None else KeptShare(kept, paid)
