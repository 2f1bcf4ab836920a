"""The TUI's tasks: a flow on its own thread, on an Embedded front end publishing on the app's one
bus; its detach Event is its Ctrl-C, its abandon Event the provisioning flag; one at a time."""

from __future__ import annotations

import threading

import pytest

from overbrainer.errors import Interrupted, OverbrainerError
from overbrainer.front.events import StageStarted
from overbrainer.tui.tasks import PIPELINE, TRAINING, Busy, Tasks


def test_a_task_publishes_on_the_shared_bus_and_reports_its_results(tmp_path):
    tasks = Tasks(tmp_path)
    sub = tasks.bus.subscribe()
    release = threading.Event()

    def flow(session):
        with session.front.open_bus() as guard:
            assert guard.bus is tasks.bus
            guard.bus.publish(StageStarted("split", 3))
        session.front.run_created("demo_20260101-000000")
        session.report("split: 2 train, 1 eval, 0 excluded, 0 orphaned")
        release.wait(10)
        return "result"

    task = tasks.start("split", PIPELINE, flow)
    assert sub.get(timeout=10) == StageStarted("split", 3)
    with pytest.raises(Busy, match="^split is running: stop or detach it first$"):
        tasks.start("answers", PIPELINE, lambda session: None)
    release.set()
    assert task.wait(10) and task.result == "result" and task.error is None
    assert task.run_id == "demo_20260101-000000"
    assert task.lines() == ["split: 2 train, 1 eval, 0 excluded, 0 orphaned"]
    assert task.outcome() == "split: done"
    assert tasks.start("answers", PIPELINE, lambda session: None).wait(10)  # free again


def test_interrupting_a_task_is_its_ctrl_c_and_abandon_is_its_provisioning_flag(tmp_path):
    tasks = Tasks(tmp_path)
    seen = {}

    def flow(session):
        flag = session.front.provisioning_flag()
        interrupt = session.front.interrupt()
        seen["flag"] = flag
        if interrupt.race(threading.Event().wait, 30) is None:
            raise Interrupted("interrupted: run r keeps running on target `here`")

    task = tasks.start("train", TRAINING, flow, pod=True)
    task.abandon.set()
    assert not task.wait(0.2)  # abandoning is not an interrupt
    assert seen["flag"].is_set()
    task.interrupt()
    assert task.wait(10) and task.interrupted
    assert task.outcome() == "interrupted: run r keeps running on target `here`"
    assert tasks.stop_all() is task  # nothing left to stop


def test_a_failed_task_says_why_in_one_line(tmp_path):
    tasks = Tasks(tmp_path)

    def fails(session):
        raise OverbrainerError("no [training] section in overbrainer.toml")

    task = tasks.start("train", TRAINING, fails)
    assert task.wait(10)
    assert task.outcome() == "train failed: no [training] section in overbrainer.toml"
    bug = tasks.start("train", TRAINING, lambda session: 1 / 0)
    assert bug.wait(10)
    assert bug.outcome() == "train failed: internal error: ZeroDivisionError: division by zero"


def test_a_second_interrupt_abandons_a_stages_requests_in_flight_not_a_provisioning(tmp_path):
    tasks = Tasks(tmp_path)
    release = threading.Event()
    stage = tasks.start("answers", PIPELINE, lambda session: release.wait(30))
    stage.interrupt()
    assert stage.detach.is_set() and not stage.abandon.is_set()  # the grace for the requests in flight
    stage.interrupt()
    assert stage.abandon.is_set()  # the second Ctrl-C: they are not waited for
    release.set()
    assert stage.wait(10)
    release.clear()
    run = tasks.start("train", TRAINING, lambda session: release.wait(30), pod=True)
    run.interrupt()
    run.interrupt()
    assert run.detach.is_set() and not run.abandon.is_set()  # `a` alone abandons a provisioning
    release.set()
    assert run.wait(10)
