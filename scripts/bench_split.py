#!/usr/bin/env python3
"""Benchmark `split` on the project's files: the streaming run_split (dataset/split.py) against the
former in-memory path (every answer read into a list, split_examples, both files rewritten from
lists), at two sizes, each run in a fresh process.

A synthetic project gets N answers of about --answer-bytes each (10 topics x 50 subtopics; 5% of
the questions answered twice, the first answer excluded; 3% excluded; 1% orphaned). Each path
runs in its own child process, which reports its wall time and peak RSS (VmHWM) less its RSS
before the split (after imports). Both paths must write byte-identical train.jsonl/eval.jsonl.
A third run, `decontam`, is the streaming split as `split` runs it by default plus a benchmark
file: the eval check (13-grams of the eval questions and answers) and a benchmark of 5,000 items
of about 100 words (docs/stages.md#decontamination); it prints its cost over `new`.

    python3 scripts/bench_split.py [--sizes 10000 100000] [--answer-bytes 2000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from overbrainer.dataset import ids  # noqa: E402
from overbrainer.dataset.jsonl import dumps  # noqa: E402
from overbrainer.dataset.paths import ProjectPaths  # noqa: E402
from overbrainer.dataset.records import Example, Message, Meta, Question  # noqa: E402

TOPICS = [f"topic{t}" for t in range(10)]
SUBTOPICS = 50
WORDS = ("borrow lifetime trait closure iterator vector slice string buffer thread mutex channel future "
         "executor reference pointer arena allocator macro module crate enum struct pattern généric "
         "ünïcode 日本 🙂 cache index query table schema transaction lock queue stream socket").split()


def _paragraphs(rng: random.Random, size: int) -> list[str]:
    out = []
    for _ in range(500):
        words, n = [], 0
        while n < size:
            w = rng.choice(WORDS)
            words.append(w)
            n += len(w.encode()) + 1
        out.append(" ".join(words))
    return out


def make_project(folder: Path, n: int, answer_bytes: int, seed: int = 1) -> ProjectPaths:
    """`n` answers (and their questions) of about `answer_bytes` each."""
    rng = random.Random(seed)
    paths = ProjectPaths(folder)
    paths.data.mkdir(parents=True, exist_ok=True)
    contents, reasonings = _paragraphs(rng, answer_bytes * 55 // 100), _paragraphs(rng, answer_bytes * 25 // 100)
    with open(paths.answers, "w", encoding="utf-8") as answers, open(paths.questions, "w", encoding="utf-8") as qs:
        for k in range(n):
            topic, subtopic = TOPICS[k % len(TOPICS)], f"subtopic {k // len(TOPICS) % SUBTOPICS}"
            text = f"question {k}: {rng.choice(WORDS)}?"
            qid = ids.question_id(ids.subtopic_id(topic, subtopic), text)
            if rng.random() >= 0.01:  # 1% orphaned: no question
                qs.write(dumps(Question(qid, topic, ids.subtopic_id(topic, subtopic), subtopic, text)) + "\n")
            lines = 2 if rng.random() < 0.05 else 1
            for line in range(lines):
                excluded = "truncated" if line < lines - 1 or rng.random() < 0.03 else None
                messages = [Message("user", text),
                            Message("assistant", rng.choice(contents), rng.choice(reasonings))]
                ex = Example(qid, topic, subtopic, messages, Meta("m", 40, 800, "stop", "raw", excluded))
                answers.write(dumps(ex) + "\n")
    return paths


def _rss_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def child(path: str, folder: str) -> None:
    """Run one split path in this process; print time and memory as JSON."""
    from overbrainer.dataset.jsonl import read_records, rewrite
    from overbrainer.dataset.split import run_split, split_examples

    paths = ProjectPaths(folder)
    topics = TOPICS
    base = _rss_kb("VmRSS")
    start, cpu = time.perf_counter(), time.process_time()
    if path == "old":  # the former run_split, as it was
        answers = read_records(paths.answers, Example)
        questions = read_records(paths.questions, Question)
        _, train, eval_ = split_examples(answers, questions, topics, 0.1, 42)
        rewrite(paths.train, train)
        rewrite(paths.eval, eval_)
    elif path == "decontam":
        run_split(paths, topics, 0.1, 42, benchmarks=_benchmark(), eval_ngram=13)
    else:
        run_split(paths, topics, 0.1, 42)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    print(json.dumps({"seconds": seconds, "cpu": cpu, "peak_kb": _rss_kb("VmHWM"), "base_kb": base}))


def _benchmark():
    """A Screen of 5,000 items of about 100 words (words that the answers do not use)."""
    from overbrainer.dataset.quality.decontam import Screen

    rng = random.Random(7)
    vocabulary = [f"bench{i}" for i in range(500)]
    screen = Screen()
    screen.add_source("bench.jsonl", (" ".join(rng.choices(vocabulary, k=100)) for _ in range(5000)))
    return screen


def _digest(paths: ProjectPaths) -> str:
    return hashlib.sha256(paths.train.read_bytes() + b"\0" + paths.eval.read_bytes()).hexdigest()


def measure(folder: Path, path: str) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", path, str(folder)], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)


def _added_mb(r: dict) -> float:
    """Peak RSS over the RSS before the split, in MB."""
    return (r["peak_kb"] - r["base_kb"]) / 1024


def _report(n: int, mb: float, old: dict, new: dict) -> None:
    for name, r in (("old", old), ("new", new)):
        print(f"{n:>7} answers ({mb:6.1f} MB): {name} {r['seconds']:6.2f} s ({r['cpu']:6.2f} s CPU), "
              f"peak RSS {r['peak_kb'] / 1024:7.1f} MB = {r['base_kb'] / 1024:.1f} MB before the split "
              f"+ {_added_mb(r):6.1f} MB ({_added_mb(r) / mb:.1%} of answers.jsonl)")
    print(f"{n:>7} answers: new/old: time {new['seconds'] / old['seconds']:.2f}x, CPU {new['cpu'] / old['cpu']:.2f}x, "
          f"peak RSS {new['peak_kb'] / old['peak_kb']:.3f}x, added memory {_added_mb(new) / _added_mb(old):.3f}x; "
          "files identical")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs=2, default=[10_000, 100_000])
    ap.add_argument("--answer-bytes", type=int, default=2000)
    ap.add_argument("--keep", type=Path, help="build the projects here and keep them")
    ap.add_argument("--child", nargs=2, metavar=("PATH", "DIR"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(*args.child)
        return 0
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.sizes:
            folder = (args.keep or Path(tmp)) / f"split-{n}"
            paths = make_project(folder, n, args.answer_bytes)
            old = measure(folder, "old")
            old_digest = _digest(paths)
            new = measure(folder, "new")
            if _digest(paths) != old_digest:
                print(f"{n}: the two paths wrote different files", file=sys.stderr)
                return 1
            rows[n] = (old, new)
            _report(n, paths.answers.stat().st_size / 1e6, old, new)
            dec = measure(folder, "decontam")
            print(f"{n:>7} answers: decontam (eval check + a 5,000-item benchmark) {dec['seconds']:6.2f} s "
                  f"({dec['cpu']:6.2f} s CPU), added memory {_added_mb(dec):6.1f} MB; over new: CPU "
                  f"{dec['cpu'] / new['cpu']:.2f}x, added memory +{_added_mb(dec) - _added_mb(new):.1f} MB")
    small, large = args.sizes
    for name, i in (("old", 0), ("new", 1)):
        a, b = rows[small][i], rows[large][i]
        print(f"{name}: {large}/{small} answers: time {b['seconds'] / a['seconds']:.2f}x, "
              f"peak RSS {b['peak_kb'] / a['peak_kb']:.2f}x, added memory {_added_mb(b) / _added_mb(a):.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
