"""Stops as cron, CI and service managers send them, to the real `overbrainer answers` while
requests are in flight: GNU `timeout` (its signal twice, to the command and to its process
group), `timeout -k` (SIGKILL after), a CI runner cancelling a job (SIGINT or SIGTERM to the
process group), systemd's and `docker stop`'s one SIGTERM. The same signal repeated within a
second is one stop: every answer in flight is waited for and written, none is abandoned, none is
asked twice (only a later, separate interrupt abandons them: test_cli_stages_signals). Many runs
each, several at a time, each against a fake provider of its own."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pytest

from tests.fixtures.cli import clean_env
from tests.fixtures.provider import FakeProvider

RUNS = 20
AT_ONCE = 5
LATENCY = 0.5  # seconds per answer: requests are in flight most of the time
QUESTIONS = 80
GAP = 0.3  # seconds between deliveries of the same stop (within support.stop_signals.REPEAT)
AFTER = 5  # seconds: `timeout`'s least duration (more on a loaded machine: see `after`)
CONCURRENCY = 4
DEADLINE = 60.0


@pytest.fixture
def template(project, cli):
    """A project with 80 questions, none answered; each run works on a copy of it (80 answers take
    10 s: a run is stopped long before it ends)."""
    project.write(topics=2, subtopics=8, questions=5, pipeline={"concurrency": CONCURRENCY})
    r = cli(["-C", project.dir, "questions"], env=project.env)
    assert r.returncode == 0, r.stderr
    return project


@dataclass
class Outcome:
    code: int
    out: str
    err: str
    asked: list[str]  # question ids, one per chat request the provider got
    answered: list[str]  # question ids of data/answers.jsonl
    raw: bytes  # data/answers.jsonl

    @property
    def waited(self) -> bool:
        """The stop came with requests in flight, and they were waited for."""
        return "request(s) in flight" in self.err


def _ids(project_dir, requests) -> list[str]:
    questions = [json.loads(line) for line in (project_dir / "data" / "questions.jsonl").read_text().splitlines()]
    ids = []
    for r in requests:
        content = r.body["messages"][-1]["content"]
        (found,) = [q["id"] for q in questions if q["text"] in content]
        ids.append(found)
    return ids


def _run(template, tmp_path, i: int, start, stop=None) -> Outcome:
    """Run `answers` on a copy of the template against a fake provider of its own: `start(argv,
    env)` starts it (a Popen), `stop(proc, fake)` stops it (None: it stops itself)."""
    fake = FakeProvider().start()
    fake.latency = LATENCY
    try:
        copy = tmp_path / f"run{i}"
        shutil.copytree(template.dir, copy)
        home = tmp_path / f"home{i}"
        home.mkdir()
        env = clean_env({**template.env, "OVERBRAINER_PROVIDERS__FAKE__BASE_URL": fake.url}, home)
        proc = start([sys.executable, "-m", "overbrainer", "-C", str(copy), "answers"], env)
        try:
            if stop is not None:
                stop(proc, fake)
            out, err = proc.communicate(timeout=DEADLINE)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
        path = copy / "data" / "answers.jsonl"
        raw = path.read_bytes() if path.exists() else b""
        answered = [json.loads(line)["id"] for line in raw.splitlines()]
        return Outcome(proc.returncode, out, err, _ids(copy, fake.chat_requests()), answered, raw)
    finally:
        fake.stop()


def _many(fn, n: int = RUNS) -> list[Outcome]:
    with ThreadPoolExecutor(AT_ONCE) as pool:
        return list(pool.map(fn, range(n)))


def _kept_everything(o: Outcome, code: int) -> None:
    assert o.code == code, o.err
    assert "abandoned" not in o.out + o.err, o.err
    assert len(o.asked) == len(set(o.asked)), "a question was asked twice"
    assert sorted(o.answered) == sorted(o.asked), o.err  # every answer in flight was kept
    assert o.raw == b"" or o.raw.endswith(b"\n")
    if o.asked:
        assert "interrupted: answers stopped; rerun `overbrainer -C " in o.err


def _popen(argv, env):
    """Started in a session (and process group) of its own, as a CI job's shell or `timeout` is."""
    return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


@pytest.fixture
def after(template, tmp_path) -> int:
    """`timeout`'s duration on this machine now: the slowest of AT_ONCE runs started together to
    reach its first requests in flight, plus half of it and 1 s (at least AFTER). On a loaded
    machine a start takes seconds, and a fixed duration would stop every run before it sent
    anything (a stop with nothing in flight, which the tests below are not about)."""
    def startup(i):
        took = []

        def stop(proc, fake):
            began = time.monotonic()
            _when_in_flight(fake, proc)
            took.append(time.monotonic() - began)
            os.killpg(proc.pid, signal.SIGKILL)

        _run(template, tmp_path / "startup", i, _popen, stop)
        return took[0]

    (tmp_path / "startup").mkdir()
    with ThreadPoolExecutor(AT_ONCE) as pool:
        slowest = max(pool.map(startup, range(AT_ONCE)))
    return max(AFTER, round(slowest * 1.5 + 1))


@pytest.mark.timeout(600)  # its duration grows with `after` on a loaded machine
def test_timeout_keeps_every_answer_in_flight(template, tmp_path, after):
    """`timeout 5 overbrainer … answers`, 20 times: its SIGTERM comes twice (to the command, then
    to its group); each run waits for what it has in flight, writes it, exits 124 (timeout's
    code for a command it stopped; with --preserve-status, ours: 143)."""
    def one(i):
        preserve = ["--preserve-status"] if i % 2 else []
        return _run(template, tmp_path, i,
                    lambda argv, env: _popen(["timeout", *preserve, str(after), *argv], env))

    outcomes = _many(one)
    for i, o in enumerate(outcomes):
        _kept_everything(o, 143 if i % 2 else 124)
    assert sum(o.waited for o in outcomes) >= RUNS // 2  # most stops met requests in flight


def _when_in_flight(fake: FakeProvider, proc) -> None:
    """Until the fake holds a full set of requests, none of them answered yet."""
    end = time.monotonic() + DEADLINE
    while time.monotonic() < end:
        if len(fake.chat_requests()) - len(fake.served) >= CONCURRENCY:
            return
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.01)
    raise AssertionError("no requests in flight")


def _when_answered(fake: FakeProvider, proc, n: int) -> None:
    """Until the fake has answered n requests (or the run has ended: `timeout` came first)."""
    end = time.monotonic() + DEADLINE
    while time.monotonic() < end and len(fake.served) < n and proc.poll() is None:
        time.sleep(0.01)


@pytest.mark.parametrize("signum,times,code", [
    (signal.SIGINT, 1, 130),   # GitHub Actions cancelling a job: SIGINT to the group
    (signal.SIGTERM, 1, 143),  # GitLab's runner, systemd's stop, `docker stop`
    (signal.SIGTERM, 2, 143),  # the same stop delivered twice (to the process, then to its group)
    (signal.SIGINT, 3, 130),   # a wrapper that signals the group, then again, within the second
])
def test_a_process_group_signalled_keeps_every_answer_in_flight(template, tmp_path, signum, times, code):
    """5 runs of each: 20 process-group kills in all."""
    def stop(proc, fake):
        _when_in_flight(fake, proc)
        for n in range(times):
            if n:
                time.sleep(GAP)  # delivered again: not coalesced with the first by the kernel
            os.killpg(proc.pid, signum)

    outcomes = _many(lambda i: _run(template, tmp_path, i, _popen, stop), RUNS // 4)
    for o in outcomes:
        _kept_everything(o, code)
        assert o.waited and len(o.asked) >= CONCURRENCY


@pytest.mark.timeout(600)  # its duration grows with `after` on a loaded machine
def test_timeout_kill_after_leaves_nothing_torn_and_the_rerun_asks_only_the_rest(template, tmp_path, after):
    """`timeout -k 1 <after>`: SIGTERM, and SIGKILL 1 s later, while the answers in flight are
    still awaited (the first answers come at once, then each takes longer than the run has left,
    so none can land between the two signals): the group is killed (`timeout` too, as it kills
    its own group), nothing is half-written; the next run asks exactly the questions without an
    answer, never one written before."""
    def one(i):
        fake = FakeProvider().start()
        fake.latency = LATENCY
        copy = tmp_path / f"kill{i}"
        shutil.copytree(template.dir, copy)
        home = tmp_path / f"home-kill{i}"
        home.mkdir()
        env = clean_env({**template.env, "OVERBRAINER_PROVIDERS__FAKE__BASE_URL": fake.url}, home)
        argv = [sys.executable, "-m", "overbrainer", "-C", str(copy), "answers"]
        try:
            proc = _popen(["timeout", "-k", "1", str(after), *argv], env)
            _when_answered(fake, proc, CONCURRENCY)
            fake.latency = after + 5.0
            _, err = proc.communicate(timeout=DEADLINE)
            path = copy / "data" / "answers.jsonl"
            raw = path.read_bytes() if path.exists() else b""
            fake.latency = 0
            fake.clear()
            rerun = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=DEADLINE)
            return proc.returncode, err, raw, _ids(copy, fake.chat_requests()), rerun, path.read_bytes()
        finally:
            fake.stop()

    with ThreadPoolExecutor(3) as pool:
        results = list(pool.map(one, range(3)))
    for code, err, before, asked, rerun, later in results:
        assert code in (-signal.SIGKILL, 124), err  # killed while it waited (or done just in time)
        assert before == b"" or before.endswith(b"\n")  # no torn line
        kept = [json.loads(line)["id"] for line in before.splitlines()]
        assert rerun.returncode == 0, rerun.stderr
        assert later.startswith(before)  # nothing written is lost or changed
        ids = [json.loads(line)["id"] for line in later.splitlines()]
        assert len(ids) == len(set(ids)) == QUESTIONS
        assert sorted(asked) == sorted(set(ids) - set(kept))  # the rest, once each
    assert any(code == -signal.SIGKILL for code, *_ in results), "\n".join(r[1] for r in results)  # the kill did come
