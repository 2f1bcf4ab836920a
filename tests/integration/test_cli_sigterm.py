"""SIGTERM (a timeout, systemd, `docker stop`, a CI cancellation) sent to the real `overbrainer`
process is handled like Ctrl-C: the stage stops at a safe point, history records what it spent,
the message says what resumes and how, and the exit code is 143."""

from __future__ import annotations

import signal
import subprocess
import sys

from tests.fixtures.cli import clean_env
from tests.integration.test_cli_stages_signals import (DEADLINE, _check_complete, _prepare, _start,
                                                      _wait_for_answers)


def test_sigterm_mid_answers_exits_143_records_history_and_resumes(project, fake_provider, cli, tmp_path):
    ids = _prepare(project, cli)
    fake_provider.latency = 0.1
    path = project.data / "answers.jsonl"
    proc = _start(project, ["answers"], tmp_path)
    try:
        _wait_for_answers(path, 2, proc)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=DEADLINE)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, err
    last = err.strip().splitlines()[-1]
    assert last.startswith(("interrupted", "error: interrupted")) and "resume" in last, err
    assert out == ""
    hist = project.history()
    assert hist[-1]["stage"] == "answers" and hist[-1]["status"] == "interrupted"
    assert hist[-1]["done"] >= 2
    fake_provider.latency = 0
    r = cli(["-C", project.dir, "answers"], env=project.env)
    assert r.returncode == 0, r.stderr
    _check_complete(project, ids)


_WAITING_COMMAND = (
    "import threading, click\n"
    "import overbrainer.cli.main as m\n"
    "@click.command()\n"
    "@click.option('--json', is_flag=True)\n"
    "def wait(json):\n"
    "    print('ready', flush=True)\n"
    "    threading.Event().wait(60)\n"
    "m.cli = wait\n"
    "m.main(%r)\n"
)


def _terminate_waiting_command(tmp_path, args):
    proc = subprocess.Popen([sys.executable, "-c", _WAITING_COMMAND % (args,)], env=clean_env(home=tmp_path),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "ready\n"
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=DEADLINE)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, err.strip()  # click puts a newline after a ^C first


def test_sigterm_outside_a_stage_says_interrupted_and_exits_143(tmp_path):
    assert _terminate_waiting_command(tmp_path, []) == (143, "error: interrupted")
    code, err = _terminate_waiting_command(tmp_path, ["--json"])
    assert code == 143 and '"exit_code": 143' in err
