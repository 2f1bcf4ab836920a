#!/usr/bin/env python3
"""Batch benchmark: the answers stage of one project, online and in batch mode, on the fakes.

Two projects with the same topics, the same prompts and the same questions: `online` answers
them one request at a time (POST /chat/completions), `batch` with `[pipeline] mode = "batch"`
(OpenAI's Files + Batch API: upload, POST /batches, poll, output file; `--dialect anthropic`:
Message Batches). The fake provider
(tests/fixtures/provider.py) runs in a process of its own, answers with realistic, deterministic
replies (tests/fixtures/provider_text.py) and lists the parent's price on GET /models; each batch
request is answered by the same code as the online one (tests/fixtures/batch_state.py), so the
two stages get the same tokens. The batch project is run as cron runs it: `run` (submits, exits
0 saying what is pending), then `run` again until it has every answer (`--wait` is not used).

Measured, not assumed: the cost of each stage is what overbrainer recorded, the `answers` totals
of `overbrainer history --json` (every execution of the stage, from .overbrainer/history.jsonl,
summed by the tool); the script computes no price. Printed: both costs and the answers' tokens,
their ratio (target ≤ 0.52: the batch APIs bill half the online price), the wall time of the
online `run` and of each batch `run` (each includes the subtopics and questions stages, and
`split` once the answers are in), and whether the two answers.jsonl hold the same answers (lines
as a multiset, byte for byte). Exits 1 when the target is missed, a run fails, or the
two projects did not make the same answers.

Usage: python3 scripts/bench_batch.py [--answers 10000] [--dialect openai|anthropic] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

sys.path.insert(0, str(ROOT / "scripts"))

from bench_scale import child_env  # noqa: E402
from bench_scale import make_project as scale_project  # noqa: E402

from tests.fixtures.provider_process import ProviderProcess  # noqa: E402

TARGET = 0.52
CONCURRENCY = 32
PRICES = {"gen": (0.5, 1.5), "parent": (3.0, 15.0)}  # USD per million tokens, listed on GET /models
SETUP = f"""
from tests.fixtures.provider_text import realistic
fake.responder = realistic
fake.record = False
fake.models = {PRICES!r}
"""


def make_project(root: Path, answers: int, batch: bool, protocol: str) -> Path:
    """bench_scale's project (10 topics x answers/100 subtopics x 10 questions), the parent
    without reasoning (the `openai` dialect refuses reasoning_effort for a non-reasoning model),
    the protocol given, and `mode = "batch"` for the batch project."""
    project = scale_project(root, answers, CONCURRENCY)
    toml = project / "overbrainer.toml"
    text = toml.read_text().replace(", reasoning = true", "").replace('protocol = "openai"', f'protocol = "{protocol}"')
    if protocol == "openai":
        text = text.replace('[providers.fake]\n', '[providers.fake]\ndialect = "openai"\n', 1)
    if batch:
        text = text.replace("[pipeline]\n", '[pipeline]\nmode = "batch"\n', 1)
    toml.write_text(text)
    return project


def env(url: str) -> dict[str, str]:
    return {**child_env(url), "OVERBRAINER_PROVIDERS__FAKE__API_KEY": "sk-bench"}


def overbrainer(project: Path, url: str, *args: str) -> tuple[int, float, str]:
    """(exit code, wall seconds, stdout then stderr) of one `overbrainer -C project ...`."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "overbrainer", "-C", str(project), *args], env=env(url),
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=3600)
    return done.returncode, time.perf_counter() - start, done.stdout + done.stderr


def answers_cost(project: Path, url: str) -> dict:
    """What overbrainer recorded for the answers stage: `overbrainer history --json`'s totals
    (every execution of the stage: the batch project's submit and collect runs)."""
    rc, _, out = overbrainer(project, url, "history", "--json")
    if rc != 0:
        raise SystemExit(f"history --json exited {rc}: {out[-1000:]}")
    stage = json.loads(next(x for x in out.splitlines() if x.startswith("{")))["stages"]["answers"]
    return {"executions": stage["runs"], "cost": stage["cost"] if stage["cost_complete"] else None,
            "input_tokens": stage["input_tokens"], "output_tokens": stage["output_tokens"], "done": stage["done"]}


def answer_lines(project: Path) -> Counter:
    """The lines of answers.jsonl as a multiset (their order is completion order)."""
    path = project / "data" / "answers.jsonl"
    return Counter(path.read_bytes().splitlines()) if path.exists() else Counter()


def run_until_done(project: Path, url: str, limit: int = 20) -> tuple[list[tuple[int, float]], str]:
    """`run` as cron runs it, until it exits 0 with every stage done (or `limit` runs)."""
    runs, log = [], ""
    for _ in range(limit):
        rc, wall, out = overbrainer(project, url, "run")
        runs.append((rc, wall))
        log = out
        if rc != 0 or not pending(out):
            break
    return runs, log


def pending(out: str) -> bool:
    return "pending" in out.lower() or "come back" in out.lower()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--answers", type=int, default=10_000, help="answers in each project (default 10000)")
    parser.add_argument("--dialect", choices=("openai", "anthropic"), default="openai")
    parser.add_argument("--keep", type=Path, help="keep the projects in this directory")
    args = parser.parse_args()
    tmp = args.keep or Path(tempfile.mkdtemp(prefix="bench-batch-"))
    dialect = f"fake.dialect = {args.dialect!r}\n" if args.dialect == "openai" else ""
    server = ProviderProcess(setup=SETUP + dialect + "fake.api_key = 'sk-bench'\n")
    try:
        online = make_project(tmp / "online", args.answers, False, args.dialect)
        rc, wall_online, log = overbrainer(online, server.url, "run")
        if rc != 0:
            print(f"online run exited {rc}:\n{log[-2000:]}")
            return 1
        batch = make_project(tmp / "batch", args.answers, True, args.dialect)
        runs, log = run_until_done(batch, server.url)
        if runs[-1][0] != 0:
            print(f"batch run exited {runs[-1][0]}:\n{log[-2000:]}")
            return 1
        return report(online, batch, wall_online, runs, server.url)
    finally:
        server.close()
        if args.keep is None:
            shutil.rmtree(tmp, ignore_errors=True)


def report(online: Path, batch: Path, wall_online: float, runs: list[tuple[int, float]], url: str) -> int:
    a, b = answers_cost(online, url), answers_cost(batch, url)
    print(f"online: {a['done']} answers, {a['input_tokens']} in + {a['output_tokens']} out tokens, "
          f"recorded cost ${a['cost']:.6f}, `run` wall {wall_online:.1f} s" if a["cost"] is not None
          else f"online: cost unknown ({a})")
    print(f"batch : {b['done']} answers, {b['input_tokens']} in + {b['output_tokens']} out tokens, "
          f"recorded cost ${b['cost']:.6f} over {b['executions']} answers executions; {len(runs)} `run`s, "
          f"wall {sum(w for _, w in runs):.1f} s ({', '.join(f'{w:.1f}' for _, w in runs)})"
          if b["cost"] is not None else f"batch: cost unknown ({b})")
    if not a["cost"] or b["cost"] is None:
        print("ratio: not measurable (a cost is unknown or zero)  MISSED")
        return 1
    ratio = b["cost"] / a["cost"]
    same = answer_lines(online) == answer_lines(batch)
    print(f"ratio batch / online: {ratio:.4f} (target <= {TARGET})  {'OK' if ratio <= TARGET else 'MISSED'}")
    print(f"answers.jsonl, online vs batch (lines as a multiset, byte for byte): "
          f"{'identical' if same else 'DIFFERENT'}")
    return 0 if ratio <= TARGET and a["done"] == b["done"] and same else 1


if __name__ == "__main__":
    sys.exit(main())
