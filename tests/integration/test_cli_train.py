"""`overbrainer train`, `train attach|stop|cancel` and `runs ls|show|logs` end to end on the local
target, with the fake axolotl."""

from __future__ import annotations

import json
import os
import signal

from overbrainer.jobs.start import create_run
from tests.integration.test_runs_support import HF_TOKEN, cmdlines, files_containing, make_project


def only_run(p) -> str:
    ids = p.run_ids()
    assert len(ids) == 1, ids
    return ids[0]


def test_train_ok_succeeds_with_a_verified_adapter(tmp_path, fake_axolotl):
    p = make_project(tmp_path, fake_axolotl, merge=True, hf_token=True)
    fake_axolotl.set_mode("ok", delay=0.5)
    r = p.run("train")
    assert r.returncode == 0, r.stderr
    rid = only_run(p)
    assert rid.startswith("train_demo_")
    rec = p.record(rid)
    assert rec["state"] == "succeeded" and rec["message"] is None and rec["job"]["pid"] > 1
    assert rec["remote_dir"] == str((p.runs / rid).resolve())
    out = r.stdout.splitlines()
    assert out == [f"train: run {rid} succeeded; step 2/2, epoch 1.00, loss 1.2500; output in runs/{rid}/output",
                   f"train: adapter in runs/{rid}/output",
                   f"train: merged model in runs/{rid}/output/merged"]
    run_dir = p.runs / rid
    assert (run_dir / "output" / "adapter_model.safetensors").is_file()
    assert (run_dir / "plugin" / "overbrainer_metrics.py").is_file()
    assert (run_dir / "data" / "eval.jsonl").is_file()
    assert "token present" in (run_dir / "job.log").read_text()
    assert "train: job running" in r.stderr
    # The token never lands in a file.
    assert files_containing(p.dir, HF_TOKEN.encode()) == []
    # runs ls / show / logs
    ls = p.run("runs", "ls")
    assert ls.returncode == 0 and ls.stdout.split() == [rid, "succeeded", "local", rec["created"]]
    show = p.run("--json", "runs", "show", rid)
    data = json.loads(show.stdout)
    assert data["state"] == "succeeded" and data["step"] == 2 and data["loss"] == 1.25
    logs = p.run("runs", "logs", rid, "--tail", "1")
    assert logs.returncode == 0 and logs.stdout == "fake axolotl: merge-lora axolotl.yaml (mode ok)\n"


def test_train_step_lines_show_the_last_step_once_and_no_zero_lr(tmp_path, fake_axolotl):
    # The fake writes what a real trainer does: lr 0.0 at the warmup's first step, then the closing
    # summary (a log at the last step with no metric) before `end`.
    p = make_project(tmp_path, fake_axolotl)
    r = p.run("train")
    assert r.returncode == 0, r.stderr
    steps = [line.split(" INFO ", 1)[1] for line in r.stderr.splitlines() if "train: step" in line]
    assert steps == ["train: step 1/2 (50%), epoch 0.50, loss 1.5000, grad_norm 0.900",
                     "train: step 2/2 (100%), epoch 1.00, loss 1.2500, lr 1.00e-4, grad_norm 0.800"]
    assert "lr 0.00e0" not in r.stderr


def test_one_evaluation_per_epoch_over_one_epoch_is_corrected_and_warned(tmp_path, fake_axolotl):
    import yaml

    p = make_project(tmp_path, fake_axolotl)
    p.env.update(OVERBRAINER_TRAINING__EPOCHS="1", OVERBRAINER_TRAINING__EVALS_PER_EPOCH="1")
    r = p.run("train")
    assert r.returncode == 0, r.stderr
    assert ("WARN training.evals_per_epoch = 1 with training.epochs = 1 gives no evaluation in Axolotl"
            in r.stderr)
    config = yaml.safe_load((p.runs / only_run(p) / "axolotl.yaml").read_text())
    assert config["eval_strategy"] == "epoch" and "evals_per_epoch" not in config
    assert config["num_epochs"] == 1


def test_train_json_reports_one_object(tmp_path, fake_axolotl):
    p = make_project(tmp_path, fake_axolotl)
    r = p.run("--json", "train")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    rid = only_run(p)
    assert data["run_id"] == rid and data["state"] == "succeeded" and data["output"] == f"runs/{rid}/output"


def test_train_fail_reports_the_exit_code(tmp_path, fake_axolotl):
    p = make_project(tmp_path, fake_axolotl)
    fake_axolotl.set_mode("fail")
    r = p.run("train")
    rid = only_run(p)
    assert r.returncode == 1
    message = f"the job exited with code 3 (see runs/{rid}/job.log)"
    assert f"error: {message}" in r.stderr
    assert r.stdout.startswith(f"train: run {rid} failed; step 0")
    rec = p.record(rid)
    assert rec["state"] == "failed" and rec["message"] == message
    assert "training failed" in (p.runs / rid / "job.log").read_text()


def test_train_silent_fails_for_missing_metrics(tmp_path, fake_axolotl):
    p = make_project(tmp_path, fake_axolotl)
    fake_axolotl.set_mode("silent")
    r = p.run("train")
    rid = only_run(p)
    assert r.returncode == 1
    assert p.record(rid)["message"] == (
        f"the job wrote no metrics: the overbrainer metrics plugin was not loaded (see runs/{rid}/job.log)")


def test_train_without_examples_creates_no_run(tmp_path, fake_axolotl):
    p = make_project(tmp_path, fake_axolotl)
    (p.dir / "data" / "train.jsonl").write_text("")
    r = p.run("train")
    assert r.returncode == 1
    assert "error: data/train.jsonl has no example: run `overbrainer split` first" in r.stderr
    assert p.run_ids() == []


def test_unknown_target(tmp_path, fake_axolotl):
    p = make_project(tmp_path, fake_axolotl)
    r = p.run("train", "--target", "nope")
    assert r.returncode == 2 and "unknown target `nope`" in r.stderr
    assert p.run_ids() == []


def test_ssh_target_without_host_names_the_variable(tmp_path, fake_axolotl):
    p = make_project(tmp_path, fake_axolotl, remote=tmp_path / "remote")
    r = p.run("train", "--target", "remote")
    assert r.returncode == 2
    assert "targets.remote.host is not set: set OVERBRAINER_TARGETS__REMOTE__HOST" in r.stderr
    assert p.run_ids() == []


def test_detach_then_attach(tmp_path, fake_axolotl):
    p = make_project(tmp_path, fake_axolotl)
    fake_axolotl.set_mode("ok", delay=1)
    r = p.run("train", "--detach")
    assert r.returncode == 0, r.stderr
    rid = only_run(p)
    assert r.stdout == rid + "\n"
    assert p.record(rid)["state"] == "running"
    a = p.run("train", "attach", rid)
    assert a.returncode == 0, a.stderr
    assert a.stdout.startswith(f"train: run {rid} succeeded;")
    assert p.record(rid)["state"] == "succeeded"
    # Attaching an ended run again reports it from the local files.
    again = p.run("train", "attach", rid)
    assert again.returncode == 0 and again.stdout == a.stdout


def test_cancel_of_a_run_killed_while_preparing_on_a_machine_fails_it(tmp_path, fake_axolotl):
    # Its `train` died before the job started: no target kind recorded anything in its folder, so
    # `train cancel` only fails it (a Runpod run's pods would be deleted first: test_runpod_crash_windows).
    p = make_project(tmp_path, fake_axolotl)
    record, _ = create_run(p.runs, "demo", "local")
    c = p.run("--json", "train", "cancel", record.id)
    assert c.returncode == 0, c.stderr
    message = "cancelled before its job started (its process was killed)"
    assert json.loads(c.stdout) == {"run_id": record.id, "cancelled": False, "state": "failed", "message": message,
                                    "pods": []}
    rec = p.record(record.id)
    assert (rec["state"], rec["message"]) == ("failed", message)


def test_cancel_a_running_job(tmp_path, fake_axolotl):
    p = make_project(tmp_path, fake_axolotl)
    fake_axolotl.set_mode("slow")
    r = p.run("train", "--detach")
    assert r.returncode == 0, r.stderr
    rid = only_run(p)
    p.wait_metrics(rid, 2)
    c = p.run("train", "cancel", rid)
    assert c.returncode == 0, c.stderr
    assert c.stdout == f"train: run {rid} cancelled\n"
    rec = p.record(rid)
    assert rec["state"] == "cancelled"
    pid = rec["job"]["pid"]
    try:
        os.killpg(pid, 0)
        alive = True
    except ProcessLookupError:
        alive = False
    assert not alive
    again = p.run("train", "cancel", rid)
    assert again.returncode == 1 and f"error: run {rid} already ended: cancelled" in again.stderr
    a = p.run("train", "attach", rid)
    assert a.returncode == 1 and f"error: run {rid} was cancelled" in a.stderr


def test_cancel_of_an_ended_job_leaves_the_record(tmp_path, fake_axolotl):
    p = make_project(tmp_path, fake_axolotl)
    r = p.run("train", "--detach")
    assert r.returncode == 0, r.stderr
    rid = only_run(p)
    p.wait_for(lambda: (p.runs / rid / "exit_code").exists(), what="the job's end")
    c = p.run("train", "cancel", rid)
    assert c.returncode == 0, c.stderr
    assert c.stdout == (f"train: the job of run {rid} had already ended (exited with code 0): "
                        f"collect it with `overbrainer train attach {rid}`\n")
    assert p.record(rid)["state"] == "running"


def test_stop_with_snapshot_then_resume(tmp_path, fake_axolotl):
    p = make_project(tmp_path, fake_axolotl)
    fake_axolotl.set_mode("snapshot")
    p.run("train", "--detach")
    rid = only_run(p)
    p.wait_metrics(rid, 2)
    s = p.run("train", "stop", rid)
    assert s.returncode == 0, s.stderr
    lines = s.stdout.splitlines()
    assert lines[0] == (f"train: snapshot of run {rid} requested: its job saves a checkpoint at the end of "
                        "its current step, then stops")
    rec = p.record(rid)
    assert rec["state"] == "stopped", rec
    step = rec["snapshot"]["step"]
    assert rec["snapshot"] == {"checkpoint": f"output/checkpoint-{step}", "step": step, "reason": "requested"}
    assert any(f"resume with `overbrainer train --resume-from {rid}`" in line for line in lines)
    assert (p.runs / rid / "output" / f"checkpoint-{step}" / "trainer_state.json").is_file()
    fake_axolotl.set_mode("ok")
    r = p.run("train", "--resume-from", rid)
    assert r.returncode == 0, r.stderr
    new = [i for i in p.run_ids() if i != rid]
    assert len(new) == 1
    new_rec = p.record(new[0])
    assert new_rec["resumed_from"] == rid and new_rec["state"] == "succeeded"
    new_dir = p.runs / new[0]
    assert (new_dir / "resume" / f"checkpoint-{step}" / "trainer_state.json").is_file()
    assert f'resume_from_checkpoint: "{new_dir.resolve()}/resume/checkpoint-{step}"' in (
        new_dir / "axolotl.yaml").read_text()
    # A run that is not stopped cannot be resumed.
    bad = p.run("train", "--resume-from", new[0])
    assert bad.returncode == 1
    assert f"cannot resume from run {new[0]}: it is succeeded, not stopped with a snapshot" in bad.stderr


def test_resume_refuses_changed_settings(tmp_path, fake_axolotl):
    p = make_project(tmp_path, fake_axolotl)
    fake_axolotl.set_mode("snapshot")
    p.run("train", "--detach")
    rid = only_run(p)
    p.wait_metrics(rid, 2)
    assert p.run("train", "stop", rid).returncode == 0
    toml = p.dir / "overbrainer.toml"
    toml.write_text(toml.read_text().replace('adapter = "lora"', 'adapter = "lora"\nlora_r = 8'))
    r = p.run("train", "--resume-from", rid)
    assert r.returncode == 1
    assert (f"cannot resume from run {rid}: the training settings differ from the ones it ran with "
            "(lora_r); set them back to resume, or start a new run") in r.stderr


def test_ctrl_c_during_follow_detaches_and_the_job_keeps_running(tmp_path, fake_axolotl):
    p = make_project(tmp_path, fake_axolotl, hf_token=True)
    fake_axolotl.set_mode("slow")
    proc = p.popen("train")
    try:
        rid = p.wait_for(lambda: p.run_ids() and p.run_ids()[0], what="the run")
        p.wait_state(rid, "running")
        p.wait_metrics(rid, 2)
        # No secret on any command line while the job runs.
        assert not [c for c in cmdlines() if HF_TOKEN.encode() in c]
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert (f"error: interrupted: run {rid} keeps running on target `local`; follow it again with "
            f"`overbrainer train attach {rid}`") in err
    rec = p.record(rid)
    assert rec["state"] == "running"
    os.killpg(rec["job"]["pid"], 0)  # still there
    c = p.run("train", "cancel", rid)
    assert c.returncode == 0 and p.record(rid)["state"] == "cancelled"


def test_runs_show_and_ls_on_a_corrupt_record(tmp_path, fake_axolotl):
    p = make_project(tmp_path, fake_axolotl)
    marker = "MARKER-c0ffee"
    good = p.runs / "train_demo_20260101-000000"
    good.mkdir(parents=True)
    (good / "run.json").write_text(json.dumps({
        "id": good.name, "target": "local", "created": "2026-01-01T00:00:00Z", "remote_dir": str(good),
        "job": None, "state": "failed", "message": "x", "snapshots": True}))
    bad = p.runs / "train_demo_20260102-000000"
    bad.mkdir()
    (bad / "run.json").write_text('{\n  "id": ' + marker + "\n}\n")
    r = p.run("runs", "show", bad.name)
    assert r.returncode == 1
    assert f"error: {bad / 'run.json'} is not a valid run record (line 2, column 9)" in r.stderr
    assert marker not in r.stderr + r.stdout
    ls = p.run("runs", "ls")
    assert ls.returncode == 0 and ls.stdout.split()[0] == good.name and len(ls.stdout.splitlines()) == 1
    assert f"skipping runs/{bad.name}" in ls.stderr and marker not in ls.stderr
    a = p.run("train", "attach", bad.name)
    assert a.returncode == 1 and marker not in a.stderr
    assert p.run("runs", "show", "../etc").returncode == 1


def test_runs_logs_redacts_and_strips_control_characters(tmp_path, fake_axolotl):
    p = make_project(tmp_path, fake_axolotl, hf_token=True)
    run = p.runs / "train_demo_20260101-000000"
    run.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({
        "id": run.name, "target": "local", "created": "2026-01-01T00:00:00Z", "remote_dir": str(run),
        "job": None, "state": "failed", "message": None}))
    assert p.run("runs", "logs", run.name).stdout == f"runs: no job.log for run {run.name} yet\n"
    (run / "job.log").write_bytes(b"one\n\x1b[31mred\x1b[0m two\x07\nthe token " + HF_TOKEN.encode()
                                  + b" leaked\nprogress\r50%\rdone\nlast")
    # .env is read by the CLI, so the token is registered with the redactor.
    (p.dir / ".env").write_text(f"OVERBRAINER_HF_TOKEN={HF_TOKEN}\n")
    r = p.run("runs", "logs", run.name)
    assert r.returncode == 0, r.stderr
    # The last line has no newline: nobody follows, so it is shown all the same.
    assert r.stdout.splitlines() == ["one", "red two", "the token *** leaked", "progress 50% done", "last"]
    t = p.run("runs", "logs", run.name, "--tail", "2")
    assert t.stdout.splitlines() == ["progress 50% done", "last"]
    assert p.run("runs", "logs", "nope_1").returncode == 1
    (run / "job.log").unlink()
    (run / "job.log").symlink_to(p.dir / "overbrainer.toml")
    s = p.run("runs", "logs", run.name)
    assert s.returncode == 1 and "symbolic link" in s.stderr


def test_stop_while_another_process_holds_the_lock_only_asks(tmp_path, fake_axolotl):
    from overbrainer.support.lock import ProjectLock

    p = make_project(tmp_path, fake_axolotl)
    fake_axolotl.set_mode("snapshot")
    p.run("train", "--detach")
    rid = only_run(p)
    p.wait_metrics(rid, 2)
    with ProjectLock(p.dir):
        busy = p.run("train", "attach", rid)
        assert busy.returncode == 75 and f"another overbrainer (pid {os.getpid()}) is using this project" in busy.stderr
        s = p.run("train", "stop", rid)
    assert s.returncode == 0, s.stderr
    assert s.stdout.splitlines()[1] == (
        f"train: overbrainer (pid {os.getpid()}) is using this project: if it follows run {rid}, it collects "
        f"the snapshot; if not, collect it with `overbrainer train attach {rid}`")
    assert (p.runs / rid / "snapshot.request").read_text() == "requested"
    assert p.record(rid)["state"] == "running"
    a = p.run("train", "attach", rid)
    assert a.returncode == 0, a.stderr
    assert p.record(rid)["state"] == "stopped"
    bad = p.run("train", "stop", rid)
    assert bad.returncode == 1 and f"run {rid} already ended: stopped" in bad.stderr


def test_runs_logs_follow_ends_with_the_run(tmp_path, fake_axolotl):
    p = make_project(tmp_path, fake_axolotl)
    fake_axolotl.set_mode("slow")
    p.run("train", "--detach")
    rid = only_run(p)
    p.wait_metrics(rid, 1)
    follower = p.popen("runs", "logs", rid, "--follow")
    try:
        p.wait_metrics(rid, 3)
        assert p.run("train", "cancel", rid).returncode == 0
        out, err = follower.communicate(timeout=20)
    finally:
        if follower.poll() is None:
            follower.kill()
    assert follower.returncode == 0, err
    assert out.splitlines()[0] == "fake axolotl: train axolotl.yaml (mode slow)"


def test_train_subcommand_options_conflict(tmp_path, fake_axolotl):
    p = make_project(tmp_path, fake_axolotl)
    r = p.run("train", "--detach", "attach", "x_1")
    assert r.returncode == 2 and "only apply to `overbrainer train` itself" in r.stderr
    r = p.run("train", "attach", "../x")
    assert r.returncode == 1 and "is not a valid run ID" in r.stderr
    r = p.run("train", "attach", "nope_1")
    assert r.returncode == 1 and "no run `nope_1` in runs/" in r.stderr


def test_runs_show_gives_phase_step_loss_and_time_left_of_a_running_run(tmp_path, fake_axolotl):
    p = make_project(tmp_path, fake_axolotl)
    run = p.runs / "train_demo_20260101-000000"
    run.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({
        "id": run.name, "target": "local", "created": "2026-01-01T00:00:00Z", "remote_dir": str(run),
        "job": {"dir": str(run), "pid": 4242, "container": None}, "state": "running", "message": None,
        "snapshots": True}))
    lines = [{"event": "begin", "time": 100.0, "max_steps": 40},
             {"event": "log", "time": 100.0, "step": 10, "epoch": 0.5, "max_steps": 40, "loss": 1.5},
             {"event": "log", "time": 110.0, "step": 20, "epoch": 1.0, "max_steps": 40, "loss": 1.25}]
    (run / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    r = p.run("runs", "show", run.name)
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert "phase:     training" in out and "step:      20/40" in out and "loss:      1.2500" in out
    assert "time left: 20s (1.00 steps/s)" in out
    data = json.loads(p.run("--json", "runs", "show", run.name).stdout)
    assert (data["pace"], data["time_left"]) == (1.0, 20.0)
