"""Batch mode from the command line, as cron runs it: `run` submits and exits 0 saying what is
pending, the next `run` collects and goes on to split; `batches ls|cancel`; the configuration
refuses a provider without a batch API (exit 2, naming the key, nothing sent); and `kill -9` at
each step of a submission leaves no second batch and no lost result."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest

from tests.fixtures.cli import clean_env

MODEL = {"openai": "gpt-5-mini", "anthropic": "claude-sonnet-4-5"}


def _project(project, fake_provider, protocol="openai", dialect="openai", **pipeline):
    model = MODEL[protocol]
    project.write(topics=1, subtopics=2, questions=3, protocol=protocol, dialect=dialect, parent_model=model,
                  generator_model=model, pipeline={"mode": "batch", **pipeline})
    fake_provider.models = {model: (2.0, 8.0)}
    return project


@pytest.mark.parametrize("dialect", ["openrouter", "llamacpp", "ollama", "vllm", "generic"])
def test_a_provider_without_a_batch_api_is_refused(project, fake_provider, cli, dialect):
    _project(project, fake_provider, dialect=dialect)
    for args in (["config", "check"], ["run"]):
        r = cli(["-C", project.dir, *args], env=project.env)
        assert r.returncode == 2, r.stderr
        assert "pipeline.mode: batch mode needs a provider with a batch API" in r.stderr
        assert f"{dialect} dialect" in r.stderr
    assert fake_provider.count == 0 and fake_provider.batches.created == 0


def test_answers_mode_names_its_own_key(project, fake_provider, cli):
    project.write(dialect="ollama", pipeline={"answers_mode": "batch"})
    r = cli(["-C", project.dir, "config", "check"], env=project.env)
    assert r.returncode == 2 and "pipeline.answers_mode: batch mode needs" in r.stderr


@pytest.mark.parametrize("protocol,dialect", [("openai", "openai"), ("anthropic", None)])
def test_cron_run_submits_then_collects_then_splits(project, fake_provider, cli, protocol, dialect):
    _project(project, fake_provider, protocol, dialect)
    r = cli(["-C", project.dir, "run"], env=project.env)
    assert r.returncode == 0, r.stderr
    assert "6 question(s) pending in 1 batch(es) since" in r.stdout and "run the command again" in r.stdout
    # The log says what each call does: not `nothing to do` before it submits or collects.
    assert " INFO answers: batch mode: no ended batch to collect\n" in r.stderr
    assert "answers: nothing to do" not in r.stderr
    assert "split:" not in r.stdout and not (project.data / "answers.jsonl").exists()
    ls = cli(["-C", project.dir, "--json", "batches", "ls"], env=project.env)
    assert ls.returncode == 0, ls.stderr
    subs = json.loads(ls.stdout)["submissions"]
    assert [s["state"] for s in subs] == ["submitted"] and subs[0]["requests"] == 6
    r = cli(["-C", project.dir, "--json", "run"], env=project.env)
    assert r.returncode == 0, r.stderr
    started = [d for d in map(json.loads, r.stderr.splitlines()) if d["event"] == "stage_started"]
    assert {"event": "stage_started", "stage": "answers", "total": 6, "skipped": 0, "batch": True} in started
    assert not [d for d in started if d["stage"] == "answers" and not d["batch"]]
    stages = {d["stage"]: d for d in map(json.loads, r.stdout.splitlines())}
    assert stages["answers"]["mode"] == "batch" and stages["answers"]["pending"] == 0
    assert stages["answers"]["done"] + stages["answers"]["excluded"] == 6
    assert stages["split"]["train"] + stages["split"]["eval"] > 0
    assert len(project.records("answers")) == 6 and fake_provider.batches.created == 1


def test_wait_collects_in_one_call(project, fake_provider, cli):
    _project(project, fake_provider)
    fake_provider.batches.auto_finish_after = 2  # ends on the second look
    r = cli(["-C", project.dir, "run", "--wait"], env=project.env)
    assert r.returncode == 0, r.stderr
    assert "split:" in r.stdout and len(project.records("answers")) == 6
    looks = [line.split(" INFO ", 1)[1] for line in r.stderr.splitlines() if " INFO answers: batch mode: " in line]
    assert looks == ["answers: batch mode: no ended batch to collect",
                     "answers: batch mode: collecting 6 answer(s) from ended batches"], r.stderr
    assert "answers: 6/6" in r.stderr and "answers: nothing to do" not in r.stderr


@pytest.mark.parametrize("protocol,dialect", [("openai", "openai"), ("anthropic", None)])
def test_cancel_then_resubmitted(project, fake_provider, cli, protocol, dialect):
    _project(project, fake_provider, protocol, dialect)
    fake_provider.batches.auto_finish_after = None  # only cancel ends it
    assert cli(["-C", project.dir, "run"], env=project.env).returncode == 0
    r = cli(["-C", project.dir, "batches", "cancel", "--all"], env=project.env)
    assert r.returncode == 0, r.stderr
    assert "cancelled s" in r.stdout
    fake_provider.batches.auto_finish_after = 1
    r = cli(["-C", project.dir, "answers"], env=project.env)  # collects the cancel, sends them again
    assert r.returncode == 0, r.stderr
    assert fake_provider.batches.created == 2 and "6 question(s) submitted" in r.stdout
    r = cli(["-C", project.dir, "answers"], env=project.env)
    assert r.returncode == 0 and len(project.records("answers")) == 6


def _start(project, args):
    return subprocess.Popen([sys.executable, "-m", "overbrainer", "-C", str(project.dir), *args],
                            env=clean_env(project.env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("protocol,dialect,prefix", [
    ("openai", "openai", "/files"),  # killed after the upload, before its id was recorded
    ("openai", "openai", "/batches"),  # after the batch was created, before its id was recorded
    ("anthropic", None, "/messages/batches"),  # the same, found by the list (no metadata)
])
def test_kill9_after_a_send_before_its_record(project, fake_provider, cli, protocol, dialect, prefix):
    _project(project, fake_provider, protocol, dialect)
    assert cli(["-C", project.dir, "questions"], env=project.env).returncode == 0
    hold = fake_provider.batches.hold(prefix, method="POST")
    proc = _start(project, ["answers"])
    try:
        assert hold.wait(60), proc.stderr.read() if proc.poll() is not None else "no send"
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
    finally:
        hold.release()
        if proc.poll() is None:
            proc.kill()
    journal = list((project.dir / ".overbrainer" / "batches").glob("*.json"))
    assert [json.loads(p.read_text())["state"] for p in journal] == ["submitting"]
    r = cli(["-C", project.dir, "answers"], env=project.env)  # finds what was sent
    assert r.returncode == 0, r.stderr
    assert fake_provider.batches.created == 1 and fake_provider.files.created <= 1, r.stderr
    r = cli(["-C", project.dir, "answers"], env=project.env)  # collects it
    assert r.returncode == 0, r.stderr
    answers = project.records("answers")
    assert len(answers) == 6 and len({a["id"] for a in answers}) == 6
    assert fake_provider.batches.created == 1


def test_plan_shows_online_and_batch_side_by_side(project, fake_provider, cli):
    _project(project, fake_provider)
    assert cli(["-C", project.dir, "questions"], env=project.env).returncode == 0
    r = cli(["-C", project.dir, "--json", "answers", "--plan"], env=project.env)
    assert r.returncode == 0, r.stderr
    answers = json.loads(r.stdout.splitlines()[0])
    assert answers["mode"] == "batch" and answers["requests"] == 6
    assert answers["batch_cost_usd"] == pytest.approx(answers["online_cost_usd"] * 0.5)
    assert answers["batch_cost_max_usd"] == pytest.approx(answers["online_cost_max_usd"] * 0.5)
    assert answers["cost_usd"] == answers["batch_cost_usd"]  # the mode configured is what counts
    text = cli(["-C", project.dir, "answers", "--plan"], env=project.env).stdout
    assert "online $" in text and "batch $" in text and "batch mode counted" in text
    assert fake_provider.batches.created == 0 and fake_provider.files.created == 0
