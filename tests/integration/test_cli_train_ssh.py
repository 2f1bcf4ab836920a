"""`overbrainer train` on an SSH target: a real sshd on 127.0.0.1 (the `sshd` fixture), reached
through an ~/.ssh/config alias named by OVERBRAINER_TARGETS__REMOTE__HOST."""

from __future__ import annotations

import pytest

from tests.integration.test_runs_support import HF_TOKEN, cmdlines, files_containing, make_project

pytestmark = pytest.mark.ssh


def ssh_project(tmp_path, fake_axolotl, sshd, **kw):
    p = make_project(tmp_path, fake_axolotl, target="remote", remote=tmp_path / "remote",
                     ssh_alias=sshd.alias, **kw)
    p.home = sshd.home
    return p


def test_train_over_ssh_downloads_and_verifies(tmp_path, fake_axolotl, sshd):
    p = ssh_project(tmp_path, fake_axolotl, sshd, merge=True, hf_token=True)
    r = p.run("train")
    assert r.returncode == 0, r.stderr
    [rid] = p.run_ids()
    rec = p.record(rid)
    remote_dir = (tmp_path / "remote").resolve() / rid
    assert rec["state"] == "succeeded" and rec["target"] == "remote"
    assert rec["remote_dir"] == str(remote_dir)
    local = p.runs / rid
    for name in ("output/adapter_model.safetensors", "output/merged/model.safetensors", "metrics.jsonl", "job.log"):
        assert (local / name).read_bytes() == (remote_dir / name).read_bytes(), name
    # Checkpoints and job-control files stay on the target.
    assert not (local / "output" / "checkpoint-2").exists()
    assert not (local / "exit_code").exists() and not (local / ".claim").exists()
    assert (remote_dir / ".claim").is_file()
    # The record lives here only: a copy on the target would say `preparing` forever.
    assert not (remote_dir / "run.json").exists()
    assert "token present" in (local / "job.log").read_text()
    assert r.stdout.splitlines()[1:] == [f"train: adapter in runs/{rid}/output",
                                         f"train: merged model in runs/{rid}/output/merged"]
    assert files_containing(p.dir, HF_TOKEN.encode()) == []
    assert files_containing(tmp_path / "remote", HF_TOKEN.encode()) == []


def test_connection_lost_mid_follow_then_attach(tmp_path, fake_axolotl, sshd):
    p = ssh_project(tmp_path, fake_axolotl, sshd, hf_token=True)
    fake_axolotl.set_mode("ok", delay=4)
    proc = p.popen("train")
    try:
        rid = p.wait_for(lambda: p.run_ids() and p.run_ids()[0], what="the run")
        p.wait_state(rid, "running")
        # Both ends of the connection are on this machine: the token is on no command line.
        assert not [c for c in cmdlines() if HF_TOKEN.encode() in c]
        sshd.stop()
        try:
            out, err = proc.communicate(timeout=60)
        finally:
            sshd.start()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, err
    assert "cannot reach the job (1/5)" in err and "cannot reach the job (5/5)" in err
    assert f"follow it again with `overbrainer train attach {rid}`" in err
    assert p.record(rid)["state"] == "running"
    p.wait_for(lambda: (tmp_path / "remote" / rid / "exit_code").exists(), what="the job's end")
    a = p.run("train", "attach", rid)
    assert a.returncode == 0, a.stderr
    assert p.record(rid)["state"] == "succeeded"
    assert (p.runs / rid / "output" / "adapter_model.safetensors").is_file()


def test_cancel_over_ssh(tmp_path, fake_axolotl, sshd):
    p = ssh_project(tmp_path, fake_axolotl, sshd)
    fake_axolotl.set_mode("slow")
    d = p.run("train", "--detach")
    assert d.returncode == 0, d.stderr
    [rid] = p.run_ids()
    p.wait_metrics(rid, 2, root=tmp_path / "remote")
    c = p.run("train", "cancel", rid)
    assert c.returncode == 0, c.stderr
    assert c.stdout == f"train: run {rid} cancelled\n"
    assert p.record(rid)["state"] == "cancelled"
    assert (p.runs / rid / "job.log").is_file()  # retrieved, best effort
    assert (tmp_path / "remote" / rid / "cancelled").exists()


def test_unreachable_target_is_named_once_and_creates_no_run(tmp_path, fake_axolotl, sshd):
    p = ssh_project(tmp_path, fake_axolotl, sshd)
    sshd.stop()
    try:
        r = p.run("train")
    finally:
        sshd.start()
    assert r.returncode == 1
    [line] = [x for x in r.stderr.splitlines() if x.startswith("error: ")]
    assert line.startswith("error: cannot reach target `remote`: ")
    assert line.count("cannot reach") == 1
    assert p.run_ids() == []


def test_uploads_and_downloads_publish_their_progress(tmp_path, fake_axolotl, sshd):
    import json

    p = ssh_project(tmp_path, fake_axolotl, sshd, merge=True)
    r = p.run("--json", "train")
    assert r.returncode == 0, r.stderr
    [rid] = p.run_ids()
    events = [json.loads(line) for line in r.stderr.splitlines() if line.startswith("{")]
    transfers = [e for e in events if e.get("event") == "transfer"]
    for direction in ("upload", "download"):
        mine = [(e["done"], e["total"]) for e in transfers if e["direction"] == direction]
        assert mine and mine[0][0] == 0, (direction, mine)
        done, total = mine[-1]
        assert done == total > 0 and all(e["run_id"] == rid for e in transfers)
    # the download's total: the files brought home
    local = p.runs / rid
    files = [*(local / "output").rglob("*"), local / "metrics.jsonl", local / "job.log"]
    brought = sum(f.stat().st_size for f in files if f.is_file())
    last = [(e["done"], e["total"]) for e in transfers if e["direction"] == "download"][-1]
    assert last == (brought, brought)
