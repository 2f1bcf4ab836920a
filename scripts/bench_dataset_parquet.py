#!/usr/bin/env python3
"""`push --dataset`'s Parquet writing (overbrainer/hub/parquet.write_split) at growing split sizes:
memory must stay flat (one row group in memory, whatever the split's size).

Per size N: a train.jsonl of N examples like a distillation run's (a system prompt, a question of
~100 characters, an answer of ~1.5 KB with ~0.5 KB of reasoning, distinct texts), written once;
then, in a fresh process, `write_split` to Parquet: wall, CPU, peak RSS (ru_maxrss of that
process, whose baseline is the interpreter with pyarrow loaded), the file's size, and a check that
the file holds N rows. Then each size over the smallest: peak RSS <= 1.3x (target), and time per
example. Exits 1 when the target is missed.

Usage: python3 scripts/bench_dataset_parquet.py [--sizes 10000,100000] [--big] [--keep DIR]
  --big adds 1,000,000 examples (a ~2.5 GB JSONL file; a few minutes).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORDS = ("value input step reader example answer because therefore memory split parquet model topic "
         "question context token reasoning first second result check count order").split()
CHILD = """
import resource, sys, time
from pathlib import Path
import pyarrow.parquet as pq
from overbrainer.hub.parquet import write_split
src, dest = Path(sys.argv[1]), Path(sys.argv[2])
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0, c0 = time.perf_counter(), time.process_time()
out = write_split(src, dest)
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
assert pq.ParquetFile(dest).metadata.num_rows == out.rows
print(out.rows, out.size, wall, cpu, base, peak, pq.ParquetFile(dest).num_row_groups)
"""


def text(rng: random.Random, chars: int, i: int) -> str:
    """About `chars` characters of words, distinct per example."""
    words = [f"n{i}"] + rng.choices(WORDS, k=chars // 7)
    return " ".join(words)[:chars]


def make(path: Path, n: int) -> None:
    rng = random.Random(n)
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):
            record = {"id": f"{i:016x}", "topic": f"topic{i % 10}", "subtopic": f"sub{i % 500}",
                      "messages": [{"role": "system", "content": "You answer questions about the topic."},
                                   {"role": "user", "content": text(rng, 100, i)},
                                   {"role": "assistant", "content": text(rng, 1500, i),
                                    "reasoning_content": text(rng, 500, i)}],
                      "meta": {"model": "parent/model", "input_tokens": 40, "output_tokens": 500,
                               "finish_reason": "stop", "reasoning_kind": "raw", "excluded": None}}
            f.write(json.dumps(record, separators=(",", ":")) + "\n")


def measure(folder: Path, n: int) -> dict:
    src = folder / f"train-{n}.jsonl"
    if not src.exists():
        make(src, n)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", CHILD, str(src), str(folder / f"train-{n}.parquet")],
                         capture_output=True, text=True, env=env, check=True)
    rows, size, wall, cpu, base, peak, groups = out.stdout.split()
    assert int(rows) == n, (rows, n)
    return {"n": n, "jsonl_mb": src.stat().st_size / 1e6, "parquet_mb": int(size) / 1e6, "wall": float(wall),
            "cpu": float(cpu), "base_mb": int(base) / 1024, "peak_mb": int(peak) / 1024, "groups": int(groups)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--big", action="store_true")
    ap.add_argument("--keep", type=Path)
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")] + ([1_000_000] if args.big else [])
    folder = args.keep or Path(tempfile.mkdtemp(prefix="bench-parquet-"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        results = [measure(folder, n) for n in sizes]
    finally:
        if args.keep is None:
            shutil.rmtree(folder, ignore_errors=True)
    print(f"{'examples':>9} {'jsonl MB':>9} {'parquet MB':>10} {'row groups':>10} {'wall s':>7} {'cpu s':>6} "
          f"{'us/ex':>6} {'base MB':>8} {'peak MB':>8}")
    for r in results:
        print(f"{r['n']:>9} {r['jsonl_mb']:>9.1f} {r['parquet_mb']:>10.1f} {r['groups']:>10} {r['wall']:>7.2f} "
              f"{r['cpu']:>6.2f} {1e6 * r['wall'] / r['n']:>6.1f} {r['base_mb']:>8.1f} {r['peak_mb']:>8.1f}")
    first, ok = results[0], True
    for r in results[1:]:
        ratio = r["peak_mb"] / first["peak_mb"]
        ok = ok and ratio <= 1.3
        print(f"{r['n']} over {first['n']}: peak RSS {ratio:.2f}x (target <= 1.3x), "
              f"time per example {(r['wall'] / r['n']) / (first['wall'] / first['n']):.2f}x")
    print("peak RSS target met" if ok else "peak RSS target MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
