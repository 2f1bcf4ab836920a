"""The metrics' numbers (overbrainer/metrics/tally.py): seeded from history, moved by bus events."""

from __future__ import annotations

import pytest

from overbrainer.dataset.accounting.history import HistoryEntry
from overbrainer.dataset.accounting.stages import StageStats
from overbrainer.front import events as ev
from overbrainer.metrics.tally import Tally, history_counts, model_label
from overbrainer.support.usage import Usage


def entry(stage, model, *, done=0, skipped=0, failed=0, excluded=0, tin=0, tout=0, cost=None, status="ok"):
    return HistoryEntry(stage, "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z", status, "fake", model, done, skipped,
                        failed, excluded, tin, tout, cost)


HISTORY = [
    entry("subtopics", "gen", done=2, tin=100, tout=50, cost=0.01),
    entry("answers", "parent", done=10, excluded=1, failed=1, tin=1000, tout=4000, cost=0.5),
    entry("answers", "parent", done=2, skipped=11, tin=200, tout=800, cost=None, status="interrupted"),
    entry("split", None, done=11, skipped=1, excluded=1),
]


def test_history_adds_up_per_stage_model_and_result():
    counts = history_counts(HISTORY)
    assert counts.items[("answers", "done")] == 12 and counts.items[("answers", "skipped")] == 11
    assert counts.items[("answers", "failed")] == 1 and counts.items[("answers", "excluded")] == 1
    assert counts.items[("split", "done")] == 11 and counts.items[("split", "excluded")] == 1
    assert counts.tokens == {("subtopics", "gen", "in"): 100, ("subtopics", "gen", "out"): 50,
                             ("answers", "parent", "in"): 1200, ("answers", "parent", "out"): 4800}
    assert counts.cost == {("subtopics", "gen"): 0.01, ("answers", "parent"): 0.5}  # split has no price


@pytest.mark.parametrize("model, label", [
    ("deepseek/deepseek-r1", "deepseek/deepseek-r1"), (None, "unknown"), ("", "unknown"),
    ("/home/alice/models/qwen3-8b.gguf", "qwen3-8b.gguf"), ("~/m/q.gguf", "q.gguf"),
    ("C:\\Users\\bob\\q.gguf", "q.gguf"), ("bad\x1bname", "badname"),
])
def test_a_model_label_never_holds_a_home_directory(model, label):
    assert model_label(model) == label


def stage_events(stage="answers", model="parent"):
    return [
        ev.StageModel(stage, model), ev.StageStarted(stage, 4),
        ev.ItemDone(stage, "q1", Usage(10, 40), 0.01),
        ev.ItemFailed(stage, "q2", "HTTP 500; retrying in 0.1s", True),
        ev.ItemDone(stage, "q2", Usage(12, 0), 0.002, excluded=True),
        ev.ItemDone(stage, "q3", None, None),
        ev.ItemFailed(stage, "q4", "HTTP 400", False),
    ]


def test_events_add_to_the_seed_and_the_finished_stage_brings_its_history_line():
    tally = Tally()
    tally.seed(HISTORY)
    for e in stage_events():
        tally.apply(e)
    snap = tally.snapshot()
    assert snap.running["answers"] == 1 and snap.retries["answers"] == 1
    assert snap.counts.items[("answers", "done")] == 13 and snap.counts.items[("answers", "excluded")] == 2
    assert snap.counts.items[("answers", "skipped")] == 12 and snap.counts.items[("answers", "failed")] == 2
    assert snap.counts.tokens[("answers", "parent", "in")] == 1222
    # The stage's stats count more than its events: a retried attempt's tokens, 5 answers skipped
    # without an event. Once it finishes, the counters hold exactly history + its line.
    stats = StageStats(done=1, skipped=6, failed=1, excluded=1, usage=Usage(30, 60), cost=0.015)
    tally.apply(ev.StageFinished("answers", stats))
    line = entry("answers", "parent", done=1, skipped=6, failed=1, excluded=1, tin=30, tout=60, cost=0.015)
    snap = tally.snapshot()
    expected = history_counts([*HISTORY, line])
    assert {k: v for k, v in snap.counts.items.items() if v} == expected.items
    assert snap.counts.tokens == expected.tokens
    assert snap.counts.cost == pytest.approx(expected.cost)
    assert snap.running["answers"] == 0 and snap.retries["answers"] == 1


def test_a_stage_stopped_midway_is_made_good_from_history_and_nothing_goes_down():
    tally = Tally()
    tally.seed(HISTORY)
    for e in stage_events()[:3]:
        tally.apply(e)
    assert tally.bus_ended(["answers"], []) is True  # it was running: Ctrl-C
    assert tally.snapshot().running["answers"] == 0
    line = entry("answers", "parent", done=1, skipped=5, tin=25, tout=40, cost=0.012, status="interrupted")
    tally.reconcile([*HISTORY, line])
    snap = tally.snapshot()
    assert snap.counts.items[("answers", "skipped")] == 16 and snap.counts.tokens[("answers", "parent", "in")] == 1225
    tally.reconcile(HISTORY)  # a history that says less (a line that could not be written) lowers nothing
    assert tally.snapshot().counts == snap.counts
    assert tally.bus_ended(["answers"], []) is False


def test_a_stage_that_finished_without_events_counts_its_stats():
    tally = Tally()
    tally.apply(ev.StageStarted("split", 12))
    tally.apply(ev.StageFinished("split", StageStats(done=11, skipped=1, excluded=2)))
    snap = tally.snapshot()
    assert (snap.counts.items[("split", "done")], snap.counts.items[("split", "excluded")]) == (11, 2)
    assert snap.counts.tokens == {} and snap.counts.cost == {}


def test_training_gauges_and_phase_of_a_watched_run():
    tally = Tally()
    rid = "demo_20260101-000000"
    tally.apply(ev.Metric(rid, 1.0, 1))  # not watched yet: ignored
    assert tally.snapshot().runs == {}
    tally.apply(ev.RunWatched(rid))
    tally.apply(ev.Metric(rid, 1.0, 1, max_steps=4, loss=1.5, learning_rate=0.0))
    run = tally.snapshot().runs[rid]
    assert (run.step, run.max_steps, run.loss, run.learning_rate, run.eval_loss, run.phase) == (
        1, 4, 1.5, 0.0, None, "training")
    tally.apply(ev.Mark(rid, "eval", step=1, total=3))
    assert tally.snapshot().runs[rid].phase == "evaluating"
    tally.apply(ev.Metric(rid, 2.0, 2, eval_loss=1.4))
    tally.apply(ev.Metric(rid, 3.0, 4, loss=1.2, learning_rate=1e-4))
    tally.apply(ev.Metric(rid, 3.0, 4))  # the trainer's closing summary: no metric, nothing lost
    run = tally.snapshot().runs[rid]
    assert (run.step, run.loss, run.eval_loss, run.learning_rate, run.phase) == (4, 1.2, 1.4, 1e-4, "finalizing")
    tally.apply(ev.Mark(rid, "stage", name="merge"))
    assert tally.snapshot().runs[rid].phase == "merging"
    tally.apply(ev.JobStatus(rid, "exited", 0))
    assert tally.snapshot().runs[rid].phase == "retrieving"
    tally.bus_ended([], [rid])
    run = tally.snapshot().runs[rid]
    assert run.phase is None and run.step == 4  # the last values stay; the phase goes


def test_side_jobs_have_no_training_gauges():
    tally = Tally()
    tally.apply(ev.RunWatched("export_20260101-000000", job="export"))
    tally.apply(ev.Mark("export_20260101-000000", "stage", name="export"))
    assert tally.snapshot().runs == {}
