import io
import json
import logging
import subprocess
import sys

import pytest

from overbrainer.dataset.accounting.stages import StageStats
from overbrainer.front import terminal
from overbrainer.front.events import (
    ItemDone, ItemFailed, JobStatus, Lagged, Mark, Metric, RunWatched, StageFinished, StageModel,
    StageStarted, Transfer,
)
from overbrainer.front.render_bars import BarRenderer
from overbrainer.front.render_json import JsonRenderer, event_line
from overbrainer.front.render_lines import Every, LineRenderer, Tenths, describe_metric, sci
from overbrainer.support.usage import Usage


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


class Tty(io.StringIO):
    def isatty(self):
        return True


@pytest.fixture
def lines(caplog):
    caplog.set_level(logging.DEBUG, logger="overbrainer")

    def info_and_up():
        return [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO]

    return info_and_up


def test_tenths_are_due_once_per_tenth_and_every_item_below_ten():
    t = Tenths(40)
    assert [n for n in range(1, 41) if t.due(n)] == list(range(4, 41, 4))
    t = Tenths(1000)
    assert sum(t.due(n) for n in range(1, 1001)) == 10
    t = Tenths(5)
    assert [n for n in range(1, 6) if t.due(n)] == [1, 2, 3, 4, 5]
    t = Tenths(15)
    assert [n for n in range(1, 16) if t.due(n)] == [2, 3, 5, 6, 8, 9, 11, 12, 14, 15]
    assert not Tenths(0).due(1) and not Tenths(None).due(3)


def test_every_is_due_at_most_once_per_interval():
    clock = Clock()
    e = Every(10, clock)
    assert e.due()
    clock.now += 9.9
    assert not e.due()
    assert e.due(force=True)
    clock.now += 10
    assert e.due() and not e.due()


def test_a_stage_stopped_by_a_fatal_error_says_so(lines, caplog):
    r = LineRenderer()
    r.handle(StageStarted("subtopics", 1))
    r.handle(ItemFailed("subtopics", "t0", "provider fake is unreachable", False, stops=True))
    r.handle(StageFinished("subtopics", StageStats(failed=1), stopped="provider unreachable (connection refused)"))
    assert lines() == [
        "subtopics: 1 to process",
        "subtopics: t0 failed: provider fake is unreachable",
        "subtopics: stopped: provider unreachable (connection refused)",
    ]


def test_stage_events_give_the_spec_lines(lines, caplog):
    r = LineRenderer()
    r.handle(StageStarted("answers", 40))
    r.handle(StageModel("answers", "gpt-parent"))
    for i in range(39):
        r.handle(ItemDone("answers", f"q{i}", Usage(1, 1) if i else None))
        if i == 5:
            r.handle(ItemFailed("answers", "q6", "HTTP 429: slow down; retrying in 2.4s", True))
    r.handle(ItemFailed("answers", "q39", "HTTP 400: bad request", False))
    r.handle(StageFinished("answers", StageStats(done=39, failed=1)))
    r.handle(Lagged(3))
    assert lines() == [
        "answers: 40 to process",
        "answers: 4/40",
        "answers: q6: HTTP 429: slow down; retrying in 2.4s",
        *[f"answers: {n}/40" for n in range(8, 40, 4)],
        "answers: q39 failed: HTTP 400: bad request",
        "answers: 40/40",
        "answers: finished",
    ]
    levels = {r.getMessage(): r.levelname for r in caplog.records}
    assert levels["answers: q6: HTTP 429: slow down; retrying in 2.4s"] == "WARNING"
    assert levels["answers: q39 failed: HTTP 400: bad request"] == "ERROR"
    assert levels["answers: model gpt-parent"] == "DEBUG"
    assert levels["progress: 3 event(s) dropped: the display fell behind"] == "DEBUG"


def test_a_slow_stage_says_how_far_it_is_at_least_once_a_minute_as_well_as_at_each_tenth(lines):
    """1000 items at one a second: a line at each tenth (every 100 s) would leave 99 s silent; a
    line also comes once 60 s passed since the last one (never more than one per item)."""
    clock = Clock()
    r = LineRenderer(clock=clock)
    r.handle(StageStarted("answers", 1000))
    for n in range(1, 1001):
        clock.now += 1
        r.handle(ItemDone("answers", f"q{n}", Usage(1, 1)))
    shown = [int(g.split(" ")[1].split("/")[0]) for g in lines() if g.startswith("answers: ") and "/" in g]
    assert shown == sorted([100 * k for k in range(1, 11)] + [100 * k + 60 for k in range(10)])
    r.handle(StageFinished("answers", StageStats()))
    r.handle(StageStarted("questions", 1000))  # fast items: the tenths only
    for n in range(1, 1001):
        clock.now += 0.01
        r.handle(ItemDone("questions", f"s{n}", Usage(1, 1)))
    assert sum(1 for g in lines() if g.startswith("questions: ") and "/" in g) == 10


def test_metric_lines_are_throttled_to_one_per_ten_seconds_except_evals_and_the_end(lines):
    clock = Clock()
    r = LineRenderer(clock=clock)
    r.handle(RunWatched("r1"))
    r.handle(JobStatus("r1", "running"))
    for step in range(1, 41):
        clock.now += 1
        r.handle(Metric("r1", clock.now, step, step / 10, 40, loss=2.0 / step,
                        learning_rate=2e-4, grad_norm=0.8123))
        if step == 20:
            r.handle(Metric("r1", clock.now, 20, 1.5, 40, eval_loss=0.5012))
    r.handle(Mark("r1", "end", step=40))
    r.handle(JobStatus("r1", "exited", 0))
    got = lines()
    assert got[0] == "train: job running"
    assert got[1] == "train: step 1/40 (2%), epoch 0.10, loss 2.0000, lr 2.00e-4, grad_norm 0.812"
    steps = [g.split(",")[0] for g in got if g.startswith("train: step")]
    assert steps == ["train: step 1/40 (2%)", "train: step 11/40 (27%)", "train: step 20/40 (50%)",
                     "train: step 30/40 (75%)", "train: step 40/40 (100%)"]
    assert "train: step 20/40 (50%), epoch 1.50, eval_loss 0.5012" in got
    assert got[-2:] == ["train: finalizing (saving model)", "train: job exited with code 0"]


def test_phase_eval_transfer_and_job_lines(lines):
    r = LineRenderer()
    r.handle(RunWatched("r2", job="export"))
    r.handle(Mark("r2", "stage", name="merge"))
    for step in range(1, 101):
        r.handle(Mark("r2", "eval", step=step, total=100))
    r.handle(Mark("r2", "eval", step=1, total=100))  # a new evaluation
    for done in range(0, 1_000_001, 100_000):
        r.handle(Transfer("r2", "upload", done, 1_000_000))
    r.handle(JobStatus("r2", "lost"))
    r.handle(JobStatus("r3", "exited", 3))
    got = lines()
    assert got[0] == "export: merging adapter"
    evals = [g for g in got if "evaluating" in g]
    assert evals == ["export: evaluating 1/100"] + [f"export: evaluating {n}/100" for n in range(10, 101, 10)] \
        + ["export: evaluating 1/100"]
    uploads = [g for g in got if "uploading" in g]
    assert uploads[0] == "export: uploading 100.0 kB of 1.0 MB" and len(uploads) == 10
    assert got[-2:] == ["export: job lost (stopped without an exit code)", "train: job exited with code 3"]


def test_a_log_without_metrics_and_a_zero_lr_show_nothing_new(lines):
    for r in (LineRenderer(clock=Clock()), BarRenderer(Tty())):
        r.handle(Metric("r1", 0.0, 1, 0.5, 2, loss=1.5, learning_rate=0.0))
        r.handle(Metric("r1", 0.0, 2, 1.0, 2, loss=1.25, learning_rate=1e-4))
        r.handle(Metric("r1", 0.0, 2, 1.0, 2))  # the trainer's closing summary
        r.close()
    got = lines()
    first = [g for g in got if g.startswith("train: step 1/2")]
    assert first == ["train: step 1/2 (50%), epoch 0.50, loss 1.5000"]
    assert got.count("train: step 2/2 (100%), epoch 1.00, loss 1.2500, lr 1.00e-4") == 2  # once per renderer
    assert len(got) == 3


def test_transfer_lines_skip_the_start_and_show_the_end_of_an_unknown_total(lines):
    clock = Clock()
    r = LineRenderer(clock=clock)
    r.handle(Transfer("r1", "download", 0, None))
    r.handle(Transfer("r1", "download", 5_000, None))
    clock.now += 1
    r.handle(Transfer("r1", "download", 9_000, None))  # within 10 s of the last line
    r.handle(Transfer("r1", "download", 12_000, 12_000))  # the end
    r.handle(Transfer("r1", "upload", 0, 2_000))
    r.handle(Transfer("r1", "upload", 2_000, 2_000))
    assert lines() == ["train: downloading 5.0 kB", "train: downloading 12.0 kB of 12.0 kB",
                       "train: uploading 2.0 kB of 2.0 kB"]


def test_each_transfer_gets_a_bar_that_closes_at_its_end():
    tty = Tty()
    r = BarRenderer(tty)
    r.handle(Transfer("r1", "download", 0, 1000))
    r.handle(Transfer("r1", "download", 600, 1000))
    assert ("transfer", "train", "download") in r.bars
    r.handle(Transfer("r1", "download", 0, 500))  # the next fetch: a new bar
    assert r.bars[("transfer", "train", "download")].total == 500
    r.handle(Transfer("r1", "download", 500, 500))
    assert not r.bars and terminal._bars == 0
    assert "train: download" in tty.getvalue()


def test_number_formats():
    assert sci(2e-4) == "2.00e-4" and sci(1.5e-10) == "1.50e-10"
    assert describe_metric(Metric("r", 0.0, 7)) == "step 7"
    assert describe_metric(Metric("r", 0.0, 7, loss=float("nan"), eval_loss=0.25)) == "step 7, eval_loss 0.2500"


def test_json_lines_parse_and_carry_nothing_else():
    buf = io.StringIO()
    r = JsonRenderer(buf)
    r.handle(ItemDone("answers", "q1", Usage(3, 4), 0.01))
    r.handle(Metric("r1", 1.5, 2, loss=float("inf")))
    r.handle(Lagged(2))
    objs = [json.loads(line) for line in buf.getvalue().splitlines()]
    assert objs[0] == {"event": "item_done", "stage": "answers", "id": "q1",
                       "usage": {"input_tokens": 3, "output_tokens": 4}, "cost": 0.01, "excluded": False}
    assert objs[1]["event"] == "metric" and objs[1]["loss"] is None
    assert objs[2] == {"event": "lagged", "dropped": 2}
    assert json.loads(event_line(StageStarted("split", 1))) == {"event": "stage_started", "stage": "split", "total": 1,
                                                               "skipped": 0, "batch": False}


def test_bars_only_on_a_terminal():
    assert terminal.use_bars(Tty(), environ={})
    assert not terminal.use_bars(io.StringIO(), environ={})
    assert not terminal.use_bars(Tty(), json=True, environ={})
    assert not terminal.use_bars(Tty(), environ={"TERM": "dumb"})
    assert not terminal.use_bars(None, environ={})


def test_the_bar_renderer_draws_on_a_terminal_and_logs_around_it(lines):
    from overbrainer.front.frontend import Cli
    from overbrainer.front.render_bars import BarRenderer

    tty = Tty()
    front = Cli(stderr=tty)
    r = front.make_renderer()
    assert isinstance(r, BarRenderer)
    r.handle(StageStarted("answers", 20))
    for i in range(20):
        r.handle(ItemDone("answers", f"q{i}", Usage(1, 1)))
    r.handle(ItemFailed("answers", "q3", "timeout; retrying in 1.0s", True))
    r.handle(StageFinished("answers", StageStats(done=20)))
    r.handle(Metric("r1", 0.0, 5, 0.5, 10, loss=1.0))
    r.handle(Metric("r1", 0.0, 10, 1.0, 10, loss=0.5, eval_loss=0.7))
    r.handle(Transfer("r1", "download", 500, 1000))
    r.close()
    drawn = tty.getvalue()
    assert "answers:" in drawn and "/20" in drawn and "train:" in drawn
    got = lines()
    assert "answers: 20 to process" in got and "answers: finished" in got
    assert not any(g.startswith("answers: 2/") for g in got), "no progress lines under a bar"
    assert "train: step 10/10 (100%), epoch 1.00, loss 0.5000, eval_loss 0.7000" in got
    assert not r.bars and terminal._bars == 0


def test_tqdm_is_imported_only_when_a_bar_is_drawn():
    code = (
        "import sys\n"
        "from overbrainer.front.logs import setup_logging\n"
        "setup_logging(False)\n"
        "from overbrainer.front.frontend import Cli\n"
        "from overbrainer.front.events import StageStarted\n"
        "with Cli().open_bus() as g:\n"
        "    g.bus.publish(StageStarted('split', 1))\n"
        "print('tqdm' in sys.modules)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"
    assert "split: 1 to process" in r.stderr


def test_no_bars_on_a_terminal_without_a_width():
    import fcntl
    import os
    import pty
    import struct
    import termios

    master, slave = pty.openpty()
    try:
        with os.fdopen(os.dup(slave), "w") as tty:
            fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 0, 0, 0, 0))
            assert not terminal.use_bars(tty, environ={})
            fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
            assert terminal.use_bars(tty, environ={})
    finally:
        os.close(master)
        os.close(slave)


def test_pod_status_lines_and_json(lines, caplog):
    from overbrainer.front.events import PodStatus

    r = LineRenderer()
    r.handle(PodStatus("r1", "ready", "abc123", "NVIDIA A40", 0.44))
    r.handle(PodStatus("r1", "deleted", "abc123", spend=0.0123, message="retrieved"))
    r.handle(PodStatus("r1", "not_deleted", "abc123", message="check `overbrainer pod ls`"))
    assert lines()[-3:] == ["train: pod abc123 ready (NVIDIA A40, $0.44/h)",
                            "train: pod abc123 deleted (about $0.01): retrieved",
                            "train: pod abc123 not deleted: check `overbrainer pod ls`"]
    assert caplog.records[-1].levelname == "WARNING"
    assert json.loads(event_line(PodStatus("r1", "creating", gpu="A", rate=0.5))) == {
        "event": "pod_status", "run_id": "r1", "phase": "creating", "pod_id": None, "gpu": "A", "rate": 0.5,
        "spend": None, "message": None}


def test_a_runs_label_outlives_the_bus_it_was_said_on(lines):
    """Each bus of a command has a renderer of its own: a side job's label, said on one bus, still
    names its lines on the next (the Cli front end's renderers share their labels)."""
    from overbrainer.front.events import PodStatus, RunWatched
    from overbrainer.front.frontend import Cli

    front = Cli(stderr=io.StringIO())
    first, second = front.make_renderer(), front.make_renderer()
    first.handle(RunWatched("eval_1", "eval"))
    second.handle(PodStatus("eval_1", "ready", "abc123"))
    second.handle(PodStatus("r1", "ready", "def456"))
    assert lines()[-2:] == ["eval: pod abc123 ready", "train: pod def456 ready"]
