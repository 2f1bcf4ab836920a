"""`overbrainer tui` as a user runs it: the real command in a real pseudo-terminal (the `pty`
module), quit with `q`; refused without a terminal or in one smaller than 80x24; holding the
project lock while open (a second writer gets the command line's busy answer); SIGTERM ends it."""

from __future__ import annotations

import fcntl
import os
import select
import signal
import struct
import subprocess
import sys
import termios
import time

from tests.fixtures.cli import clean_env


class PtyRun:
    """`overbrainer ARGS` on the slave side of a new pty of `cols` x `rows`, its controlling
    terminal; `expect(text)` reads the screen's bytes until `text` shows up (with a deadline)."""

    def __init__(self, args, env, home, cols: int = 100, rows: int = 30):
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))

        def controlling_tty() -> None:
            os.setsid()
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        self.proc = subprocess.Popen([sys.executable, "-m", "overbrainer", *map(str, args)], stdin=slave,
                                     stdout=slave, stderr=slave, close_fds=True, preexec_fn=controlling_tty,
                                     env=clean_env({**env, "TERM": "xterm-256color"}, home))
        os.close(slave)
        self.master = master
        self.output = b""

    def read(self, timeout: float) -> None:
        ready, _, _ = select.select([self.master], [], [], timeout)
        if ready:
            try:
                self.output += os.read(self.master, 65536)
            except OSError:  # the slave side closed: the process ended
                time.sleep(timeout)

    def expect(self, text: bytes, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.output:
            if time.monotonic() > deadline or (self.proc.poll() is not None and text not in self.output):
                self.read(0.1)
                if text in self.output:
                    return
                raise AssertionError(f"{text!r} never showed; the screen had {self.output[-2000:]!r}")
            self.read(0.1)

    def send(self, data: bytes) -> None:
        os.write(self.master, data)

    def wait(self, timeout: float = 30) -> int:
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None:
            if time.monotonic() > deadline:
                self.proc.kill()
                raise AssertionError(f"the TUI did not exit; the screen had {self.output[-2000:]!r}")
            self.read(0.05)
        self.read(0.05)
        return self.proc.returncode

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        os.close(self.master)


def _tui(project, tmp_path, **kw) -> PtyRun:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return PtyRun(["-C", project.dir, "tui"], project.env, home, **kw)


def test_the_tui_in_a_pseudo_terminal_quits_with_q(project, tmp_path):
    run = _tui(project, tmp_path)
    try:
        run.expect(b"Configuration")
        run.expect(b"providers.fake.base_url")
        run.send(b"q")
        assert run.wait() == 0
    finally:
        run.close()
    assert b"Traceback" not in run.output


def test_the_tui_holds_the_project_lock_while_open(project, tmp_path, cli):
    run = _tui(project, tmp_path)
    try:
        run.expect(b"Configuration")
        busy = cli(["-C", project.dir, "split"], env=project.env)
        assert busy.returncode == 75  # busy, not broken
        assert busy.stderr == (f"error: another overbrainer (pid {run.proc.pid}, `overbrainer tui`) is using this "
                               "project; try again once it has ended\n")
        second = _tui(project, tmp_path)
        try:
            code = second.wait()
        finally:
            second.close()
        assert code == busy.returncode
        assert f"error: another overbrainer (pid {run.proc.pid}, `overbrainer tui`) is using".encode() in second.output
        run.send(b"q")
        assert run.wait() == 0
    finally:
        run.close()
    after = cli(["-C", project.dir, "split"], env=project.env)  # the lock went with the TUI
    assert after.returncode != 75 and "split: finished" in after.stderr
    assert "another overbrainer" not in after.stderr


def test_the_tui_needs_a_terminal_of_80x24(project, tmp_path, cli):
    r = cli(["-C", project.dir, "tui"], env=project.env)
    assert r.returncode == 2
    assert r.stderr == ("error: `overbrainer tui` needs a terminal: stdin and stdout are not one "
                        "(the other commands work without)\n")
    assert not (project.dir / ".overbrainer" / "lock").exists()  # refused before taking the lock
    small = _tui(project, tmp_path, cols=79, rows=30)
    try:
        assert small.wait() == 2
    finally:
        small.close()
    assert b"error: `overbrainer tui` needs a terminal of at least 80x24; this one is 79x30" in small.output


def test_sigterm_ends_the_tui_with_143(project, tmp_path):
    run = _tui(project, tmp_path)
    try:
        run.expect(b"Configuration")
        run.proc.send_signal(signal.SIGTERM)
        assert run.wait() == 143
    finally:
        run.close()
    assert b"Traceback" not in run.output


def test_a_stage_started_in_the_tui_counts_in_its_metrics(project, tmp_path):
    """[metrics] watches the TUI's one bus: a split started from the Pipeline view is in the textfile."""
    from prometheus_client.parser import text_string_to_metric_families

    project.write(topics=1, subtopics=2, questions=2)
    for stage in ("subtopics", "questions", "answers"):
        assert project.stage(stage)[2] is None
    project.env["OVERBRAINER_METRICS__TEXTFILE"] = "metrics.prom"
    textfile = project.dir / "metrics.prom"

    def split_done() -> float | None:
        try:
            text = textfile.read_text()
        except FileNotFoundError:
            return None
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                if s.name == "overbrainer_stage_items_total" and s.labels.get("stage") == "split" \
                        and s.labels.get("result") == "done" and s.value:
                    return s.value
        return None

    run = _tui(project, tmp_path)
    try:
        run.expect(b"Configuration")
        run.send(b"3")
        run.expect(b"nothing started yet")
        run.send(b"\x1b[B\x1b[B\x1b[B\r")  # down three times to split, Enter (split spends nothing: no question)
        deadline = time.monotonic() + 30
        while split_done() is None:
            assert time.monotonic() < deadline, f"no split in {textfile}; the screen had {run.output[-2000:]!r}"
            run.read(0.1)
        run.send(b"q")
        assert run.wait() == 0
    finally:
        run.close()
    assert split_done() == 4.0 and len(project.records("train")) + len(project.records("eval")) == 4
