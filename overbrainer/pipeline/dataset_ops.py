"""The flows of `history` and `dataset stats|gated|reject`: read or prune the data files and report
the result through the session, `flow(session, *, options)` like every flow."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from overbrainer.dataset.answer_index import index_answers
from overbrainer.dataset.accounting.history import format_history_lines, history_report, read_history
from overbrainer.dataset.reject import reject
from overbrainer.dataset.paths import ProjectPaths
from overbrainer.dataset.accounting.stats import dataset_stats
from overbrainer.dataset.quality.verdicts import gated_answers
from overbrainer.pipeline.gate import gate_settings
from overbrainer.support.fmt import plural

if TYPE_CHECKING:
    from overbrainer.front.session import Session


def history_flow(session: "Session", *, all_runs: bool = False, pods: tuple[str, dict[str, Any]] | None = None) -> None:
    """`history [--all]`: totals per stage (or one line per execution), then `pods` (what the
    training pods cost: a line and its fields) when given. Reads only, and reads no configuration
    (the session may have none: history works even when overbrainer.toml does not)."""
    entries = read_history(session.project_dir)
    text = "\n".join(format_history_lines(entries, all=all_runs))
    data = history_report(entries, all=all_runs)
    if pods is not None:
        text = f"{text}\n{pods[0]}" if text else pods[0]
        data = {**data, "pods": pods[1]}
    session.report(text, data)


def stats_flow(session: "Session") -> None:
    """`dataset stats`: per topic subtopics, questions, answered, excluded by reason; tokens and
    cost so far. Reads only (no lock)."""
    config = session.config
    stats = dataset_stats(session.project_dir, list(config.topics), gate_settings(config, session.project_dir))
    session.report("\n".join(stats.lines()), stats.to_dict())


def gated_flow(session: "Session", *, topic: str | None = None) -> None:
    """`dataset gated [--topic NAME]`: the answers the gate dropped, with their reasons. Reads only."""
    config = session.config
    if topic is not None:
        config.topic(topic)  # `unknown topic` first
    paths = ProjectPaths(session.project_dir)
    rows = [(t, sub, v) for t, sub, v in gated_answers(paths, gate_settings(config, session.project_dir),
                                                       index_answers(paths.answers))
            if topic is None or t == topic]
    lines = [f"{v.id}  {t} / {sub}  {v.check}: {v.reason}" + (f": {v.detail}" if v.detail else "")
             for t, sub, v in rows]
    lines.append(f"{plural(len(rows), 'answer')} gated")
    data = {"gated": [{"id": v.id, "topic": t, "subtopic": sub, "check": v.check, "reason": v.reason,
                       "detail": v.detail, "score": v.score} for t, sub, v in rows], "count": len(rows)}
    session.report("\n".join(lines), data)


def reject_flow(session: "Session", *, item_id: str) -> None:
    """`dataset reject ID`: the caller holds the project lock."""
    result = reject(session.project_dir, item_id)
    session.report(result.line(), result.to_dict())
