"""The exporter on the front end's buses: one subscriber per bus, whatever front end opens it."""

from __future__ import annotations

import threading

from overbrainer.config.model import Metrics
from overbrainer.dataset.accounting.stages import StageStats
from overbrainer.front import events as ev
from overbrainer.front.bus import EventBus
from overbrainer.front.frontend import Cli, Embedded
from overbrainer.metrics.exporter import Exporter
from overbrainer.support.usage import Usage
from tests.fixtures.buses import closed, receivers


def test_the_cli_front_end_shows_each_new_bus_to_its_watchers_before_any_event():
    front = Cli()
    seen = []
    front.watch_buses(lambda bus: seen.append((bus, receivers(bus))))
    front.watch_buses(lambda bus: 1 / 0)  # a broken watcher stops nothing
    with front.open_bus() as first, front.open_bus() as second:
        assert [b for b, _ in seen] == [first.bus, second.bus]
        assert [n for _, n in seen] == [0, 0]  # before the renderer subscribed: nothing missed
    assert Cli()._watchers == ()  # each front end has its own


def test_a_command_s_buses_are_counted_and_closing_them_writes_the_textfile(tmp_path):
    exporter = Exporter(tmp_path, "demo", Metrics(textfile="demo.prom")).start()
    front = Cli()
    front.watch_buses(exporter.watch)
    with front.open_bus() as guard:
        exporter.watch(guard.bus)  # the same bus again: still one subscriber
        assert receivers(guard.bus) == 2  # the renderer and the exporter
        for e in [ev.StageModel("answers", "m"), ev.StageStarted("answers", 1),
                  ev.ItemDone("answers", "q1", Usage(3, 4), 0.5),
                  ev.StageFinished("answers", StageStats(done=1, usage=Usage(3, 4), cost=0.5))]:
            guard.bus.publish(e)
    exporter.stop()
    snap = exporter.tally.snapshot()
    assert snap.counts.items[("answers", "done")] == 1 and snap.counts.cost == {("answers", "m"): 0.5}
    assert 'overbrainer_cost_usd_total{model="m",project="demo",stage="answers"} 0.5' in (
        tmp_path / "demo.prom").read_text()


def test_an_embedding_caller_s_shared_bus_is_watched_once_and_let_go_at_stop(tmp_path):
    bus = EventBus()
    front = Embedded(bus, threading.Event(), threading.Event(), lambda report: None, renderer=lambda: None)
    exporter = Exporter(tmp_path, "demo", Metrics(textfile="demo.prom")).start()
    front.watch_buses(exporter.watch)
    front.open_bus().close()
    front.open_bus().close()  # the same bus, opened by the next flow
    assert receivers(bus) == 1
    bus.publish(ev.StageStarted("questions", 3))
    exporter.stop()  # the bus stays open (it is the caller's): the exporter lets go of it
    assert receivers(bus) == 0 and not closed(bus)
    assert exporter.tally.snapshot().running["questions"] == 0
    assert 'overbrainer_stage_running{project="demo",stage="questions"} 0.0' in (tmp_path / "demo.prom").read_text()
