"""Client-side metrics (docs/runs.md#metrics-plugin): line splitting, the summary fold, phases, pace."""

from __future__ import annotations

import json
import logging

import pytest

from overbrainer.front.events import Mark, Metric, metrics_event
from overbrainer.support import fmt
from overbrainer.train import metrics as m


def j(**kw):
    return json.dumps(kw)


def begin(max_steps=4, t=100):
    return j(event="begin", time=t, max_steps=max_steps)


def log_line(step, t, loss=None, max_steps=4, **kw):
    rec = dict(event="log", time=t, step=step, epoch=step / 2, max_steps=max_steps)
    if loss is not None:
        rec["loss"] = loss
    rec.update(kw)
    return json.dumps(rec)


# --- LineReader ------------------------------------------------------------------------------

def test_lines_split_across_chunks_and_tail_waits():
    r = m.line_reader()
    assert r.feed(b'{"a":1}\n{"b"') == ['{"a":1}']
    assert len(r.pending) == 4 and r.offset == 12
    assert r.feed(b':2}\r\n\n{"c":3}\r') == ['{"b":2}', '{"c":3}']
    assert len(r.pending) == 0 and r.offset == 26
    assert r.feed(b"tail") == [] and r.finish() == ["tail"]


def test_a_long_line_without_terminator_is_cut_at_a_utf8_boundary():
    r = m.line_reader(limit=8)
    out = r.feed("abcdeé€x".encode())  # é is 2 bytes, € 3: byte 8 falls inside €
    assert out == ["abcdeé"]
    assert r.feed(b"\n") == ["€x"]


def test_multibyte_split_between_chunks_is_decoded_whole():
    data = "ü€\n".encode()
    r = m.line_reader()
    assert r.feed(data[:2]) == [] and r.feed(data[2:]) == ["ü€"]


def test_read_lines_of_a_file(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(b"one\ntwo\rthree")
    assert list(m.read_lines(path)) == ["one", "two", "three"]
    assert list(m.read_lines(tmp_path / "missing")) == []


# --- parse_record ----------------------------------------------------------------------------

@pytest.mark.parametrize("line", [
    "not json", "[1]", "{}", j(event="mystery", time=1), j(event="log", time=1),
    j(event="log", time=1, step="3"), j(event="log", time=1, step=True), j(event="log", time="x", step=1),
    j(event="log", time=1, step=1, loss="high"), j(event="eval", time=1), j(event="stage", time=1, name=""),
    j(event="begin", time=1, max_steps=2.5), '{"event":"log","time":1,"step":1,"loss":NaN}',
])
def test_malformed_records(line):
    assert m.parse_record(line) is None


def test_valid_records():
    assert m.parse_record(log_line(1, 5, loss=1.0, grad_norm=None))["loss"] == 1.0
    assert m.parse_record(j(event="stage", name="merge", time=7))["name"] == "merge"
    assert m.parse_record(j(event="eval", time=1, step=1, total=None))["total"] is None
    assert m.parse_record(j(event="end", time=1.5, step=4, extra="ignored"))["step"] == 4


# --- the fold --------------------------------------------------------------------------------

def test_summary_folds_a_run_with_malformed_unknown_and_stage_lines(caplog):
    lines = [
        j(event="stage", name="train", time=99),
        begin(),
        "garbage",
        log_line(1, 100, loss=2.0, learning_rate=2e-4),
        j(event="future_kind", time=101),
        log_line(2, 102, loss=1.5),
        j(event="eval", time=103, step=1, total=10),
        log_line(2, 104, eval_loss=1.75),
        log_line(3, 106, loss=1.25),
        j(event="end", time=108, step=4),
        j(event="stage", name="merge", time=109),
    ]
    with caplog.at_level(logging.WARNING, logger="overbrainer.train.metrics"):
        s = m.MetricsSummary().feed_all(lines)
    assert s.lines == 7 and s.malformed == 2
    assert s.step == 4 and s.max_steps == 4 and s.eval_loss == 1.75
    assert s.last_train["step"] == 3 and s.last_train["loss"] == 1.25
    assert s.describe() == "step 4/4, epoch 1.50, loss 1.2500, eval_loss 1.7500"
    assert s.phase() == "merging adapter"
    assert len([r for r in caplog.records if "skipped" in r.getMessage()]) == 2
    assert "garbage" not in caplog.text


def test_summary_feed_returns_the_record_or_none():
    s = m.MetricsSummary()
    assert s.feed(begin())["event"] == "begin"
    assert s.feed(b"\xff\xfe") is None and s.malformed == 1


def test_empty_and_minimal_descriptions():
    assert m.MetricsSummary().describe() == "step 0"
    s = m.MetricsSummary().feed_all([j(event="log", time=1, step=7)])
    assert s.describe() == "step 7" and s.last_train is None


def test_summarize_file(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text("\n".join([begin(2), log_line(1, 1, loss=1.0, max_steps=2), log_line(2, 2, loss=0.5, max_steps=2)]))
    s = m.summarize_file(path)
    assert s.lines == 3 and s.describe() == "step 2/2, epoch 1.00, loss 0.5000"
    assert m.summarize_file(tmp_path / "none").lines == 0


# --- phases ----------------------------------------------------------------------------------

def phase_after(lines, exited=False):
    return m.MetricsSummary().feed_all(lines).phase(exited)


def test_phases():
    base = [j(event="stage", name="train", time=1), begin(4)]
    assert phase_after([]) == "training"
    assert phase_after(base + [log_line(1, 2, loss=1.0)]) == "training"
    assert phase_after(base + [j(event="eval", time=3, step=120, total=1200)]) == "evaluating 120/1200"
    assert phase_after(base + [j(event="eval", time=3, step=5, total=None)]) == "evaluating 5"
    assert phase_after(base + [j(event="eval", time=3, step=5, total=9), log_line(2, 4, loss=1.0)]) == "training"
    assert phase_after(base + [j(event="end", time=5, step=4)]) == "finalizing (saving model)"
    assert phase_after(base + [log_line(4, 5, loss=1.0)]) == "finalizing (saving model)"  # old runs
    assert phase_after(base + [log_line(4, 5, loss=1.0), j(event="eval", time=6, step=3, total=9)]) \
        == "finalizing (evaluation 3/9)"
    assert phase_after(base + [j(event="stage", name="export", time=9)]) == "exporting GGUF"
    assert phase_after(base + [j(event="stage", name="compare", time=9)]) == "starting llama-server"
    assert phase_after(base + [j(event="stage", name="compare", time=9),
                               j(event="eval", time=10, step=2, total=8)]) == "answering 2/8"
    assert phase_after(base, exited=True) == "retrieving results"


# --- pace and time left ----------------------------------------------------------------------

def test_pace_and_time_left_use_first_and_latest_loss_logs():
    s = m.MetricsSummary().feed_all([
        begin(100, t=0),
        log_line(10, 50, max_steps=100),        # no loss: not a pace point
        log_line(10, 100, loss=2.0, max_steps=100),
        log_line(20, 110, eval_loss=1.0, max_steps=100),
        log_line(30, 120, loss=1.0, max_steps=100),
    ])
    assert s.pace() == pytest.approx(1.0)
    assert s.time_left() == pytest.approx(70.0)


def test_pace_unknown_without_two_points_or_max_steps():
    assert m.MetricsSummary().pace() is None
    one = m.MetricsSummary().feed_all([log_line(1, 1, loss=1.0)])
    assert one.pace() is None and one.time_left() is None
    no_max = m.MetricsSummary().feed_all([log_line(1, 1, loss=1.0, max_steps=None),
                                          log_line(3, 2, loss=1.0, max_steps=None)])
    assert no_max.pace() == 2.0 and no_max.time_left() is None


def test_format_helpers():
    rec = m.parse_record(log_line(12, 1, loss=1.23449, max_steps=40, learning_rate=2e-4, grad_norm=0.8123))
    rec["epoch"] = 0.9
    # How the front end words a log record, once it is an event.
    from overbrainer.front.render_lines import describe_metric

    assert describe_metric(metrics_event("r", rec)) == \
        "step 12/40 (30%), epoch 0.90, loss 1.2345, lr 2.00e-4, grad_norm 0.812"
    assert describe_metric(metrics_event("r", {"event": "log", "time": 1.0, "step": 3})) == "step 3"
    assert [fmt.duration(s) for s in (45, 725, 11220)] == ["45s", "12m05s", "3h07m"]  # `runs show`'s time left


def test_records_become_events():
    assert metrics_event("r", m.parse_record(begin())) is None
    metric = metrics_event("r", m.parse_record(log_line(2, 5.5, loss=1.0, grad_norm=0.1)))
    assert metric == Metric(run_id="r", time=5.5, step=2, epoch=1.0, max_steps=4, loss=1.0, grad_norm=0.1)
    event = metrics_event("r", m.parse_record(j(event="stage", name="merge", time=1)))
    assert event == Mark("r", "stage", name="merge")
    event = metrics_event("r", m.parse_record(j(event="eval", time=1, step=3, total=9)))
    assert event == Mark("r", "eval", step=3, total=9)
    assert metrics_event("r", m.parse_record(j(event="end", time=1, step=4))) == Mark("r", "end", step=4)
