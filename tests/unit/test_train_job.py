"""The training job as `Runtime.job` builds it (docs/runs.md#job-control-on-the-target),
run for real with `sh` and the fake axolotl; the metrics plugin shipped with the run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from overbrainer.config.model import Training
from overbrainer.exec.runtime import Runtime, Step
from overbrainer.train import axolotl_config as ac
from overbrainer.train import job
from overbrainer.train.metrics import MetricsSummary, parse_record, read_lines
from tests.fixtures.axolotl import FakeAxolotl

TOKEN = "hf_secretTOKENvalue123"


def test_venv_tool_expands_home_where_the_job_runs():
    tool = Runtime(venv="~/v/").tool("axolotl")
    out = subprocess.run(["sh", "-c", f"printf %s {tool}"], env={"HOME": "/h"},
                         capture_output=True, text=True, check=True)
    assert out.stdout == "/h/v/bin/axolotl"
    assert Runtime(venv="/opt/my venv").tool("axolotl") == "'/opt/my venv/bin/axolotl'"


def test_stage_line_is_a_stage_record(tmp_path):
    metrics = tmp_path / "m" / "metrics.jsonl"
    metrics.parent.mkdir()
    before = int(time.time())
    subprocess.run(["sh", "-c", Runtime().chain([Step("merge", ("true",))])], cwd=tmp_path, check=True,
                   env={"PATH": os.environ["PATH"], "OVERBRAINER_METRICS": str(metrics)})
    rec = parse_record(metrics.read_text())
    assert rec["event"] == "stage" and rec["name"] == "merge" and rec["time"] >= before
    assert metrics.read_text().endswith("}\n")


def test_install_plugin_ships_an_importable_plugin(tmp_path):
    dest = job.install_plugin(tmp_path)
    assert dest == tmp_path / "plugin" / "overbrainer_metrics.py"
    assert dest.read_bytes() == job.plugin_source()
    env = dict(os.environ, **Runtime().job_env(str(tmp_path)))
    code = "import overbrainer_metrics as m; print(m.OverbrainerMetricsPlugin.__name__)"
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd="/", capture_output=True, text=True,
                         timeout=30)
    assert out.stdout.strip() == "OverbrainerMetricsPlugin", out.stderr


# --- the chain against the fake axolotl ------------------------------------------------------

def prepare_run(tmp_path: Path, fake: FakeAxolotl, *, merge: bool, mode: str):
    """A run directory and the native job script `Runtime.job` gives for it (as runs/start.py
    builds it), with the environment the executor would give the job (HF_TOKEN included)."""
    run = tmp_path / "runs" / "r1"
    (run / "data").mkdir(parents=True)
    (run / "data" / "train.jsonl").write_text('{"messages": []}\n')
    ac.require_examples(run / "data" / "train.jsonl")
    training = Training(target="here", base_model="Qwen/Qwen3-4B", adapter="lora", merge=merge)
    ac.write_config(run / "axolotl.yaml", ac.build_config(training, str(run), has_eval=False))
    job.install_plugin(run)
    fake.set_mode(mode)
    steps = [Step("train", ("axolotl", "train", job.CONFIG_NAME))]
    if job.wants_merge(training):
        steps.append(Step("merge", ("axolotl", "merge-lora", job.CONFIG_NAME)))
    script, container = Runtime(venv=str(fake.venv)).job("r1", str(run), str(tmp_path / "hf-cache"), steps,
                                                         secret_names=["HF_TOKEN"])
    assert container is None and TOKEN not in script
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "HF_TOKEN": TOKEN}
    return run, script, env


def run_chain(run, script, env, timeout=30):
    return subprocess.run(["sh", "-c", script], cwd=run, env=env, capture_output=True, text=True,
                          timeout=timeout)


def stages(run):
    return [r["name"] for r in map(parse_record, read_lines(run / "metrics.jsonl")) if r and r["event"] == "stage"]


def test_ok_run_trains_and_merges(tmp_path, fake_axolotl):
    run, script, env = prepare_run(tmp_path, fake_axolotl, merge=True, mode="ok")
    out = run_chain(run, script, env)
    assert out.returncode == 0, out.stderr
    assert "token present" in out.stdout
    summary = MetricsSummary().feed_all(read_lines(run / "metrics.jsonl"))
    assert (summary.lines, summary.malformed) == (5, 0)  # begin, 3 logs, end
    assert summary.describe() == "step 2/2, epoch 1.00, loss 1.2500"
    assert stages(run) == ["train", "merge"]
    assert (run / "output" / "adapter_model.safetensors").is_file()
    assert (run / "output" / "checkpoint-2").is_dir()
    assert (run / "output" / "merged" / "model.safetensors").is_file()
    assert fake_axolotl.calls() == ["train axolotl.yaml", "merge-lora axolotl.yaml"]
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert TOKEN.encode() not in path.read_bytes(), path


def test_failed_training_stops_the_chain(tmp_path, fake_axolotl):
    run, script, env = prepare_run(tmp_path, fake_axolotl, merge=True, mode="fail")
    out = run_chain(run, script, env)
    assert out.returncode == 3 and "training failed" in out.stderr
    assert stages(run) == ["train"] and not (run / "output" / "merged").exists()


def test_failed_merge_fails_the_job(tmp_path, fake_axolotl):
    run, script, env = prepare_run(tmp_path, fake_axolotl, merge=True, mode="fail-merge")
    out = run_chain(run, script, env)
    assert out.returncode == 4 and stages(run) == ["train", "merge"]


def test_silent_run_writes_no_plugin_line(tmp_path, fake_axolotl):
    run, script, env = prepare_run(tmp_path, fake_axolotl, merge=False, mode="silent")
    out = run_chain(run, script, env)
    assert out.returncode == 0
    summary = MetricsSummary().feed_all(read_lines(run / "metrics.jsonl"))
    assert summary.lines == 0 and stages(run) == ["train"]


def wait_for(predicate, timeout=20.0):
    """Poll a file-system condition the job makes true (nothing to block on)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        time.sleep(0.05)


def log_steps(run):
    recs = [parse_record(line) for line in read_lines(run / "metrics.jsonl")]
    return [r["step"] for r in recs if r and r["event"] == "log"]


def test_snapshot_stop_skips_merge_and_exits_zero(tmp_path, fake_axolotl):
    run, script, env = prepare_run(tmp_path, fake_axolotl, merge=True, mode="snapshot")
    proc = subprocess.Popen(["sh", "-c", script], cwd=run, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        wait_for(lambda: len(log_steps(run)) >= 2)
        (run / "snapshot.request").write_text("cost")
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.stderr.close()
    proof = json.loads((run / "snapshot.json").read_text())
    step = proof["step"]
    assert proof == {"checkpoint": f"output/checkpoint-{step}", "step": step, "time": proof["time"], "reason": "cost"}
    assert (run / "output" / f"checkpoint-{step}").is_dir() and step >= 2
    assert stages(run) == ["train"] and not (run / "output" / "merged").exists()
    assert MetricsSummary().feed_all(read_lines(run / "metrics.jsonl")).phase() == "finalizing (saving model)"


def test_slow_run_keeps_going_until_its_group_is_killed(tmp_path, fake_axolotl):
    run, script, env = prepare_run(tmp_path, fake_axolotl, merge=False, mode="slow")
    proc = subprocess.Popen(["sh", "-c", script], cwd=run, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_for(lambda: len(log_steps(run)) >= 2)
        assert proc.poll() is None
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=10) == -signal.SIGTERM
    assert log_steps(run)[:2] == [1, 2] and not (run / "snapshot.json").exists()


def test_a_cluster_trains_with_one_torchrun_per_node_and_the_rest_on_the_primary(tmp_path):
    from overbrainer.config.model import RunpodTarget
    from overbrainer.jobs.run_record import RunRecord
    from overbrainer.runs.job_spec import job_spec

    target = RunpodTarget(name="c", kind="runpod", gpu_types=["A100"], max_hours=1, gpu_count=8, nodes=4,
                          venv="/v")
    record = RunRecord(id="r1", target="c", created="2026-01-01T00:00:00Z", remote_dir=str(tmp_path), state="running")
    training = Training(target="c", base_model="m", adapter="lora", merge=True)
    spec = job_spec(target, record, training, str(tmp_path), {})
    assert ("/v/bin/torchrun --nnodes 4 --nproc_per_node 8 --rdzv_backend static -m axolotl.cli.train "
            "axolotl.yaml") in spec.script
    (tmp_path / "bin").mkdir()
    for tool in ("torchrun", "axolotl"):  # each says it ran
        (tmp_path / "bin" / tool).write_text(f'#!/bin/sh\necho {tool} "$@" >> "{tmp_path}/ran"\n')
        os.chmod(tmp_path / "bin" / tool, 0o755)
    script = spec.script.replace("/v/bin", str(tmp_path / "bin"))
    for rank in ("1", "0"):
        env = {"PATH": os.environ["PATH"], "OVERBRAINER_NODE_RANK": rank}
        subprocess.run(["sh", "-c", script], cwd=tmp_path, check=True, env=env)
    assert (tmp_path / "ran").read_text().splitlines() == [
        "torchrun --nnodes 4 --nproc_per_node 8 --rdzv_backend static -m axolotl.cli.train axolotl.yaml",  # rank 1
        "torchrun --nnodes 4 --nproc_per_node 8 --rdzv_backend static -m axolotl.cli.train axolotl.yaml",  # rank 0
        "axolotl merge-lora axolotl.yaml"]  # the primary only
    stages = [json.loads(line)["name"] for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert stages == ["train", "train", "merge"]
