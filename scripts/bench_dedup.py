#!/usr/bin/env python3
"""Benchmark the lexical deduplication of one topic: memory per 100k texts, time per text.

Synthetic questions (8-20 words, 17 on average, from templates over a Zipf-weighted vocabulary;
about one in eight a near-duplicate of an earlier one: a word changed, dropped or added, case and
punctuation changed) go through LexicalDedup in batches of 10, as the questions stage feeds it.
For each size (--sizes) and each implementation (this tree's, and the one of git revision
--baseline, loaded from git into the same run), a fresh child process measures:

- CPU time per text (each text handed over as a fresh str, as parsed from a response);
- the index's memory: tracemalloc's traced bytes held by the deduplicator once every text went
  through (its remembered texts included), and the peak while building, both per 100k texts;
  and the growth of the process's RSS over the same build (without tracemalloc);
- exact Jaccard checks per text, and a digest of (kept, dropped): both implementations must
  give the same answer.

Then a --sample-question sample runs through both the index and the exact all-pairs rule: the
results must be identical, and the speed-up is printed. Last, the embedding deduplicator (this
tree's and the baseline's): the memory it holds per 100k remembered vectors of dimension
--embed-dim (seeded with --embed-n random vectors handed over as fresh lists of floats, as
parsed from a response), and identical answers on a small filter.

Targets (exit 1 when one is missed, or when an answer differs): the index holds <= 40 MB per
100k texts at each size, and takes <= 1.2x the baseline's CPU time per text.

    python3 scripts/bench_dedup.py [--sizes 10000,100000] [--sample 5000] [--threshold 0.8]
                                   [--seed 1] [--baseline REV | --baseline '']
                                   [--embed-dim 768] [--embed-n 10000]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import subprocess
import sys
import time
import tracemalloc
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from overbrainer.dataset.quality import dedup as current  # noqa: E402
from overbrainer.dataset.quality import embed_dedup as embed_current  # noqa: E402
from tests.fixtures.oracles import filter_all_pairs  # noqa: E402

# The last revision with the str/frozenset/dict index (before the compact one).
BASELINE = "581e7f635d7e0858f7fd41870b912b916d3b6826"
PATH = "overbrainer/dataset/dedup.py"  # where the baseline revision had it
MAX_MB_PER_100K = 40  # the lexical index's held memory per 100k texts (of ~17 words)
MAX_TIME_RATIO = 1.2  # CPU time per text against the baseline (single runs: a busy machine skews)

OPENINGS = ["", "", "", "In practice, ", "Can you explain: ", "I am new to this: ", "Quick question: ",
            "From a performance point of view, ", "For a code review, ", "In a large codebase, "]
BODIES = [
    "how does {n} interact with {n} when the {n} is {a}",
    "what is the difference between {n} and {n} in a {a} {n}",
    "why would a {n} {v} the {n} instead of using {n} directly",
    "when should I {v} a {a} {n} rather than a {n} with {n}",
    "how can I {v} {n} without breaking the {n} of the {a} {n}",
    "what happens to the {n} if I {v} it inside a {n} that owns a {n}",
    "is it safe to {v} a {n} across {n} boundaries when {n} is {a}",
    "how do I debug a {a} {n} that fails to {v} after the {n} changes",
    "compare {n} and {n} for a {a} {n} that must {v} often",
    "what if the {n} has to {v} a {n} while another {n} holds a {a} {n}",
    "which {n} should I pick to {v} a {a} {n} and why does the {n} matter",
    "explain how a {a} {n} affects {n} when you {v} many {n} at once",
]
CLOSINGS = ["?", "?", "?", " in production?", " for a beginner?", " under heavy load?", " in tests?",
            " on embedded targets?", " with several threads?", " and what are the pitfalls?"]
NOUNS = ("borrow lifetime trait closure iterator vector slice string buffer thread mutex channel "
         "future executor reference pointer box arena allocator macro module crate enum struct "
         "pattern match generic bound impl object cache index query table schema transaction lock "
         "queue stream socket request response handler router session token parser lexer compiler "
         "register stack heap page frame driver kernel process signal pipe file cursor tensor "
         "gradient layer batch epoch optimizer loss weight shader texture mesh config logger metric "
         "span trace event callback promise coroutine scheduler worker pool connection client server "
         "endpoint header payload codec checksum hash map set tree graph node edge path snapshot "
         "migration replica shard partition offset commit branch merge rebase tag release build "
         "artifact container image volume network firewall certificate key secret policy role user "
         "account quota limit timeout retry backoff deadline budget").split()
QUALIFIERS = ("thread local global shared read write async sync atomic weak strong raw smart fat "
              "dangling owned borrowed static const").split()
ADJECTIVES = ("mutable immutable shared unique static dynamic async blocking lazy eager nested "
              "recursive generic concurrent cached sorted empty large small stale dirty pinned "
              "volatile transient persistent").split()
VERBS = ("borrow move clone drop share lock spawn await poll parse serialize cache index flush "
         "rebuild merge split sort filter map reduce inline refactor profile validate retry").split()


def zipf_choice(rng: random.Random, words: list[str]) -> str:
    # rank r with weight about 1/r: a few words are very common, as in real questions
    i = int(len(words) ** rng.random()) - 1
    return words[min(max(i, 0), len(words) - 1)]


def noun(rng: random.Random) -> str:
    word = zipf_choice(rng, NOUNS)
    return f"{rng.choice(QUALIFIERS)} {word}" if rng.random() < 0.3 else word


def question(rng: random.Random) -> str:
    while True:
        text = rng.choice(BODIES)
        for slot, pick in (("{n}", noun), ("{a}", lambda r: zipf_choice(r, ADJECTIVES)),
                           ("{v}", lambda r: zipf_choice(r, VERBS))):
            while slot in text:
                text = text.replace(slot, pick(rng), 1)
        opening = rng.choice(OPENINGS)
        text = opening + (text[0].upper() + text[1:] if not opening else text) + rng.choice(CLOSINGS)
        if 8 <= len(text.split()) <= 20:
            return text


def near_duplicate(rng: random.Random, text: str) -> str:
    words = text.split()
    kind = rng.randrange(4)
    if kind == 0:
        words[rng.randrange(len(words))] = zipf_choice(rng, NOUNS)
    elif kind == 1 and len(words) > 8:
        del words[rng.randrange(len(words))]
    elif kind == 2:
        words.insert(rng.randrange(len(words)), zipf_choice(rng, ADJECTIVES))
    out = " ".join(words)
    return out.lower() if rng.random() < 0.5 else out.rstrip("?.") + "."


def corpus(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    texts: list[str] = []
    for _ in range(n):
        if texts and rng.random() < 0.125:
            texts.append(near_duplicate(rng, rng.choice(texts)))
        else:
            texts.append(question(rng))
    return texts


def run_indexed(texts: list[str], threshold: float, cls=None, batch: int = 10, answers: bool = True):
    """Feed `texts` in batches, each text as a fresh str object (the deduplicator is then the
    only holder of the texts it remembers, as in the pipeline); with answers=False, the
    answers are not kept (to measure the deduplicator's memory alone)."""
    d = (cls or current.LexicalDedup)(threshold)
    kept, dropped = [], []
    for start in range(0, len(texts), batch):
        k, dr = d.filter([t.encode().decode() for t in texts[start:start + batch]])
        if answers:
            kept += k
            dropped += dr
    return (kept, dropped), d


def load_baseline(rev: str, path: str = PATH) -> types.ModuleType:
    source = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:{path}"], check=True,
                            capture_output=True, text=True).stdout
    module = types.ModuleType("baseline")
    exec(compile(source, f"{rev[:10]}:{path}", "exec"), module.__dict__)
    return module


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def measure(impl: str, n: int, threshold: float, seed: int) -> dict:
    """One implementation at one size, in this (fresh) process."""
    cls = (current if impl == "current" else load_baseline(impl)).LexicalDedup
    texts = corpus(n, seed)
    before, cpu = rss(), time.process_time()
    _, d = run_indexed(texts, threshold, cls, answers=False)
    cpu, grown = time.process_time() - cpu, rss() - before
    del d
    result, d = run_indexed(texts, threshold, cls)
    digest = hashlib.sha256(json.dumps(result).encode()).hexdigest()[:16]
    comparisons, kept = d.comparisons, len(result[0])
    del d, result
    tracemalloc.start()
    _, d = run_indexed(texts, threshold, cls, answers=False)
    held, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {"us_per_text": cpu / n * 1e6, "held": held, "peak": peak, "rss": grown, "kept": kept,
            "comparisons": comparisons, "digest": digest}


def child(impl: str, n: int, args) -> dict:
    out = subprocess.run([sys.executable, __file__, "--measure", impl, "--sizes", str(n),
                          "--threshold", str(args.threshold), "--seed", str(args.seed)],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def report(label: str, n: int, m: dict) -> None:
    per = 100_000 / n / 1e6
    print(f"  {label:9} {m['us_per_text']:7.1f} us/text  held {m['held'] * per:7.1f} MB/100k "
          f"({m['held'] / n:5.0f} B/text)  peak {m['peak'] * per:7.1f} MB/100k  "
          f"RSS +{m['rss'] * per:7.1f} MB/100k  checks {m['comparisons'] / n:5.2f}/text  "
          f"kept {m['kept']}")


def compare_sizes(args) -> int:
    status = 0
    impls = [("current", "current")] + ([("baseline", args.baseline)] if args.baseline else [])
    for n in [int(x) for x in args.sizes.split(",")]:
        print(f"{n} questions (threshold {args.threshold}):")
        got = {label: child(impl, n, args) for label, impl in impls}
        for label, m in got.items():
            report(label, n, m)
        held = got["current"]["held"] * 100_000 / n / 1e6
        ok = held <= MAX_MB_PER_100K
        status |= 0 if ok else 1
        print(f"  target: held memory <= {MAX_MB_PER_100K} MB per 100k texts: {'met' if ok else 'MISSED'}")
        if "baseline" in got:
            new, old = got["current"], got["baseline"]
            same = new["digest"] == old["digest"]
            time_ratio = new["us_per_text"] / old["us_per_text"]
            ok = same and time_ratio <= MAX_TIME_RATIO
            status |= 0 if ok else 1
            print(f"  current/baseline: time {time_ratio:.2f}x (target <= {MAX_TIME_RATIO}x), "
                  f"held memory {new['held'] / old['held']:.3f}x, peak {new['peak'] / old['peak']:.3f}x; "
                  f"answers {'identical' if same else 'DIFFER'}: {'met' if ok else 'MISSED'}")
    return status


def compare_all_pairs(args) -> int:
    sample = corpus(args.sample, args.seed)
    start = time.process_time()
    indexed, _ = run_indexed(sample, args.threshold)
    t_indexed = time.process_time() - start
    start = time.process_time()
    naive = filter_all_pairs([], sample, args.threshold)
    t_naive = time.process_time() - start
    if indexed != naive:
        print(f"speed-up over all-pairs ({args.sample}): results DIFFER", file=sys.stderr)
        return 1
    print(f"speed-up over all-pairs ({args.sample}): {t_naive / t_indexed:.1f}x (identical results; "
          f"{t_naive:.2f} s vs {t_indexed:.2f} s CPU)")
    return 0


class RandomEmbedder:
    """Deterministic vectors: a fresh list of floats per text (as parsed from JSON)."""

    def __init__(self, dim: int, seed: int):
        self.dim, self.seed = dim, seed

    def __call__(self, texts: list[str]) -> list[list[float]]:
        out = []
        for text in texts:
            rng = random.Random(f"{self.seed}:{text.rstrip('!')}")  # "x!" embeds as "x": a duplicate
            out.append([rng.gauss(0.0, 1.0) for _ in range(self.dim)])
        return out


def embedding_memory(cls, dim: int, n: int, seed: int) -> int:
    """Bytes tracemalloc sees held by an embedding deduplicator after seeding n vectors."""
    embed = RandomEmbedder(dim, seed)
    tracemalloc.start()
    d = cls(0.9, embed)
    d.seed(f"text {i}" for i in range(n))
    held, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del d
    return held


def embedding_answers(cls, dim: int, seed: int):
    d = cls(0.95, RandomEmbedder(dim, seed))
    d.seed(f"text {i}" for i in range(200))
    return d.filter([f"text {i}!" if i % 3 else f"new {i}" for i in range(0, 400, 2)])


def compare_embeddings(args) -> int:
    impls = [("current", embed_current)]
    if args.baseline:
        impls.append(("baseline", load_baseline(args.baseline, "overbrainer/dataset/embed_dedup.py")))
    print(f"embedding dedup, dimension {args.embed_dim}, {args.embed_n} vectors seeded:")
    held, answers = {}, {}
    for label, module in impls:
        held[label] = embedding_memory(module.EmbeddingDedup, args.embed_dim, args.embed_n, args.seed)
        answers[label] = embedding_answers(module.EmbeddingDedup, args.embed_dim, args.seed)
        print(f"  {label:9} held {held[label] * 100_000 / args.embed_n / 1e6:8.1f} MB/100k vectors "
              f"({held[label] / args.embed_n:6.0f} B/vector)")
    if "baseline" not in held:
        return 0
    same = answers["current"] == answers["baseline"]
    print(f"  current/baseline: held memory {held['current'] / held['baseline']:.3f}x; answers "
          f"{'identical' if same else 'DIFFER'} ({len(answers['current'][1])} of 200 dropped)")
    return 0 if same else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--sample", type=int, default=5_000)
    ap.add_argument("--threshold", type=float, default=0.8)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--baseline", default=BASELINE, help="git revision to compare with ('' for none)")
    ap.add_argument("--embed-dim", type=int, default=768)
    ap.add_argument("--embed-n", type=int, default=10_000)
    ap.add_argument("--measure", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure, int(args.sizes), args.threshold, args.seed)))
        return 0
    return compare_sizes(args) | compare_all_pairs(args) | compare_embeddings(args)


if __name__ == "__main__":
    sys.exit(main())
