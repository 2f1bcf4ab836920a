import json
import logging
from datetime import datetime, timedelta, timezone

import pytest

from overbrainer.dataset.accounting.history import (HistoryEntry, HistoryRecorder, append_entries, format_history_lines,
                                         history_path, history_report, read_history)
from overbrainer.dataset.split import split
from overbrainer.dataset.accounting.stages import StageStats
from overbrainer.support.usage import Usage


def clock():
    moments = iter(datetime(2026, 9, 27, 10, 0, s, tzinfo=timezone.utc) for s in range(0, 60, 30))
    return lambda: next(moments)


def lines(tmp_path):
    return history_path(tmp_path).read_text().splitlines()


def test_ok_line_has_exactly_the_spec_fields_in_order(tmp_path):
    rec = HistoryRecorder(tmp_path, clock=clock())
    rec.begin("answers", "openrouter", "deepseek/deepseek-r1")
    rec.finish(stats=StageStats(done=3, skipped=1, failed=0, excluded=1, usage=Usage(100, 50), cost=0.0042))
    assert lines(tmp_path) == [
        '{"stage":"answers","started_at":"2026-09-27T10:00:00Z","ended_at":"2026-09-27T10:00:30Z",'
        '"status":"ok","provider":"openrouter","model":"deepseek/deepseek-r1","done":3,"skipped":1,'
        '"failed":0,"excluded":1,"input_tokens":100,"output_tokens":50,"cost":0.0042}']


def test_failed_items_make_a_failed_line(tmp_path):
    rec = HistoryRecorder(tmp_path, clock=clock())
    rec.begin("questions", "p", "m")
    entry = rec.finish(stats=StageStats(done=1, failed=2))
    assert entry.status == "failed" and json.loads(lines(tmp_path)[0])["failed"] == 2


def test_interrupted_and_fatal_lines_carry_the_counts_reached(tmp_path):
    rec = HistoryRecorder(tmp_path, clock=clock())
    rec.begin("answers", "p", "m")
    reached = StageStats(done=1, skipped=1, failed=1, excluded=1, usage=Usage(11, 6), cost=0.5)
    entry = rec.finish("interrupted", reached)
    d = json.loads(lines(tmp_path)[0])
    assert (d["status"], d["done"], d["excluded"], d["skipped"], d["failed"]) == ("interrupted", 1, 1, 1, 1)
    assert (d["input_tokens"], d["output_tokens"], d["cost"]) == (11, 6, 0.5)
    assert entry.status == "interrupted"
    assert rec.finish("ok", reached) is None  # nothing begun: nothing written
    assert len(lines(tmp_path)) == 1


def test_split_line(tmp_path):
    rec = HistoryRecorder(tmp_path, clock=clock())
    rec.begin("split")
    rec.finish(split={"train": 9, "eval": 1, "orphaned": 2})
    d = json.loads(lines(tmp_path)[0])
    assert d["provider"] is None and d["model"] is None and d["status"] == "ok"
    assert d["split"] == {"train": 9, "eval": 1, "orphaned": 2} and d["done"] == 10 and d["skipped"] == 2
    assert list(d)[-1] == "split" and "backfilled" not in d


def test_split_line_from_a_split_result(tmp_path):
    from tests.unit.test_dataset_split import example, questions_for

    data = [example("s", i) for i in range(4)] + [example("s", 9, excluded="empty")]
    result = split(data, questions_for(data), ["t"], 0.25, 1)
    rec = HistoryRecorder(tmp_path)
    rec.begin("split")
    entry = rec.finish(split=result)
    assert entry.split == {"train": 3, "eval": 1, "orphaned": 0, "kept_output_tokens": 4 * data[0].meta.output_tokens}
    assert entry.excluded == 1


def test_a_write_failure_only_warns(tmp_path, caplog):
    (tmp_path / ".overbrainer").write_text("a file where the folder should be")
    rec = HistoryRecorder(tmp_path)
    rec.begin("subtopics", "p", "m")
    with caplog.at_level(logging.WARNING):
        entry = rec.finish(stats=StageStats(done=1))
    assert entry.done == 1 and "cannot record the subtopics stage" in caplog.text


def entry(stage, cost, status="ok", **kw):
    base = dict(done=2, failed=1, input_tokens=10, output_tokens=5)
    base.update(kw)
    return HistoryEntry(stage, "2026-09-27T10:00:00Z", "2026-09-27T10:01:00Z", status, "p", "m", cost=cost, **base)


def test_read_skips_malformed_lines(tmp_path, caplog):
    append_entries(tmp_path, [entry("questions", 1.0)])
    with open(history_path(tmp_path), "a") as f:
        f.write("not json\n")
        f.write('{"stage":"nope"}\n')
    append_entries(tmp_path, [entry("answers", None)])
    with open(history_path(tmp_path), "a") as f:
        f.write('{"stage":"answers","star')  # torn last line
    with caplog.at_level(logging.WARNING):
        got = read_history(tmp_path)
    assert [e.stage for e in got] == ["questions", "answers"]
    assert "skipping line 2" in caplog.text and "skipping line 3" in caplog.text
    assert read_history(tmp_path / "missing") == []


def test_round_trip_with_backfilled(tmp_path):
    e = entry("answers", None, backfilled=True)
    append_entries(tmp_path, [e])
    assert json.loads(lines(tmp_path)[0])["backfilled"] is True
    assert read_history(tmp_path) == [e]


def test_totals_output():
    entries = [entry("answers", 1.0), entry("answers", None), entry("questions", 0.25), entry("subtopics", None)]
    assert format_history_lines(entries) == [
        "subtopics  1 run(s), 2 topics done, 1 failed; tokens 10 in, 5 out; cost unknown",
        "questions  1 run(s), 2 subtopics done, 1 failed; tokens 10 in, 5 out; $0.2500",
        "answers    2 run(s), 4 questions done, 2 failed; tokens 20 in, 10 out; $1.0000+",
        # topics, subtopics and questions are not alike: the total never adds them up
        "total      4 run(s); tokens 40 in, 20 out; $1.2500+",
    ]
    assert format_history_lines([entry("answers", 0.002), entry("answers", 0.0022)])[-1].endswith("; $0.0042")
    assert format_history_lines([]) == ["no stage has run yet"]
    report = history_report(entries)
    assert report["total"]["cost"] == 1.25 and report["total"]["cost_complete"] is False
    assert "done" not in report["total"] and report["stages"]["answers"]["done"] == 4


def test_all_output():
    split_entry = HistoryEntry("split", "2026-09-27T11:00:00Z", "2026-09-27T11:00:00Z", "ok", excluded=3,
                               done=10, skipped=2, split={"train": 9, "eval": 1, "orphaned": 2})
    entries = [entry("answers", 0.5, status="interrupted"), entry("answers", None, backfilled=True), split_entry]
    assert format_history_lines(entries, all=True) == [
        "2026-09-27T10:00:00Z  answers  interrupted  m  2 done, 0 skipped, 1 failed, 0 excluded; "
        "tokens 10 in, 5 out; $0.5000",
        "2026-09-27T10:00:00Z  answers  ok           m  2 done, 0 skipped, 1 failed, 0 excluded; "
        "tokens 10 in, 5 out; cost unknown (backfilled)",
        "2026-09-27T11:00:00Z  split    ok           -  train 9, eval 1, excluded 3, orphaned 2; $0",
    ]
    assert len(history_report(entries, all=True)["entries"]) == 3


def test_timestamps_are_utc_rfc3339(tmp_path):
    local = timezone(timedelta(hours=2))
    rec = HistoryRecorder(tmp_path, clock=lambda: datetime(2026, 9, 27, 12, 0, 0, 123456, tzinfo=local))
    rec.begin("split")
    assert rec.finish(split={"train": 0, "eval": 0, "orphaned": 0}).started_at == "2026-09-27T10:00:00Z"


def test_split_lines_cost_nothing_in_the_totals():
    from overbrainer.dataset.accounting.history import HistoryEntry, format_history_lines

    base = dict(started_at="2026-01-01T00:00:00Z", ended_at="2026-01-01T00:00:01Z", status="ok",
                skipped=0, failed=0, excluded=0)
    answers = HistoryEntry(stage="answers", provider="p", model="m", done=2, input_tokens=10,
                           output_tokens=20, cost=0.5, **base)
    split = HistoryEntry(stage="split", provider=None, model=None, done=2, input_tokens=0, output_tokens=0,
                         cost=None, split={"train": 1, "eval": 1, "orphaned": 0}, **base)
    lines = format_history_lines([answers, split])
    assert lines[-1].endswith("; $0.5000")


def test_split_lines_without_kept_tokens_still_read_and_the_share_waits_for_one_with_them():
    from overbrainer.dataset.accounting.history import kept_share

    old = {"stage": "split", "started_at": "t", "ended_at": "t", "status": "ok", "provider": None, "model": None,
           "done": 4, "skipped": 0, "failed": 0, "excluded": 0, "input_tokens": 0, "output_tokens": 0,
           "cost": None, "split": {"train": 3, "eval": 1, "orphaned": 0}}
    paid = dict(old, stage="answers", split=None, output_tokens=900)
    del paid["split"]
    entries = [HistoryEntry.from_dict(d) for d in (paid, old)]
    assert entries[1].to_dict() == old and kept_share(entries) is None  # an older line: no share yet
    new = dict(old, split={"train": 3, "eval": 1, "orphaned": 0, "kept_output_tokens": 600})
    entries.append(HistoryEntry.from_dict(new))
    assert entries[2].to_dict() == new
    share = kept_share(entries)
    assert (share.kept, share.paid) == (600, 900)
    assert share.text() == "600 of 900 paid output tokens (66.7%) are in train/eval examples"
    with pytest.raises(ValueError, match="kept_output_tokens"):
        HistoryEntry.from_dict(dict(old, split={"train": 3, "eval": 1, "orphaned": 0, "kept_output_tokens": -1}))
