#!/usr/bin/env python3
"""Benchmark the `answers` stage against a bare `requests` + ThreadPoolExecutor client.

The fake provider (tests/fixtures/provider.py) runs in a separate process, so its CPU does not
count as ours; overbrainer's answers flow runs in-process (CPU via time.process_time, which
counts every thread of this process). Both clients make the same calls in the same run.

(a) 2,000 answers, 100 ms latency, concurrency 64: overbrainer's wall time and CPU time per
    request over the bare client's (targets <= 1.15 and <= 1.3);
(b) 320 answers, 1 s latency, concurrency 32: wall time over the ideal N x latency / concurrency
    (target <= 1.10).

Usage: python3 scripts/bench_pipeline.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

_SERVER = r"""
import sys, threading
sys.path.insert(0, sys.argv[1])
from tests.fixtures.provider import FakeProvider
fake = FakeProvider()
fake.latency = float(sys.argv[2])
fake.start()
print(fake.url, flush=True)
sys.stdin.read()   # until the benchmark closes our stdin
fake.stop()
"""


class Server:
    def __init__(self, latency: float):
        self.proc = subprocess.Popen([sys.executable, "-c", _SERVER, str(ROOT), str(latency)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.url = self.proc.stdout.readline().strip()

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(10)


def make_project(root: Path, url: str, n: int, concurrency: int) -> Path:
    from overbrainer.dataset.ids import question_id, subtopic_id
    from overbrainer.dataset.jsonl import rewrite
    from overbrainer.dataset.records import Question, Subtopic

    root.mkdir(parents=True)
    (root / "overbrainer.toml").write_text(f"""
[project]
name = "bench"

[[topics]]
name = "bench"
subtopics = 1
questions_per_subtopic = {n}

[providers.fake]
protocol = "openai"

[roles]
generator = {{ provider = "fake", model = "gen" }}
parent = {{ provider = "fake", model = "parent", max_tokens = 512 }}

[pipeline]
concurrency = {concurrency}
max_retries = 0
""")
    sid = subtopic_id("bench", "everything")
    rewrite(root / "data" / "subtopics.jsonl", [Subtopic(sid, "bench", "everything")])
    texts = [f"Benchmark question number {i}: why does case {i} behave that way?" for i in range(n)]
    rewrite(root / "data" / "questions.jsonl",
            [Question(question_id(sid, t), "bench", sid, "everything", t) for t in texts])
    return root


def bare_client(url: str, texts: list[str], concurrency: int) -> tuple[float, float]:
    import requests
    from requests.adapters import HTTPAdapter

    session = requests.Session()
    adapter = HTTPAdapter(pool_connections=4, pool_maxsize=concurrency, max_retries=0)
    session.mount("http://", adapter)

    def ask(text: str) -> dict:
        body = {"model": "parent", "max_tokens": 512,
                "messages": [{"role": "system", "content": "You are an expert in bench."},
                             {"role": "user", "content": text}]}
        r = session.post(url + "/chat/completions", json=body, timeout=(30, 600))
        r.raise_for_status()
        return r.json()

    wall0, cpu0 = time.perf_counter(), time.process_time()
    with ThreadPoolExecutor(concurrency) as pool:
        results = list(pool.map(ask, texts))
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    assert len(results) == len(texts)
    session.close()
    return wall, cpu


def overbrainer_answers(project: Path, url: str) -> tuple[float, float, int]:
    from overbrainer.config.load import load_config
    from overbrainer.front.bus import EventBus
    from overbrainer.llm.http import close_channels
    from overbrainer.pipeline.answers import run_answers
    from overbrainer.pipeline.context import StageContext

    config = load_config(project, environ={"OVERBRAINER_PROVIDERS__FAKE__BASE_URL": url})
    # Import what the command imports before the clock starts, as the bare client's `requests`
    # was: the ratio is about the per-request cost, not Python's module loading.
    import jinja2.sandbox  # noqa: F401
    import overbrainer.config.templates  # noqa: F401
    import overbrainer.llm.client  # noqa: F401
    import overbrainer.llm.hidden  # noqa: F401
    bus = EventBus()
    wall0, cpu0 = time.perf_counter(), time.process_time()
    ctx = StageContext(project, config, bus=bus)
    result = run_answers(ctx, list(config.topics))
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    bus.close()
    close_channels()
    assert result.error is None and result.stats.failed == 0, result
    return wall, cpu, result.stats.done + result.stats.excluded


def scenario_a(tmp: Path, n: int, latency: float, concurrency: int) -> dict:
    server = Server(latency)
    try:
        project = make_project(tmp / "a", server.url, n, concurrency)
        texts = [json.loads(line)["text"] for line in (project / "data" / "questions.jsonl").read_text().splitlines()]
        bare_wall, bare_cpu = bare_client(server.url, texts, concurrency)
        ob_wall, ob_cpu, done = overbrainer_answers(project, server.url)
    finally:
        server.close()
    assert done == n
    return {"n": n, "latency": latency, "concurrency": concurrency,
            "bare_wall": bare_wall, "bare_cpu_per_req_ms": 1000 * bare_cpu / n,
            "ob_wall": ob_wall, "ob_cpu_per_req_ms": 1000 * ob_cpu / n,
            "wall_ratio": ob_wall / bare_wall, "cpu_ratio": ob_cpu / bare_cpu}


def scenario_b(tmp: Path, n: int, latency: float, concurrency: int) -> dict:
    server = Server(latency)
    try:
        project = make_project(tmp / "b", server.url, n, concurrency)
        wall, cpu, done = overbrainer_answers(project, server.url)
    finally:
        server.close()
    assert done == n
    ideal = n * latency / concurrency
    return {"n": n, "latency": latency, "concurrency": concurrency, "wall": wall, "ideal": ideal,
            "ratio": wall / ideal}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a tenth of the requests (a smoke run)")
    args = parser.parse_args()
    scale = 10 if args.quick else 1
    os.environ.setdefault("OVERBRAINER_LOG", "warn")
    import logging

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        a = scenario_a(tmp, 2000 // scale, 0.1, 64)
        print(f"(a) {a['n']} answers, {a['latency'] * 1000:.0f} ms latency, concurrency {a['concurrency']}")
        print(f"    bare client : wall {a['bare_wall']:.2f} s, CPU {a['bare_cpu_per_req_ms']:.3f} ms/request")
        print(f"    overbrainer : wall {a['ob_wall']:.2f} s, CPU {a['ob_cpu_per_req_ms']:.3f} ms/request")
        print(f"    wall ratio  {a['wall_ratio']:.3f} (target <= 1.15)  "
              f"{'OK' if a['wall_ratio'] <= 1.15 else 'MISSED'}")
        print(f"    CPU ratio   {a['cpu_ratio']:.3f} (target <= 1.30)  "
              f"{'OK' if a['cpu_ratio'] <= 1.3 else 'MISSED'}")
        b = scenario_b(tmp, 320 // scale, 1.0, 32)
        print(f"(b) {b['n']} answers, {b['latency']:.0f} s latency, concurrency {b['concurrency']}")
        print(f"    wall {b['wall']:.2f} s, ideal {b['ideal']:.2f} s, ratio {b['ratio']:.3f} (target <= 1.10)  "
              f"{'OK' if b['ratio'] <= 1.10 else 'MISSED'}")
    ok = a["wall_ratio"] <= 1.15 and a["cpu_ratio"] <= 1.3 and b["ratio"] <= 1.10
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
