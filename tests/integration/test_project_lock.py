"""One writer per project: fcntl.flock on .overbrainer/lock with the holder's PID (and command)
inside; a second writer exits 75 (EX_TEMPFAIL) naming them."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from overbrainer.errors import OverbrainerError
from overbrainer.support.lock import ProjectLock, ProjectLocked

HOLD = textwrap.dedent("""
    import sys, time
    from overbrainer.support.lock import ProjectLock
    lock = ProjectLock(sys.argv[1]).acquire()
    print("held", flush=True)
    time.sleep(120)
""")


@pytest.fixture
def holder(tmp_path):
    """Another process holding the lock of an initialised project."""
    project = tmp_path / "p"
    subprocess.run([sys.executable, "-m", "overbrainer", "init", str(project)], check=True, capture_output=True)
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(project)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    yield project, proc
    proc.kill()
    proc.wait()


def test_a_second_writer_fails_at_once_naming_the_holder(holder, cli):
    project, proc = holder
    r = cli(["-C", project, "split"])
    assert r.returncode == 75
    assert r.stderr.strip() == (f"error: another overbrainer (pid {proc.pid}) is using this project; "
                                "try again once it has ended")
    assert not (project / "data").exists()


def test_a_busy_project_exits_75_naming_the_holders_pid_and_command(project, fake_provider, cli):
    """A cron wrapper can tell "still running" (75) from "broken" (1): the holder is a real
    command, and the lock file names it (its name, not its arguments)."""
    import time

    from tests.fixtures.cli import clean_env

    project.write(topics=1, subtopics=1, questions=1)
    fake_provider.latency = 30  # the holder waits on its first request
    holder = subprocess.Popen([sys.executable, "-m", "overbrainer", "-C", str(project.dir), "subtopics"],
                              env=clean_env(project.env),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        lock = project.dir / ".overbrainer" / "lock"
        deadline = time.monotonic() + 30
        while not (lock.is_file() and lock.read_text().count("\n") == 2) or not fake_provider.chat_requests():
            assert time.monotonic() < deadline, "the holder never took the lock"
            time.sleep(0.05)
        assert lock.read_text() == f"{holder.pid}\noverbrainer subtopics\n"
        r = cli(["-C", project.dir, "questions"], env=project.env)
        assert r.returncode == 75, r.stderr
        assert r.stderr.strip() == (f"error: another overbrainer (pid {holder.pid}, `overbrainer subtopics`) is "
                                    "using this project; try again once it has ended")
        r = cli(["--json", "-C", project.dir, "run"], env=project.env)
        assert r.returncode == 75
        assert json.loads(r.stderr.strip().splitlines()[-1])["exit_code"] == 75
        assert len(fake_provider.chat_requests()) == 1  # neither sent anything
    finally:
        holder.kill()
        holder.wait()


def test_readers_never_lock(holder, cli):
    project, _ = holder
    url = {"OVERBRAINER_PROVIDERS__LLM__BASE_URL": "http://127.0.0.1:11434/v1"}
    assert cli(["-C", project, "config", "check"], env=url).returncode == 0
    r = cli(["-C", project, "history"])
    assert r.returncode == 0 and r.stdout == "no stage has run yet\n"


def test_the_lock_dies_with_its_holder(holder, cli):
    project, proc = holder
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    r = cli(["-C", project, "split"])
    assert r.returncode == 1, r.stderr  # it ran (no answer yet, so no train example)
    assert r.stdout.startswith("split: 0 train, 0 eval")
    assert "another overbrainer" not in r.stderr


def test_no_project_no_state_dir(tmp_path, cli):
    r = cli(["-C", tmp_path, "answers"])
    assert r.returncode == 2
    assert "overbrainer.toml" in r.stderr
    assert not (tmp_path / ".overbrainer").exists()


def test_a_symlinked_lock_is_refused(tmp_path):
    (tmp_path / ".overbrainer").mkdir()
    os.symlink(tmp_path / "elsewhere", tmp_path / ".overbrainer" / "lock")
    with pytest.raises(OverbrainerError, match="it is a symbolic link"):
        ProjectLock(tmp_path).acquire()


def test_the_pid_is_written_and_the_lock_reusable_after_release(tmp_path):
    with ProjectLock(tmp_path):
        assert (tmp_path / ".overbrainer" / "lock").read_text() == f"{os.getpid()}\n"
    with ProjectLock(tmp_path):
        pass


def test_the_lock_file_is_emptied_on_release(tmp_path):
    with ProjectLock(tmp_path, "overbrainer answers"):
        assert (tmp_path / ".overbrainer" / "lock").read_text() == f"{os.getpid()}\noverbrainer answers\n"
    assert (tmp_path / ".overbrainer" / "lock").read_text() == ""


def test_the_busy_message_never_names_a_dead_pid(tmp_path):
    # A holder that has the lock but has not written its PID yet: the file still names a dead one.
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / ".overbrainer").mkdir()
    (tmp_path / ".overbrainer" / "lock").write_text(f"{dead.pid}\noverbrainer run\n")
    fd = os.open(tmp_path / ".overbrainer" / "lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with pytest.raises(ProjectLocked) as e:
            ProjectLock(tmp_path).acquire()
    finally:
        os.close(fd)
    assert e.value.pid is None and str(dead.pid) not in str(e.value)
    assert str(e.value) == "another overbrainer (unknown pid) is using this project; try again once it has ended"
