"""What the Training and Results views show: the project's runs (state, step, loss, time left,
pod spend), one run's detail with its loss series, and the read-only results of exports,
compares and pushes.

A run's progress comes from its `runs/<id>/metrics.jsonl` (read again only when the file
changed) or, while the TUI follows it, from the bus's events, whichever saw more: a job on an
SSH target or a pod writes its metrics there, and they reach this machine only once retrieved.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from overbrainer.errors import OverbrainerError
from overbrainer.jobs.records import run_costs
from overbrainer.jobs.run_record import RunPlace, list_runs
from overbrainer.support import fmt
from overbrainer.support.record_file import RecordFile
from overbrainer.train.metrics import READ_LIMIT, MetricsSummary, line_reader
from overbrainer.tui.live import LOSSES, Live


@dataclass(frozen=True)
class RunRow:
    id: str
    state: str
    target: str
    created: str
    step: str
    loss: str
    eta: str
    pod: str


class _Followed:
    """One metrics.jsonl read so far: where the reading stopped, and what it gave."""

    def __init__(self, inode: int):
        self.inode = inode
        self.reader = line_reader()
        self.summary = MetricsSummary()
        self.losses: list[float] = []

    def add(self, line: str) -> None:
        rec = self.summary.feed(line)
        if rec is not None and rec["event"] == "log" and rec.get("loss") is not None:
            self.losses.append(float(rec["loss"]))
            del self.losses[:-LOSSES]


class MetricsCache:
    """The summary and loss series of each metrics.jsonl, read on from where it was left (a
    growing file is never read again from its start; a replaced or shorter one is)."""

    def __init__(self) -> None:
        self._seen: dict[Path, _Followed] = {}

    def get(self, path: Path) -> tuple[MetricsSummary, list[float]]:
        try:
            st = os.stat(path)
        except OSError:
            return MetricsSummary(), []
        seen = self._seen.get(path)
        if seen is None or seen.inode != st.st_ino or st.st_size < seen.reader.offset:
            seen = self._seen[path] = _Followed(st.st_ino)
        if st.st_size > seen.reader.offset:
            try:
                with open(path, "rb") as f:
                    f.seek(seen.reader.offset)
                    while chunk := f.read(READ_LIMIT):
                        for line in seen.reader.feed(chunk):
                            seen.add(line)
            except OSError:
                pass  # read again at the next refresh
        return seen.summary, seen.losses


def progress(place: RunPlace, cache: MetricsCache, live: Live) -> tuple[MetricsSummary, list[float]]:
    """The run's summary and losses: its local metrics file's, or the events' when they saw more."""
    summary, losses = cache.get(place.dir / "metrics.jsonl")
    seen = live.runs.get(place.run_id)
    if seen is not None and (seen.summary.step > summary.step or len(seen.losses) > len(losses)):
        return seen.summary, seen.losses
    return summary, losses


def _step(summary: MetricsSummary) -> str:
    if not summary.lines:
        return "-"
    return f"{summary.step}/{summary.max_steps}" if summary.max_steps else str(summary.step)


def _eta(record: Any, summary: MetricsSummary) -> str:
    left = summary.time_left() if record.state == "running" else None
    return fmt.duration(left) if left is not None else "-"


def _pod(run_dir: Path) -> tuple[str, dict | None]:
    found = run_costs(run_dir)
    if found is None:
        return "-", None
    fields = found[1]
    if fields.get("pod_id") is None:
        return found[0], fields
    return fmt.about_usd(fields.get("spend")), fields


def rows(runs_dir: Path, cache: MetricsCache, live: Live) -> list[RunRow]:
    """One row per readable run, newest first."""
    out = []
    for record in reversed(list_runs(runs_dir)):
        summary, _ = progress(RunPlace(runs_dir, record.id), cache, live)
        loss = f"{summary.last_train['loss']:.4f}" if summary.last_train else "-"
        out.append(RunRow(record.id, record.state, record.target, record.created, _step(summary), loss,
                          _eta(record, summary), _pod(Path(runs_dir) / record.id)[0]))
    return out


def detail(place: RunPlace, cache: MetricsCache, live: Live) -> tuple[list[str], list[float]]:
    """The lines beside the run list for one run, and its loss series (for the chart)."""
    try:
        record = place.load()
    except OverbrainerError as e:
        return [str(e)], []
    summary, losses = progress(place, cache, live)
    seen = live.runs.get(place.run_id)
    lines = [f"run {record.id}: {record.state} on target `{record.target}`, created {record.created}"]
    phase = seen.phase() if seen is not None and seen.watched else None
    lines.append(f"progress: {summary.describe()}" + (f"; {phase}" if phase else ""))
    lines.append(f"time left: {_eta(record, summary)}")
    pod_text, fields = _pod(place.dir)
    if fields is not None:
        lines.append(f"pod: {fields.get('pod_id') or '-'} {fields.get('state') or ''}, spend {pod_text}")
    lines += _live_lines(seen)
    if record.snapshot is not None:
        lines.append(f"snapshot: step {record.snapshot.step} ({record.snapshot.reason}) in "
                     f"runs/{record.id}/{record.snapshot.checkpoint}")
    if record.resumed_from:
        lines.append(f"resumed from {record.resumed_from}")
    if record.message_shown:
        lines.append(f"message: {record.message_shown}")
    return lines, losses


def _live_lines(seen: Any) -> list[str]:
    if seen is None:
        return []
    out = []
    if seen.watched:
        out.append("followed by this TUI (d detaches: the job goes on)")
    if seen.pod is not None and (seen.provisioning or not seen.watched):
        pod = seen.pod
        out.append(f"pod {pod.pod_id or ''} {pod.phase.replace('_', ' ')}"
                   + (f" ({pod.gpu})" if pod.gpu else "") + (f": {pod.message}" if pod.message else ""))
    if seen.transfer is not None:
        direction, done, total = seen.transfer
        out.append(f"{direction}: {fmt.size(done)}" + (f" of {fmt.size(total)}" if total else ""))
    return out


def results(runs_dir: Path) -> list[str]:
    """The exports, compares and pushes of every run, newest run first (read-only)."""
    out: list[str] = []
    for record in reversed(list_runs(runs_dir)):
        run_dir = Path(runs_dir) / record.id
        found = _exports(run_dir) + _compares(run_dir) + _push(run_dir)
        if found:
            out += [f"{record.id} ({record.state})"] + [f"  {line}" for line in found]
    return out or ["no export, compare or push yet"]


def _read(path: Path) -> dict | None:
    try:
        return RecordFile("record").read_if_any(path)
    except OverbrainerError as e:
        return {"unreadable": str(e)}


def _described(kind: str, paths: list[Path], describe) -> list[str]:
    """One line per record found: `describe(path, data)`, or why it cannot be read."""
    out = []
    for path in paths:
        data = _read(path)
        if data is not None:
            out.append(f"{kind}: {data['unreadable']}" if "unreadable" in data else describe(path, data))
    return out


def _exports(run_dir: Path) -> list[str]:
    return _described("export", [run_dir / "export.json", *sorted(run_dir.glob("exports/*/export.json"))],
                      lambda path, d: f"export: {d.get('file')} ({d.get('quantize') or '?'}), {d.get('created') or ''}")


def _compare_line(path: Path, data: dict) -> str:
    s = data.get("summary") or {}
    rate, interval = s.get("win_or_tie"), s.get("win_or_tie_interval")
    text = f"compare {path.parent.name}: win or tie " + ("-" if rate is None else f"{rate * 100:.1f}%")
    if interval:
        text += f" (95 % interval {interval[0] * 100:.1f}% to {interval[1] * 100:.1f}%)"
    return text + (f", {s.get('wins', 0)} wins / {s.get('ties', 0)} ties / {s.get('losses', 0)} losses, "
                   f"judge {data.get('judge')}")


def _compares(run_dir: Path) -> list[str]:
    return _described("compare", sorted(run_dir.glob("compares/*/compare.json")), _compare_line)


def _push(run_dir: Path) -> list[str]:
    return _described("push", [run_dir / "hub" / "push.json"],
                      lambda path, d: f"push: {d.get('repo')} {d.get('state')}"
                      + (f" ({d['url']})" if d.get("url") else ""))
