"""`overbrainer run` trains only what changed (runs/fingerprint.py): a run records the fingerprint of
its data and [training] settings; `run` on unchanged data says `train: up to date with run <id>`;
after a failed run on them it stops (exit 1) and says how to retry; `run --retrain` and `train`
always train; `run --plan` says when training would be skipped. The fake axolotl counts the
trainings."""

from __future__ import annotations

import json

from tests.fixtures.timescale import scale, scaled_env

SCALE = 0.05
RUN_ENV = scaled_env(SCALE)


def _trainings(fake_axolotl) -> int:
    return sum(1 for call in fake_axolotl.calls() if call.startswith("train "))


def _runs(project) -> list[str]:
    runs = project.dir / "runs"
    return sorted(p.name for p in runs.iterdir() if not p.name.startswith(".")) if runs.is_dir() else []


def test_three_runs_on_unchanged_data_make_one_training_run(project, fake_provider, fake_axolotl, cli):
    project.write(topics=1, subtopics=1, questions=2, training=fake_axolotl.venv)
    env = {**project.env, **RUN_ENV}
    first = cli(["-C", project.dir, "run"], env=env)
    assert first.returncode == 0, first.stderr
    (rid,) = _runs(project)
    record = json.loads((project.dir / "runs" / rid / "run.json").read_text())
    assert set(record["fingerprint"]) == {"sha256", "train", "eval", "settings"}
    for _ in range(2):
        again = cli(["-C", project.dir, "run"], env=env)
        assert again.returncode == 0, again.stderr
        assert again.stdout.splitlines()[-1] == f"train: up to date with run {rid}"
    assert _runs(project) == [rid] and _trainings(fake_axolotl) == 1
    r = cli(["--json", "-C", project.dir, "run"], env=env)
    assert json.loads(r.stdout.splitlines()[-1]) == {"stage": "train", "up_to_date": True, "run_id": rid,
                                                      "state": "succeeded"}

    # The plan says so too, and `--retrain` plans (and makes) a training.
    plan = cli(["-C", project.dir, "run", "--plan"], env=env)
    assert plan.returncode == 0, plan.stderr
    assert (f"train: up to date with run {rid}: `run` would not train (nothing rented; `--retrain` trains "
            "anyway)") in plan.stdout.splitlines()
    plan = cli(["-C", project.dir, "run", "--plan", "--retrain"], env=env)
    assert "train: target here (local);" in plan.stdout
    r = cli(["-C", project.dir, "run", "--retrain"], env=env)
    assert r.returncode == 0, r.stderr
    assert len(_runs(project)) == 2 and _trainings(fake_axolotl) == 2

    # A changed [training] setting that shapes the model trains again, once; `train` always trains.
    changed = {**env, "OVERBRAINER_TRAINING__EPOCHS": "1"}
    r = cli(["-C", project.dir, "run"], env=changed)
    assert r.returncode == 0, r.stderr
    assert "train: the [training] settings changed since run " in r.stderr
    assert cli(["-C", project.dir, "run"], env=changed).stdout.splitlines()[-1].startswith("train: up to date")
    assert cli(["-C", project.dir, "train"], env=changed).returncode == 0
    assert len(_runs(project)) == 4 and _trainings(fake_axolotl) == 4


def test_after_a_failed_run_on_the_same_data_run_says_how_to_retry(project, fake_provider, fake_axolotl, cli):
    project.write(topics=1, subtopics=1, questions=2, training=fake_axolotl.venv)
    env = {**project.env, **RUN_ENV}
    fake_axolotl.set_mode("fail")
    r = cli(["-C", project.dir, "run"], env=env)
    assert r.returncode == 1
    (failed,) = _runs(project)
    fake_axolotl.set_mode("ok")
    for _ in range(2):
        r = cli(["-C", project.dir, "run"], env=env)
        assert r.returncode == 1
        assert r.stderr.strip().splitlines()[-1] == (
            f"error: run {failed} failed (the job exited with code 3 (see runs/{failed}/job.log)) on this same "
            "data and [training] settings; `run` does not train them again on its own: retry with "
            "`overbrainer train` (or `overbrainer run --retrain`)")
    assert _runs(project) == [failed] and _trainings(fake_axolotl) == 1
    plan = cli(["-C", project.dir, "run", "--plan"], env=env)
    assert f"train: `run` would stop without training: run {failed} failed" in plan.stdout

    r = cli(["-C", project.dir, "train"], env=env)
    assert r.returncode == 0, r.stderr
    r = cli(["-C", project.dir, "run"], env=env)
    assert r.returncode == 0 and r.stdout.splitlines()[-1].startswith("train: up to date with run ")
    assert len(_runs(project)) == 2 and _trainings(fake_axolotl) == 2


def _tui_run(project) -> list[str]:
    """`run` started from the TUI's Pipeline view on `project`: the result lines it printed."""
    from tests.fixtures.tui import TuiDriver, run_from_pipeline

    driver = TuiDriver(project.dir, {**project.env, **RUN_ENV})

    async def scenario(pilot, app):
        await run_from_pipeline(pilot, app, timeout=120)

    with driver:
        driver.run(scenario)
    task = driver.tasks.current
    assert task.error is None, task.error
    return task.lines()


def test_the_tuis_run_is_the_commands_run_it_trains_only_on_change(project, fake_provider, fake_axolotl, cli,
                                                                   monkeypatch):
    scale(monkeypatch, SCALE)
    project.write(topics=1, subtopics=1, questions=2, training=fake_axolotl.venv)
    first = _tui_run(project)
    (rid,) = _runs(project)
    assert any(line.startswith(f"train: run {rid} succeeded") for line in first) and _trainings(fake_axolotl) == 1
    # The TUI's second run and the command's run on unchanged data: the same line, no training.
    assert _tui_run(project)[-1] == f"train: up to date with run {rid}"
    r = cli(["-C", project.dir, "run"], env={**project.env, **RUN_ENV})
    assert r.returncode == 0 and r.stdout.splitlines()[-1] == f"train: up to date with run {rid}"
    assert _runs(project) == [rid] and _trainings(fake_axolotl) == 1
