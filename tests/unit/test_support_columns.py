"""Columns of `history --all` and `runs ls` start at the same place on every line."""

from overbrainer.dataset.accounting.history import HistoryEntry, format_history_lines
from overbrainer.support.fmt import plural, realign, table


def _starts(line, *words):
    return [line.index(w) for w in words]


def test_history_all_aligns_every_column_whatever_the_model_name():
    def entry(stage, model, status="ok"):
        return HistoryEntry(stage, "2026-09-27T10:00:00Z", "2026-09-27T10:00:01Z", status, model=model, done=2)

    split = HistoryEntry("split", "2026-09-27T11:00:00Z", "2026-09-27T11:00:01Z", "ok",
                         split={"train": 9, "eval": 1, "orphaned": 0})
    lines = format_history_lines([entry("subtopics", "qwen/qwen3-235b", "interrupted"),
                                  entry("answers", "deepseek/deepseek-r1"), split], all=True)
    counts = [line.index("2 done") if "done" in line else line.index("train") for line in lines]
    assert len(set(counts)) == 1, lines
    assert lines[2].split()[:4] == ["2026-09-27T11:00:00Z", "split", "ok", "-"]


def test_table_pads_every_column_but_the_last():
    assert table([["a", "bbb", "c"], ["aaaa", "b", "cc", "extra"]]) == ["a     bbb  c", "aaaa  b    cc  extra"]
    assert realign(["x  y  z", "xx  z"], cells=3) == ["x   y  z", "xx  -  z"]


def test_plural():
    assert [plural(n, "subtopic") for n in (0, 1, 2)] == ["0 subtopics", "1 subtopic", "2 subtopics"]
    assert plural(2, "entry") == "2 entries"
