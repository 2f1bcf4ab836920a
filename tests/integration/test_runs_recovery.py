"""Review fixes: a spawn cut off before its PID came back, a cancel that finished on the target
but not in the record, and the `train stop` limits' cancel (shielded from Ctrl-C). Real
executors: LocalExecutor, and SshExecutor on the session's sshd where SSH matters."""

from __future__ import annotations

import logging
import threading

import pytest

from overbrainer.errors import Interrupted, OverbrainerError
from overbrainer.exec.base import TargetUnreachable
from overbrainer.exec.local import LocalExecutor
from overbrainer.front.bus import EventBus
from overbrainer.front.frontend import Embedded
from overbrainer.front.session import Session
from overbrainer.jobs import lease, start
from overbrainer.runs import flow
from overbrainer.runs import stop_limits as limits
from overbrainer.jobs.follow import job_id
from overbrainer.jobs.run_record import RunPlace
from tests.integration.test_runs_support import make_project
from tests.fixtures.timescale import scale


def _app(p, ctrl_c: threading.Event | None = None):
    reports: list = []
    front = Embedded(EventBus(), ctrl_c or threading.Event(), threading.Event(), reports.append)
    return Session(p.dir, front), reports


def _config(p):
    from overbrainer.config.load import load_config

    return load_config(p.dir)


# --- 1. a spawn cut off after the launcher was sent -------------------------------------------

def _cut_executor(sshd, workdir, *, gone_after_cut: bool):
    from overbrainer.exec.ssh import SshExecutor, _Dropped

    class CutAfterLaunch(SshExecutor):
        """The launcher reaches the target and starts the job; the connection then dies before
        the PID is read (and, with `gone_after_cut`, the target stays out of reach)."""

        gone = False
        cut = True

        def _transport(self):
            if self.gone:
                raise TargetUnreachable(f"cannot reach {self.endpoint.name}: connection refused")
            return super()._transport()

        def _exec(self, t, script, *, action="command", **kw):
            out = super()._exec(t, script, action=action, **kw)
            if action == "spawn" and self.cut:
                self.cut = False
                self._drop(t)
                self.gone = gone_after_cut
                raise _Dropped(f"cannot reach {self.endpoint.name}: spawn: the connection closed", True)
            return out

    return CutAfterLaunch(sshd.endpoint(), workdir=str(workdir))


def _ssh_project(tmp_path, fake_axolotl, sshd):
    p = make_project(tmp_path, fake_axolotl, target="remote", remote=tmp_path / "remote", ssh_alias=sshd.alias)
    p.home = sshd.home
    return p


@pytest.mark.ssh
def test_a_spawn_cut_after_the_launch_finds_its_job_and_attach_completes(tmp_path, fake_axolotl, sshd,
                                                                         monkeypatch):
    p = _ssh_project(tmp_path, fake_axolotl, sshd)
    fake_axolotl.set_mode("ok", delay=1)
    ex = _cut_executor(sshd, tmp_path / "remote", gone_after_cut=False)
    monkeypatch.setattr(lease, "open_executor", lambda *a, **k: ex)
    app, _ = _app(p)
    result = flow.train_flow(app.with_config(_config(p)), detach=True)
    assert result.state == "running" and result.detached
    rec = p.record(result.run_id)
    assert rec["state"] == "running" and rec["message"] is None
    assert rec["job"]["pid"] == int((tmp_path / "remote" / result.run_id / "job.pid").read_text())
    a = p.run("train", "attach", result.run_id)
    assert a.returncode == 0, a.stderr
    assert p.record(result.run_id)["state"] == "succeeded"
    assert (p.runs / result.run_id / "output" / "adapter_model.safetensors").is_file()


@pytest.mark.ssh
def test_a_spawn_cut_with_the_target_gone_stays_running_until_attach_settles_it(tmp_path, fake_axolotl, sshd,
                                                                                monkeypatch):
    p = _ssh_project(tmp_path, fake_axolotl, sshd)
    fake_axolotl.set_mode("ok", delay=1)
    ex = _cut_executor(sshd, tmp_path / "remote", gone_after_cut=True)
    monkeypatch.setattr(lease, "open_executor", lambda *a, **k: ex)
    monkeypatch.setattr(start, "PID_WAIT_SECS", 0.5)
    app, _ = _app(p)
    with pytest.raises(OverbrainerError) as e:
        flow.train_flow(app.with_config(_config(p)))
    [rid] = p.run_ids()
    rec = p.record(rid)
    assert rec["state"] == "running" and rec["job"] is None
    assert rec["message"] == str(e.value)
    assert "could not be confirmed" in rec["message"]
    assert f"`overbrainer train attach {rid}`" in rec["message"]
    assert f"`overbrainer train cancel {rid}`" in rec["message"]
    a = p.run("train", "attach", rid)
    assert a.returncode == 0, a.stderr
    rec = p.record(rid)
    assert rec["state"] == "succeeded" and rec["job"]["pid"] > 1 and rec["message"] is None


@pytest.mark.ssh
def test_cancel_settles_an_unconfirmed_start(tmp_path, fake_axolotl, sshd, monkeypatch):
    p = _ssh_project(tmp_path, fake_axolotl, sshd)
    fake_axolotl.set_mode("slow")
    ex = _cut_executor(sshd, tmp_path / "remote", gone_after_cut=True)
    monkeypatch.setattr(lease, "open_executor", lambda *a, **k: ex)
    monkeypatch.setattr(start, "PID_WAIT_SECS", 0.5)
    app, _ = _app(p)
    with pytest.raises(OverbrainerError):
        flow.train_flow(app.with_config(_config(p)), detach=True)
    [rid] = p.run_ids()
    c = p.run("train", "cancel", rid)
    assert c.returncode == 0, c.stderr
    assert c.stdout == f"train: run {rid} cancelled\n"
    assert p.record(rid)["state"] == "cancelled"
    assert (tmp_path / "remote" / rid / "cancelled").exists()


def test_a_spawn_that_never_reached_the_target_fails_the_run(tmp_path, fake_axolotl, monkeypatch):
    p = make_project(tmp_path, fake_axolotl)

    class NeverSent(LocalExecutor):
        def spawn(self, job):
            e = TargetUnreachable("cannot reach target `local`: spawn: connection reset")
            e.sent = False
            raise e

    monkeypatch.setattr(lease, "open_executor", lambda *a, **k: NeverSent(p.runs))
    app, _ = _app(p)
    with pytest.raises(OverbrainerError):
        flow.train_flow(app.with_config(_config(p)))
    [rid] = p.run_ids()
    rec = p.record(rid)
    assert rec["state"] == "failed" and rec["job"] is None
    assert rec["message"] == "the job could not start: cannot reach target `local`: spawn: connection reset"


# --- 2. cancel when the job already reads cancelled -------------------------------------------

def test_cancel_records_a_job_that_already_reads_cancelled(tmp_path, fake_axolotl):
    p = make_project(tmp_path, fake_axolotl)
    fake_axolotl.set_mode("slow")
    assert p.run("train", "--detach").returncode == 0
    [rid] = p.run_ids()
    p.wait_metrics(rid, 2)
    # An earlier cancel finished on the target but died before saving the record.
    LocalExecutor(p.runs).cancel(job_id(RunPlace(p.runs, rid).load()))
    assert p.record(rid)["state"] == "running"
    c = p.run("train", "cancel", rid)
    assert c.returncode == 0, c.stderr
    assert c.stdout == f"train: run {rid} cancelled\n"
    assert p.record(rid)["state"] == "cancelled"
    assert (p.runs / rid / "job.log").is_file()


def test_cancel_leaves_a_stopped_run_whose_job_reads_cancelled(tmp_path, fake_axolotl):
    p = make_project(tmp_path, fake_axolotl)
    fake_axolotl.set_mode("slow")
    assert p.run("train", "--detach").returncode == 0
    [rid] = p.run_ids()
    p.wait_metrics(rid, 2)
    place = RunPlace(p.runs, rid)
    LocalExecutor(p.runs).cancel(job_id(place.load()))
    record = place.load()
    record.state = "stopped"  # e.g. the stop limit's cancel after a snapshot proof
    place.save(record)
    c = p.run("train", "cancel", rid)
    assert c.returncode == 0, c.stderr
    assert "had already ended (cancelled)" in c.stdout
    assert p.record(rid)["state"] == "stopped"


# --- 3. the stop limits cancel shielded --------------------------------------------------------

@pytest.fixture
def stop_limits(monkeypatch):
    scale(monkeypatch, 0.025)
    monkeypatch.setattr(limits, "STOP_GRACE_SECS", 0.5)


def _slow_run(tmp_path, fake_axolotl):
    p = make_project(tmp_path, fake_axolotl)
    fake_axolotl.set_mode("slow")  # ignores the snapshot request
    assert p.run("train", "--detach").returncode == 0
    [rid] = p.run_ids()
    p.wait_metrics(rid, 2)
    return p, rid


def test_a_stop_whose_snapshot_never_comes_is_cancelled(tmp_path, fake_axolotl, stop_limits, caplog):
    p, rid = _slow_run(tmp_path, fake_axolotl)
    app, reports = _app(p)
    with caplog.at_level(logging.WARNING), pytest.raises(OverbrainerError) as e:
        flow.stop_flow(app.with_config(_config(p)), rid)
    warning = "no snapshot 0.5 s after it was asked for: the job was cancelled"
    assert str(e.value) == f"run {rid} was cancelled ({warning})"
    assert warning in caplog.messages
    rec = p.record(rid)
    assert rec["state"] == "cancelled" and rec["message"] == warning
    assert (p.runs / rid / "cancelled").exists()


def test_ctrl_c_during_the_limit_cancel_lets_it_finish(tmp_path, fake_axolotl, stop_limits, monkeypatch):
    p, rid = _slow_run(tmp_path, fake_axolotl)
    ctrl_c = threading.Event()

    class CtrlCWhileCancelling(LocalExecutor):
        def cancel(self, job):
            ctrl_c.set()
            super().cancel(job)

    monkeypatch.setattr(lease, "open_executor", lambda *a, **k: CtrlCWhileCancelling(p.runs))
    app, _ = _app(p, ctrl_c)
    with pytest.raises(Interrupted) as e:
        flow.stop_flow(app.with_config(_config(p)), rid)
    # The cancel ran to its end before the flow gave up.
    assert (p.runs / rid / "cancelled").exists()
    assert f"the job of run {rid} was cancelled" in str(e.value)
    assert f"`overbrainer train attach {rid}`" in str(e.value)
    a = p.run("train", "attach", rid)
    assert a.returncode == 1 and f"error: run {rid} was cancelled" in a.stderr


def test_stop_limit_messages_name_the_durations():
    from overbrainer.support.fmt import duration  # as the cancel messages word their graces

    assert duration(30 * 60, words=True) == "30 min" and duration(10 * 60, words=True) == "10 min"
    assert duration(0.5, words=True) == "0.5 s" and duration(90, words=True) == "1 min 30 s"
