"""Reading a run's `metrics.jsonl` (docs/runs.md#metrics-plugin): lines, the summary, phase, pace.

* `line_reader()` splits a byte stream (read in chunks from an offset) into complete lines
  (support/lines.py's reader in text mode).
* `parse_record(line)` checks one line against the plugin's format (`begin log eval end stage`).
* `MetricsSummary` folds the records: step, loss, eval loss, phase, pace and time left.
"""

from __future__ import annotations

import json
import logging
import math
import os
from dataclasses import dataclass, field
from typing import Any, Iterable

from overbrainer.support.lines import LineReader

log = logging.getLogger(__name__)

READ_LIMIT = 1 << 20  # bytes per read of metrics.jsonl
PLUGIN_EVENTS = ("begin", "log", "eval", "end")
_MAX_WARNINGS = 5


# --- bytes → lines ---------------------------------------------------------------------------

def line_reader(offset: int = 0, limit: int = READ_LIMIT) -> LineReader:
    """The reader of metrics.jsonl: text lines, `\r` or `\n` ends one, blank lines dropped."""
    return LineReader(offset, limit, text=True)


def read_lines(path: str | os.PathLike) -> Iterable[str]:
    """Every line of a local metrics file (missing file: none), the unterminated tail included."""
    reader = line_reader()
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        return
    with f:
        while chunk := f.read(READ_LIMIT):
            yield from reader.feed(chunk)
    yield from reader.finish()


# --- one record ------------------------------------------------------------------------------

def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return (isinstance(v, (int, float)) and not isinstance(v, bool)) and math.isfinite(v)


def _opt(check, v: Any) -> bool:
    return v is None or check(v)


def parse_record(line: str | bytes) -> dict[str, Any] | None:
    """The record of a line, or None when it is not valid JSON of a known kind and shape."""
    try:
        obj = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(obj, dict) or not _opt(_is_num, obj.get("time")):
        return None
    kind = obj.get("event")
    if kind == "begin":
        ok = _opt(_is_int, obj.get("max_steps"))
    elif kind == "log":
        ok = _is_int(obj.get("step")) and _opt(_is_int, obj.get("max_steps")) and all(
            _opt(_is_num, obj.get(k)) for k in ("epoch", "loss", "eval_loss", "learning_rate", "grad_norm"))
    elif kind == "eval":
        ok = _is_int(obj.get("step")) and _opt(_is_int, obj.get("total"))
    elif kind == "end":
        ok = _is_int(obj.get("step"))
    elif kind == "stage":
        ok = isinstance(obj.get("name"), str) and bool(obj["name"])
    else:
        ok = False
    return obj if ok else None


# --- the fold --------------------------------------------------------------------------------

@dataclass
class Phases:
    """What the job is doing now, from the marks seen so far."""

    stage: str | None = None
    eval_mark: tuple[int, int | None] | None = None  # (step, total) of an eval with no later log
    compare_mark: tuple[int, int | None] | None = None
    ended: bool = False
    step: int = 0
    max_steps: int | None = None

    def add(self, rec: dict[str, Any]) -> None:
        kind = rec["event"]
        if kind == "stage":
            self.stage = rec["name"]
            self.eval_mark = self.compare_mark = None
        elif kind == "eval":
            mark = (rec["step"], rec.get("total"))
            if self.stage == "compare":
                self.compare_mark = mark
            else:
                self.eval_mark = mark
        elif kind == "log":
            self.eval_mark = None
            self.step = max(self.step, rec["step"])
            self.max_steps = rec.get("max_steps") or self.max_steps
        elif kind == "begin":
            self.max_steps = rec.get("max_steps") or self.max_steps
        elif kind == "end":
            self.ended = True
            self.step = max(self.step, rec["step"])

    def phase(self, exited: bool = False) -> str:
        if exited:
            return "retrieving results"
        if self.stage == "merge":
            return "merging adapter"
        if self.stage == "export":
            return "exporting GGUF"
        if self.stage == "compare":
            return "starting llama-server" if self.compare_mark is None else f"answering {_of(*self.compare_mark)}"
        ended = self.ended or (self.max_steps is not None and self.max_steps > 0 and self.step >= self.max_steps)
        if self.eval_mark is not None:
            what = _of(*self.eval_mark)
            return f"finalizing (evaluation {what})" if ended else f"evaluating {what}"
        if ended:
            return "finalizing (saving model)"
        return "training"


def _of(step: int, total: int | None) -> str:
    return f"{step}/{total}" if total else str(step)


@dataclass
class MetricsSummary:
    """The fold of a run's metrics lines. `lines` counts plugin lines (begin/log/eval/end), not
    stage lines; `malformed` counts lines that are not valid records (skipped, warned)."""

    lines: int = 0
    malformed: int = 0
    last_train: dict[str, Any] | None = None  # the last `log` that carried a loss
    eval_loss: float | None = None
    step: int = 0
    max_steps: int | None = None
    epoch: float | None = None
    phases: Phases = field(default_factory=Phases)
    first_train: dict[str, Any] | None = None  # the first `log` that carried a loss (pace)
    first_time: float | None = None  # the earliest and latest `time` of the plugin lines
    last_time: float | None = None
    timed: int = 0  # plugin lines with a `time`

    def feed(self, line: str | bytes) -> dict[str, Any] | None:
        """Fold one line; returns its record, or None for a malformed line."""
        rec = parse_record(line)
        if rec is None:
            self.malformed += 1
            if self.malformed <= _MAX_WARNINGS:
                log.warning("metrics line %d is not a known metrics record: skipped",
                            self.lines + self.malformed)
            return None
        self.add(rec)
        return rec

    def feed_all(self, lines: Iterable[str | bytes]) -> "MetricsSummary":
        for line in lines:
            self.feed(line)
        return self

    def add(self, rec: dict[str, Any]) -> None:
        kind = rec["event"]
        if kind in PLUGIN_EVENTS:
            self.lines += 1
            t = rec.get("time")
            if t is not None:
                self.timed += 1
                self.first_time = t if self.first_time is None else min(self.first_time, t)
                self.last_time = t if self.last_time is None else max(self.last_time, t)
        if kind == "begin":
            self.max_steps = rec.get("max_steps") or self.max_steps
        elif kind == "log":
            self.step = max(self.step, rec["step"])
            self.max_steps = rec.get("max_steps") or self.max_steps
            if rec.get("epoch") is not None:
                self.epoch = rec["epoch"]
            if rec.get("loss") is not None:
                self.last_train = rec
                if self.first_train is None:
                    self.first_train = rec
            if rec.get("eval_loss") is not None:
                self.eval_loss = rec["eval_loss"]
        elif kind == "end":
            self.step = max(self.step, rec["step"])
        self.phases.add(rec)

    def phase(self, exited: bool = False) -> str:
        return self.phases.phase(exited)

    def pace(self) -> float | None:
        """Steps per second between the first and the latest loss-carrying logs (plugin clock)."""
        a, b = self.first_train, self.last_train
        if not a or not b or a.get("time") is None or b.get("time") is None:
            return None
        steps, secs = b["step"] - a["step"], b["time"] - a["time"]
        if steps <= 0 or secs <= 0:
            return None
        return steps / secs

    def span(self) -> float | None:
        """Seconds from the first to the last plugin line (the plugin's clock); None with fewer
        than two timed lines."""
        if self.timed < 2 or self.first_time is None or self.last_time is None:
            return None
        return self.last_time - self.first_time

    def time_left(self) -> float | None:
        """Seconds until `max_steps` at the current pace, or None when unknown."""
        rate = self.pace()
        if rate is None or not self.max_steps:
            return None
        return max(0, self.max_steps - self.step) / rate

    def describe(self) -> str:
        """`step 1200/1200, epoch 3.00, loss 0.4123, eval_loss 0.5012` (only what is known)."""
        parts = [f"step {self.step}/{self.max_steps}" if self.max_steps else f"step {self.step}"]
        if self.epoch is not None:
            parts.append(f"epoch {self.epoch:.2f}")
        if self.last_train is not None:
            parts.append(f"loss {self.last_train['loss']:.4f}")
        if self.eval_loss is not None:
            parts.append(f"eval_loss {self.eval_loss:.4f}")
        return ", ".join(parts)


def summarize_file(path: str | os.PathLike) -> MetricsSummary:
    """The summary of a local metrics.jsonl (missing file: an empty summary)."""
    return MetricsSummary().feed_all(read_lines(path))

