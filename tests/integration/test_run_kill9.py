"""`overbrainer run` killed with SIGKILL at any point, then run again to completion, gives the
dataset an uninterrupted run gives: the same subtopics, questions and answers (as multisets of
lines: their order is completion order) and byte-identical train.jsonl and eval.jsonl.

The fake answers realistically and deterministically (tests/fixtures/provider_text.py: the same
prompt, the same reply), so two runs that ask the same things get the same records. The kill
lands at a known point without timing:
- in a stage: the fake holds chosen requests (it answers the others), and the test kills once
  the data file has the lines that must be there and every worker waits on a held request;
- around the atomic rewrites (split's train.jsonl and eval.jsonl, any state file): the command
  runs with `os.replace` wrapped so that the k-th rename inside the project first leaves a mark
  and then waits; the test kills once the mark is there, for k = 1, 2, … until a run ends
  without reaching the k-th rename. Both during a first run and during a rerun.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.fixtures.cli import clean_env, run_cli, signalled_when
from tests.fixtures.project import Project
from tests.fixtures.provider import FakeProvider
from tests.fixtures.provider_text import realistic

SHAPE = {"topics": 2, "subtopics": 3, "questions": 4, "pipeline": {"concurrency": 2, "question_batch_size": 2}}
FILES = ("subtopics", "questions", "answers")  # compared as multisets of lines
SPLIT = ("train", "eval")  # compared byte for byte
DEADLINE = 30.0

# `python -c` wrapper: overbrainer with the k-th os.replace into the project held (a mark first).
_HOLD_REPLACE = r"""
import os, runpy, sys, time
k, under, mark = int(sys.argv[1]), os.path.realpath(sys.argv[2]), sys.argv[3]
seen, real = [0], os.replace
def replace(src, dst, *args, **kw):
    if os.path.realpath(os.fspath(dst)).startswith(under + os.sep):
        seen[0] += 1
        if seen[0] == k:
            with open(mark, "w") as f:
                f.write(os.path.relpath(os.fspath(dst), under))
            time.sleep(600)
    return real(src, dst, *args, **kw)
os.replace = replace
sys.argv = ["overbrainer", *sys.argv[4:]]
runpy.run_module("overbrainer", run_name="__main__", alter_sys=True)
"""


class Gate:
    """The fake's responder: realistic replies; while armed, a request whose prompt `match`es is
    held (after the first `after` such ones are let through) until `release()`."""

    def __init__(self):
        self._cond = threading.Condition()
        self._match = None
        self._after = 0
        self.held = 0

    def arm(self, match, after: int = 0) -> None:
        with self._cond:
            self._match, self._after, self.held = match, after, 0

    def release(self) -> None:
        with self._cond:
            self._match = None
            self._cond.notify_all()

    def __call__(self, req):
        with self._cond:
            match = self._match
            if match is not None and match(req.prompt):
                if self._after > 0:
                    self._after -= 1
                else:
                    self.held += 1
                    self._cond.wait_for(lambda: self._match is not match, timeout=DEADLINE * 2)
        return realistic(req)


@pytest.fixture
def gated(fake_provider):
    gate = Gate()
    fake_provider.responder = gate
    yield gate
    gate.release()


def _dataset(data: Path) -> dict:
    out = {}
    for name in FILES:
        path = data / f"{name}.jsonl"
        out[name] = sorted(path.read_bytes().splitlines(keepends=True)) if path.exists() else []
    for name in SPLIT:
        path = data / f"{name}.jsonl"
        out[name] = path.read_bytes() if path.exists() else None
    return out


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict:
    """The dataset of an uninterrupted `run` on a fresh project."""
    fake = FakeProvider().start()
    fake.responder = realistic
    try:
        project = Project(tmp_path_factory.mktemp("reference") / "proj", fake.url).write(**SHAPE)
        r = run_cli(["-C", project.dir, "run"], env=project.env, home=project.dir.parent)
        assert r.returncode == 0, r.stderr
    finally:
        fake.stop()
    data = _dataset(project.data)
    assert [len(data[n]) for n in FILES] == [6, 24, 24] and data["train"] and data["eval"]
    return data


def _lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def _start(project: Project, tmp_path: Path, hold: tuple | None = None) -> subprocess.Popen:
    """`overbrainer run` (with the k-th rename held: hold = (k, mark path))."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    args = ["-C", str(project.dir), "run"]
    cmd = ([sys.executable, "-c", _HOLD_REPLACE, str(hold[0]), str(project.dir), str(hold[1]), *args] if hold
           else [sys.executable, "-m", "overbrainer", *args])
    return subprocess.Popen(cmd, env=clean_env(project.env, home), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _kill_when(proc: subprocess.Popen, ready, what: str) -> None:
    import signal

    signalled_when(proc, ready, what, signum=signal.SIGKILL, timeout=DEADLINE)
    assert proc.returncode == -signal.SIGKILL, what


def _complete(project: Project, cli, reference: dict, what: str) -> None:
    r = cli(["-C", project.dir, "run"], env=project.env)
    assert r.returncode == 0, f"{what}: {r.stderr}"
    got = _dataset(project.data)
    for name in FILES + SPLIT:
        assert got[name] == reference[name], f"{what}: data/{name}.jsonl differs from an uninterrupted run's"


def _subtopics_of(topic: str):
    return lambda prompt: f'dataset about the topic "{topic}"' in prompt and "distinct subtopics" in prompt


def _second_batch(prompt: str) -> bool:
    return "These questions already exist" in prompt


def _answer(prompt: str) -> bool:
    return "JSON array of" not in prompt


# (what, the held requests, how many such let through first, lines of which file, workers held)
STAGE_POINTS = [
    ("subtopics: one topic's written, the other's asked", _subtopics_of("topic1"), 0, "subtopics", 3, 1),
    ("questions: every subtopic in progress has its first batch, its second asked", _second_batch, 0,
     "questions", 4, 2),
    ("answers: 5 written, 2 asked", _answer, 5, "answers", 5, 2),
]


@pytest.mark.parametrize("what,match,after,name,lines,held", STAGE_POINTS, ids=["subtopics", "questions", "answers"])
def test_a_run_killed_mid_stage_then_rerun_gives_the_uninterrupted_dataset(project, gated, cli, tmp_path, reference,
                                                                            what, match, after, name, lines, held):
    project.write(**SHAPE)
    gated.arm(match, after)
    proc = _start(project, tmp_path)
    path = project.data / f"{name}.jsonl"
    _kill_when(proc, lambda: _lines(path) >= lines and gated.held >= held, what)
    assert _lines(path) == lines, what  # nothing more could be written: every worker was held
    gated.release()
    _complete(project, cli, reference, what)


def _hold_rename(project: Project, tmp_path: Path, k: int) -> str | None:
    """Run with the k-th rename held and kill it there: the renamed file, or None when the run
    ended (successfully) without a k-th rename."""
    mark = tmp_path / f"mark{k}"
    proc = _start(project, tmp_path, (k, mark))
    try:
        end = time.monotonic() + DEADLINE
        while not mark.exists() and proc.poll() is None:
            assert time.monotonic() < end, f"rename {k}: the run neither ended nor reached it"
            time.sleep(0.02)
    finally:
        if mark.exists() or proc.poll() is None:
            proc.kill()
        out, err = proc.communicate(timeout=DEADLINE)
    if not mark.exists():
        assert proc.returncode == 0, err
        return None
    return mark.read_text()


@pytest.mark.parametrize("rerun", [False, True], ids=["first-run", "rerun"])
def test_a_run_killed_at_each_rename_then_rerun_gives_the_uninterrupted_dataset(fake_provider, cli, tmp_path, reference,
                                                                             rerun):
    fake_provider.responder = realistic
    renamed = []
    k = 1
    while True:
        where = tmp_path / f"k{k}"
        project = Project(where / "proj", fake_provider.url).write(**SHAPE)
        if rerun:
            _complete(project, cli, reference, "the run before the rerun")
        target = _hold_rename(project, where, k)
        what = f"killed before rename {k} ({target})" if target else f"a run without a rename {k}"
        assert _dataset(project.data) == reference or target is not None, what
        if target is None:
            break
        renamed.append(target)
        _complete(project, cli, reference, what)
        k += 1
    if not rerun:  # a first run's split rewrites train.jsonl then eval.jsonl: both points were hit
        assert {"data/train.jsonl", "data/eval.jsonl"} <= set(renamed), renamed
