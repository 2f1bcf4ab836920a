"""The SSH executor against a real sshd: host keys, ssh config, dropped connections, detached jobs."""

from __future__ import annotations

import json
import shutil
import threading
import uuid
from pathlib import Path

import pytest

from overbrainer.errors import OverbrainerError
from overbrainer.exec.base import HostKeyError, JobId, JobSpec, JobState, TargetUnreachable
from overbrainer.exec.ssh import SshExecutor
from tests.fixtures.sshd import wait_for


def test_job_survives_the_connection_and_is_found_again_from_its_job_object(sshd, tmp_path):
    ex = SshExecutor(sshd.endpoint(), workdir=str(tmp_path / "remote"))
    d = f"{ex.workdir}/run1"
    job = ex.spawn(JobSpec(d, f"while [ ! -e '{d}/go' ]; do sleep 0.02; done; echo finished"))
    saved = json.dumps(job.to_json())
    ex.close()
    sshd.drop_connections()
    later = SshExecutor(sshd.endpoint(), workdir=str(tmp_path / "remote"))
    again = JobId.from_json(json.loads(saved))
    assert later.status(again) == JobState("running")
    later.put_file(f"{d}/go", "")
    assert wait_for(lambda: (s := later.status(again)).ended and s) == JobState("exited", 0)
    assert later.read_from(f"{d}/job.log", 0, 1000) == b"finished\n"
    later.close()


def test_an_idle_connection_dropped_by_the_server_is_replaced(ssh_executor, sshd):
    first = ssh_executor._transport()
    assert sshd.drop_connections() >= 1
    assert ssh_executor.probe("echo back") == "back\n"
    assert ssh_executor._transport() is not first


def test_an_operation_whose_connection_drops_midway_is_retried_once(ssh_executor, sshd, tmp_path):
    started, go = tmp_path / "started", tmp_path / "go"
    result: dict = {}

    def run():
        try:
            result["out"] = ssh_executor.probe(
                f"touch '{started}'; while [ ! -e '{go}' ]; do sleep 0.02; done; echo done", timeout=20)
        except Exception as e:  # the assertion below reports it
            result["error"] = e

    t = threading.Thread(target=run)
    t.start()
    wait_for(started.exists)
    started.unlink()
    sshd.drop_connections()
    wait_for(started.exists)  # the second attempt, on a fresh connection
    go.touch()
    t.join(20)
    assert result == {"out": "done\n"}


def test_a_connection_that_dies_as_the_channel_closes_is_dropped_not_escaped(ssh_executor, monkeypatch):
    """Closing a channel sends a message; on a connection that has just died (a pod deleted while
    its command ended) paramiko's send raises EOFError. That is a dropped connection (retried
    once, on a fresh one), never an EOFError out of the executor."""
    import paramiko

    first = ssh_executor._transport()
    open_session = paramiko.Transport.open_session
    failed = []

    def session_whose_close_fails(transport, *args, **kw):
        chan = open_session(transport, *args, **kw)
        if not failed:
            def close_on_a_dead_socket():
                if transport not in failed:
                    failed.append(transport)
                    raise EOFError()  # what paramiko's packetizer raises when the socket write fails
                return paramiko.Channel.close(chan)
            chan.close = close_on_a_dead_socket
        return chan

    monkeypatch.setattr(paramiko.Transport, "open_session", session_whose_close_fails)
    assert ssh_executor.probe("echo back") == "back\n"
    assert failed == [first] and not first.is_active()
    assert ssh_executor._transport() is not first


def test_a_stopped_server_is_target_unreachable_then_it_recovers(ssh_executor, sshd):
    sshd.stop()
    try:
        with pytest.raises(TargetUnreachable, match="cannot reach target `test`"):
            ssh_executor.probe("true")
    finally:
        sshd.start()
    assert ssh_executor.probe("echo ok") == "ok\n"


def test_an_unknown_host_key_is_refused_with_the_command_that_adds_it(sshd, tmp_path):
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    ep = sshd.endpoint(known_hosts=[str(empty)])
    with pytest.raises(HostKeyError) as err:
        SshExecutor(ep, workdir=str(tmp_path / "remote"))
    msg = str(err.value)
    assert "127.0.0.1" in msg and "is not known" in msg
    assert f"ssh-keyscan -p {sshd.port} 127.0.0.1 >> {empty}" in msg
    assert not (tmp_path / "remote").exists()


def test_a_changed_host_key_is_refused(sshd, tmp_path):
    other = tmp_path / "known_hosts"
    other.write_text(f"[127.0.0.1]:{sshd.port} ssh-ed25519 "
                     "AAAAC3NzaC1lZDI1NTE5AAAAIDyV1hbmPKlJMVKfFUZcAL/wEqN3sybDdsHvPo2vGzQl\n")
    with pytest.raises(HostKeyError, match="host key verification failed for 127.0.0.1: the key differs"):
        SshExecutor(sshd.endpoint(known_hosts=[str(other)]), workdir=str(tmp_path / "remote"))


def test_a_pinned_host_key_is_the_only_one_accepted(sshd, tmp_path):
    ex = SshExecutor(sshd.endpoint(host_key=sshd.host_key_line), workdir=str(tmp_path / "remote"))
    assert ex.probe("echo pinned") == "pinned\n"
    ex.close()
    wrong = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDyV1hbmPKlJMVKfFUZcAL/wEqN3sybDdsHvPo2vGzQl"
    with pytest.raises(HostKeyError, match="not the pinned key"):
        SshExecutor(sshd.endpoint(host_key=wrong), workdir=str(tmp_path / "remote"))


def test_an_ssh_config_alias_from_home_works(sshd, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(sshd.home))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    ex = SshExecutor(sshd.alias, workdir=str(tmp_path / "remote"))
    assert ex.probe("echo aliased") == "aliased\n"
    assert ex.workdir == str((tmp_path / "remote").resolve())
    ex.close()
    ex = SshExecutor(f"{sshd.user}@{sshd.alias}", workdir=str(tmp_path / "remote"), label="target `homelab`")
    assert ex.probe("echo user-at-alias") == "user-at-alias\n"
    ex.close()


def test_a_workdir_under_home_is_expanded_on_the_target(ssh_executor, sshd):
    name = "overbrainer-test-" + uuid.uuid4().hex[:8]
    home = ssh_executor.probe('cd && pwd -P').strip()
    ex = SshExecutor(sshd.endpoint(), workdir=f"~/{name}")
    try:
        assert ex.workdir == f"{home}/{name}" and Path(ex.workdir).is_dir()
        ex.close()
        ex = SshExecutor(sshd.endpoint(), workdir=name)  # relative = under $HOME
        assert ex.workdir == f"{home}/{name}"
    finally:
        ex.close()
        shutil.rmtree(f"{home}/{name}", ignore_errors=True)


def test_a_wrong_key_is_refused_without_trying_the_agent(sshd, tmp_path):
    import subprocess

    key = tmp_path / "other_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    ep = sshd.endpoint()
    ep.key_files = [str(key)]
    ep.ssh_config = str(tmp_path / "no-config")
    (tmp_path / "no-config").write_text("")
    with pytest.raises(OverbrainerError, match="no key was accepted") as err:
        SshExecutor(ep, workdir=str(tmp_path / "remote"))
    assert not isinstance(err.value, TargetUnreachable)


def test_nothing_listening_is_target_unreachable(sshd, tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(TargetUnreachable, match="cannot reach target `test`"):
        SshExecutor(sshd.endpoint(port=port, timeout=5), workdir=str(tmp_path / "remote"))


def test_remote_command_failure_names_the_action_and_the_target(ssh_executor):
    with pytest.raises(OverbrainerError, match=r"manifest on target `test` failed: .*does not exist"):
        ssh_executor.manifest(f"{ssh_executor.workdir}/nope", ["output"])
