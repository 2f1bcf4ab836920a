#!/usr/bin/env python3
"""Benchmark the `gate` stage's rule checks at two sizes, each run in a fresh process: the first
gate (every answer judged, a verdict appended per answer), a rerun with nothing to do (the saved
.overbrainer/gate.json: no data file read), and a rerun without that cache (answers.jsonl and
gate.jsonl read again, nothing judged). Then `split` with the gate's drops.

The projects are bench_split.py's (10 topics x 50 subtopics, answers of about --answer-bytes);
[gate] sets language = "en", min_chars and a format_regex that drops about 1 answer in 8. Each
child prints its wall time and peak RSS (VmHWM) less its RSS before the stage (after imports).

    python3 scripts/bench_gate.py [--sizes 5000 50000] [--answer-bytes 2000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_split import TOPICS, _rss_kb, make_project  # noqa: E402

CONFIG = """
[project]
name = "bench"
[providers.p]
protocol = "openai"
[roles]
generator = { provider = "p", model = "m" }
parent = { provider = "p", model = "m" }
[gate]
language = "en"
min_chars = 200
format_regex = "^[^q]"
stop_after = 0
""" + "".join(f'[[topics]]\nname = "{t}"\nsubtopics = 50\nquestions_per_subtopic = 100\n' for t in TOPICS)


def child(what: str, folder: str) -> None:
    from overbrainer.config.load import parse_config
    from overbrainer.pipeline.context import StageContext
    from overbrainer.pipeline.gate import run_gate
    from overbrainer.pipeline.split_stage import run_split_stage

    config = parse_config(tomllib.loads(CONFIG), {"OVERBRAINER_PROVIDERS__P__BASE_URL": "http://127.0.0.1:9"})
    ctx = StageContext(folder, config)
    base = _rss_kb("VmRSS")
    start = time.perf_counter()
    result = run_split_stage(ctx) if what == "split" else run_gate(ctx, list(config.topics))
    seconds = time.perf_counter() - start
    print(json.dumps({"seconds": seconds, "peak_kb": _rss_kb("VmHWM"), "base_kb": base, "line": result.text()}))


def measure(folder: Path, what: str) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", what, str(folder)], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs=2, default=[5_000, 50_000])
    ap.add_argument("--answer-bytes", type=int, default=2000)
    ap.add_argument("--keep", type=Path, help="build the projects here and keep them")
    ap.add_argument("--child", nargs=2, metavar=("WHAT", "DIR"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(*args.child)
        return 0
    rows: dict[int, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        base = args.keep or Path(tmp)
        for n in args.sizes:
            folder = base / f"gate{n}"
            paths = make_project(folder, n, args.answer_bytes)
            runs = {"first": measure(folder, "gate"), "rerun": measure(folder, "gate")}
            os.unlink(paths.gate_state)
            runs["rescan"] = measure(folder, "gate")
            runs["split"] = measure(folder, "split")
            rows[n] = runs
            for name, r in runs.items():
                added = (r["peak_kb"] - r["base_kb"]) / 1024
                print(f"{n:>7} answers: {name:6} {r['seconds']:6.2f} s, peak RSS {r['peak_kb'] / 1024:6.1f} MB "
                      f"(+{added:5.1f} MB): {r['line']}")
    small, big = (rows[n] for n in args.sizes)
    ratio = args.sizes[1] / args.sizes[0]
    for name in ("first", "rerun", "rescan", "split"):
        print(f"{name:6}: {args.sizes[1]}/{args.sizes[0]} answers ({ratio:g}x): time "
              f"{big[name]['seconds'] / small[name]['seconds']:.2f}x, peak RSS "
              f"{big[name]['peak_kb'] / small[name]['peak_kb']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
