"""Review of the dataset pipeline: `history` totals after resumed runs that spent nothing."""

from __future__ import annotations

from overbrainer.dataset.accounting.history import HistoryEntry, format_history_lines, history_report


def _entry(stage, cost, tokens):
    return HistoryEntry(stage=stage, started_at="2026-01-01T00:00:00Z", ended_at="2026-01-01T00:00:01Z",
                        status="ok", provider="p", model="m", done=0, skipped=4, input_tokens=tokens,
                        output_tokens=tokens, cost=cost)


def test_a_rerun_that_used_no_token_keeps_the_total_cost_complete():
    # A nightly `run` after the dataset is complete skips everything: its lines carry no cost
    # (no priced request was made) but nothing was spent, so the totals stay exact.
    entries = [_entry("answers", 0.5, 100), _entry("answers", None, 0), _entry("answers", None, 0)]
    lines = format_history_lines(entries)
    assert lines[0] == "answers    3 run(s), 0 questions done, 0 failed; tokens 100 in, 100 out; $0.5000"
    assert lines[-1].endswith("; $0.5000")
    assert history_report(entries)["total"]["cost_complete"] is True
    # Its own line says what its summary said: it spent nothing.
    assert format_history_lines(entries, all=True)[1].endswith("tokens 0 in, 0 out; $0")


def test_unpriced_tokens_still_make_the_total_partial_or_unknown():
    assert format_history_lines([_entry("answers", 0.5, 100), _entry("answers", None, 7)])[-1].endswith("$0.5000+")
    for entries in ([_entry("answers", None, 7), _entry("answers", None, 0)],
                    [_entry("answers", None, 0), _entry("answers", None, 7)]):
        assert format_history_lines(entries)[-1].endswith("; cost unknown")
    # A stage that spent nothing shows $0.
    assert format_history_lines([_entry("questions", None, 0)]) == [
        "questions  1 run(s), 0 subtopics done, 0 failed; tokens 0 in, 0 out; $0",
        "total      1 run(s); tokens 0 in, 0 out; $0"]
    assert format_history_lines([_entry("answers", 0.0, 0)])[-1].endswith("; $0")
