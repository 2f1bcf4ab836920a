"""The flows of `history` and `dataset stats|reject`: read or prune the data files and report
the result through the session, `flow(session, config, *, options)` like every flow."""

from __future__ import annotations

from typing import TYPE_CHECKING

from overbrainer.dataset.history import format_history_lines, history_report, read_history
from overbrainer.dataset.reject import reject
from overbrainer.dataset.stats import dataset_stats
from overbrainer.pipeline.gate import gate_settings

if TYPE_CHECKING:
    from overbrainer.front.session import Session


def history_flow(session: "Session", config=None, *, all_runs: bool = False,
                 pods: tuple[str, dict] | None = None) -> None:
    """`history [--all]`: totals per stage (or one line per execution), then `pods` (what the
    training pods cost: a line and its fields) when given. Reads only, and reads no configuration
    (`config` may be None: history works even when overbrainer.toml does not)."""
    entries = read_history(session.project_dir)
    text = "\n".join(format_history_lines(entries, all=all_runs))
    data = history_report(entries, all=all_runs)
    if pods is not None:
        text = f"{text}\n{pods[0]}" if text else pods[0]
        data = {**data, "pods": pods[1]}
    session.report(text, data)


def stats_flow(session: "Session", config) -> None:
    """`dataset stats`: per topic subtopics, questions, answered, excluded by reason; tokens and
    cost so far. Reads only (no lock)."""
    gate = gate_settings(config, session.project_dir) if config is not None else None
    stats = dataset_stats(session.project_dir, list(config.topics) if config is not None else None, gate)
    session.report("\n".join(stats.lines()), stats.to_dict())


def reject_flow(session: "Session", config, *, item_id: str) -> None:
    """`dataset reject ID`: the caller holds the project lock."""
    result = reject(session.project_dir, item_id)
    session.report(result.line(), result.to_dict())
