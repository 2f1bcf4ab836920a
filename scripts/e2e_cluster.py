#!/usr/bin/env python3
"""A real distributed training on a 2-node Instant Cluster of the fake Runpod (not in the default
suite: it takes minutes on 2 CPU cores).

    AXO_VENV=/path/to/axolotl-venv python scripts/e2e_cluster.py [--steps 3] [--keep]

Run from the repository with overbrainer's test extra installed (the fake Runpod and the SmolLM2
model come from the test suite: tests/fixtures/runpod.py, tests/fixtures/llama.py). As root: the
fake's members are real process trees, each in its own mount, PID and network namespaces, joined
by one overlay bridge (10.65.0.0/16), like the members of a real cluster on their `ens1`.

What it does, with overbrainer's own code at each step: `start_cluster` creates the 2-pod cluster
(recorded first, every member up with its rank and overlay address, reached over SSH, its
watchdog's verdict read); `fill_run_dir` writes the run (data, axolotl.yaml with
`distributed = "ddp"`, the metrics plugin); `job_spec` builds the job (one `torchrun --nnodes 2
--rdzv_backend static -m axolotl.cli.train` per node, the rest on the primary); exec/nodes.py
uploads the run to both members and starts the job on each with its rank and the primary's
rendezvous address; gloo carries the gradients over the overlay (no GPU: ACCELERATE_USE_CPU=true
makes Accelerate's state MULTI_CPU). Then rank 0's adapter and metrics come home, the adapter is
loaded with PEFT on the base model, the loss curve is printed, and the cluster is deleted.

Checks: both nodes exit 0; rank 0 logged a loss for every step; the run was one distributed
run of 2 processes, not two runs side by side: each step took 2 examples of the epoch (epoch
2/8 a step: the sampler split the data over 2 ranks) and neither log has transformers' "process
group is initialized, but parallel_mode != ParallelMode.DISTRIBUTED"; the adapter loads; nothing
bills at the end. Prints `e2e-cluster: all good` (exit 0) or `e2e-cluster: FAILED: <why>` (exit 1), and the
times of provisioning, training and retrieval.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE))

from overbrainer.config.model import RunpodTarget, Training  # noqa: E402
from overbrainer.exec import nodes as N  # noqa: E402
from overbrainer.front.interrupt import Flag  # noqa: E402
from overbrainer.jobs.run_record import RunRecord  # noqa: E402
from overbrainer.runpod.api import RunpodClient  # noqa: E402
from overbrainer.runpod.cluster import end_cluster, members_lost, start_cluster  # noqa: E402
from overbrainer.runpod.provision import PodPlace  # noqa: E402
from overbrainer.runpod.waits import Timing  # noqa: E402
from overbrainer.runs.job_spec import job_spec  # noqa: E402
from overbrainer.runs.prepare import fill_run_dir  # noqa: E402

GPU = "NVIDIA A100 80GB PCIe"
WORKDIR = "/workspace/overbrainer"
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


def training(model: Path, steps: int) -> Training:
    return Training(target="cluster", base_model=str(model), adapter="lora", epochs=1, sequence_len=256,
                    micro_batch_size=1, gradient_accumulation_steps=1, sample_packing=False, saves_per_epoch=1,
                    optimizer="adamw_torch", distributed="ddp",
                    axolotl_extra={"bf16": False, "fp16": False, "tf32": False, "lora_mlp_kernel": False,
                                   "lora_qkv_kernel": False, "lora_o_kernel": False,
                                   "chat_template": "tokenizer_default", "max_steps": steps,
                                   "gradient_checkpointing": False})


def project(work: Path) -> Path:
    proj = work / "proj"
    (proj / "data").mkdir(parents=True)
    rows = [{"messages": [{"role": "user", "content": f"What is the capital of {c}?"},
                          {"role": "assistant", "content": f"{t} is the capital of {c}."}]} for c, t in FACTS]
    (proj / "data" / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return proj


def metrics(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip().startswith("{")]


def run(args) -> dict:
    from tests.fixtures.runpod_server import FakeRunpod

    venv = Path(args.venv)
    if not (venv / "bin" / "torchrun").exists():
        raise Failed(f"no torchrun in {venv}: set AXO_VENV to a venv with axolotl 0.19 and torch")
    model = model_dir()
    work = Path(tempfile.mkdtemp(prefix="ob-e2e-cluster-"))
    times: dict[str, float] = {}
    fake = FakeRunpod(work / "runpod").start()
    python_home = Path(os.path.realpath(venv / "bin" / "python3")).parents[1]  # the venv's base Python
    fake.pods.image_paths = [str(p) for p in (model, venv, python_home) if str(p).startswith("/root/")]
    target = RunpodTarget(name="cluster", kind="runpod", gpu_types=[GPU], max_hours=1.0, nodes=2, gpu_count=1,
                          venv=str(venv), max_cost_usd=10.0)
    client = RunpodClient(fake.url, fake.account_key, sleep=lambda s: None)
    run_id = "e2e1"
    run_dir = work / "runs" / run_id
    up = None
    try:
        t0 = time.monotonic()
        up = start_cluster(client, target, PodPlace(run_id, run_dir, WORKDIR, client.base_url),
                           flag=Flag(threading.Event()), timing=Timing.default())
        times["provisioning_s"] = time.monotonic() - t0
        say(f"cluster {up.cluster.id} up in {times['provisioning_s']:.1f} s: "
            + ", ".join(f"rank {m.rank} {m.pod_id} at {m.ip}" for m in up.record.members))
        remote = f"{WORKDIR}/{run_id}/run"
        local = run_dir / "job"
        local.mkdir(parents=True)
        fill_run_dir(local, project(work), training(model, args.steps), remote)
        record = RunRecord(id=run_id, target="cluster", created="2026-01-01T00:00:00Z", remote_dir=remote,
                           state="running")
        spec = job_spec(target, record, training(model, args.steps), WORKDIR, {})
        env = {"ACCELERATE_USE_CPU": "true", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
               "AXOLOTL_DO_NOT_TRACK": "1", "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1"}
        spec = type(spec)(dir=spec.dir, script=spec.script, env=env, secrets=spec.secrets, container=spec.container)
        nodes = [N.Node(m.rank, m.ip, ex) for m, ex in zip(up.record.members, up.executors)]
        t1 = time.monotonic()
        N.upload_all(nodes, str(local), remote)
        jobs = N.spawn_all(nodes, spec)
        say("torchrun started on both nodes; waiting (about a minute a step on 2 shared cores)")
        while True:
            why = members_lost(client, up.record)
            if why:
                raise Failed(why)
            verdict, rank = N.verdict(N.states(nodes, jobs))
            if verdict != "running":
                break
            time.sleep(5)
        times["training_s"] = time.monotonic() - t1
        logs = [n.executor.read_from(f"{remote}/job.log", 0, 1 << 20).decode("utf-8", "replace") for n in nodes]
        if verdict != "succeeded":
            raise Failed(f"node {rank} failed; its log ends:\n" + "\n".join(logs[rank or 0].splitlines()[-30:]))
        t2 = time.monotonic()
        home = work / "home"
        nodes[0].executor.download(remote, str(home), ["output", "metrics.jsonl"], exclude=["output/checkpoint-*"])
        times["retrieval_s"] = time.monotonic() - t2
        return check(home, logs, model, venv, args.steps, times)
    finally:
        if up is not None:
            up.close()
            end_cluster(client, up.record, "requested", Timing.default())
        left = fake.billing()
        fake.stop()
        if left:
            raise Failed(f"still billing after the delete: {[p.get('id') for p in left]}")
        if args.keep:
            say(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def check(home: Path, logs: list[str], model: Path, venv: Path, steps: int, times: dict) -> dict:
    primary = metrics((home / "metrics.jsonl").read_text())
    lines = [m for m in primary if m.get("event") == "log" and m.get("loss") is not None]
    if [m["step"] for m in lines] != list(range(1, steps + 1)):
        raise Failed(f"rank 0 logged steps {[m['step'] for m in lines]}, not 1..{steps}")
    per_step = 2 / len(FACTS)  # 2 ranks × micro_batch_size 1 of the epoch's examples
    if abs(lines[0]["epoch"] - per_step) > 1e-6:
        raise Failed(f"step 1 is epoch {lines[0]['epoch']}, not {per_step}: the data was not split over 2 ranks")
    for rank, text in enumerate(logs):
        if "parallel_mode != ParallelMode.DISTRIBUTED" in text:
            raise Failed(f"rank {rank} did not train as part of one distributed run")
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
