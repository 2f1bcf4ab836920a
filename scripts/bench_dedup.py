#!/usr/bin/env python3
"""Benchmark the lexical deduplication of one topic.

100,000 synthetic questions (8-20 words from templates over a Zipf-weighted vocabulary, about
one in eight a near-duplicate of an earlier one: a word changed, dropped or added, case and
punctuation changed) go through LexicalDedup in batches of 10, as the questions stage feeds it.
Then a 5,000-question sample runs through both the indexed filter and the exact all-pairs rule:
the results must be identical, and the speed-up is printed.

    python3 scripts/bench_dedup.py [--n 100000] [--sample 5000] [--threshold 0.8] [--seed 1]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from overbrainer.dataset.dedup import LexicalDedup, jaccard, shingles  # noqa: E402

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


def run_indexed(texts: list[str], threshold: float, batch: int = 10):
    d = LexicalDedup(threshold)
    kept, dropped = [], []
    for start in range(0, len(texts), batch):
        k, dr = d.filter(texts[start:start + batch])
        kept += k
        dropped += dr
    return (kept, dropped), d


def run_all_pairs(texts: list[str], threshold: float):
    """The exact rule, O(n²): every candidate against every kept text (shingles computed once)."""
    kept, dropped, sets = [], [], []
    for text in texts:
        s = shingles(text)
        hit = next((i for i, other in enumerate(sets) if jaccard(s, other) >= threshold), None)
        if hit is None:
            kept.append(text)
            sets.append(s)
        else:
            dropped.append((text, kept[hit]))
    return kept, dropped


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--sample", type=int, default=5_000)
    ap.add_argument("--threshold", type=float, default=0.8)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()

    texts = corpus(args.n, args.seed)
    start, cpu = time.perf_counter(), time.process_time()
    (kept, dropped), d = run_indexed(texts, args.threshold)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    print(f"dedup {args.n} questions: {seconds:.1f} s ({cpu:.1f} s CPU)")
    print(f"kept {len(kept)}, dropped {len(dropped)}; exact Jaccard checks {d.comparisons} "
          f"({d.comparisons / max(1, args.n):.1f} per question)")

    sample = texts[: args.sample]
    start = time.process_time()
    indexed, _ = run_indexed(sample, args.threshold)
    t_indexed = time.process_time() - start
    start = time.process_time()
    naive = run_all_pairs(sample, args.threshold)
    t_naive = time.process_time() - start
    if indexed != naive:
        print(f"speed-up over all-pairs ({args.sample}): results DIFFER", file=sys.stderr)
        return 1
    print(f"speed-up over all-pairs ({args.sample}): {t_naive / t_indexed:.1f}x (identical results; "
          f"{t_naive:.2f} s vs {t_indexed:.2f} s CPU)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
