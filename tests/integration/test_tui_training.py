"""The Training view on the fake axolotl (a local target): a run started from the TUI, its loss
chart; `d` detaches a followed run and its job goes on; Enter follows it again; `c` cancels it
(the follow detached first); `s` stops a run with a snapshot; quitting while a run is followed
leaves it running and says so."""

from __future__ import annotations

import os

from tests.fixtures.tui import TuiDriver, until
from tests.integration.test_runs_support import TIME_SCALE, make_project
from tests.fixtures.timescale import scale


def _setup(tmp_path, fake_axolotl, monkeypatch, mode: str = "ok"):
    """A training project on the fake axolotl in `mode`, and a TUI driver on it."""
    scale(monkeypatch, TIME_SCALE)
    fake_axolotl.set_mode(mode)
    p = make_project(tmp_path, fake_axolotl)
    return p, TuiDriver(p.dir, p.env)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def _start_run(pilot, app):
    await pilot.press("4", "n")
    await until(pilot, lambda: type(app.screen).__name__ == "Confirm", "the confirmation")
    assert "Qwen/Qwen3-0.6B (lora) on target `local`" in str(app.screen.query_one("#question").render())
    await pilot.press("y")
    await until(pilot, lambda: app.tasks.current is not None and app.tasks.current.run_id, "the run's ID")
    return app.tasks.current


async def _confirmed(pilot, app, key: str, label: str):
    """Press `key` on the selected run, say yes, and wait for the task `label` it starts to end."""
    await pilot.press(key)
    await until(pilot, lambda: type(app.screen).__name__ == "Confirm", "the confirmation")
    await pilot.press("y")
    await until(pilot, lambda: app.tasks.current.label.startswith(label) and not app.tasks.current.running,
                label, timeout=60)


async def _following(pilot, app):
    """A new run started from the Training view, once the TUI follows it (two steps seen)."""
    task = await _start_run(pilot, app)
    await _followed(pilot, app, task)
    return task


async def _listed(pilot, app, run_id: str):
    """Once the Training view lists the run and has it selected."""
    await until(pilot, lambda: app.view("training").selected() == run_id, f"run {run_id} listed")


async def _followed(pilot, app, task, steps: int = 2):
    def seen():
        run = app.live.runs.get(task.run_id)
        return run is not None and run.watched and len(run.losses) >= steps
    await until(pilot, seen, f"{steps} steps of run {task.run_id} followed")


def test_a_run_started_from_the_tui_succeeds_and_shows_its_loss(tmp_path, fake_axolotl, monkeypatch):
    from textual.widgets import DataTable, Sparkline, Static

    p, driver = _setup(tmp_path, fake_axolotl, monkeypatch)

    async def scenario(pilot, app):
        task = await _start_run(pilot, app)
        await until(pilot, lambda: not task.running, "the run to end")
        table = app.query_one("#runs", DataTable)
        await until(pilot, lambda: table.row_count and str(table.get_row_at(0)[1]) == "succeeded"
                    and len(app.query_one("#loss", Sparkline).data) == 2, "the view to show the run's end")
        app.state_row = [str(c) for c in table.get_row_at(0)]
        app.state_losses = list(app.query_one("#loss", Sparkline).data)
        app.state_detail = str(app.query_one("#run", Static).render())

    with driver:
        driver.run(scenario)
    task = driver.tasks.current
    assert task.error is None, task.error
    [rid] = p.run_ids()
    assert p.record(rid)["state"] == "succeeded"
    assert task.lines()[0].startswith(f"train: run {rid} succeeded; step 2/2")
    assert driver.app.state_row[:2] == [rid, "succeeded"] and driver.app.state_row[4] == "2/2"
    assert len(driver.app.state_losses) == 2 and driver.app.state_row[5] == f"{driver.app.state_losses[-1]:.4f}"
    assert f"run {rid}: succeeded on target `local`" in driver.app.state_detail


def test_d_detaches_the_followed_run_its_job_goes_on_then_enter_follows_and_c_cancels(
        tmp_path, fake_axolotl, monkeypatch):
    p, driver = _setup(tmp_path, fake_axolotl, monkeypatch, "slow")

    async def scenario(pilot, app):
        task = await _following(pilot, app)
        await pilot.press("d")
        await until(pilot, lambda: not task.running, "the detach")
        record = p.record(task.run_id)
        app.state_detached = (task, record, _alive(record["job"]["pid"]))
        await _listed(pilot, app, task.run_id)
        await pilot.press("enter")  # follows the selected run again: `train attach`
        attach = await until(pilot, lambda: app.tasks.current is not task and app.tasks.current, "the attach")
        await _followed(pilot, app, attach, steps=3)
        await _confirmed(pilot, app, "c", "train cancel")

    with driver:
        driver.run(scenario)
    detached, record, alive = driver.app.state_detached
    rid = detached.run_id
    assert alive  # the job's process outlived the detach
    assert detached.interrupted and detached.outcome() == (
        f"interrupted: run {rid} keeps running on target `local`; follow it again with "
        f"`overbrainer train attach {rid}`")
    assert record["state"] == "running"  # the job went on
    attach, cancel = driver.tasks.history[1:]
    assert attach.label == f"train attach {rid}" and attach.interrupted  # detached for the cancel
    assert cancel.error is None and cancel.lines() == [f"train: run {rid} cancelled"]
    assert p.record(rid)["state"] == "cancelled"
    assert not _alive(record["job"]["pid"])


def test_s_stops_the_followed_run_with_a_snapshot(tmp_path, fake_axolotl, monkeypatch):
    p, driver = _setup(tmp_path, fake_axolotl, monkeypatch, "snapshot")

    async def scenario(pilot, app):
        task = await _following(pilot, app)
        await _listed(pilot, app, task.run_id)
        await _confirmed(pilot, app, "s", "train stop")

    with driver:
        driver.run(scenario)
    train, stop = driver.tasks.history
    rid = train.run_id
    assert train.interrupted and stop.error is None, stop.error
    record = p.record(rid)
    assert record["state"] == "stopped" and record["snapshot"]["checkpoint"].startswith("output/checkpoint-")
    assert any(f"train: run {rid} stopped at step" in line for line in stop.lines())


def test_quitting_while_a_run_is_followed_leaves_it_running_and_says_so(tmp_path, fake_axolotl, monkeypatch):
    p, driver = _setup(tmp_path, fake_axolotl, monkeypatch, "slow")

    async def scenario(pilot, app):
        task = await _following(pilot, app)
        await pilot.press("q")
        await until(pilot, lambda: type(app.screen).__name__ == "Confirm", "the question")
        app.state_question = str(app.screen.query_one("#question").render())
        await pilot.press("y")
        await until(pilot, lambda: not task.running, "the task to stop")
        await until(pilot, lambda: app._exit, "the app to exit")

    with driver:
        driver.run(scenario)
    rid = driver.app.stopped_task.run_id
    assert f"run {rid} keeps running on its target; `overbrainer train attach {rid}`" in driver.app.state_question
    assert driver.app.stopped_task.outcome().startswith(f"interrupted: run {rid} keeps running on target `local`")
    assert p.record(rid)["state"] == "running"
    # This test's process spawned the job (a real TUI's exit hands it to init): cancel it here.
    from overbrainer.tui import work
    from overbrainer.tui.tasks import TRAINING

    cancel = driver.tasks.start("cancel", TRAINING, work.cancel(driver.workspace, rid))
    assert cancel.wait(60) and cancel.error is None, cancel.error
    assert p.record(rid)["state"] == "cancelled"
