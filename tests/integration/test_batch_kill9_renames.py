"""Batch mode killed with SIGKILL at every atomic rewrite of a submit and of a collect (each
journal record, the dataset's figures), then run again until the answers are in: never a second
batch, never an answer lost or written twice. The kill lands without timing: the command runs
with `os.replace` wrapped so that the k-th rename inside the project first leaves a mark and then
waits; the test kills once the mark is there, for k = 1, 2, … until a command ends without
reaching the k-th rename (tests/integration/test_run_kill9.py's method)."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from tests.fixtures.cli import clean_env, run_cli
from tests.fixtures.project import Project
from tests.integration.test_run_kill9 import _HOLD_REPLACE

MODEL = {"openai": "gpt-5-mini", "anthropic": "claude-sonnet-4-5"}
DEADLINE = 60.0


def _held_run(project: Project, k: int, mark, args) -> bool:
    """`overbrainer ARGS` with the k-th rename held: killed there (True), or it ended first."""
    import time

    proc = subprocess.Popen([sys.executable, "-c", _HOLD_REPLACE, str(k), str(project.dir), str(mark),
                             "-C", str(project.dir), *args], env=clean_env(project.env),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + DEADLINE
    try:
        while not mark.exists():
            if proc.poll() is not None:
                return False
            assert time.monotonic() < deadline, "the command neither ended nor reached the rename"
            time.sleep(0.02)
        proc.kill()
        return True
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        mark.unlink(missing_ok=True)


def _complete(project: Project) -> None:
    outs = []
    for _ in range(4):
        r = run_cli(["-C", project.dir, "answers"], env=project.env)
        assert r.returncode == 0, r.stderr
        outs.append(r.stdout + r.stderr)
        if "pending" not in r.stdout:
            return
    raise AssertionError("still pending after 4 runs: " + "\n".join(outs))


@pytest.mark.parametrize("protocol,dialect,phase", [
    ("openai", "openai", "submit"), ("openai", "openai", "collect"),
    ("anthropic", None, "submit"),  # its recovery goes through the list; a collect is the same code
])
def test_kill9_at_every_rename(project, fake_provider, tmp_path, protocol, dialect, phase):
    model = MODEL[protocol]
    project.write(topics=1, subtopics=2, questions=3, protocol=protocol, dialect=dialect, parent_model=model,
                  generator_model=model, pipeline={"mode": "batch"})
    assert run_cli(["-C", project.dir, "questions"], env=project.env).returncode == 0
    mark = tmp_path / "mark"
    k, killed = 1, True
    while killed:
        copy = Project(tmp_path / f"k{k}", project.url)
        shutil.copytree(project.dir, copy.dir)
        copy.env = dict(project.env)
        for b in fake_provider.batches.all():  # one project's batches on the account (docs/batch.md)
            fake_provider.batches.remove(b.id)
        before = fake_provider.batches.created
        if phase == "collect":
            assert run_cli(["-C", copy.dir, "answers"], env=copy.env).returncode == 0
        killed = _held_run(copy, k, mark, ["answers"])
        _complete(copy)
        answers = copy.records("answers")
        assert len(answers) == 6 and len({a["id"] for a in answers}) == 6, (k, answers)
        assert fake_provider.batches.created - before == 1, k
        k += 1
    assert k > 3  # a submit has at least its three journal records; a collect its own and the figures'
