"""`overbrainer runs logs` of a run on an SSH target: while the run goes on (or its log was never
retrieved) the lines come from `<remote_dir>/job.log` on the target, through the real sshd."""

from __future__ import annotations

import json
import signal
import threading

import pytest

from tests.integration.test_cli_train_ssh import ssh_project
from tests.integration.test_runs_support import HF_TOKEN

pytestmark = pytest.mark.ssh

FIRST = "fake axolotl: train axolotl.yaml (mode slow)"


def detached_slow_run(p, fake_axolotl, tmp_path) -> tuple[str, object]:
    fake_axolotl.set_mode("slow")
    d = p.run("train", "--detach")
    assert d.returncode == 0, d.stderr
    [rid] = p.run_ids()
    p.wait_metrics(rid, 1, root=tmp_path / "remote")
    return rid, tmp_path / "remote" / rid / "job.log"


def handmade_run(p, tmp_path, state: str, rid: str = "train_demo_20260101-000000"):
    """A run record on target `remote` with no job behind it; its log is only what a test writes."""
    remote = (tmp_path / "remote" / rid)
    remote.mkdir(parents=True)
    run = p.runs / rid
    run.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({
        "id": rid, "target": "remote", "created": "2026-01-01T00:00:00Z", "remote_dir": str(remote),
        "job": {"dir": str(remote), "pid": 4242, "container": None}, "state": state, "message": None}))
    return rid, run, remote


def test_a_running_ssh_run_shows_the_targets_log(tmp_path, fake_axolotl, sshd):
    p = ssh_project(tmp_path, fake_axolotl, sshd, hf_token=True)
    rid, remote_log = detached_slow_run(p, fake_axolotl, tmp_path)
    try:
        p.wait_for(lambda: remote_log.read_text().startswith(FIRST + "\n"), what="the job's first line")
        # The job writes no more lines in slow mode: add some, with a secret and control characters.
        with open(remote_log, "ab") as f:
            f.write(b"\x1b[31mred\x1b[0m one\nthe token " + HF_TOKEN.encode() + b" leaked\nlast")
        before = sorted(x.name for x in (p.runs / rid).iterdir())
        assert "job.log" not in before
        r = p.run("runs", "logs", rid)
        assert r.returncode == 0, r.stderr
        assert r.stdout.splitlines() == [FIRST, "red one", "the token *** leaked", "last"]
        t = p.run("runs", "logs", rid, "--tail", "2")
        assert t.returncode == 0, t.stderr
        assert t.stdout.splitlines() == ["the token *** leaked", "last"]
        j = p.run("--json", "runs", "logs", rid, "--tail", "1")
        assert json.loads(j.stdout) == {"run_id": rid, "lines": ["last"]}
        # Read-only: nothing was written in the run dir.
        assert sorted(x.name for x in (p.runs / rid).iterdir()) == before
        assert HF_TOKEN not in r.stdout + r.stderr + t.stdout + j.stdout
    finally:
        assert p.run("train", "cancel", rid).returncode == 0


def test_follow_prints_remote_lines_as_they_come_and_ends_with_the_run(tmp_path, fake_axolotl, sshd):
    p = ssh_project(tmp_path, fake_axolotl, sshd, hf_token=True)
    fake_axolotl.set_mode("ok", delay=3)
    train = p.popen("train")
    follower = None
    try:
        rid = p.wait_for(lambda: p.run_ids() and p.run_ids()[0], what="the run")
        remote_log = tmp_path / "remote" / rid / "job.log"
        p.wait_for(lambda: remote_log.is_file() and remote_log.read_text(), what="the job's first line")
        follower = p.popen("runs", "logs", rid, "--follow")
        watchdog = threading.Timer(30, follower.kill)
        watchdog.start()
        try:
            first = follower.stdout.readline()
            # The first line came while the job still ran: from the target, not a retrieved log.
            assert p.record(rid)["state"] == "running" and not (p.runs / rid / "job.log").exists()
            # Read on from the same buffered stream (communicate() would read the pipe itself and
            # miss a line that came with the first one, as it does on a busy machine).
            out = follower.stdout.read()
            err = follower.stderr.read()
            follower.wait()
        finally:
            watchdog.cancel()
        assert first == "fake axolotl: train axolotl.yaml (mode ok)\n"
        assert follower.returncode == 0, err
        assert out.splitlines() == ["token present"]
        # It ended because the run did.
        assert p.record(rid)["state"] == "succeeded"
        t_out, t_err = train.communicate(timeout=30)
        assert train.returncode == 0, t_err
    finally:
        for proc in (train, follower):
            if proc is not None and proc.poll() is None:
                proc.kill()


def test_an_unreachable_target_is_an_error_without_a_local_log(tmp_path, fake_axolotl, sshd):
    p = ssh_project(tmp_path, fake_axolotl, sshd)
    rid, run, remote = handmade_run(p, tmp_path, "running")
    (remote / "job.log").write_text("remote line\n")
    assert p.run("runs", "logs", rid).stdout == "remote line\n"
    sshd.stop()
    try:
        r = p.run("runs", "logs", rid)
        # A log retrieved earlier is shown instead, with a warning.
        (run / "job.log").write_text("local line\n")
        s = p.run("runs", "logs", rid)
    finally:
        sshd.start()
    assert r.returncode == 1 and r.stdout == ""
    [line] = [x for x in r.stderr.splitlines() if x.startswith("error: ")]
    assert line.startswith("error: cannot reach target `remote`: ")
    assert s.returncode == 0 and s.stdout == "local line\n"
    assert "showing the log retrieved earlier" in s.stderr


def test_an_ended_run_reads_its_retrieved_log_without_connecting(tmp_path, fake_axolotl, sshd):
    p = ssh_project(tmp_path, fake_axolotl, sshd)
    p.env["OVERBRAINER_TARGETS__REMOTE__HOST"] = "no-such-host.invalid"
    rid, run, remote = handmade_run(p, tmp_path, "failed")
    (remote / "job.log").write_text("remote line\n")
    (run / "job.log").write_text("local line\n")
    r = p.run("runs", "logs", rid, "--follow")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "local line\n"
    # Never retrieved: the target's log (here unreachable, so an error).
    (run / "job.log").unlink()
    u = p.run("runs", "logs", rid)
    assert u.returncode == 1 and "error: cannot reach target `remote`: " in u.stderr
    p.env["OVERBRAINER_TARGETS__REMOTE__HOST"] = sshd.alias
    assert p.run("runs", "logs", rid).stdout == "remote line\n"


def test_follow_gives_up_after_the_failure_budget(tmp_path, fake_axolotl, sshd):
    p = ssh_project(tmp_path, fake_axolotl, sshd)
    rid, run, remote = handmade_run(p, tmp_path, "running")
    (remote / "job.log").write_text("before\n")
    follower = p.popen("runs", "logs", rid, "--follow")
    try:
        assert follower.stdout.readline() == "before\n"
        sshd.stop()
        try:
            out, err = follower.communicate(timeout=30)
        finally:
            sshd.start()
    finally:
        if follower.poll() is None:
            follower.kill()
    assert follower.returncode == 1, err
    assert "cannot read the log (1/5)" in err and "cannot read the log (5/5)" in err
    [line] = [x for x in err.splitlines() if x.startswith("error: ")]
    assert line.startswith(f"error: cannot follow the log of run {rid}: cannot reach target `remote`")


def test_ctrl_c_ends_a_remote_follow_quietly(tmp_path, fake_axolotl, sshd):
    p = ssh_project(tmp_path, fake_axolotl, sshd)
    rid, run, remote = handmade_run(p, tmp_path, "running")
    (remote / "job.log").write_text("before\n")
    follower = p.popen("runs", "logs", rid, "--follow")
    try:
        assert follower.stdout.readline() == "before\n"
        follower.send_signal(signal.SIGINT)
        out, err = follower.communicate(timeout=10)
    finally:
        if follower.poll() is None:
            follower.kill()
    assert follower.returncode == 0, err
    assert out == "" and "Traceback" not in err
