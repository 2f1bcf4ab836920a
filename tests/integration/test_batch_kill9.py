"""`overbrainer run` in batch mode killed with SIGKILL at every step of submit and collect, then run
again (as cron would) until nothing is pending: the fake batch APIs (tests/fixtures/batch_*.py,
state in the test's server, so it outlives the killed command) saw exactly one input file and one
batch, and answers.jsonl is byte for byte that of an uninterrupted run: no answer lost, none
twice.

The kill lands at a known point without timing:
- on the provider's side, the fake holds a request (`batches.hold`): before it takes effect
  (the command dies mid-send: the request is then dropped) or after it took effect, its answer
  kept (the command dies after the send, before it could record what it got);
- on the command's side, a wrapper holds a function of the command (`Journal.write` of a given
  submission state, the k-th `BatchAnswers._keep`) before or after it runs, leaving a mark; the
  test kills once the mark is there.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fixtures.cli import clean_env, run_cli
from tests.fixtures.project import Project
from tests.fixtures.provider import FakeProvider

DEADLINE = 60.0

# `python -c` wrapper: overbrainer with one function held on its k-th matching call (a mark first).
_HOLD_CALL = r"""
import importlib, runpy, sys, time
target, k, when, mark, cond = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
module, qual = target.split(":")
owner = importlib.import_module(module)
*path, name = qual.split(".")
for part in path:
    owner = getattr(owner, part)
real, test, seen = getattr(owner, name), eval(cond), [0]
def stop():
    open(mark, "w").close()
    time.sleep(600)
def held(*args, **kw):
    hit = test(*args, **kw)
    seen[0] += hit
    if hit and seen[0] == k and when == "before":
        stop()
    out = real(*args, **kw)
    if hit and seen[0] == k and when == "after":
        stop()
    return out
setattr(owner, name, held)
sys.argv = ["overbrainer", *sys.argv[6:]]
runpy.run_module("overbrainer", run_name="__main__", alter_sys=True)
"""
JOURNAL = "overbrainer.dataset.batch_journal:Journal.write"
KEEP = "overbrainer.pipeline.answers_batch:BatchAnswers._keep"
ANY = "lambda *a, **kw: True"

# (name, phase, how): phase "submit" kills the first `run`, "collect" the one after it submitted;
# how: ("fake", path, before) holds that POST on the provider, ("call", target, k, when, cond)
# holds a function of the command.
STEPS_OPENAI = [
    ("journal written, nothing sent", "submit",
     ("call", JOURNAL, 1, "after", "lambda self, sub: sub.state == 'submitting' and sub.file_id is None")),
    ("during the upload", "submit", ("fake", "/files", True)),
    ("uploaded, the file id not recorded", "submit", ("fake", "/files", False)),
    ("file id recorded, batch not created", "submit",
     ("call", JOURNAL, 1, "after", "lambda self, sub: sub.file_id is not None and sub.batch_id is None")),
    ("during the create", "submit", ("fake", "/batches", True)),
    ("created, the batch id not recorded", "submit", ("fake", "/batches", False)),
    ("collecting, some answers appended", "collect", ("call", KEEP, 3, "after", ANY)),
    ("collected, the journal not updated", "collect",
     ("call", JOURNAL, 1, "before", "lambda self, sub: sub.state == 'collected'")),
]
STEPS_ANTHROPIC = [
    ("journal written, nothing sent", "submit",
     ("call", JOURNAL, 1, "after", "lambda self, sub: sub.state == 'submitting' and sub.batch_id is None")),
    ("during the create", "submit", ("fake", "/messages/batches", True)),
    ("created, the batch id not recorded", "submit", ("fake", "/messages/batches", False)),
    ("collecting, some answers appended", "collect", ("call", KEEP, 3, "after", ANY)),
    ("collected, the journal not updated", "collect",
     ("call", JOURNAL, 1, "before", "lambda self, sub: sub.state == 'collected'")),
]


def _prepared(project: Project, fake_provider, protocol: str) -> None:
    model = "claude-sonnet-4-5" if protocol == "anthropic" else "gpt-4o-mini"
    project.write(topics=2, subtopics=2, questions=3, protocol=protocol, parent_model=model, generator_model=model,
                  dialect="openai" if protocol == "openai" else None,
                  pipeline={"concurrency": 2, "mode": "batch"})
    fake_provider.models = {model: (2.0, 8.0)}
    texts, _, err = project.stage("questions")
    assert err is None, texts


def _reference(project: Project, root: Path, models: dict) -> bytes:
    """answers.jsonl of an uninterrupted batch run of a copy of `project`, on a provider of its
    own (a batch of the same questions on the test's provider could pass for the test's own)."""
    with FakeProvider() as fake:
        fake.models = dict(models)
        other = Project(root, fake.url)
        shutil.copytree(project.dir, other.dir)
        other.env = {**project.env, "OVERBRAINER_PROVIDERS__FAKE__BASE_URL": fake.url}
        _until_done(other)
        assert fake.batches.created == 1
    return (other.data / "answers.jsonl").read_bytes()


def _until_done(project: Project, runs: int = 6) -> None:
    """`run` as cron runs it until a run ends with nothing pending."""
    for _ in range(runs):
        done = run_cli(["-C", project.dir, "run"], env=project.env, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        if "pending" not in done.stdout + done.stderr:
            return
    raise AssertionError(f"still pending after {runs} runs: {done.stdout}{done.stderr}")


def _killed_run(project: Project, fake_provider, how: tuple, mark: Path) -> None:
    """One `run` killed with SIGKILL once it reached the step `how` holds."""
    hold = None
    if how[0] == "fake":
        hold = fake_provider.batches.hold(how[1], "POST", before=how[2])
        argv = [sys.executable, "-m", "overbrainer"]
        reached = hold.arrived.is_set
    else:
        _, target, k, when, cond = how
        argv = [sys.executable, "-c", _HOLD_CALL, target, str(k), when, str(mark), cond]
        reached = mark.exists
    proc = subprocess.Popen([*argv, "-C", str(project.dir), "run"], env=clean_env(project.env),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + DEADLINE
        while not reached():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, f"the run never reached the step held ({how})"
            time.sleep(0.02)
        proc.kill()
        proc.communicate(timeout=30)
        assert proc.returncode == -9
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        if hold is not None:
            hold.release(drop=how[2])


def _ids(project: Project) -> list[str]:
    return [r["id"] for r in project.records("answers")]


def _check(protocol: str, step, project, fake_provider, tmp_path):
    name, phase, how = step
    _prepared(project, fake_provider, protocol)
    expected = _reference(project, tmp_path / "reference", fake_provider.models)
    questions = {r["id"] for r in project.records("questions")}
    assert len(questions) == 12 and expected.count(b"\n") == 12
    files, batches = fake_provider.files.created, fake_provider.batches.created
    if phase == "collect":
        fake_provider.batches.auto_finish_after = None  # the batch ends once the test lets it
        first = run_cli(["-C", project.dir, "run"], env=project.env, timeout=120)
        assert first.returncode == 0 and "pending" in first.stdout + first.stderr, first.stdout + first.stderr
        fake_provider.batches.finish()
    _killed_run(project, fake_provider, how, tmp_path / "mark")
    if phase == "collect" and how[1] == KEEP:
        assert len(_ids(project)) == 3, f"{name}: killed after 3 answers appended"
    fake_provider.batches.auto_finish_after = 1
    _until_done(project)
    assert fake_provider.batches.created - batches == 1, f"{name}: duplicate batches"
    if protocol == "openai":
        assert fake_provider.files.created - files == 1, f"{name}: duplicate input files"
    assert len(fake_provider.batches.processed) == 12, f"{name}: requests the provider ran (and billed) twice"
    assert fake_provider.batches.invalid == [], f"{name}: requests the provider refused"
    ids = _ids(project)
    assert len(ids) == len(set(ids)) and set(ids) == questions, f"{name}: answers lost or twice"
    assert (project.data / "answers.jsonl").read_bytes() == expected, name


@pytest.mark.parametrize("step", STEPS_OPENAI, ids=[s[0] for s in STEPS_OPENAI])
def test_openai_kill9_at_each_step(step, project, fake_provider, tmp_path):
    _check("openai", step, project, fake_provider, tmp_path)


@pytest.mark.parametrize("step", STEPS_ANTHROPIC, ids=[s[0] for s in STEPS_ANTHROPIC])
def test_anthropic_kill9_at_each_step(step, project, fake_provider, tmp_path):
    _check("anthropic", step, project, fake_provider, tmp_path)
