import gc
import io
import json
import threading
import time

import pytest

from overbrainer.dataset.accounting.stages import StageStats
from overbrainer.front.bus import EventBus
from overbrainer.front.events import ItemDone, StageFinished, StageStarted
from overbrainer.front.frontend import RENDER_GRACE, Cli, Embedded, Report
from overbrainer.front.render_lines import LineRenderer
from overbrainer.support import redact
from tests.fixtures.buses import closed, receivers

LIMIT = 10


class Recorder:
    """A renderer that records events; `gate` (if given) must be set before it handles one."""

    def __init__(self, gate=None):
        self.events = []
        self.closed = threading.Event()
        self.gate = gate

    def handle(self, ev):
        if self.gate is not None:
            self.gate.wait(60)
        self.events.append(ev)

    def close(self):
        self.closed.set()


def embedded(renderer=None, reports=None):
    bus = EventBus(8)
    front = Embedded(bus, threading.Event(), threading.Event(),
                     (reports.append if reports is not None else (lambda r: None)),
                     renderer=(lambda: renderer) if renderer else None)
    return front, bus


def test_a_cli_bus_is_rendered_until_it_is_closed(caplog):
    caplog.set_level("INFO", logger="overbrainer")
    guard = Cli().open_bus()
    extra = guard.bus.subscribe()
    guard.bus.publish(StageStarted("split", 1))
    assert extra.get(0) == StageStarted("split", 1)
    guard.close()
    assert not guard._thread.is_alive() and closed(guard.bus)
    assert "split: 1 to process" in caplog.messages
    guard.close()  # twice is fine


def test_close_drains_what_is_queued():
    rec = Recorder()
    front, bus = embedded(rec)
    guard = front.open_bus()
    for i in range(8):
        bus.publish(ItemDone("answers", f"q{i}"))
    guard.close()
    assert [e.id for e in rec.events] == [f"q{i}" for i in range(8)]
    assert rec.closed.is_set() and not guard._thread.is_alive()


def test_close_gives_a_stuck_renderer_a_bounded_grace():
    assert RENDER_GRACE == 2.0
    gate = threading.Event()
    rec = Recorder(gate)
    front, bus = embedded(rec)
    guard = front.open_bus()
    thread = guard._thread
    for i in range(5):
        bus.publish(ItemDone("answers", f"q{i}"))
    t0 = time.monotonic()
    guard.close(grace=0.2)
    assert time.monotonic() - t0 < LIMIT
    assert receivers(bus) == 0 and not closed(bus), "a shared bus stays open"
    gate.set()
    thread.join(LIMIT)
    assert not thread.is_alive()
    assert len(rec.events) < 5, "what was queued past the grace is dropped"


def test_a_bus_guard_dropped_without_close_stops_its_renderer():
    guard = Cli().open_bus()
    bus, thread = guard.bus, guard._thread
    assert receivers(bus) == 1, "the renderer"
    del guard
    gc.collect()
    thread.join(LIMIT)
    assert not thread.is_alive() and receivers(bus) == 0 and closed(bus)

    rec = Recorder()
    front, shared = embedded(rec)
    guard = front.open_bus()
    thread = guard._thread
    assert receivers(shared) == 1
    del guard
    gc.collect()
    thread.join(LIMIT)
    assert not thread.is_alive() and receivers(shared) == 0 and not closed(shared)
    assert rec.closed.is_set()


def test_a_guard_left_by_an_exception_stops_without_draining():
    gate = threading.Event()
    rec = Recorder(gate)
    front, bus = embedded(rec)
    with pytest.raises(RuntimeError):
        with front.open_bus() as guard:
            thread = guard._thread
            for i in range(4):
                bus.publish(ItemDone("answers", f"q{i}"))
            raise RuntimeError("flow failed")
    assert receivers(bus) == 0
    gate.set()
    thread.join(LIMIT)
    assert not thread.is_alive() and len(rec.events) <= 1


def test_an_embedded_front_end_shares_its_bus_flag_and_reports():
    reports = []
    front, bus = embedded(reports=reports)
    events = bus.subscribe()
    guard = front.open_bus()
    assert isinstance(guard._thread, threading.Thread)
    guard.bus.publish(StageStarted("split", 2))
    assert events.get(0) == StageStarted("split", 2), "the task's own bus"
    guard.close()
    assert not closed(bus)
    flag = front.provisioning_flag()
    assert not flag.is_set()
    front.abandon.set()
    assert flag.is_set()
    flag.close()
    interrupt = front.interrupt()
    assert not interrupt.caught()
    front.detach.set()
    assert interrupt.caught() and interrupt.race(lambda: 1) is None
    front.report("split: 1 train, 1 eval, 0 excluded, 0 orphaned", {"train": 1})
    front.report("plain", {"message": "plain"})
    front.run_created("20260101-abc")
    front.run_stopped(120)
    assert reports == [
        Report("line", text="split: 1 train, 1 eval, 0 excluded, 0 orphaned", data={"train": 1}),
        Report("line", text="plain", data={"message": "plain"}),
        Report("run_created", run_id="20260101-abc"),
        Report("run_stopped", step=120),
    ]


def test_an_embedded_front_end_renders_log_lines_by_default(caplog):
    caplog.set_level("INFO", logger="overbrainer")
    front, bus = embedded()
    with front.open_bus() as guard:
        guard.bus.publish(StageStarted("answers", 3))
    assert "answers: 3 to process" in caplog.messages


def test_cli_reports_text_on_stdout_and_nothing_for_runs():
    out, err = io.StringIO(), io.StringIO()
    front = Cli(stdout=out, stderr=err)
    assert isinstance(front.make_renderer(), LineRenderer), "not a terminal: plain lines"
    redact.register("sk-secret-value-123")
    try:
        front.report("answers: 1 done (sk-secret-value-123)", {"done": 1})
    finally:
        redact.REDACTOR.clear()
    front.run_created("x")
    front.run_stopped(3)
    assert out.getvalue() == "answers: 1 done (***)\n"
    assert err.getvalue() == ""


def test_json_front_end_prints_objects_on_stdout_and_events_on_stderr():
    out, err = io.StringIO(), io.StringIO()
    front = Cli(json=True, stdout=out, stderr=err)
    with front.open_bus() as guard:
        guard.bus.publish(StageStarted("answers", 2))
        guard.bus.publish(StageFinished("answers", StageStats(done=2)))
    front.report("answers: 2 done", {"stage": "answers", "done": 2})
    front.report("hello", {"message": "hello"})
    stdout = [json.loads(line) for line in out.getvalue().splitlines()]
    assert stdout == [{"stage": "answers", "done": 2}, {"message": "hello"}]
    events = [json.loads(line) for line in err.getvalue().splitlines()]
    assert [e["event"] for e in events] == ["stage_started", "stage_finished"]
    assert events[1]["stats"]["done"] == 2 and events[1]["stats"]["usage"]["input_tokens"] == 0
    assert "\x1b" not in err.getvalue()


def test_cli_flag_and_interrupt_catch_ctrl_c_from_their_creation():
    front = Cli()
    with front.interrupt() as interrupt:
        assert interrupt.state == "listening"
    flag = front.provisioning_flag()
    assert not flag.is_set()
    flag.close()
