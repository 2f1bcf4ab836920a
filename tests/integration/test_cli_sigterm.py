"""SIGTERM outside a stage (a timeout, systemd, `docker stop`, a CI cancellation) and SIGHUP (a closed
terminal, a dropped SSH session) sent to the real `overbrainer` process are handled like Ctrl-C and
exit 143 and 129; a SIGHUP ignored at start (nohup) stays ignored. (Mid-stage:
test_cli_stages_signals.) The waiting command is a sub-command of the real `overbrainer` group, so
it gets what every command that runs work gets (its AppContext, made by `pass_app`: start_work)."""

from __future__ import annotations

import signal
import subprocess
import sys

from tests.fixtures.cli import clean_env
from tests.integration.test_cli_stages_signals import DEADLINE


_WAITING_COMMAND = (
    "import threading, click\n"
    "import overbrainer.cli.main as m\n"
    "from overbrainer.cli.context import pass_app\n"
    "@click.command()\n"
    "@pass_app\n"
    "def wait(app):\n"
    "    print('ready', flush=True)\n"
    "    threading.Event().wait(60)\n"
    "m.COMMANDS['wait'] = ('__main__', 'wait', 'Wait.')\n"
    "m.main(['wait', *%r])\n"
)


def _terminate_waiting_command(tmp_path, args, signum=signal.SIGTERM):
    proc = subprocess.Popen([sys.executable, "-c", _WAITING_COMMAND % (args,)], env=clean_env(home=tmp_path),
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "ready\n"
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=DEADLINE)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, err.strip()  # click puts a newline after a ^C first


def test_sigterm_outside_a_stage_says_interrupted_and_exits_143(tmp_path):
    assert _terminate_waiting_command(tmp_path, []) == (143, "error: interrupted")
    code, err = _terminate_waiting_command(tmp_path, ["--json"])
    assert code == 143 and '"exit_code": 143' in err


def test_sighup_outside_a_stage_says_interrupted_and_exits_129(tmp_path):
    assert _terminate_waiting_command(tmp_path, [], signal.SIGHUP) == (129, "error: interrupted")
    code, err = _terminate_waiting_command(tmp_path, ["--json"], signal.SIGHUP)
    assert code == 129 and '"exit_code": 129' in err


def test_a_sighup_ignored_at_start_stays_ignored(tmp_path):
    """`nohup overbrainer …`: the hangup of the terminal does not stop it."""
    script = ("import signal, sys\nsignal.signal(signal.SIGHUP, signal.SIG_IGN)\n"
              "sys.argv = ['overbrainer', 'wait']\n") + _WAITING_COMMAND % ([],)
    proc = subprocess.Popen([sys.executable, "-c", script], env=clean_env(home=tmp_path),
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "ready\n"
        proc.send_signal(signal.SIGHUP)  # ignored
        proc.send_signal(signal.SIGTERM)  # then stopped: the SIGTERM's code, not SIGHUP's
        proc.communicate(timeout=DEADLINE)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143
