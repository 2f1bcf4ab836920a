"""The TUI against the fake Runpod (whose pods are real process trees): `a` during a provisioning
abandons it, and the lease deletes the pod it made; no pod is left billing."""

from __future__ import annotations

import os

import pytest

from tests.fixtures.tui import TuiDriver, until
from tests.integration.test_runpod_train import TIME_SCALE, PodProject
from tests.fixtures.timescale import scale

pytestmark = pytest.mark.ssh


@pytest.fixture
def fake(fake_runpod):
    os.makedirs("/run/sshd", exist_ok=True)
    yield fake_runpod
    assert fake_runpod.billing() == []


def test_a_abandons_a_provisioning_and_its_pod_is_deleted(tmp_path, fake_axolotl, fake, monkeypatch):
    p = PodProject(tmp_path, fake_axolotl, fake)
    scale(monkeypatch, TIME_SCALE)
    fake.pods.boot_delay = 3  # the pod exists, and boots, while the TUI is asked to abandon it
    driver = TuiDriver(p.dir, p.env)

    async def scenario(pilot, app):
        await pilot.press("4", "n")
        await until(pilot, lambda: type(app.screen).__name__ == "Confirm", "the confirmation")
        assert "a Runpod pod (NVIDIA GeForce RTX 4090 x1) bills per second" in str(
            app.screen.query_one("#question").render())
        await pilot.press("y")
        task = await until(pilot, lambda: app.tasks.current, "the task")
        await until(pilot, lambda: task.run_id and app.live.runs[task.run_id].pod is not None
                    and app.live.runs[task.run_id].pod.phase == "created", "the pod to be created")
        await pilot.press("d")  # nothing is followed yet: `d` says so and leaves the provisioning alone
        assert task.running and not task.detach.is_set() and not task.abandon.is_set()
        await pilot.press("a")
        await until(pilot, lambda: not task.running, "the provisioning to stop", timeout=60)
        table = app.query_one("#runs")
        await until(pilot, lambda: table.row_count and str(table.get_row_at(0)[1]) == "failed", "the run's row")
        app.state_row = [str(c) for c in table.get_row_at(0)]
        app.state_detail = str(app.query_one("#run").render())

    with driver:
        driver.run(scenario)
    task = driver.tasks.current
    rid = task.run_id
    assert task.abandon.is_set() and not task.detach.is_set()
    assert task.outcome() == "interrupted before the job started: it has no pod left"
    record = p.record(rid)
    assert record["state"] == "failed" and record["message"] == "interrupted before the job started: it has no pod left"
    pod = p.pod_json(rid)
    assert pod["state"] == "deleted" and pod["deleted_by"] == "client"
    assert [c.key for c in p.deletes()] == ["account"]
    assert fake.billing() == [] and fake.secrets == {}
    # The Training view: the run failed before any step, its pod deleted, and what it cost.
    row, detail = driver.app.state_row, driver.app.state_detail
    assert row[:3] == [rid, "failed", "gpu"] and row[4:7] == ["-", "-", "-"] and row[7].startswith("about ")
    assert f"pod: {pod['pod_id']} deleted, spend {row[7]}" in detail
    assert "message: interrupted before the job started: it has no pod left" in detail
