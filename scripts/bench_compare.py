#!/usr/bin/env python3
"""Benchmark compare's own overhead: the wall time of the compare flow judging 200 questions
with a judge that takes 1 s per verdict, at `[pipeline] concurrency = 16`, over the ideal
200 × 1 s / 16 = 12.5 s (the floor is 13 s: 13 rounds of 16). Target <= 1.15. The flow is timed
in-process from reading setup.json to compare.md written (`compare_flow(... rejudge=ID)`); the
same run through the `overbrainer compare --rejudge` command (Python start-up and imports
included) is printed beside it, for information.

The fake provider (tests/fixtures/provider.py) runs in a separate process, so its CPU is not ours.

Usage: python3 scripts/bench_compare.py [--questions N] [--latency S] [--concurrency C]
Prints the ratio; exits 1 when it misses the target.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
TARGET = 1.15

_SERVER = r"""
import sys
sys.path.insert(0, sys.argv[1])
from tests.fixtures.provider import Answer, FakeProvider
fake = FakeProvider()
fake.latency = float(sys.argv[2])
fake.responder = lambda req: Answer(content='{"verdict": "tie", "reason": "both fine"}')
fake.start()
print(fake.url, flush=True)
sys.stdin.read()   # until the benchmark closes our stdin
print(len(fake.chat_requests()), fake.max_in_flight, flush=True)
fake.stop()
"""


def in_process(project, compare_id: str) -> float:
    """Seconds of compare_flow judging and reporting compare `compare_id`, in this process."""
    import threading

    from overbrainer.compare.flow import compare_flow
    from overbrainer.front.bus import EventBus
    from overbrainer.front.frontend import Embedded
    from overbrainer.front.session import Session

    config = project.config()
    front = Embedded(EventBus(), threading.Event(), threading.Event(), lambda report: None,
                     renderer=lambda: None)
    started = time.monotonic()
    compare_flow(Session(project.dir, front, config), rejudge=compare_id)
    return time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--latency", type=float, default=1.0)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()

    from tests.fixtures.cli import clean_env
    from tests.fixtures.compare import stage_compare
    from tests.fixtures.project import Project

    server = subprocess.Popen([sys.executable, "-c", _SERVER, str(ROOT), str(args.latency)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        url = server.stdout.readline().strip()
        with tempfile.TemporaryDirectory() as tmp:
            project = Project(Path(tmp) / "proj", url).write(
                pipeline={"concurrency": args.concurrency, "max_retries": 0})
            staged = stage_compare(project, {f"q{i:03d}": "win" for i in range(args.questions)})
            wall = in_process(project, staged.compare_id)
            questions = json.loads((staged.compare_dir / "compare.json").read_text())["summary"]["questions"]
            for verdicts in staged.compare_dir.glob("verdicts-*.jsonl"):
                verdicts.unlink()  # the command judges everything again
            cmd = [sys.executable, "-m", "overbrainer", "-C", str(project.dir), "compare",
                   "--rejudge", staged.compare_id]
            env = clean_env(dict(project.env, PYTHONPATH=str(ROOT)), Path(tmp))
            started = time.monotonic()
            done = subprocess.run(cmd, env=env, capture_output=True, text=True)
            command = time.monotonic() - started
            if done.returncode != 0:
                print(done.stderr, file=sys.stderr)
                return 1
    finally:
        server.stdin.close()
        requests, in_flight = (int(x) for x in server.stdout.read().split())
        server.wait(10)
    ideal = args.questions * args.latency / args.concurrency
    ratio = wall / ideal
    print(f"compare judge: {questions} verdicts, {requests} requests (two runs), at most {in_flight} in "
          f"flight, {args.latency:g} s latency, concurrency {args.concurrency}: flow {wall:.2f} s vs ideal "
          f"{ideal:.2f} s = {ratio:.3f}x (target <= {TARGET}); whole command {command:.2f} s = "
          f"{command / ideal:.3f}x")
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
