#!/usr/bin/env python3
"""Batch results memory benchmark: the peak RSS of reading an ended Anthropic batch's results
(every line's custom_id checked, then every answer read by the online parser: what a collect
does) for a small and a large batch, each in a fresh process, through the real client
(llm/batch_anthropic.py → llm/client.py → llm/http.py) against the fake Message Batches API
(tests/fixtures/provider.py) running in a process of its own.

A results file is written to a temporary file as it downloads and read a line at a time, so the
peak should barely move with the batch's size. Printed: each size's results bytes and peak RSS,
and their ratio (target ≤ 1.3). Exits 1 when the target is missed.

Usage: python3 scripts/bench_batch_results.py [--small 1000] [--large 50000]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fixtures.batch_big import setup  # noqa: E402
from tests.fixtures.provider_process import ProviderProcess  # noqa: E402

TARGET = 1.3
# The reader, in a fresh process: one collect's two passes over the results; prints JSON.
READER = r"""
import json, resource, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from tests.fixtures.batch_big import reach
url, folder, n = sys.argv[2], Path(sys.argv[3]), int(sys.argv[4])
api, sub, status = reach(url, folder, n)
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
with api.results(sub, status) as results:
    size = sum(f.seek(0, 2) for f in results.files)
    ids = sum(1 for c, _ in results.lines() if sub.item_of(c) is not None)
    answers = sum(1 for o in results.outcomes() if o.response is not None)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"n": n, "bytes": size, "ids": ids, "answers": answers, "base_kib": base, "peak_kib": peak}))
"""


def measure(n: int, work: Path) -> dict:
    server = ProviderProcess(setup=setup(n))
    try:
        done = subprocess.run([sys.executable, "-c", READER, str(ROOT), server.url, str(work / f"p{n}"), str(n)],
                              capture_output=True, text=True, timeout=900)
    finally:
        server.close()
    if done.returncode != 0:
        raise SystemExit(f"the reader failed for {n} results:\n{done.stderr}")
    out = json.loads(done.stdout.strip().splitlines()[-1])
    if out["ids"] != n or out["answers"] != n:
        raise SystemExit(f"read {out['ids']} custom_ids and {out['answers']} answers of {n}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--small", type=int, default=1000)
    ap.add_argument("--large", type=int, default=50_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        small, large = measure(args.small, Path(tmp)), measure(args.large, Path(tmp))
    for r in (small, large):
        print(f"{r['n']:>7} results, {r['bytes'] / 2**20:8.1f} MiB: peak RSS {r['peak_kib'] / 1024:7.1f} MiB "
              f"(before reading {r['base_kib'] / 1024:.1f} MiB)")
    ratio = large["peak_kib"] / small["peak_kib"]
    print(f"peak RSS ratio {args.large} / {args.small} results: {ratio:.2f} (target ≤ {TARGET}; "
          f"the results grew {large['bytes'] / small['bytes']:.0f}×)")
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
