"""Jobs through both executors (local and a real sshd): spawn, status, read_from, cancel, claim."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from overbrainer.errors import OverbrainerError
from overbrainer.exec.base import JobId, JobSpec, JobState
from overbrainer.exec.local import LocalExecutor
from tests.fixtures.cli import clean_env
from tests.fixtures.sshd import wait_for


def run_dir(ex, name="run1") -> str:
    return f"{ex.workdir}/{name}"


def file_exists(ex, path) -> bool:
    return ex.probe(f"[ -e '{path}' ] && echo yes || true").strip() == "yes"


def test_workdir_is_absolute_and_exists(executor):
    assert executor.workdir.startswith("/")
    assert Path(executor.workdir).is_dir()


def test_job_runs_then_exits_with_its_code(executor):
    d = run_dir(executor)
    job = executor.spawn(JobSpec(d, f"echo started; while [ ! -e '{d}/go' ]; do sleep 0.02; done; exit 7"))
    assert job.pid > 1 and job.dir == d
    assert executor.status(job) == JobState("running")
    assert Path(d, "job.pid").read_text().strip() == str(job.pid)
    executor.put_file(f"{d}/go", "now")
    state = wait_for(lambda: (s := executor.status(job)).ended and s)
    assert state == JobState("exited", 7) and str(state) == "exited 7"
    assert Path(d, "exit_code").read_text().strip() == "7"
    assert executor.read_from(f"{d}/job.log", 0, 100) == b"started\n"


def test_job_exiting_zero_and_a_trailing_comment(executor):
    d = run_dir(executor)
    job = executor.spawn(JobSpec(d, "echo ok # a trailing comment cannot eat the paren"))
    assert wait_for(lambda: (s := executor.status(job)).ended and s) == JobState("exited", 0)


def test_spawn_removes_stale_control_files(executor):
    d = run_dir(executor)
    os.makedirs(d)
    for name in ("exit_code", "cancelled", "cancelling"):
        Path(d, name).write_text("1\n")
    job = executor.spawn(JobSpec(d, f"while [ ! -e '{d}/go' ]; do sleep 0.02; done"))
    assert executor.status(job).kind == "running"
    Path(d, "go").touch()
    assert wait_for(lambda: (s := executor.status(job)).ended and s) == JobState("exited", 0)


def test_status_from_run_json_job_object_alone(executor, tmp_path):
    d = run_dir(executor)
    job = executor.spawn(JobSpec(d, f"while [ ! -e '{d}/go' ]; do sleep 0.02; done"))
    again = JobId.from_json(json.loads(json.dumps(job.to_json())))
    assert again == job and job.to_json() == {"dir": d, "pid": job.pid, "container": None}
    executor.close()
    fresh = LocalExecutor(tmp_path / "elsewhere")  # any executor on the same machine
    assert fresh.status(again).kind == "running"
    Path(d, "go").touch()
    assert wait_for(lambda: (s := fresh.status(again)).ended and s) == JobState("exited", 0)


def test_job_id_from_json_rejects_bad_objects():
    for bad in (None, {"dir": "/x", "pid": 1}, {"dir": "/x", "pid": 0}, {"dir": "", "pid": 5},
                {"dir": "/x", "pid": True}, {"dir": "/x", "pid": 5, "container": {"engine": "lxc", "name": "a"}}):
        with pytest.raises(ValueError):
            JobId.from_json(bad)
    job = JobId.from_json({"dir": "/x", "pid": 5, "container": {"engine": "podman", "name": "overbrainer-r"}})
    assert job.container.engine == "podman" and job.to_json()["container"]["name"] == "overbrainer-r"


def test_status_of_a_vanished_job_is_lost(executor):
    d = run_dir(executor)
    job = executor.spawn(JobSpec(d, "true"))
    wait_for(lambda: executor.status(job).ended)
    os.unlink(Path(d, "exit_code"))
    assert executor.status(job) == JobState("lost")
    subprocess.run(["rm", "-rf", d], check=True)
    assert executor.status(job) == JobState("lost")


def test_read_from_offsets_limits_and_missing_file(executor):
    d = run_dir(executor)
    executor.put_file(f"{d}/metrics.jsonl", b"0123456789abcdef")
    assert executor.read_from(f"{d}/metrics.jsonl", 0, 4) == b"0123"
    assert executor.read_from(f"{d}/metrics.jsonl", 10, 100) == b"abcdef"
    assert executor.read_from(f"{d}/metrics.jsonl", 16, 10) == b""
    assert executor.read_from(f"{d}/metrics.jsonl", 99, 10) == b""
    assert executor.read_from(f"{d}/nothing.jsonl", 0, 10) == b""
    assert executor.read_from("run1/metrics.jsonl", 2, 3) == b"234"  # relative = under workdir


def test_put_file_is_atomic_and_creates_the_folder(executor):
    path = f"{executor.workdir}/a/b/snapshot.request"
    executor.put_file(path, "requested")
    executor.put_file(path, "deadline")
    assert Path(path).read_text() == "deadline"
    assert sorted(os.listdir(Path(path).parent)) == ["snapshot.request"]


def test_cancel_running_job_then_again_is_a_no_op(executor):
    d = run_dir(executor)
    # A child process that ignores nothing and lingers: the whole group must go.
    job = executor.spawn(JobSpec(d, "sleep 60 & sleep 60"))
    wait_for(lambda: executor.status(job).kind == "running")
    executor.cancel(job)
    assert executor.status(job) == JobState("cancelled")
    assert Path(d, "cancelled").exists() and not Path(d, "exit_code").exists()
    assert subprocess.run(["sh", "-c", f"kill -0 -{job.pid}"], capture_output=True).returncode != 0
    mtime = Path(d, "cancelled").stat().st_mtime_ns
    executor.cancel(job)
    assert executor.status(job) == JobState("cancelled")
    assert Path(d, "cancelled").stat().st_mtime_ns == mtime


def test_cancel_of_an_ended_job_never_signals(executor):
    d = run_dir(executor)
    job = executor.spawn(JobSpec(d, "exit 3"))
    wait_for(lambda: executor.status(job).ended)
    # The pid is recycled by an unrelated process group: the cancel must leave it alone.
    other = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        recycled = JobId(d, other.pid)
        executor.cancel(recycled)
        assert other.poll() is None
        assert executor.status(recycled) == JobState("exited", 3)
        assert not Path(d, "cancelled").exists() and not Path(d, "cancelling").exists()
    finally:
        other.kill()
        other.wait()


def test_cancel_with_a_bad_pid_fails(executor):
    d = run_dir(executor)
    os.makedirs(d)
    with pytest.raises(OverbrainerError, match="cancel"):
        executor.cancel(JobId(d, 1))


def test_claim_is_exclusive_per_owner(executor):
    d = run_dir(executor, "claimed")
    assert executor.claim(d, "0123456789abcdef") is True
    assert executor.claim(d, "0123456789abcdef") is True
    assert executor.claim(d, "fedcba9876543210") is False
    assert Path(d, ".claim").read_text() == "0123456789abcdef\n"
    with pytest.raises(OverbrainerError):
        executor.claim(d, "bad owner; rm -rf /")


def test_probe_returns_stdout_and_reports_failures(executor):
    assert executor.probe("echo one; echo two >&2; echo three") == "one\nthree\n"
    with pytest.raises(OverbrainerError, match="probe.*failed: boom"):
        executor.probe("echo boom >&2; exit 4")


def test_secret_reaches_the_job_but_no_command_line(executor):
    marker = "obsecret-" + uuid.uuid4().hex
    d = run_dir(executor)
    script = (
        "printf '%s' \"$OB_TOKEN\" | sha256sum > token.sha\n"
        "echo \"plain=$OB_PLAIN\" > plain.txt\n"
        f"touch ready; while [ ! -e '{d}/go' ]; do sleep 0.02; done"
    )
    job = executor.spawn(JobSpec(d, script, env={"OB_PLAIN": "visible"}, secrets={"OB_TOKEN": marker}))
    wait_for(lambda: Path(d, "ready").exists())
    hits = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                    hits.append(pid)
            except OSError:
                pass
    executor.put_file(f"{d}/go", "")
    assert hits == []
    assert wait_for(lambda: (s := executor.status(job)).ended and s) == JobState("exited", 0)
    assert Path(d, "token.sha").read_text().split()[0] == hashlib.sha256(marker.encode()).hexdigest()
    assert Path(d, "plain.txt").read_text() == "plain=visible\n"
    for f in Path(d).iterdir():
        assert marker not in f.read_text(errors="replace")


def test_secret_values_with_a_newline_are_refused(executor):
    with pytest.raises(OverbrainerError, match="HF_TOKEN cannot be passed to the job"):
        executor.spawn(JobSpec(run_dir(executor), "true", secrets={"HF_TOKEN": "a\nb"}))
    with pytest.raises(OverbrainerError, match="cannot be passed to the job"):
        executor.spawn(JobSpec(run_dir(executor), "true", secrets={"BAD NAME": "x"}))


def test_local_job_env_drops_overbrainer_and_vault_variables(tmp_path, monkeypatch):
    monkeypatch.setenv("OVERBRAINER_SECRETISH", "x1")
    monkeypatch.setenv("VAULT_TOKEN", "x2")
    monkeypatch.setenv("KEEP_ME", "x3")
    ex = LocalExecutor(tmp_path / "runs")
    d = run_dir(ex)
    job = ex.spawn(JobSpec(d, "env > env.txt", env={"OVERBRAINER_METRICS": f"{d}/metrics.jsonl"}))
    wait_for(lambda: ex.status(job).ended)
    env = Path(d, "env.txt").read_text().splitlines()
    assert "KEEP_ME=x3" in env and f"OVERBRAINER_METRICS={d}/metrics.jsonl" in env
    assert not [e for e in env if e.startswith(("OVERBRAINER_SECRETISH", "VAULT_"))]


def test_local_job_survives_the_cli_exiting_in_its_own_group(tmp_path):
    runs = tmp_path / "runs"
    d = runs / "run1"
    code = (
        "import json, sys\n"
        "from overbrainer.exec.local import LocalExecutor\n"
        "from overbrainer.exec.base import JobSpec\n"
        f"ex = LocalExecutor({str(runs)!r})\n"
        f"job = ex.spawn(JobSpec({str(d)!r}, 'while [ ! -e go ]; do sleep 0.02; done; echo done'))\n"
        "print(json.dumps(job.to_json()))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env=clean_env({"PYTHONPATH": str(Path(__file__).parents[2])}))
    job = JobId.from_json(json.loads(out.stdout))
    assert os.getpgid(job.pid) == job.pid != os.getpgid(0)
    ex = LocalExecutor(runs)
    assert ex.status(job).kind == "running"
    (d / "go").touch()
    assert wait_for(lambda: (s := ex.status(job)).ended and s) == JobState("exited", 0)
    assert (d / "job.log").read_text() == "done\n"


def _gone(pid: int) -> bool:
    """The process ended (a zombie waiting for its reaper counts as ended)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_a_timed_out_script_is_killed_with_its_whole_process_group(tmp_path):
    # The background sleep holds the script's stdout: killing only `sh` left the reader waiting
    # for it (30 s here, for ever with a daemon).
    ex = LocalExecutor(tmp_path / "runs")
    pid_file = tmp_path / "child.pid"
    start = time.monotonic()
    with pytest.raises(OverbrainerError, match=r"^probe failed: it did not finish within 0\.5 s$"):
        ex.probe(f"sleep 30 & echo $! > '{pid_file}'; sleep 30", timeout=0.5)
    assert time.monotonic() - start < 10
    wait_for(lambda: _gone(int(pid_file.read_text())))


def test_a_script_that_left_its_group_costs_the_reader_limit_only(tmp_path, monkeypatch):
    from overbrainer.exec import local

    monkeypatch.setattr(local, "READER_LIMIT", 0.3)
    ex = LocalExecutor(tmp_path / "runs")
    pid_file = tmp_path / "escaped.pid"
    try:
        start = time.monotonic()
        with pytest.raises(OverbrainerError, match="did not finish within"):
            ex.probe(f"setsid sh -c 'echo $$ > \"{pid_file}\"; exec sleep 30' & sleep 30", timeout=0.5)
        assert time.monotonic() - start < 10  # not the escaped process's 30 s
    finally:
        pid = int(wait_for(lambda: pid_file.exists() and pid_file.read_text().strip()))
        os.kill(pid, 9)
