#!/usr/bin/env python3
"""Benchmark the `answers` stage against a bare `requests` + ThreadPoolExecutor client.

The fake provider (tests/fixtures/provider.py) runs in a separate process, so its CPU does not
count as ours; overbrainer's answers flow runs in-process (CPU via time.process_time, which
counts every thread of this process). Both clients make the same calls in the same run.

overbrainer runs as a cron job runs it: the `Cli` front end subscribed to the stage's events and
rendering its throttled progress lines (stderr is a file, log level info). Bare and ours alternate
over ROUNDS rounds (default 5, each ours on a fresh project); the medians are compared.

(a) 2,000 answers, 100 ms latency, concurrency 64: overbrainer's wall time and CPU time per
    request over the bare client's (targets <= 1.10 and <= 1.2);
(b) 320 answers, 1 s latency, concurrency 32: wall time over the ideal N x latency / concurrency
    (target <= 1.10), and over the bare client's.

Each round also runs overbrainer with a spend cap set (`[pipeline] max_cost_usd`, high enough never
to stop it: every request's upper bound is computed, held and settled): the same targets apply to
it, and its wall and CPU over the uncapped run's are printed (the cap's bookkeeping should cost
nothing measurable: <= 1.05). The fake lists the parent's price in every run.

Exits 1 when a target is missed.
Usage: python3 scripts/bench_pipeline.py [--quick] [--rounds N] [--cap USD]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fixtures.provider_process import ProviderProcess  # noqa: E402

WALL, CPU = 1.10, 1.20  # (a)'s targets: overbrainer over the bare client
CAPPED = 1.05  # the capped run over the uncapped one (wall and CPU)

PRICES = "fake.models = {'parent': (1.0, 2.0)}"  # listed prices: every run computes its cost


def make_project(root: Path, url: str, n: int, concurrency: int, cap: float | None = None, *,
                 texts: list[str] | None = None, dialect: str | None = None, model: str = "parent",
                 max_tokens: int | None = 512, max_retries: int | None = 0, protocol: str = "openai") -> Path:
    """A project of `n` questions (`texts`, else short uniform ones) for the parent `model` (its
    `max_tokens`, None: the default) on the fake provider (`protocol`; `dialect`, None: guessed)."""
    from overbrainer.dataset.ids import question_id, subtopic_id
    from overbrainer.dataset.jsonl import rewrite
    from overbrainer.dataset.records import Question, Subtopic

    root.mkdir(parents=True)
    limit = f", max_tokens = {max_tokens}" if max_tokens is not None else ""
    (root / "overbrainer.toml").write_text(f"""
[project]
name = "bench"

[[topics]]
name = "bench"
subtopics = 1
questions_per_subtopic = {n}

[providers.fake]
protocol = "{protocol}"
""" + (f'dialect = "{dialect}"\n' if dialect else "") + f"""
[roles]
generator = {{ provider = "fake", model = "gen" }}
parent = {{ provider = "fake", model = "{model}"{limit} }}

[pipeline]
concurrency = {concurrency}
""" + (f"max_retries = {max_retries}\n" if max_retries is not None else "")
      + (f"max_cost_usd = {cap}\n" if cap is not None else ""))
    sid = subtopic_id("bench", "everything")
    rewrite(root / "data" / "subtopics.jsonl", [Subtopic(sid, "bench", "everything")])
    if texts is None:
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


def overbrainer_answers(project: Path, url: str, stderr_log: Path) -> tuple[float, float, int, int]:
    """(wall, CPU, answers written, progress lines rendered) of one `answers` run as cron runs it."""
    from overbrainer.config.load import load_config
    from overbrainer.front.frontend import Cli
    from overbrainer.front.logs import setup_logging
    from overbrainer.pipeline.answers import run_answers
    from overbrainer.pipeline.context import StageContext

    config = load_config(project, environ={"OVERBRAINER_PROVIDERS__FAKE__BASE_URL": url})
    # Import what the command imports before the clock starts, as the bare client's `requests`
    # was: the ratio is about the per-request cost, not Python's module loading.
    import jinja2.sandbox  # noqa: F401
    import overbrainer.config.templates  # noqa: F401
    import overbrainer.front.render_lines  # noqa: F401
    import overbrainer.llm.client  # noqa: F401
    import overbrainer.llm.hidden  # noqa: F401
    with open(stderr_log, "w") as err:
        saved = sys.stderr
        sys.stderr = err  # not a terminal: the Cli front end renders throttled lines
        try:
            setup_logging(stream=err, environ={"OVERBRAINER_LOG": "info"})
            front = Cli(stderr=err)
            wall0, cpu0 = time.perf_counter(), time.process_time()
            with front.open_bus() as guard, StageContext(project, config, bus=guard.bus) as ctx:
                result = run_answers(ctx, list(config.topics))
            wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        finally:
            sys.stderr = saved
    assert result.error is None and result.stats.failed == 0, result
    lines = len(stderr_log.read_text().splitlines())
    return wall, cpu, result.stats.done + result.stats.excluded, lines


def median(values: list[float]) -> float:
    return statistics.median(values)


def alternate(tmp: Path, name: str, n: int, latency: float, concurrency: int, rounds: int, cap: float) -> dict:
    """Bare, ours, then ours under a spend cap, `rounds` times on one server; medians of each."""
    server = ProviderProcess(latency, PRICES)
    runs: dict[str, list] = {k: [] for k in ("bare_wall", "bare_cpu", "ob_wall", "ob_cpu", "lines",
                                             "cap_wall", "cap_cpu")}
    try:
        for r in range(rounds):
            project = make_project(tmp / f"{name}{r}", server.url, n, concurrency)
            texts = [json.loads(line)["text"]
                     for line in (project / "data" / "questions.jsonl").read_text().splitlines()]
            w, c = bare_client(server.url, texts, concurrency)
            runs["bare_wall"].append(w)
            runs["bare_cpu"].append(c)
            capped = make_project(tmp / f"{name}{r}-cap", server.url, n, concurrency, cap)
            order = [("ob", project), ("cap", capped)]
            for kind, where in order if r % 2 == 0 else order[::-1]:  # neither always goes first
                w, c, done, shown = overbrainer_answers(where, server.url, tmp / f"{name}{r}-{kind}.stderr")
                assert done == n
                runs[f"{kind}_wall"].append(w)
                runs[f"{kind}_cpu"].append(c)
                if kind == "ob":
                    runs["lines"].append(shown)
    finally:
        server.close()
    m = {k: median(v) for k, v in runs.items()}
    return {"n": n, "latency": latency, "concurrency": concurrency, "rounds": rounds, "cap": cap,
            "bare_wall": m["bare_wall"], "bare_cpu_per_req_ms": 1000 * m["bare_cpu"] / n,
            "ob_wall": m["ob_wall"], "ob_cpu_per_req_ms": 1000 * m["ob_cpu"] / n,
            "wall_ratio": m["ob_wall"] / m["bare_wall"], "cpu_ratio": m["ob_cpu"] / m["bare_cpu"],
            "cap_wall": m["cap_wall"], "cap_cpu_per_req_ms": 1000 * m["cap_cpu"] / n,
            "cap_wall_ratio": m["cap_wall"] / m["bare_wall"], "cap_cpu_ratio": m["cap_cpu"] / m["bare_cpu"],
            "cap_over_ob_wall": m["cap_wall"] / m["ob_wall"], "cap_over_ob_cpu": m["cap_cpu"] / m["ob_cpu"],
            "ideal": n * latency / concurrency, "lines": m["lines"]}


def bookkeeping(n: int = 200_000) -> tuple[float, float]:
    """Microseconds per request of the processor's admit + settle without and with a budget that
    never stops anything, the bound computed as the stages compute it (LlmClient.bound)."""
    from types import SimpleNamespace

    from overbrainer.llm.client import LlmClient
    from overbrainer.llm.http import LlmSession
    from overbrainer.llm.prices import Price
    from overbrainer.llm.types import ChatRequest
    from overbrainer.support.budget import Budget
    from overbrainer.support.processor import FATAL, Processor

    channel = LlmSession().channel("bench", "http://127.0.0.1:9", 1)
    client = LlmClient(provider_name="bench", protocol="openai", channel=channel,
                       role=SimpleNamespace(model="parent", max_tokens=512), pipeline=SimpleNamespace(),
                       api_key=None, price=Price(1.0, 2.0))  # never sends: only bound() is called
    request = ChatRequest(user="Benchmark question number 7: why does case 7 behave that way?",
                          system="You are an expert in bench.")
    out = []
    for budget in (None, Budget(1e12)):
        proc = Processor(None, concurrency=1, interrupt=None, classify=lambda e: FATAL, budget=budget)
        start = time.perf_counter()
        for _ in range(n):
            held = proc.admit(lambda: client.bound(request))
            proc.settle(held, 0.001)
        out.append(1e6 * (time.perf_counter() - start) / n)
    return out[0], out[1]


def _ok(value: float, target: float) -> str:
    return f"(target <= {target:.2f})  {'OK' if value <= target else 'MISSED'}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a tenth of the requests (a smoke run)")
    parser.add_argument("--rounds", type=int, default=5, help="alternated rounds of bare and ours (default 5)")
    parser.add_argument("--cap", type=float, default=1e6, help="max_cost_usd of the capped runs (default 1e6)")
    args = parser.parse_args()
    scale = 10 if args.quick else 1
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        a = alternate(tmp, "a", 2000 // scale, 0.1, 64, args.rounds, args.cap)
        print(f"(a) {a['n']} answers, {a['latency'] * 1000:.0f} ms latency, concurrency {a['concurrency']}, "
              f"medians of {a['rounds']} alternated rounds")
        print(f"    bare client : wall {a['bare_wall']:.2f} s, CPU {a['bare_cpu_per_req_ms']:.3f} ms/request")
        print(f"    overbrainer : wall {a['ob_wall']:.2f} s, CPU {a['ob_cpu_per_req_ms']:.3f} ms/request "
              f"(Cli front end, {a['lines']:.0f} stderr lines)")
        print(f"    wall ratio  {a['wall_ratio']:.3f} {_ok(a['wall_ratio'], WALL)}")
        print(f"    CPU ratio   {a['cpu_ratio']:.3f} {_ok(a['cpu_ratio'], CPU)}")
        print(f"    with max_cost_usd = {a['cap']:g}: wall {a['cap_wall']:.2f} s, CPU {a['cap_cpu_per_req_ms']:.3f} "
              f"ms/request; over the bare client wall {a['cap_wall_ratio']:.3f} {_ok(a['cap_wall_ratio'], WALL)}, "
              f"CPU {a['cap_cpu_ratio']:.3f} {_ok(a['cap_cpu_ratio'], CPU)}")
        print(f"    capped over uncapped: wall {a['cap_over_ob_wall']:.3f} {_ok(a['cap_over_ob_wall'], CAPPED)}, "
              f"CPU {a['cap_over_ob_cpu']:.3f} {_ok(a['cap_over_ob_cpu'], CAPPED)}")
        b = alternate(tmp, "b", 320 // scale, 1.0, 32, args.rounds, args.cap)
        b_ratio = b["ob_wall"] / b["ideal"]
        b_cap = b["cap_wall"] / b["ideal"]
        print(f"(b) {b['n']} answers, {b['latency']:.0f} s latency, concurrency {b['concurrency']}, "
              f"medians of {b['rounds']} alternated rounds")
        print(f"    bare client : wall {b['bare_wall']:.2f} s ({b['bare_wall'] / b['ideal']:.3f}x ideal)")
        print(f"    overbrainer : wall {b['ob_wall']:.2f} s ({b['lines']:.0f} stderr lines), ideal {b['ideal']:.2f} s, "
              f"ratio {b_ratio:.3f} {_ok(b_ratio, 1.10)}; {b['wall_ratio']:.3f}x the bare client")
        print(f"    with max_cost_usd = {b['cap']:g}: wall {b['cap_wall']:.2f} s, "
              f"ratio {b_cap:.3f} {_ok(b_cap, 1.10)}; "
              f"capped over uncapped {b['cap_over_ob_wall']:.3f} {_ok(b['cap_over_ob_wall'], CAPPED)}")
        plain, capped = bookkeeping()
        share = (capped - plain) / (1000 * a["ob_cpu_per_req_ms"])
        print(f"(c) admit + settle per request: {plain:.2f} us without a cap, {capped:.2f} us with one: the cap adds "
              f"{capped - plain:.2f} us, {share:.3%} of overbrainer's CPU per request in (a)")
    ok = (a["wall_ratio"] <= WALL and a["cpu_ratio"] <= CPU and b_ratio <= 1.10
          and a["cap_wall_ratio"] <= WALL and a["cap_cpu_ratio"] <= CPU and b_cap <= 1.10
          and a["cap_over_ob_wall"] <= CAPPED and a["cap_over_ob_cpu"] <= CAPPED and b["cap_over_ob_wall"] <= CAPPED)
    print("all targets met" if ok else "target(s) MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
