"""`answers` killed (-9) or interrupted (SIGINT) while it writes: nothing written is lost, no
torn line survives, the rerun completes with every question exactly once. A stop keeps what was
paid for: the requests in flight are waited for (a second Ctrl-C abandons them, and says so)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from overbrainer.support.stop_signals import REPEAT
from tests.fixtures.cli import clean_env

DEADLINE = 30.0


def _start(project, args, tmp_path):
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return subprocess.Popen([sys.executable, "-m", "overbrainer", "-C", str(project.dir), *args],
                            env=clean_env(project.env, home), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _lines(path):
    return path.read_bytes().split(b"\n") if path.exists() else [b""]


def _wait_for_answers(path, n, proc):
    """Until `n` complete lines are in the file (the fake is slow, so the stage is mid-way)."""
    end = time.monotonic() + DEADLINE
    while time.monotonic() < end:
        if len(_lines(path)) - 1 >= n:
            return
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.01)
    raise AssertionError("answers did not start")


def _prepare(project, cli):
    project.write(topics=2, subtopics=2, questions=4, pipeline={"concurrency": 2})
    r = cli(["-C", project.dir, "questions"], env=project.env)
    assert r.returncode == 0, r.stderr
    return {q["id"] for q in project.records("questions")}


def _check_complete(project, ids):
    raw = (project.data / "answers.jsonl").read_bytes()
    assert raw.endswith(b"\n")
    answers = [json.loads(line) for line in raw.splitlines()]  # no torn line anywhere
    assert sorted(a["id"] for a in answers) == sorted(ids)    # every question exactly once


def test_kill_9_mid_answers_then_rerun(project, fake_provider, cli, tmp_path):
    ids = _prepare(project, cli)
    fake_provider.latency = 0.1
    path = project.data / "answers.jsonl"
    proc = _start(project, ["answers"], tmp_path)
    try:
        _wait_for_answers(path, 3, proc)
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=DEADLINE)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    written = [line for line in _lines(path)[:-1]]  # complete lines at the time of the kill
    assert 3 <= len(written) < len(ids)
    fake_provider.latency = 0
    r = cli(["-C", project.dir, "answers"], env=project.env)
    assert r.returncode == 0, r.stderr
    _check_complete(project, ids)
    after = path.read_bytes().split(b"\n")
    assert after[:len(written)] == written  # nothing that had been written is lost or changed


@pytest.mark.parametrize("command,signum,code", [("answers", signal.SIGINT, 130), ("run", signal.SIGINT, 130),
                                                 ("answers", signal.SIGTERM, 143), ("answers", signal.SIGHUP, 129)])
def test_a_signal_mid_answers_stops_the_stage_says_what_resumes_and_exits(project, fake_provider, cli, tmp_path,
                                                                         command, signum, code):
    """Ctrl-C (130), SIGTERM (143: a timeout, systemd, `docker stop`, a CI cancellation) and SIGHUP
    (129: the terminal closed, the SSH session dropped) alike."""
    ids = _prepare(project, cli)
    fake_provider.latency = 0.1
    path = project.data / "answers.jsonl"
    proc = _start(project, [command], tmp_path)
    try:
        _wait_for_answers(path, 2, proc)
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=DEADLINE)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == code, err
    # A note naming the stage and what resumes it (with the -C DIR given), not an error; under
    # `run` too.
    d = project.dir
    assert f"\ninterrupted: answers stopped; rerun `overbrainer -C {d} answers` (or `overbrainer -C {d} run`) to resume\n" in err
    assert "error:" not in err
    # The stage's summary is still printed (under `run`, after the earlier stages' ones).
    summary = out.splitlines()[-1]
    assert summary.startswith("answers: stopped after ") and " of 16 questions: interrupted; " in summary
    hist = project.history()
    assert hist[-1]["stage"] == "answers" and hist[-1]["status"] == "interrupted"
    assert hist[-1]["done"] >= 2
    fake_provider.latency = 0
    r = cli(["-C", project.dir, "answers"], env=project.env)
    assert r.returncode == 0, r.stderr
    _check_complete(project, ids)


def _in_flight(fake, n, proc):
    """Until the fake holds `n` answer requests at once, none served yet."""
    end = time.monotonic() + DEADLINE
    while time.monotonic() < end:
        if len(fake.chat_requests()) >= n:
            assert not fake.served
            return
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.01)
    raise AssertionError("the answers were not asked")


def test_ctrl_c_keeps_every_answer_the_provider_served(project, fake_provider, cli, tmp_path):
    """Four answers in flight (1 s each) when Ctrl-C comes: nothing new is sent, the four are
    waited for, written, and their tokens recorded; the rerun asks only for the rest."""
    ids = _prepare(project, cli)
    project.write(topics=2, subtopics=2, questions=4, pipeline={"concurrency": 4})
    fake_provider.clear()
    fake_provider.latency = 1.0
    proc = _start(project, ["answers"], tmp_path)
    try:
        _in_flight(fake_provider, 4, proc)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=DEADLINE)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    served = fake_provider.served
    answers = project.records("answers")
    assert len(served) == len(fake_provider.chat_requests()) == 4  # nothing sent after Ctrl-C
    assert sorted(a["id"] for a in answers) == sorted(
        q["id"] for q in project.records("questions") if any(q["text"] in r.body["messages"][-1]["content"]
                                                             for r in served))
    assert "waiting up to 30 s for 4 request(s) in flight" in err
    assert out.splitlines()[-1].startswith("answers: stopped after 4 of 16 questions: interrupted; 4 answers written")
    hist = project.history()[-1]
    assert hist["status"] == "interrupted" and hist["done"] == 4
    assert hist["output_tokens"] == sum(a["meta"]["output_tokens"] for a in answers) > 0
    fake_provider.latency = 0
    fake_provider.clear()
    r = cli(["-C", project.dir, "answers"], env=project.env)
    assert r.returncode == 0, r.stderr
    assert len(fake_provider.chat_requests()) == 12  # the other 12, not the 4 paid for again
    _check_complete(project, ids)


def test_a_second_ctrl_c_abandons_the_requests_in_flight_and_says_so(project, fake_provider, cli, tmp_path):
    _prepare(project, cli)
    project.write(topics=2, subtopics=2, questions=4, pipeline={"concurrency": 3})
    fake_provider.clear()
    fake_provider.latency = 60.0  # never back in this test's time
    proc = _start(project, ["answers"], tmp_path)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stderr.readline, "")), daemon=True)
    reader.start()
    try:
        _in_flight(fake_provider, 3, proc)
        proc.send_signal(signal.SIGINT)
        first = time.monotonic()
        end = first + DEADLINE
        while not any("waiting up to" in line for line in list(lines)):
            assert time.monotonic() < end and proc.poll() is None, lines
            time.sleep(0.01)
        # A second interrupt is a separate one, not the same stop delivered twice (as `timeout`
        # and CI runners do: test_cli_signals_cron): it comes more than REPEAT seconds later.
        time.sleep(max(0.0, first + REPEAT + 0.2 - time.monotonic()))
        started = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out = proc.stdout.read()
        proc.wait(timeout=DEADLINE)
        reader.join(DEADLINE)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert time.monotonic() - started < 10  # not the 30 s grace, nor the 60 s answers
    assert proc.returncode == 130, lines
    assert out.splitlines()[-1].endswith(
        "; 3 requests in flight were abandoned; the provider may bill them"), out
    assert project.records("answers") == []
    assert project.history()[-1]["status"] == "interrupted"
