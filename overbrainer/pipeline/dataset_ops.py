"""The flows of `history` and `dataset stats|reject`: read or prune the data files and give
back (text, data) for the front end's report."""

from __future__ import annotations

from pathlib import Path


def history_view(project_dir: Path, *, all_runs: bool = False) -> tuple[str, dict]:
    """`history [--all]`: totals per stage (or one line per execution). Reads only."""
    from overbrainer.dataset.history import format_history_lines, history_report, read_history

    entries = read_history(project_dir)
    text = "\n".join(format_history_lines(entries, all=all_runs))
    return text, history_report(entries, all=all_runs)


def stats_view(project_dir: Path, config) -> tuple[str, dict]:
    """`dataset stats`: per topic subtopics, questions, answered, excluded by reason; tokens and
    cost so far. Reads only (no lock)."""
    from overbrainer.dataset.stats import dataset_stats

    stats = dataset_stats(project_dir, list(config.topics) if config is not None else None)
    return "\n".join(stats.lines()), stats.to_dict()


def reject_item(project_dir: Path, item_id: str) -> tuple[str, dict]:
    """`dataset reject ID`: the caller holds the project lock."""
    from overbrainer.dataset.reject import reject

    result = reject(project_dir, item_id)
    return result.line(), result.to_dict()
