#!/usr/bin/env python3
"""Benchmark `overbrainer eval`'s overhead over running lm-eval by hand on the same server and
task. Target: ours / by hand <= 1.05 (medians).

The child: SmolLM2-135M-Instruct (Q4_1, the tests' cached GGUF) as a run's GGUF, llama-server on
one thread (LLAMA_ARG_THREADS=1); the task: the eval split of `--items` questions as
`overbrainer eval` generates it (copied once, so both sides read the same YAML and JSONL), answers
of at most `--max-tokens` tokens. Each repeat times, alternately, two commands end to end (Python
start-up, imports, the server's start and stop included on both sides):

- ours: `overbrainer eval --no-parent --max-tokens M` (the child only: the parent is another
  model's time, the same through both);
- by hand: `llama-server` started with the same arguments and waited for (`GET /health`), then
  lm-eval with the same model arguments, generation kwargs and seeds, then the server stopped.
  `--hand api` (default): a Python process calling `lm_eval.simple_evaluate` with a TaskManager of
  the task's folder only, its output written as JSON (the least lm-eval can do);
  `--hand cli`: `lm-eval run --model local-chat-completions --model_args … --tasks
  overbrainer_eval --include_path <task dir> --apply_chat_template --log_samples --output_path …`,
  which also indexes the ~15,000 tasks lm-eval ships (seconds of YAML parsing).

Usage: python3 scripts/bench_eval.py [--items N] [--max-tokens M] [--repeats R] [--hand api|cli]
Prints both medians and the ratio; exits 1 when it misses the target.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
TARGET = 1.05
QUESTIONS = ["Say hello to the world.", "Name a colour of the sky.", "What is two plus two?",
             "Name a fruit that is yellow.", "What do cats drink?"]


# By hand through the API: simple_evaluate with the task's folder only (no index of lm-eval's own
# tasks, as `overbrainer eval` does for local tasks), the results written as JSON.
_API = r"""
import json, sys
import lm_eval
from lm_eval.tasks import TaskManager
url, task_dir, max_tokens, limit, out = sys.argv[1:6]
manager = TaskManager(include_path=[task_dir], include_defaults=False)
args = {"base_url": url, "model": "child", "seed": 42, "num_concurrent": 1, "max_retries": 3, "timeout": 600,
        "tokenizer_backend": None, "think_end_token": "</think>"}
res = lm_eval.simple_evaluate(model="local-chat-completions", model_args=args, tasks=["overbrainer_eval"],
                              task_manager=manager, limit=int(limit), apply_chat_template=True, log_samples=True,
                              gen_kwargs={"max_gen_toks": int(max_tokens), "temperature": 0.0, "do_sample": False},
                              random_seed=42, numpy_random_seed=42, torch_random_seed=42, fewshot_random_seed=42)
with open(out, "w") as f:
    json.dump(res, f, default=str)
"""


def make_project(tmp: Path, items: int):
    from tests.fixtures.llama import prepare_gguf, prepare_llama_cpp
    from tests.fixtures.project import Project
    from tests.integration.test_cli_compare_job import make_run

    project = Project(tmp / "proj", "http://127.0.0.1:9").write()
    llama_cpp_dir = prepare_llama_cpp()
    make_run(project, prepare_gguf(), target="here", remote=tmp / "remote", llama_cpp_dir=llama_cpp_dir)
    with (project.data / "eval.jsonl").open("w") as f:
        for i in range(items):
            q = QUESTIONS[i % len(QUESTIONS)]
            f.write(json.dumps({"id": f"e{i:03d}", "topic": "t", "messages": [
                {"role": "user", "content": f"{q} ({i})"}, {"role": "assistant", "content": "An answer."}]}) + "\n")
    return project, llama_cpp_dir


def environment(project, home: Path) -> dict[str, str]:
    from tests.fixtures.cli import clean_env

    return clean_env({**project.env, "LLAMA_ARG_THREADS": "1"}, home)


def ours(project, env: dict, max_tokens: int) -> tuple[float, Path]:
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "overbrainer", "-C", str(project.dir), "eval", "--no-parent",
                    "--max-tokens", str(max_tokens)], env=env, check=True, capture_output=True, text=True)
    wall = time.monotonic() - started
    newest = max((project.dir / "runs").glob("*/evals/*/eval.json"), key=lambda p: p.stat().st_mtime)
    return wall, newest.parent


def by_hand(how: str, server: Path, gguf: Path, task_dir: Path, out: Path, env: dict, max_tokens: int,
            limit: int) -> float:
    from tests.fixtures.llama import free_port

    started = time.monotonic()
    port = free_port()
    with open(out / "server.log", "wb") as log:
        proc = subprocess.Popen([str(server), "-m", str(gguf), "--host", "127.0.0.1", "--port", str(port),
                                 "-ngl", "999", "-c", "1024", "-np", "1", "--no-webui"], stdout=log,
                                stderr=subprocess.STDOUT, env=env)
    try:
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                time.sleep(0.2)
        url = f"http://127.0.0.1:{port}/v1/chat/completions"
        lm_env = {**env, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "OPENAI_API_KEY": ""}
        if how == "cli":
            model_args = (f"base_url={url},model=child,seed=42,num_concurrent=1,max_retries=3,timeout=600,"
                          "tokenizer_backend=None,think_end_token=</think>")
            command = ["-m", "lm_eval", "run", "--model", "local-chat-completions", "--model_args", model_args,
                       "--tasks", "overbrainer_eval", "--include_path", str(task_dir), "--apply_chat_template",
                       "--log_samples", "--output_path", str(out / "results"), "--gen_kwargs",
                       f"max_gen_toks={max_tokens},temperature=0.0,do_sample=False", "--seed", "42",
                       "--limit", str(limit)]
        else:
            command = ["-c", _API, url, str(task_dir), str(max_tokens), str(limit), str(out / "results.json")]
        subprocess.run([sys.executable, *command], env=lm_env, check=True, capture_output=True)
    finally:
        proc.terminate()
        proc.wait(30)
    return time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=20)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--hand", choices=("api", "cli"), default="api",
                        help="by hand through simple_evaluate (default) or the lm-eval command, which also "
                             "indexes every task lm-eval ships")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        project, llama_cpp_dir = make_project(Path(tmp), args.items)
        home = Path(tmp) / "home"
        home.mkdir()
        env = environment(project, home)
        _, first = ours(project, env, args.max_tokens)  # warm-up; its task is the hand side's
        task_dir = Path(tmp) / "task"
        shutil.copytree(first / "task", task_dir)
        gguf = next((project.dir / "runs").glob("*/output/gguf/*.gguf"))
        server = llama_cpp_dir / "bin" / "llama-server"
        mine, theirs = [], []
        for i in range(args.repeats):
            mine.append(ours(project, env, args.max_tokens)[0])
            out = Path(tmp) / f"hand{i}"
            out.mkdir()
            theirs.append(by_hand(args.hand, server, gguf, task_dir, out, env, args.max_tokens, args.items))
            print(f"repeat {i + 1}: ours {mine[-1]:.2f} s, by hand {theirs[-1]:.2f} s", flush=True)
    a, b = statistics.median(mine), statistics.median(theirs)
    ratio = a / b
    print(f"overbrainer eval: {a:.2f} s (median of {args.repeats}); lm-eval by hand ({args.hand}): {b:.2f} s; "
          f"ratio {ratio:.3f} (target <= {TARGET})")
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    os.environ.setdefault("LLAMA_ARG_THREADS", "1")
    sys.exit(main())
