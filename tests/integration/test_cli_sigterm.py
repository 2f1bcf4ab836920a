"""SIGTERM outside a stage (a timeout, systemd, `docker stop`, a CI cancellation) sent to the real
`overbrainer` process is handled like Ctrl-C and exits 143. (Mid-stage: test_cli_stages_signals.)"""

from __future__ import annotations

import signal
import subprocess
import sys

from tests.fixtures.cli import clean_env
from tests.integration.test_cli_stages_signals import DEADLINE


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
