#!/usr/bin/env python3
"""Benchmark the `answers` stage at a provider's rate limits: paced by the limits the provider
publishes (llm/pacing.py) against today's reactive way, which sends at `concurrency` and waits
out each 429 (LlmSession(pacing=False)), in one run, against the same fake.

The fake provider (tests/fixtures/provider.py, its limits tests/fixtures/provider_limits.py)
enforces 600 requests and 150,000 tokens a minute for the model, the requests over each second
(a minute's limit may be enforced over shorter periods), a request past a limit answered 429
(and counted against the request limit, as OpenAI counts refused requests). `--shape openai`
(the default): OpenAI's chat API, every answer carrying the `x-ratelimit-*` headers, a 429
without Retry-After. `--shape anthropic`: Anthropic's Messages API, the
`anthropic-ratelimit-requests-*` and `-tokens-*` headers, a 429 with `retry-after`. Answers take 2 s and are
realistic (tests/fixtures/provider_text.py: ~1-2 KB with reasoning); `concurrency = 64`, the
parent's `max_tokens` the default (16,384); the tokens limit is the binding one.

Paced: a stage of about 3 minutes (its question count sized for that at the limit). Target:
throughput >= 0.95 x the binding limit (tokens or requests a minute, whichever is the larger
share; measured by the fake, over the stage's wall time), 429s on <= 1 % of requests, and every
question answered once: none failed, none paid twice (the fake admitted exactly one request a
question).

Reactive (printed beside it, no target): the same fake (fresh buckets) and settings, a sixth of
the questions (half a minute's work at the limit, which the reactive way needs about 1.5 minutes
for: the baseline is shorter, not scaled; its figures are rates and shares over its own wall
time): its throughput, 429 share and failed questions. The whole run takes about 5 minutes.

Exits 1 when a target is missed.
Usage: python3 scripts/bench_ratelimit.py [--shape openai|anthropic] [--quick] [--seconds S]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import bench_pipeline  # noqa: E402 - scripts/, the project it answers

from tests.fixtures.provider import FakeProvider  # noqa: E402
from tests.fixtures.provider_limits import RateLimits  # noqa: E402
from tests.fixtures.provider_text import question, realistic  # noqa: E402
from tests.fixtures.provider_wire import Recorded  # noqa: E402

RPM, TPM = 600, 150_000
CONCURRENCY = 64
LATENCY = 2.0
# The provider's shape: (protocol, dialect, model, chat path).
SHAPES = {"openai": ("openai", "openai", "gpt-4o", "/chat/completions"),
          "anthropic": ("anthropic", None, "claude-sonnet-4-5", "/messages")}
THROUGHPUT, SHARE = 0.95, 0.01  # the paced run's targets


def serve(shape: str) -> FakeProvider:
    fake = FakeProvider()
    fake.dialect = SHAPES[shape][1] or "generic"
    fake.latency = LATENCY
    fake.responder = realistic
    fake.record = False
    fake.rate_limits = RateLimits(requests=RPM, tokens=TPM, window=1.0)
    return fake.start()


def texts(n: int) -> list[str]:
    return [question(f"bench {i}", i, "rate limits") for i in range(n)]


def tokens_per_question(shape: str, sample: list[str]) -> float:
    """What the fake will count for one answer of these questions (its usage: prompt + answer)."""
    _, _, model, path = SHAPES[shape]
    total = 0
    for text in sample:
        body = {"model": model, "messages": [{"role": "user", "content": text}]}
        used = realistic(Recorded("POST", path, {}, body)).usage
        total += used[0] + used[1]
    return total / len(sample)


def make_project(root: Path, shape: str, questions: list[str]) -> Path:
    protocol, dialect, model, _ = SHAPES[shape]
    return bench_pipeline.make_project(root, "", len(questions), CONCURRENCY, texts=questions, dialect=dialect,
                                       model=model, max_tokens=None, max_retries=None, protocol=protocol)


def answers_stage(project: Path, shape: str, paced: bool, log: Path) -> dict:
    """One `answers` run on a fresh fake: wall time, what the stage and the fake counted."""
    from overbrainer.config.load import load_config
    from overbrainer.front.frontend import Cli
    from overbrainer.front.logs import setup_logging
    from overbrainer.llm.http import LlmSession
    from overbrainer.pipeline.answers import run_answers
    from overbrainer.pipeline.context import StageContext

    fake = serve(shape)
    try:
        config = load_config(project, environ={"OVERBRAINER_PROVIDERS__FAKE__BASE_URL": fake.url})
        with open(log, "w") as err:
            saved = sys.stderr
            sys.stderr = err
            try:
                setup_logging(stream=err, environ={"OVERBRAINER_LOG": "info"})
                front = Cli(stderr=err)
                with front.open_bus() as guard, StageContext(project, config, bus=guard.bus) as ctx:
                    if not paced:  # today's way: no pacer, the 429s and their cool-down only
                        ctx.llm.close()
                        ctx.llm = LlmSession(pacing=False)
                    start = time.monotonic()
                    result = run_answers(ctx, list(config.topics))
                    wall = time.monotonic() - start
            finally:
                sys.stderr = saved
        stats = fake.rate_limits.stats() if fake.rate_limits is not None else {}
    finally:
        fake.stop()
    lines = (project / "data" / "answers.jsonl").read_text().splitlines()
    answered = {json.loads(line)["id"] for line in lines}
    assert len(answered) == len(lines), "a question answered twice"
    sent = stats["admitted"] + stats["refused"]
    return {"wall": wall, "done": result.stats.done + result.stats.excluded, "failed": result.stats.failed,
            "lines": len(answered), "admitted": stats["admitted"], "refused": stats["refused"],
            "share": stats["refused"] / sent if sent else 0.0,
            "tpm": 60 * stats["used"] / wall, "rpm": 60 * stats["admitted"] / wall}


def describe(name: str, r: dict, n: int) -> str:
    binding = max(r["tpm"] / TPM, r["rpm"] / RPM)
    twice = "none" if r["admitted"] == r["done"] == r["lines"] else "SOME"
    return (f"{name}: {n} questions in {r['wall']:.1f} s; {r['tpm']:,.0f} tokens/min ({r['tpm'] / TPM:.3f} of "
            f"{TPM:,}), {r['rpm']:.0f} requests/min ({r['rpm'] / RPM:.3f} of {RPM}): {binding:.3f}x the binding "
            f"limit; 429s {r['refused']} of {r['admitted'] + r['refused']} requests ({r['share']:.2%}); "
            f"answered {r['done']}, failed {r['failed']}; paid {r['admitted']}, twice: {twice}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=180.0, help="the paced stage's length at the limit")
    parser.add_argument("--shape", choices=sorted(SHAPES), default="openai",
                        help="the provider's API, headers and 429s (default openai)")
    parser.add_argument("--quick", action="store_true", help="a 45 s paced stage (a smoke run)")
    args = parser.parse_args()
    seconds = 45.0 if args.quick else args.seconds
    shape = args.shape
    per = tokens_per_question(shape, texts(200))
    n = int(seconds * 0.97 * TPM / 60 / per)
    questions = texts(n)
    print(f"{shape}-shaped provider: limits {RPM} requests and {TPM:,} tokens a minute (requests enforced per "
          f"second), concurrency {CONCURRENCY}, {LATENCY:g} s answers of ~{per:.0f} tokens, max_tokens 16384")
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        paced = answers_stage(make_project(tmp / "paced", shape, questions), shape, True, tmp / "paced.log")
        print(describe("paced   ", paced, n))
        base_n = max(1, n // 6)
        reactive = answers_stage(make_project(tmp / "reactive", shape, questions[:base_n]), shape, False,
                                 tmp / "reactive.log")
        print(describe("reactive", reactive, base_n))
    ratio = max(paced["tpm"] / TPM, paced["rpm"] / RPM)
    whole = paced["failed"] == 0 and paced["admitted"] == paced["done"] == paced["lines"] == n
    ok = ratio >= THROUGHPUT and paced["share"] <= SHARE and whole
    print(f"paced: {ratio:.3f}x the binding limit (target >= {THROUGHPUT}), 429s on {paced['share']:.2%} of requests "
          f"(target <= {SHARE:.0%}), every question answered once: {'yes' if whole else 'NO'}; "
          f"reactive: {max(reactive['tpm'] / TPM, reactive['rpm'] / RPM):.3f}x, 429s on {reactive['share']:.2%}, "
          f"{reactive['failed']} of {base_n} questions failed")
    print("all targets met" if ok else "target(s) MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
